//! The record of every connection into a shell, allowed or refused: an Event on the MyOwnShell
//! (who, which pod, how, allowed or not) and, for allowed ones, `status.lastConnection`, which
//! the lifetime work reads to tell an idle shell from a busy one. (The counter is the server's,
//! `myownshell_webhook_connections_total`.)
//!
//! A flood of connections must not flood the apiserver with writes, so both are aggregated over
//! a window (`--connection-record-interval`, 5 s by default): the first connection of a kind
//! (shell, user, how, allowed or not) is reported at once; the ones that follow within the window
//! become one Event at its end that counts them. `status.lastConnection` is written at most once
//! per shell per window, with the latest connection. So a shell costs at most one status write
//! and one Event per user and kind every window, however many connections it gets.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, Client};
use myownshell_api::names::reasons;
use myownshell_api::{MyOwnShell, names};
use myownshell_runtime::events::{self, EventType, Occurrence, Reporter};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::connect::access::Grant;
use crate::connect::gate::{ConnectKind, Connection};

/// Connections waiting to be recorded, at most (beyond, they are counted and dropped).
const QUEUE: usize = 4096;

/// The reporting controller of the Events.
pub const REPORTER: &str = "myownshell-webhook";

/// Where the server hands connections to be recorded.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Connection>,
}

impl Recorder {
    /// Queue `connection` for the record, unless it is a dry run. `false` if the queue is full
    /// (the connection goes unrecorded).
    pub fn record(&self, connection: Connection) -> bool {
        connection.dry_run || self.tx.try_send(connection).is_ok()
    }
}

/// What one aggregation key (shell, user, kind, allowed) has seen in its window.
struct Pending {
    /// When the last Event of this key was written.
    reported: Instant,
    /// Connections since then, and the latest.
    count: u32,
    latest: Option<Connection>,
}

/// The latest connection of one shell and when its status was last written.
struct LastConnection {
    written: Instant,
    waiting: Option<(Connection, Timestamp)>,
}

/// Aggregation key of an Event: the shell, who, how, and whether they were let in.
type EventKey = (String, String, String, ConnectKind, bool);
/// A shell, by namespace and name.
type ShellKey = (String, String);

/// A write the record calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// An Event for this many connections like this one (the latest of them).
    Event(Connection, u32),
    /// `status.lastConnection` of the shell: this connection, made then.
    Status(Connection, Timestamp),
}

/// Which writes the connections call for, and when: the aggregation, without I/O.
pub struct Aggregator {
    interval: Duration,
    events: HashMap<EventKey, Pending>,
    statuses: HashMap<ShellKey, LastConnection>,
}

impl Aggregator {
    /// Writes aggregated over `interval`.
    pub fn new(interval: Duration) -> Self {
        Self { interval, events: HashMap::new(), statuses: HashMap::new() }
    }

    /// One connection, made at `now` (`wall`, the same moment by the clock): written at once if
    /// its key has been quiet for a window, else kept for the window's end.
    pub fn take(&mut self, connection: Connection, now: Instant, wall: Timestamp) -> Vec<Write> {
        let mut writes = Vec::new();
        if connection.grant.is_some() {
            let shell = (connection.namespace.clone(), connection.shell.name.clone());
            match self.statuses.get_mut(&shell) {
                Some(last) if now.duration_since(last.written) < self.interval => {
                    last.waiting = Some((connection.clone(), wall));
                }
                _ => {
                    self.statuses.insert(shell, LastConnection { written: now, waiting: None });
                    writes.push(Write::Status(connection.clone(), wall));
                }
            }
        }
        let key = (
            connection.namespace.clone(),
            connection.shell.name.clone(),
            connection.user.clone(),
            connection.kind,
            connection.grant.is_some(),
        );
        let ended = match self.events.get_mut(&key) {
            Some(pending) if now.duration_since(pending.reported) < self.interval => {
                pending.count += 1;
                pending.latest = Some(connection);
                return writes;
            }
            // The window ended and `flush` has not come by yet (it ticks a quarter of a window
            // apart): what it holds is told now, before the new window starts, or under a steady
            // stream every window would lose its count.
            Some(pending) => {
                pending.latest.take().map(|latest| Write::Event(latest, std::mem::take(&mut pending.count)))
            }
            None => None,
        };
        writes.extend(ended);
        self.events.insert(key, Pending { reported: now, count: 0, latest: None });
        writes.push(Write::Event(connection, 1));
        writes
    }

    /// What waited a whole window by `now` (or everything, with `all`); keys quiet for two
    /// windows are forgotten, so memory follows the shells in use.
    pub fn flush(&mut self, now: Instant, all: bool) -> Vec<Write> {
        let interval = self.interval;
        let due = |since: Instant| all || now.duration_since(since) >= interval;
        let mut writes = Vec::new();
        self.events.retain(|_, pending| {
            if due(pending.reported)
                && let Some(latest) = pending.latest.take()
            {
                writes.push(Write::Event(latest, std::mem::take(&mut pending.count)));
                pending.reported = now;
            }
            now.duration_since(pending.reported) < interval * 2
        });
        self.statuses.retain(|_, last| {
            if due(last.written)
                && let Some((connection, at)) = last.waiting.take()
            {
                writes.push(Write::Status(connection, at));
                last.written = now;
            }
            now.duration_since(last.written) < interval * 2
        });
        writes
    }
}

/// Start recording, with writes aggregated over `interval`, until `shutdown` (then what is
/// waiting is written).
pub fn start(client: Client, interval: Duration, shutdown: CancellationToken) -> Recorder {
    let (tx, rx) = mpsc::channel(QUEUE);
    let writer = Writer { client, reporter: Arc::new(Reporter::new(REPORTER)) };
    tokio::spawn(run(Aggregator::new(interval), writer, rx, shutdown));
    Recorder { tx }
}

async fn run(
    mut aggregator: Aggregator,
    writer: Writer,
    mut rx: mpsc::Receiver<Connection>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval((aggregator.interval / 4).max(Duration::from_millis(100)));
    loop {
        let writes = tokio::select! {
            received = rx.recv() => match received {
                Some(connection) => aggregator.take(connection, Instant::now(), Timestamp::now()),
                None => break,
            },
            _ = tick.tick() => aggregator.flush(Instant::now(), false),
            () = shutdown.cancelled() => break,
        };
        writes.into_iter().for_each(|w| writer.write(w));
    }
    aggregator.flush(Instant::now(), true).into_iter().for_each(|w| writer.write(w));
}

/// Does the writes, each in a task of its own (the loop never waits for the apiserver).
struct Writer {
    client: Client,
    reporter: Arc<Reporter>,
}

impl Writer {
    fn write(&self, write: Write) {
        let client = self.client.clone();
        match write {
            Write::Event(connection, count) => {
                let (occurrence, reporter) = (occurrence(&connection, count), self.reporter.clone());
                tokio::spawn(async move {
                    if let Err(e) = events::publish(&client, occurrence, &reporter).await {
                        tracing::warn!(error = %e, shell = %connection.shell.name, namespace = %connection.namespace, "could not record a connection as an Event");
                    }
                });
            }
            Write::Status(connection, at) => {
                let api: Api<MyOwnShell> = Api::namespaced(client, &connection.namespace);
                tokio::spawn(async move {
                    if let Err(e) = write_last_connection(&api, &connection, at).await {
                        tracing::warn!(error = %e, shell = %connection.shell.name, namespace = %connection.namespace, "could not write status.lastConnection");
                    }
                });
            }
        }
    }
}

/// Write `status.lastConnection` for `connection`, made `at`, unless the shell already has a
/// later one ([`myownshell_api::last_connection::write`], shared with the gateway).
pub async fn write_last_connection(api: &Api<MyOwnShell>, connection: &Connection, at: Timestamp) -> kube::Result<()> {
    let last = myownshell_api::Connection {
        user: connection.user.clone(),
        time: myownshell_runtime::time::to_second(at),
        pod: connection.pod.clone(),
        kind: connection.kind.as_str().to_owned(),
    };
    let shell = &connection.shell;
    myownshell_api::last_connection::write(api, &shell.name, shell.uid.as_deref(), &last).await
}

/// The Event of `count` connections like `connection`.
pub fn occurrence(connection: &Connection, count: u32) -> Occurrence {
    let shell = &connection.shell;
    let regarding = ObjectReference {
        api_version: Some(names::API_VERSION.to_owned()),
        kind: Some(names::KIND.to_owned()),
        name: Some(shell.name.clone()),
        namespace: Some(connection.namespace.clone()),
        uid: shell.uid.clone(),
        ..ObjectReference::default()
    };
    let related = ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        name: Some(connection.pod.clone()),
        namespace: Some(connection.namespace.clone()),
        ..ObjectReference::default()
    };
    let (user, pod, how) = (&connection.user, &connection.pod, connection.kind.as_str());
    let times = match count {
        0 | 1 => String::new(),
        n => format!(" ({n} times in the last few seconds)"),
    };
    let (type_, reason, note) = match connection.grant {
        Some(grant) => {
            let why = match grant {
                Grant::NoOwner => "the shell has no owner".to_owned(),
                Grant::Owner => "the owner".to_owned(),
                Grant::SharedUser => "in spec.sharedWith.users".to_owned(),
                Grant::SharedGroup => "in a group of spec.sharedWith.groups".to_owned(),
                Grant::Admin => "an administrator (a group of the webhook's --admin-groups)".to_owned(),
            };
            let approved = approvers(shell);
            (
                EventType::Normal,
                reasons::CONNECTED,
                format!("{user} connected to pod {pod} ({how}){times}: {why}{approved}"),
            )
        }
        None => (
            EventType::Warning,
            reasons::CONNECTION_DENIED,
            format!("{user} was refused {how} into pod {pod}{times}: only {} may connect", shell.who_may_connect()),
        ),
    };
    Occurrence { regarding, related: Some(related), type_, reason, action: action(connection.kind), note }
}

/// `; approved by …` for a shell of a class that asks for approval, naming who approved it (as
/// its spec records them): the record of a connection names the approvers too.
fn approvers(shell: &super::access::ShellAccess) -> String {
    let approvals = shell.classed.as_ref().and_then(|c| c.0.approvals.as_deref()).unwrap_or_default();
    let mut by: Vec<&str> = approvals
        .iter()
        .filter(|a| a.decision == myownshell_api::Decision::Approve)
        .filter_map(|a| a.by.as_deref())
        .collect();
    by.dedup();
    if by.is_empty() { String::new() } else { format!("; approved by {}", by.join(", ")) }
}

/// The Event's action for a kind of connection.
fn action(kind: ConnectKind) -> &'static str {
    match kind {
        ConnectKind::Exec => "Exec",
        ConnectKind::Attach => "Attach",
        ConnectKind::PortForward => "PortForward",
        ConnectKind::Proxy => "Proxy",
        ConnectKind::Debug => "Debug",
    }
}

#[cfg(test)]
mod tests {
    use crate::connect::access::ShellAccess;

    use super::*;

    fn connection(user: &str, grant: Option<Grant>) -> Connection {
        Connection {
            kind: ConnectKind::Exec,
            namespace: "team".into(),
            pod: "web-7d9f-x2x4z".into(),
            shell: Arc::new(ShellAccess {
                name: "web".into(),
                uid: Some("u1".into()),
                owner: Some("alice".into()),
                users: vec!["bob".into()],
                ..ShellAccess::default()
            }),
            user: user.into(),
            grant,
            dry_run: false,
        }
    }

    /// What the writes are, in short: `status bob`, `event bob 3`.
    fn summary(writes: &[Write]) -> Vec<String> {
        writes
            .iter()
            .map(|w| match w {
                Write::Event(c, n) => format!("event {} {n}", c.user),
                Write::Status(c, _) => format!("status {}", c.user),
            })
            .collect()
    }

    #[test]
    fn a_flood_of_connections_is_one_write_of_each_kind_per_window() {
        let mut aggregator = Aggregator::new(Duration::from_secs(5));
        let (t0, wall) = (Instant::now(), Timestamp::from_second(1_800_000_000).unwrap());
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let owner = || connection("alice", Some(Grant::Owner));
        assert_eq!(
            summary(&aggregator.take(owner(), at(0), wall)),
            ["status alice", "event alice 1"],
            "the first, at once"
        );
        for i in 1..100 {
            assert!(aggregator.take(owner(), at(i * 10), wall).is_empty(), "the rest wait for the window");
        }
        let shared = connection("bob", Some(Grant::SharedUser));
        assert_eq!(summary(&aggregator.take(shared, at(1000), wall)), ["event bob 1"], "another user: its own Event");
        let refused = connection("carol", None);
        assert_eq!(summary(&aggregator.take(refused, at(1100), wall)), ["event carol 1"], "refused: no status");
        assert!(aggregator.flush(at(4999), false).is_empty(), "not before the window ends");
        let mut end = summary(&aggregator.flush(at(5000), false));
        end.sort();
        assert_eq!(end, ["event alice 99", "status bob"], "then one Event counting the rest, and the latest status");
        assert!(aggregator.flush(at(6000), false).is_empty());
        aggregator.flush(at(20_000), false);
        assert!(aggregator.events.is_empty() && aggregator.statuses.is_empty(), "quiet keys are forgotten");
        aggregator.take(owner(), at(30_000), wall);
        aggregator.take(owner(), at(30_001), wall);
        assert_eq!(
            summary(&aggregator.flush(at(30_002), true)),
            ["event alice 1", "status alice"],
            "at shutdown, everything waiting"
        );
    }

    /// 200 connections in 22 s, one every 110 ms, with `flush` ticking a quarter of a window apart
    /// as the recorder's loop does: the Events count every one of them (they counted 23 when a
    /// new window dropped what the last one held).
    #[test]
    fn a_steady_stream_is_counted_whole() {
        let interval = Duration::from_secs(5);
        let mut aggregator = Aggregator::new(interval);
        let (t0, wall) = (Instant::now(), Timestamp::from_second(1_800_000_000).unwrap());
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut writes = Vec::new();
        // The loop's ticks do not line up with the first connection's window.
        let mut next_tick = 700;
        for i in 0..200 {
            let now = i * 110;
            while next_tick <= now {
                writes.extend(aggregator.flush(at(next_tick), false));
                next_tick += 1250;
            }
            writes.extend(aggregator.take(connection("alice", Some(Grant::Owner)), at(now), wall));
        }
        writes.extend(aggregator.flush(at(30_000), true));
        let counted: u32 = writes.iter().map(|w| if let Write::Event(_, n) = w { *n } else { 0 }).sum();
        assert_eq!(counted, 200, "{:?}", summary(&writes));
        // And the stream stays aggregated: about one Event per window, not one per connection.
        let events = writes.iter().filter(|w| matches!(w, Write::Event(..))).count();
        assert!(events <= 12, "{events} Events for 22 s: {:?}", summary(&writes));
    }

    #[test]
    fn events_say_who_how_where_and_why() {
        let allowed = occurrence(&connection("alice", Some(Grant::Owner)), 1);
        assert_eq!((allowed.type_, allowed.reason, allowed.action), (EventType::Normal, "Connected", "Exec"));
        assert_eq!(allowed.note, "alice connected to pod web-7d9f-x2x4z (exec): the owner");
        assert_eq!(allowed.regarding.name.as_deref(), Some("web"));
        assert_eq!(allowed.regarding.uid.as_deref(), Some("u1"));
        assert_eq!(allowed.related.and_then(|r| r.name).as_deref(), Some("web-7d9f-x2x4z"));
        let mut approved = connection("alice", Some(Grant::Owner));
        let spec = myownshell_api::MyOwnShellSpec {
            approvals: Some(vec![myownshell_api::Approval {
                by: Some("sam".into()),
                decision: myownshell_api::Decision::Approve,
                ..myownshell_api::Approval::default()
            }]),
            ..myownshell_api::MyOwnShellSpec::default()
        };
        let classed = Some(crate::connect::access::ClassedSpec(Arc::new(spec)));
        approved.shell = Arc::new(ShellAccess { classed, ..(*approved.shell).clone() });
        assert_eq!(
            occurrence(&approved, 1).note,
            "alice connected to pod web-7d9f-x2x4z (exec): the owner; approved by sam"
        );
        let refused = occurrence(&connection("carol", None), 7);
        assert_eq!((refused.type_, refused.reason), (EventType::Warning, "ConnectionDenied"));
        assert_eq!(
            refused.note,
            "carol was refused exec into pod web-7d9f-x2x4z (7 times in the last few seconds): only its owner alice, the users bob may connect"
        );
    }
}
