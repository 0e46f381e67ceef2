//! `kubectl myownshell sessions NAME`: the terminal sessions the shell's holder keeps, as
//! `myownshell-session list --json` run in the shell's ready pod says (by this plugin's own exec,
//! as the user), shown as a table or as JSON. The holder lists everyone's: the caller is shown
//! their own and, when they are not the shell's owner, the owner's (the ones a sharee may join).

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use myownshell_api::connect::Wait;
use myownshell_runtime::time::format_age;
use myownshell_session::protocol::{MAX_LISTING, SessionInfo};
use tokio::io::AsyncReadExt;

use crate::args::Output;
use crate::attach::step::who;
use crate::client::Target;
use crate::direct::{self, no_holder};
use crate::{pod, whoami};

/// One line of the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    /// Who started it.
    pub user: String,
    /// How long ago it started.
    pub age: String,
    /// Who is attached (`-`: nobody, it is detached).
    pub attached: String,
    /// When someone last typed in it, or `-`.
    pub last_input: String,
    pub command: String,
}

/// The sessions `me` is shown: their own, and the owner's when `me` is not the owner.
pub fn visible(sessions: Vec<SessionInfo>, me: &str, owner: Option<&str>) -> Vec<SessionInfo> {
    let owner = owner.filter(|owner| *owner != me);
    sessions.into_iter().filter(|s| s.user == me || Some(s.user.as_str()) == owner).collect()
}

/// The line for `session`, ages counted at `now` (seconds since the Unix epoch).
pub fn row(session: &SessionInfo, now: u64) -> Row {
    let age = |t: u64| format_age(now.saturating_sub(t) as i64);
    Row {
        id: session.id.clone(),
        user: session.user.clone(),
        age: age(session.created),
        attached: if session.attached.is_empty() { "-".to_owned() } else { who(&session.attached) },
        last_input: session.last_input.map_or_else(|| "-".to_owned(), |t| format!("{} ago", age(t))),
        command: session.command.join(" "),
    }
}

/// The table, padded as kubectl pads.
pub fn render(rows: &[Row]) -> String {
    let mut lines: Vec<Vec<&str>> = vec![vec!["ID", "USER", "AGE", "ATTACHED", "LAST INPUT", "COMMAND"]];
    for r in rows {
        lines.push(vec![&r.id, &r.user, &r.age, &r.attached, &r.last_input, &r.command]);
    }
    crate::table::render(&lines)
}

/// `sessions NAME`: print the caller's sessions of shell `name`.
pub async fn show(target: &Target, name: &str, output: Output) -> anyhow::Result<()> {
    let (shell, wait) = pod::look(target, name).await?;
    let pod = match wait {
        Wait::Ready(pod) => pod,
        Wait::Stopped(why) | Wait::Waiting(why) => bail!("no sessions to list: {why}"),
    };
    let me = whoami::user_name(&target.client).await?;
    let sessions = visible(list(target, &pod).await?, &me, shell.spec.owner.as_deref());
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&sessions)?),
        Output::Table if sessions.is_empty() => eprintln!("No sessions of yours in shell {name}."),
        Output::Table => {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            print!("{}", render(&sessions.iter().map(|s| row(s, now)).collect::<Vec<_>>()));
        }
    }
    Ok(())
}

/// Every session of the holder in `pod`, by `list --json`.
pub async fn list(target: &Target, pod: &str) -> anyhow::Result<Vec<SessionInfo>> {
    let pods: Api<Pod> = Api::namespaced(target.exec_client.clone(), &target.namespace);
    let mut process = pods
        .exec(pod, myownshell_session::exec::list(), &direct::params(false))
        .await
        .with_context(|| format!("listing the sessions in pod {pod}"))?;
    let (Some(stdout), Some(stderr), Some(status)) = (process.stdout(), process.stderr(), process.take_status()) else {
        bail!("the exec gave no stdout or stderr");
    };
    let stderr = tokio::spawn(direct::kept(stderr));
    let mut json = Vec::new();
    stdout.take(2 * MAX_LISTING as u64).read_to_end(&mut json).await.context("reading the sessions")?;
    let status = status.await;
    let stderr = stderr.await.unwrap_or_default();
    if no_holder(status.as_ref()) {
        bail!(
            "this shell's pod has no session holder yet (it gets one at its next restart, kubectl myownshell \
             update)"
        );
    }
    if let Some(failed) = status.filter(|s| s.status.as_deref() != Some("Success")) {
        bail!(
            "listing the sessions failed: {}",
            if stderr.is_empty() { failed.message.unwrap_or_default() } else { stderr }
        );
    }
    serde_json::from_slice(&json).context("reading the holder's list of sessions")
}

#[cfg(test)]
mod tests {
    use myownshell_session::protocol::Attendee;

    use super::*;

    fn session(id: &str, user: &str) -> SessionInfo {
        SessionInfo { id: id.into(), user: user.into(), command: vec!["/bin/sh".into()], ..SessionInfo::default() }
    }

    #[test]
    fn the_caller_sees_their_own_and_the_owners_sessions() {
        let all = || vec![session("a1", "alice"), session("b1", "bob"), session("c1", "carol"), session("a2", "alice")];
        let ids = |shown: Vec<SessionInfo>| shown.into_iter().map(|s| s.id).collect::<Vec<_>>();
        // (who asks, the shell's owner, what they see)
        let cases: &[(&str, Option<&str>, &[&str])] = &[
            ("alice", Some("alice"), &["a1", "a2"]),
            ("bob", Some("alice"), &["a1", "b1", "a2"]),
            ("dave", Some("alice"), &["a1", "a2"]),
            ("bob", None, &["b1"]),
            ("erin", None, &[]),
        ];
        for (me, owner, shown) in cases {
            assert_eq!(ids(visible(all(), me, *owner)), *shown, "{me} in {owner:?}'s shell");
        }
    }

    #[test]
    fn the_table() {
        let attached = SessionInfo {
            created: 1000,
            last_input: Some(1290),
            attached: vec![
                Attendee { user: "alice".into(), read_only: false, driving: true },
                Attendee { user: "bob".into(), read_only: true, driving: false },
            ],
            ..session("ab12cd34", "alice")
        };
        let detached = SessionInfo {
            created: 1299,
            command: vec!["top".into(), "-d".into(), "1".into()],
            ..session("ff00", "alice")
        };
        let rows = [row(&attached, 1300), row(&detached, 1300)];
        assert_eq!(
            render(&rows),
            "ID         USER    AGE    ATTACHED                           LAST INPUT   COMMAND\n\
             ab12cd34   alice   5m0s   alice (driving), bob (read-only)   10s ago      /bin/sh\n\
             ff00       alice   1s     -                                  -            top -d 1\n"
        );
    }
}
