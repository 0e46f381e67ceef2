//! The pod a shell is reached in: its oldest ready pod (`myownshell_api::connect::wait_for`, the
//! rule the gateway follows too), waited for with a progress line that says what it waits for,
//! given up on after a timeout with the reason, never hung on.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use myownshell_api::MyOwnShell;
use myownshell_api::connect::{Wait, wait_for};

use crate::client::Target;

/// How often the shell and its pods are looked at while waiting.
const POLL: Duration = Duration::from_millis(500);

/// The progress line: rewritten in place at a terminal, one line per change elsewhere.
struct Progress {
    terminal: bool,
    last: String,
}

impl Progress {
    fn show(&mut self, line: &str, waited: Duration) {
        let mut err = std::io::stderr();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{line} ({}s)", waited.as_secs());
            let _ = err.flush();
        } else if line != self.last {
            let _ = writeln!(err, "{line}");
        }
        self.last = line.to_owned();
    }

    fn done(&self) {
        if self.terminal && !self.last.is_empty() {
            let _ = writeln!(std::io::stderr());
        }
    }
}

/// Shell `name` and what reaching it comes to now.
pub async fn look(target: &Target, name: &str) -> anyhow::Result<(MyOwnShell, Wait)> {
    let shells: Api<MyOwnShell> = Api::namespaced(target.client.clone(), &target.namespace);
    let pods: Api<Pod> = Api::namespaced(target.client.clone(), &target.namespace);
    let shell = shells
        .get_opt(name)
        .await?
        .with_context(|| format!("no MyOwnShell {name} in namespace {}", target.namespace))?;
    let selector = shell.status.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
    let found = match selector.is_empty() {
        true => Vec::new(),
        false => pods.list(&ListParams::default().labels(&selector)).await?.items,
    };
    let wait = wait_for(&shell, &found);
    Ok((shell, wait))
}

/// Wait for a ready pod of `name` (starting the shell first if `start` and it is stopped); its
/// name.
pub async fn ready(target: &Target, name: &str, timeout: Duration, start: bool) -> anyhow::Result<String> {
    let shells: Api<MyOwnShell> = Api::namespaced(target.client.clone(), &target.namespace);
    let started = Instant::now();
    let mut progress = Progress { terminal: std::io::stderr().is_terminal(), last: String::new() };
    let mut started_it = false;
    let pod = loop {
        match look(target, name).await?.1 {
            Wait::Ready(pod) => break pod,
            Wait::Stopped(why) if start && !started_it => {
                crate::lifecycle::apply_start(&shells, name).await?;
                started_it = true;
                progress.show(&format!("starting shell {name} ({why})"), started.elapsed());
            }
            Wait::Stopped(why) if !started_it => bail!(why),
            Wait::Stopped(_) => progress.show(&format!("waiting for shell {name} to start"), started.elapsed()),
            Wait::Waiting(line) => progress.show(&line, started.elapsed()),
        }
        if started.elapsed() >= timeout {
            progress.done();
            bail!("gave up after {}s: {}", timeout.as_secs(), progress.last);
        }
        tokio::time::sleep(POLL).await;
    };
    progress.done();
    Ok(pod)
}
