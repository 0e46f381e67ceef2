//! The session client (`connect`'s logic, the same through the plugin's exec and the gateway)
//! against a real holder, without Kubernetes: `myownshell-session serve` on a temporary socket,
//! and a transport that runs `attach --framed` locally, as the exec runs it in the pod.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use kubectl_myownshell::attach::{self, Ending, Options, Request, farewell};
use myownshell_session::protocol::{Size, Which};
use support::{Holder, Local, Person, eventually, terminal};
use tokio::task::JoinHandle;

const SIZE: Size = Size { cols: 100, rows: 30 };

fn options(screen: bool, grace: Duration) -> Options {
    Options {
        shell: "web".into(),
        come_back: "kubectl myownshell connect web".into(),
        detach_keys: vec![0x10, 0x11],
        grace,
        screen,
    }
}

fn request(which: Which) -> Request {
    Request { which, read_only: false, size: Some(SIZE) }
}

/// Join as `request` asks, then relay in a task of its own: the person, the session joined,
/// and the task's ending.
async fn connect(
    mut transport: Local,
    request: Request,
    options: Options,
) -> (Person, attach::Joined, JoinHandle<Ending>) {
    let (mut term, person) = terminal();
    let first = attach::open(&mut transport, &request).await.unwrap_or_else(|e| panic!("open: {e:?}"));
    let joined = first.1.clone();
    let task = tokio::spawn(async move { attach::run(&mut transport, first, request, &options, &mut term).await });
    (person, joined, task)
}

async fn ended(task: JoinHandle<Ending>) -> Ending {
    tokio::time::timeout(support::DEADLINE, task).await.expect("the client did not end").unwrap()
}

/// Attach, type, see the output; the detach keys leave the session running and say how to come
/// back; `--session ID` comes back to the same process with the screen redrawn; the session's
/// exit code is the client's.
#[tokio::test]
async fn detach_and_come_back_to_the_same_process() {
    let holder = Holder::start().await;
    let screen = options(true, Duration::from_secs(10));
    let (person, joined, task) =
        connect(holder.transport("alice"), request(Which::New { command: None }), screen.clone()).await;
    assert!(!joined.resumed && !person.cleared(), "a new session: nothing to redraw");
    person.type_keys("stty size; echo first-$((40+2))\r").await;
    person.until_screen("first-42").await;
    assert!(person.redrawn().contains("30 100"), "the session has the terminal's size: {}", person.redrawn());
    person.type_keys("\x10").await;
    person.type_keys("\x11").await;
    let ending = ended(task).await;
    assert_eq!(ending, Ending::Detached { id: joined.id.clone() });
    let (line, code) = farewell(&ending, &screen);
    let back = format!("kubectl myownshell connect web --session {}", joined.id);
    assert_eq!(line, Some(format!("detached from session {}: {back} to come back", joined.id)));
    assert_eq!(code, 0);
    let sessions = holder.list().await;
    let session = sessions.iter().find(|s| s.id == joined.id).expect("the session goes on");
    assert!(session.attached.is_empty(), "nobody is attached once detached: {session:?}");

    let by_id = request(Which::Attach { id: joined.id.clone() });
    let (again, rejoined, task) = connect(holder.transport("alice"), by_id, screen.clone()).await;
    assert_eq!((rejoined.id.as_str(), rejoined.pid, rejoined.resumed), (joined.id.as_str(), joined.pid, true));
    again.until_said(&format!("attached to session {}", joined.id)).await;
    let redrawn = again.until_screen("first-42").await;
    assert!(again.cleared(), "the screen was cleared for the replay: {redrawn:?}");
    again.type_keys("exit 3\r").await;
    let ending = ended(task).await;
    assert_eq!((ending.clone(), farewell(&ending, &screen)), (Ending::Exited(3), (None, 3)));
    println!("session {} (pid {:?}): detached, reattached with the replay, exit 3", joined.id, joined.pid);
}

/// The issue's scenario without the cluster: the connection is killed mid-command, the client
/// keeps trying within the grace while the command finishes, and once back the command's output
/// is on the redrawn screen; keys typed meanwhile were kept and are run.
#[tokio::test]
async fn killed_mid_command_reattaches_and_the_output_is_on_the_redrawn_screen() {
    let holder = Holder::start().await;
    let transport = holder.transport("alice");
    let (pids, down) = (transport.pids.clone(), transport.down.clone());
    let marker = holder.dir.path().join("finished");
    let (person, joined, task) =
        connect(transport, request(Which::New { command: None }), options(true, Duration::from_secs(30))).await;
    person.type_keys("echo ready-$((1+1))\r").await;
    person.until_screen("ready-2").await;
    down.store(true, Ordering::SeqCst);
    person.type_keys(&format!("sleep 2; echo done-$((40+2)); touch {}\r", marker.display())).await;
    person.until_screen("sleep 2; echo done").await;
    let first = pids.lock().unwrap()[0];
    support::signal(first, rustix::process::Signal::KILL);
    person.until_said(&format!("connection lost, reattaching to session {}…", joined.id)).await;
    person.type_keys("echo held-$((2+3))\r").await;
    eventually("the command to finish while the connection is down", || marker.exists().then_some(())).await;
    assert!(!person.redrawn().contains("done-42"), "the output came after the connection was lost");
    down.store(false, Ordering::SeqCst);
    person.until_said(&format!("reattached to session {}", joined.id)).await;
    let redrawn = person.until_screen("done-42").await;
    assert!(person.cleared(), "redrawn from a cleared screen: {redrawn:?}");
    person.until_screen("held-5").await;
    assert_eq!(person.lines_with("connection lost"), 1, "said once: {:?}", person.said.lock().unwrap());
    let sessions = holder.list().await;
    assert_eq!(sessions.iter().find(|s| s.id == joined.id).map(|s| s.pid), joined.pid, "the same process");
    assert!(pids.lock().unwrap().len() >= 2, "a new attach was made");
    person.type_keys("exit 5\r").await;
    assert_eq!(ended(task).await, Ending::Exited(5));
    println!("session {}: attach {first} killed mid-command, reattached; done-42 on the redrawn screen", joined.id);
}

/// Past the grace, the client gives up, naming the session and how to come back.
#[tokio::test]
async fn a_connection_that_stays_down_is_given_up_after_the_grace() {
    let holder = Holder::start().await;
    let transport = holder.transport("alice");
    let (pids, down) = (transport.pids.clone(), transport.down.clone());
    let screen = options(true, Duration::from_secs(1));
    let (person, joined, task) = connect(transport, request(Which::New { command: None }), screen.clone()).await;
    person.type_keys("echo up-$((1+1))\r").await;
    person.until_screen("up-2").await;
    down.store(true, Ordering::SeqCst);
    support::signal(pids.lock().unwrap()[0], rustix::process::Signal::KILL);
    let ending = ended(task).await;
    assert_eq!(ending, Ending::Lost { id: joined.id.clone(), why: "the network is down".into() });
    let line = farewell(&ending, &screen).0.unwrap();
    assert!(line.contains(&format!("--session {}", joined.id)) && line.contains("within 1s"), "{line}");
    assert!(holder.list().await.iter().any(|s| s.id == joined.id), "the session goes on");
}

/// A plain connect takes up the caller's newest detached session, and says so; another user's
/// plain connect gets a new one.
#[tokio::test]
async fn a_plain_connect_reattaches_the_callers_detached_session() {
    let holder = Holder::start().await;
    let screen = options(true, Duration::from_secs(10));
    let or_new = || request(Which::AttachOrNew { command: None });
    let (person, joined, task) = connect(holder.transport("alice"), or_new(), screen.clone()).await;
    assert!(!joined.resumed);
    person.type_keys("echo mine-$((3+3))\r").await;
    person.until_screen("mine-6").await;
    person.type_keys("\x10\x11").await;
    assert_eq!(ended(task).await, Ending::Detached { id: joined.id.clone() });

    let (again, rejoined, task) = connect(holder.transport("alice"), or_new(), screen.clone()).await;
    assert_eq!((rejoined.id.as_str(), rejoined.resumed), (joined.id.as_str(), true));
    let line = again.until_said("reattached to session").await;
    assert!(line.starts_with(&format!("reattached to session {} (started ", joined.id)), "{line}");
    again.until_screen("mine-6").await;
    let (bob, other, bobs) = connect(holder.transport("bob"), or_new(), screen.clone()).await;
    assert!(other.id != joined.id && !other.resumed, "bob gets a session of his own");
    assert_eq!(bob.lines_with("reattached"), 0);
    for (person, task) in [(again, task), (bob, bobs)] {
        person.type_keys("exit\r").await;
        assert_eq!(ended(task).await, Ending::Exited(0));
    }
}

/// Through a pipe: no detach keys (their bytes are input), and the end of input is the
/// session's end-of-file, so the shell exits.
#[tokio::test]
async fn through_a_pipe_the_end_of_input_ends_the_shell() {
    let holder = Holder::start().await;
    let (mut person, _, task) = connect(
        holder.transport("alice"),
        request(Which::New { command: Some(vec!["/bin/sh".into()]) }),
        options(false, Duration::from_secs(10)),
    )
    .await;
    person.type_keys("\x10\x11\n").await;
    person.type_keys("echo piped-$((3+4))\n").await;
    person.until_screen("piped-7").await;
    person.keyboard = None;
    assert_eq!(ended(task).await, Ending::Exited(0));
    assert!(!person.cleared());
}

/// A session that is not there is refused at once, in the holder's words.
#[tokio::test]
async fn an_unknown_session_is_refused() {
    let holder = Holder::start().await;
    let mut transport = holder.transport("alice");
    let refused = attach::open(&mut transport, &request(Which::Attach { id: "nope".into() })).await;
    match refused {
        Err(Ending::Refused(why)) => assert!(why.contains("nope"), "{why}"),
        other => panic!("{:?}", other.map(|(_, joined)| joined)),
    }
}
