//! A network namespace of its own, held by one process (`unshare --net -- sleep infinity`).
//!
//! The holder is started like every child of the harness (parent-death signal, its own process
//! group), so however the run ends the namespace goes when the holder does, and with it every
//! device inside and every veth with an end inside (the kernel removes both ends of a veth).

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

use crate::process::{ManagedProcess, ProcessSpec};

use super::sandbox::run;

const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The namespace and the process that holds it.
#[derive(Debug)]
pub struct HeldNetwork {
    holder: ManagedProcess,
}

fn ns_link(pid: u32, ns: &str) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).ok()
}

impl HeldNetwork {
    /// Create the namespace; `name` names the holder in messages, `log` is its log. Returns once
    /// the holder is in a namespace other than this process's (setpriv has exec'd `unshare`,
    /// and `unshare` has unshared).
    pub fn start(name: &str, log: &Path) -> Result<Self, String> {
        let spec = ProcessSpec::new(name, "unshare", log).args(["--net", "--", "sleep", "infinity"]);
        let mut holder = ManagedProcess::spawn(spec).map_err(|e| format!("starting the {name}: {e}"))?;
        let own = ns_link(std::process::id(), "net");
        let deadline = Instant::now() + START_TIMEOUT;
        while ns_link(holder.pid(), "net").is_none() || ns_link(holder.pid(), "net") == own {
            if let Some(status) = holder.exit_status() {
                return Err(format!("the {name}'s holder exited ({status}): {}", holder.log_tail(10)));
            }
            if Instant::now() > deadline {
                return Err(format!("the {name}'s namespace did not appear in {START_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Self { holder })
    }

    /// The pid (on the host) of the process holding the namespace.
    pub fn pid(&self) -> u32 {
        self.holder.pid()
    }

    /// Run the shell `script` inside the namespace.
    pub fn inside(&self, script: &str) -> Result<(), String> {
        let pid = self.pid().to_string();
        run("nsenter", &["-t", &pid, "-n", "--", "sh", "-c", script]).map(drop)
    }

    /// Run `make` on a thread of this process moved into the namespace (setns(2) moves only the
    /// calling thread): a socket it creates, a listener or a connection, belongs to the
    /// namespace for its whole life, whichever thread uses it afterwards. The thread ends with
    /// `make`; no other thread of the process changes namespace.
    pub fn enter<T: Send>(&self, make: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
        let namespace = File::open(format!("/proc/{}/ns/net", self.pid()))?;
        std::thread::scope(|scope| {
            let inside = scope.spawn(move || {
                move_into_link_name_space(namespace.as_fd(), Some(LinkNameSpaceType::Network))?;
                make()
            });
            inside.join().unwrap_or_else(|_| Err(io::Error::other("the thread inside the namespace panicked")))
        })
    }

    /// The namespace's interfaces (from the holder's `/proc/<pid>/net/dev`).
    pub fn interfaces(&self) -> Vec<String> {
        std::fs::read_to_string(format!("/proc/{}/net/dev", self.pid()))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split_once(':').map(|(name, _)| name.trim().to_owned()))
            .collect()
    }

    /// Stop the holder (the kernel releases the namespace once nothing else is in it).
    pub fn stop(&mut self, grace: Duration) {
        let _ = self.holder.stop(grace);
    }
}
