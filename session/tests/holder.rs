//! The holder as it runs in a shell's pod: the built binary serving a temporary socket folder,
//! real `/bin/sh` sessions, clients speaking the protocol. Every test waits with deadlines and
//! leaves no process behind (the holder is ended on drop, and its sessions with it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use myownshell_session::protocol::{AllowDrive, ClientMessage, EndReason, HolderMessage, KillRequest, Size, Which};
use support::{DEADLINE, Holder, alive, hello, rss_kib, session_processes, wait_for};

const SIZE: Size = Size { cols: 100, rows: 30 };

/// The PTY has the size the client asked for, and a resize changes it.
#[test]
fn stty_size_shows_the_pty_size_and_follows_resize() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let (mut client, attached) = holder.new_session("alice", &[], SIZE);
    assert_eq!((attached.cols, attached.rows, attached.resumed), (100, 30, false));
    client.input("stty size; echo TERM=$TERM; pwd\r");
    client.until_output("30 100");
    let output = client.until_output("TERM=xterm-256color");
    let home = std::env::var("HOME").unwrap_or_else(|_| "/".into());
    client.until_output(&format!("\n{home}"));
    client.send(&ClientMessage::Resize(Size { cols: 120, rows: 40 }));
    client.input("PS1=prompt:; stty size\r");
    client.until_output("40 120\r\nprompt:");
    // A keystroke's echo is not held back for more output: it comes as a frame of its own.
    client.input("x");
    let echo = client.until("the echo of one key", |m| match m {
        HolderMessage::Output(bytes) => Some(bytes.clone()),
        _ => None,
    });
    assert_eq!(echo, b"x", "{output}");
}

/// A session outlives its clients: 100 attach/detach cycles find the same shell, with its
/// recent output replayed each time.
#[test]
fn a_hundred_attach_detach_cycles_keep_the_same_session() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let (mut first, attached) = holder.new_session("alice", &[], SIZE);
    first.input("echo shell-pid-$$\r");
    first.until_output(&format!("shell-pid-{}", attached.pid));
    first.send(&ClientMessage::Detach);
    assert!(first.closed_within(DEADLINE));
    for cycle in 0..100 {
        let (mut client, again) = holder.attach("alice", &attached.id, false);
        assert_eq!((again.pid, again.resumed, again.id.as_str()), (attached.pid, true, attached.id.as_str()));
        let replay = client.until_output("shell-pid-");
        assert!(replay.contains(&format!("shell-pid-{}", attached.pid)), "cycle {cycle}: {replay:?}");
        client.input(&format!("echo cycle-$((1000+{cycle}))\r"));
        client.until_output(&format!("cycle-{}", 1000 + cycle));
        if cycle % 2 == 0 {
            client.send(&ClientMessage::Detach);
        }
        // Odd cycles just drop the connection: a client whose connection ends is detached.
        drop(client);
    }
    let list = wait_for("the session detached", DEADLINE, || {
        let list = holder.list();
        list[0].attached.is_empty().then_some(list)
    });
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].pid, attached.pid);
    assert!(alive(attached.pid as i32));
}

/// A session nobody attaches to for the TTL ends with every process of it, background jobs and
/// a job that ignores SIGHUP included (SIGKILL after the grace).
#[test]
fn a_detached_session_past_its_ttl_ends_with_every_process() {
    let holder = Holder::start(&["--detached-ttl", "500ms", "--kill-grace", "300ms"], &["sleep", "600"]);
    let (mut client, attached) = holder.new_session("alice", &[], SIZE);
    client.input("sleep 1000 & echo job-$! done-$((1+1))\r");
    client.until_output("done-2");
    client.input("(trap '' HUP; exec sleep 1001) & echo stubborn-$! done-$((2+2))\r");
    let output = client.until_output("done-4");
    // The first `tag` followed by digits (the echoed command line holds `tag$!`).
    let pid_after = |tag: &str| -> i32 {
        output
            .match_indices(tag)
            .find_map(|(at, _)| {
                let digits: String = output[at + tag.len()..].chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .unwrap_or_else(|| panic!("no pid after {tag} in {output:?}"))
    };
    let (job, stubborn) = (pid_after("job-"), pid_after("stubborn-"));
    let sid = attached.pid as i32;
    assert!(session_processes(sid).contains(&job) && session_processes(sid).contains(&stubborn));
    let detached_at = Instant::now();
    client.send(&ClientMessage::Detach);
    wait_for("the session to end", DEADLINE, || holder.list().is_empty().then_some(()));
    assert!(detached_at.elapsed() >= Duration::from_millis(500), "ended before its TTL");
    assert_eq!(session_processes(sid), Vec::<i32>::new(), "processes of the session are left");
    assert!(!alive(job) && !alive(stubborn) && !alive(sid));
}

/// The per-pod cap refuses a session past it, naming the cap and how to end one; `kill` frees
/// a place once its processes are gone.
#[test]
fn the_cap_refuses_with_a_clear_message_and_kill_frees_a_place() {
    let holder = Holder::start(&["--max-sessions", "2"], &["sleep", "600"]);
    let (_a, first) = holder.new_session("alice", &[], SIZE);
    let (_b, _) = holder.new_session("bob", &[], SIZE);
    let mut third = holder.client();
    third.send(&ClientMessage::Hello(hello("carol", Which::New { command: None }, false, None)));
    let refusal = match third.recv() {
        Some(HolderMessage::Refused(text)) => text,
        other => panic!("{other:?}"),
    };
    assert!(refusal.contains("2 sessions") && refusal.contains("--max-sessions 2"), "{refusal}");
    assert!(refusal.contains("myownshell-session kill"), "{refusal}");
    assert!(third.closed_within(DEADLINE));
    let killed = std::process::Command::new(support::BINARY)
        .args(["kill", "--socket-dir"])
        .arg(holder.socket_dir())
        .arg(&first.id)
        .output()
        .unwrap();
    assert!(killed.status.success(), "{killed:?}");
    assert_eq!(session_processes(first.pid as i32), Vec::<i32>::new(), "kill returned before the processes went");
    let (_c, _) = holder.new_session("carol", &[], SIZE);
    let mut unknown = holder.client();
    unknown.send(&ClientMessage::Kill(KillRequest { id: "nope".into() }));
    assert!(matches!(unknown.recv(), Some(HolderMessage::Refused(t)) if t.contains("no session \"nope\"")));
}

/// Several clients on one session: all see the output and each other come and go; a read-only
/// client cannot type (told once), another user types only once the creator allows it.
#[test]
fn several_clients_share_a_session_and_only_drivers_type() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let (mut alice, attached) = holder.new_session("alice", &[], SIZE);
    let (mut viewer, seen) = holder.attach("alice", &attached.id, true);
    assert!(seen.read_only && seen.attached.len() == 2);
    let presence = |n: usize| {
        move |m: &HolderMessage| matches!(m, HolderMessage::Presence(p) if p.attached.len() == n).then_some(())
    };
    alice.until("presence of two", presence(2));
    viewer.input("echo SHOULD-NOT-RUN\r");
    viewer.input("echo SHOULD-NOT-RUN-EITHER\r");
    let (mut bob, _) = holder.attach("bob", &attached.id, false);
    alice.until("presence of three", presence(3));
    bob.input("echo BOB-TYPED-$((1+1))\r");
    let notice = bob.until("bob's notice", |m| match m {
        HolderMessage::Notice(text) => Some(text.clone()),
        _ => None,
    });
    assert!(notice.contains("creator"), "{notice}");
    alice.send(&ClientMessage::AllowDrive(AllowDrive { allow: true }));
    bob.until("presence allowing others", |m| matches!(m, HolderMessage::Presence(p) if p.allow_drive).then_some(()));
    bob.input("echo BOB-TYPED-$((2+2))\r");
    alice.until_output("BOB-TYPED-4");
    alice.input("echo ALICE-DONE\r");
    let seen = viewer.until_output("ALICE-DONE");
    assert!(seen.contains("BOB-TYPED-4") && !seen.contains("BOB-TYPED-2"), "{seen}");
    assert!(!seen.contains("SHOULD-NOT-RUN"), "{seen}");
    let notices: Vec<&HolderMessage> =
        viewer.messages.iter().filter(|m| matches!(m, HolderMessage::Notice(_))).collect();
    assert_eq!(notices.len(), 1, "a read-only client is told once: {notices:?}");
    assert!(matches!(notices[0], HolderMessage::Notice(t) if t.contains("read-only")));
    drop(viewer);
    drop(bob);
    alice.until("presence of one", presence(1));
}

/// A client that never reads blocks the shell's writer (the PTY is not read while its queue is
/// full); the holder's memory stays bounded.
#[test]
fn a_client_that_never_reads_blocks_the_shell_not_the_holders_memory() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let (client, attached) = holder.new_session("alice", &["yes", "a line of output that keeps coming"], SIZE);
    let writer = attached.pid as i32;
    let written = || -> u64 {
        let io = std::fs::read_to_string(format!("/proc/{writer}/io")).unwrap();
        io.lines().find_map(|l| l.strip_prefix("wchar: ")).unwrap().parse().unwrap()
    };
    // Blocked: nothing more written over half a second.
    let blocked_at = wait_for("the shell's writer to block", DEADLINE, || {
        let before = written();
        std::thread::sleep(Duration::from_millis(500));
        (written() == before).then_some(before)
    });
    let rss = rss_kib(holder.pid());
    eprintln!("blocked after {blocked_at} bytes written; the holder's RSS is {rss} KiB");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(written(), blocked_at, "the writer went on");
    assert!(blocked_at < 16 * 1024 * 1024, "{blocked_at} bytes were taken from a client that reads nothing");
    assert!(rss < 64 * 1024, "the holder's RSS is {rss} KiB");
    assert!(rss_kib(holder.pid()) <= rss + 1024, "the holder's RSS grows");
    drop(client);
}

/// SIGTERM (the pod stopping): every attached client is told why, every session's processes
/// end, and the holder exits with the wrapped command's code.
#[test]
fn sigterm_ends_sessions_tells_clients_and_exits_with_the_commands_code() {
    let script = "trap 'exit 7' TERM; while :; do sleep 0.05; done";
    let mut holder = Holder::start(&[], &["sh", "-c", script]);
    let (mut client, attached) = holder.new_session("alice", &[], SIZE);
    client.input("sleep 1000 & echo started\r");
    client.until_output("started");
    let status = holder.terminate();
    assert_eq!(status.code(), Some(7), "{status:?}");
    let ended = client.until("Ended", |m| match m {
        HolderMessage::Ended(ended) => Some(ended.clone()),
        _ => None,
    });
    assert_eq!(ended.reason, EndReason::PodStopping);
    assert!(ended.message.contains("the shell's pod is stopping"), "{}", ended.message);
    assert!(client.closed_within(DEADLINE));
    assert_eq!(session_processes(attached.pid as i32), Vec::<i32>::new());
}

/// The exit codes of a session's command arrive through the one reaper, a signal's as 128+n,
/// and orphans reparented to the holder are reaped.
#[test]
fn exit_codes_arrive_and_orphans_are_reaped() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    // (command, code, signal)
    let cases: &[(&[&str], i32, Option<i32>)] =
        &[(&["sh", "-c", "echo bye; exit 5"], 5, None), (&["sh", "-c", "kill -9 $$"], 137, Some(9))];
    for (command, code, signal) in cases {
        let (mut client, _) = holder.new_session("alice", command, SIZE);
        let exited = client.until("Exited", |m| match m {
            HolderMessage::Exited(exited) => Some(*exited),
            _ => None,
        });
        assert_eq!((exited.code, exited.signal), (*code, *signal), "{command:?}");
        assert!(client.closed_within(DEADLINE));
    }
    let (mut client, _) = holder.new_session("alice", &["sh", "-c", "(sleep 0.2 &); echo orphaned"], SIZE);
    client.until_output("orphaned");
    let holder_pid = holder.pid();
    wait_for("no zombie left under the holder", DEADLINE, || {
        let zombies = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read_to_string(e.path().join("stat")).ok().is_some_and(|s| {
                let fields: Vec<String> = s
                    .rsplit_once(')')
                    .map(|(_, t)| t.split_whitespace().map(str::to_owned).collect())
                    .unwrap_or_default();
                fields.first().map(String::as_str) == Some("Z") && fields.get(1) == Some(&holder_pid.to_string())
            })
        });
        (!zombies).then_some(())
    });
    wait_for("every session gone", DEADLINE, || holder.list().is_empty().then_some(()));
}

/// A million short lines do not travel one line per frame.
#[test]
fn a_million_short_lines_travel_in_few_frames() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let (mut client, _) = holder.new_session("alice", &["seq", "1000000"], SIZE);
    let (mut frames, mut bytes) = (0usize, 0usize);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "{frames} frames, {bytes} bytes after 30 s");
        match client.recv() {
            Some(HolderMessage::Output(output)) => {
                frames += 1;
                bytes += output.len();
                assert!(output.len() <= 32 * 1024);
            }
            Some(HolderMessage::Exited(exited)) => {
                assert_eq!(exited.code, 0);
                break;
            }
            Some(_) => {}
            None => panic!("closed without Exited"),
        }
    }
    eprintln!("a million lines: {bytes} bytes in {frames} frames");
    // 7.9 MB of "N\r\n": one frame per line would be a million frames.
    assert!(bytes >= 7_888_896, "{bytes} bytes");
    assert!(frames <= 10_000, "{frames} frames for a million lines");
}

/// Lines written one at a time (as stdio writes to a terminal: a write at every newline) are
/// gathered too: the read after a frame is no echo when output is flowing, so frames go at most
/// one a window (1 ms), however the reads fall (each read its own frame, before: 734 to 1,163
/// frames in some 400 ms here, and 28,677 for a million lines in `cargo xtask bench sessions`).
#[test]
fn lines_written_one_at_a_time_travel_in_few_frames() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let script = "awk 'BEGIN { for (i = 0; i < 200000; i++) { print \"line\"; fflush() } }'";
    let started = Instant::now();
    let (mut client, _) = holder.new_session("alice", &["sh", "-c", script], SIZE);
    let (mut frames, mut bytes) = (0usize, 0usize);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "{frames} frames, {bytes} bytes after 30 s");
        match client.recv() {
            Some(HolderMessage::Output(output)) => {
                frames += 1;
                bytes += output.len();
            }
            Some(HolderMessage::Exited(_)) => break,
            Some(_) => {}
            None => panic!("closed without Exited"),
        }
    }
    let took = started.elapsed();
    eprintln!("200,000 lines written one at a time: {bytes} bytes in {frames} frames in {took:.0?}");
    assert_eq!(bytes, 200_000 * "line\r\n".len());
    // A frame a millisecond at most, and a few full ones and lone reads besides.
    let most = took.as_millis() as usize + 50;
    assert!(frames <= most, "{frames} frames in {took:?} for 200,000 lines written one at a time");
}

/// A replay starts at a line start within the scrollback's bound, and a full-screen program is
/// made to redraw (SIGWINCH) when someone attaches.
#[test]
fn replays_start_clean_within_the_bound_and_programs_redraw() {
    let holder = Holder::start(&["--scrollback", "4096"], &["sleep", "600"]);
    let (mut client, attached) = holder.new_session("alice", &[], SIZE);
    client.input("seq 100000 200000; echo seq-done\r");
    client.until_output("\nseq-done");
    client.send(&ClientMessage::Detach);
    assert!(client.closed_within(DEADLINE));
    let (mut again, _) = holder.attach("alice", &attached.id, false);
    let replay = again.until_output("seq-done");
    assert!(replay.len() <= 4096, "a replay of {} bytes", replay.len());
    let first: u32 = replay.lines().next().unwrap().trim().parse().unwrap_or_else(|_| panic!("{replay:?}"));
    let second: u32 = replay.lines().nth(1).unwrap().trim().parse().unwrap();
    assert_eq!(second, first + 1, "the replay starts mid-line: {replay:?}");
    again.send(&ClientMessage::Detach);
    let script = "trap 'echo redrawn' WINCH; echo ready; while :; do sleep 0.05; done";
    let (mut screen, program) = holder.new_session("alice", &["sh", "-c", script], SIZE);
    screen.until_output("ready");
    screen.send(&ClientMessage::Detach);
    let (mut back, _) = holder.attach("alice", &program.id, false);
    back.until_output("redrawn");
}

/// A watcher whose queue stays full while the driver reads is detached with a notice after the
/// stall bound, rather than holding the shell.
#[test]
fn a_watcher_that_stays_blocked_is_detached_with_a_notice() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let (mut driver, attached) = holder.new_session("alice", &["yes", "output nobody keeps up with"], SIZE);
    let (mut watcher, _) = holder.attach("alice", &attached.id, true);
    let started = Instant::now();
    // The driver reads (and drops) everything until the watcher has come and gone.
    let deadline = started + Duration::from_secs(20);
    let mut present = 0;
    loop {
        assert!(Instant::now() < deadline, "the blocked watcher was never detached");
        match driver.recv() {
            Some(HolderMessage::Presence(p)) if p.attached.len() == 2 => present = 2,
            Some(HolderMessage::Presence(p)) if p.attached.len() == 1 && present == 2 => break,
            Some(_) => {}
            None => panic!("the holder closed the driver"),
        }
    }
    assert!(started.elapsed() >= Duration::from_secs(5), "detached before the stall bound");
    let mut last_notice = None;
    loop {
        match watcher.recv() {
            Some(HolderMessage::Notice(text)) => last_notice = Some(text),
            Some(_) => {}
            None => break,
        }
    }
    let notice = last_notice.expect("no notice for the detached watcher");
    assert!(notice.contains("fell 5s behind"), "{notice}");
    // The shell goes on for the driver.
    assert!(matches!(driver.recv(), Some(HolderMessage::Output(_))));
}

/// At most 8 clients per session; the ninth is refused, naming the bound.
#[test]
fn the_ninth_client_of_a_session_is_refused() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let (_first, attached) = holder.new_session("alice", &[], SIZE);
    let others: Vec<_> = (0..7).map(|_| holder.attach("alice", &attached.id, true)).collect();
    assert_eq!(others.last().map(|(_, a)| a.attached.len()), Some(8));
    let mut ninth = holder.client();
    ninth.send(&ClientMessage::Hello(hello("alice", Which::Attach { id: attached.id.clone() }, true, None)));
    match ninth.recv() {
        Some(HolderMessage::Refused(text)) => assert!(text.contains("8 clients"), "{text}"),
        other => panic!("{other:?}"),
    }
}

/// Bad frames and hellos are refused with what failed named, and the holder goes on serving.
#[test]
fn malformed_frames_are_refused_naming_what_failed() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let json = |text: &str| {
        let mut frame = vec![0x01];
        frame.extend((text.len() as u32).to_be_bytes());
        frame.extend(text.as_bytes());
        frame
    };
    // (what, bytes, words of the refusal)
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("an unknown type", vec![0x42, 0, 0, 0, 0], "unknown frame type 0x42"),
        ("a 1 MiB hello announced", vec![0x01, 0, 0x10, 0, 0], "over its limit of 4096"),
        ("input before a hello", ClientMessage::Input(b"ls".to_vec()).encode().unwrap(), "must be a Hello"),
        ("a holder's frame", vec![0x82, 0, 0, 0, 0], "only the holder sends"),
        ("not JSON", json("{nope"), "Hello frame whose JSON"),
        ("an unknown field", json(r#"{"version":1,"user":"a","root":true}"#), "unknown field `root`"),
        ("a later version", json(r#"{"version":2,"user":"a"}"#), "protocol version 2"),
        ("a zero size", json(r#"{"version":1,"user":"a","size":{"cols":0,"rows":1}}"#), "0x1"),
    ];
    for (what, bytes, words) in cases {
        let mut client = holder.client();
        std::io::Write::write_all(&mut client.stream, &bytes).unwrap();
        match client.recv() {
            Some(HolderMessage::Refused(text)) => assert!(text.contains(words), "{what}: {text}"),
            other => panic!("{what}: {other:?}"),
        }
        assert!(client.closed_within(DEADLINE), "{what}: not closed");
    }
    assert!(holder.list().is_empty());
}

/// A hello without an id reattaches to the user's newest detached session, else starts one;
/// `End` from its creator ends it for everyone attached.
#[test]
fn attach_or_new_finds_the_users_detached_session_and_end_ends_it() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let (mut first, older) = holder.new_session("alice", &[], SIZE);
    first.send(&ClientMessage::Detach);
    assert!(first.closed_within(DEADLINE));
    let (mut second, newer) = holder.new_session("alice", &[], SIZE);
    second.send(&ClientMessage::Detach);
    assert!(second.closed_within(DEADLINE));
    wait_for("both detached", DEADLINE, || holder.list().iter().all(|s| s.attached.is_empty()).then_some(()));
    let mut alice = holder.client();
    let again = alice.hello(hello("alice", Which::default(), false, None));
    assert_eq!((again.id.as_str(), again.resumed), (newer.id.as_str(), true), "not the newest detached one");
    let mut bob = holder.client();
    let bobs = bob.hello(hello("bob", Which::default(), false, None));
    assert!(!bobs.resumed && bobs.id != older.id && bobs.id != newer.id, "{bobs:?}");
    let (mut watcher, _) = holder.attach("carol", &newer.id, true);
    alice.send(&ClientMessage::End);
    for client in [&mut alice, &mut watcher] {
        let ended = client.until("Ended", |m| match m {
            HolderMessage::Ended(ended) => Some(ended.clone()),
            _ => None,
        });
        assert_eq!((ended.reason, ended.message.as_str()), (EndReason::Killed, "ended by alice"));
    }
    assert_eq!(session_processes(newer.pid as i32), Vec::<i32>::new());
    let ids: Vec<String> = holder.list().into_iter().map(|s| s.id).collect();
    assert!(ids.contains(&older.id) && ids.contains(&bobs.id) && !ids.contains(&newer.id), "{ids:?}");
}
