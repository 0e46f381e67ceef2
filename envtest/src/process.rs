//! Child processes that cannot outlive us.
//!
//! Every child is started through `setpriv --pdeathsig KILL`, so the kernel kills it when its
//! parent dies, whether the test process exits normally, panics or is SIGKILLed. The "parent"
//! the kernel tracks is the *thread* that forked, so all children are forked from one thread
//! that lives as long as the process (tests run on short-lived threads; forking there would kill
//! the shared control plane when the first test finished). Each child also leads its own
//! process group, so a stop reaches anything it started.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// The channel to the one thread that forks children.
fn spawner() -> &'static mpsc::Sender<SpawnRequest> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        let spawned = std::thread::Builder::new().name("child-spawner".into()).spawn(move || {
            for (mut command, reply) in rx {
                // The receiver only goes away if the caller gave up; nothing to do then.
                let _ = reply.send(command.spawn());
            }
        });
        if let Err(e) = spawned {
            panic!("cannot start the child-spawner thread: {e}");
        }
        tx
    })
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// Short name used in messages ("etcd", "kube-apiserver", …).
    pub name: String,
    /// The executable (a bare name is looked up on `PATH`).
    pub program: PathBuf,
    /// Its arguments, without the program name.
    pub args: Vec<OsString>,
    /// Variables set on top of the environment, which the child inherits from this process.
    pub envs: Vec<(OsString, OsString)>,
    /// Where stdout and stderr go (appended).
    pub log: PathBuf,
}

impl ProcessSpec {
    /// A spec with no arguments and nothing added to the environment; the builder methods below
    /// add them.
    pub fn new(name: impl Into<String>, program: impl Into<PathBuf>, log: impl Into<PathBuf>) -> Self {
        Self { name: name.into(), program: program.into(), args: Vec::new(), envs: Vec::new(), log: log.into() }
    }

    /// Append one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Append several arguments, in order.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Set a variable for the child; of two entries for one key, the later wins.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.envs.push((key.into(), value.into()));
        self
    }
}

/// A running child; killed (with its process group) when dropped.
#[derive(Debug)]
pub struct ManagedProcess {
    spec: ProcessSpec,
    child: Child,
    exited: Option<ExitStatus>,
}

impl ManagedProcess {
    /// Start the process as the module docs describe, its stdout and stderr appended to
    /// `spec.log` (whose directory is created). `Err` if the log cannot be opened or `setpriv`
    /// (util-linux) cannot be started; a program that cannot be executed shows up as an early
    /// exit instead, with setpriv's message in the log.
    pub fn spawn(spec: ProcessSpec) -> io::Result<Self> {
        if let Some(parent) = spec.log.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let log = File::options().create(true).append(true).open(&spec.log)?;
        let mut command = Command::new("setpriv");
        command
            .arg("--pdeathsig")
            .arg("KILL")
            .arg("--")
            .arg(&spec.program)
            .args(&spec.args)
            .envs(spec.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .process_group(0);
        let (tx, rx) = mpsc::channel();
        spawner().send((command, tx)).map_err(|_| io::Error::other("the child-spawner thread is gone"))?;
        let child =
            rx.recv().map_err(|_| io::Error::other("the child-spawner thread did not answer"))?.map_err(|e| {
                io::Error::new(e.kind(), format!("cannot start {} via setpriv (util-linux): {e}", spec.name))
            })?;
        Ok(Self { spec, child, exited: None })
    }

    /// The spec's short name, for messages.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The child's process id, which is also its process group's id. setpriv execs the
    /// program, so this is the program's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file its stdout and stderr go to.
    pub fn log_path(&self) -> &Path {
        &self.spec.log
    }

    /// What it was started with, e.g. to start it again the same way.
    pub fn spec(&self) -> &ProcessSpec {
        &self.spec
    }

    /// `Some(status)` once the process has exited.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// Whether it has not exited yet (an exited child is reaped; this never blocks).
    pub fn is_running(&mut self) -> bool {
        self.exit_status().is_none()
    }

    /// Send `signal` to the child's process group.
    fn signal(&mut self, signal: Signal) -> io::Result<()> {
        if !self.is_running() {
            return Ok(());
        }
        let pid = Pid::from_raw(self.pid() as i32).ok_or_else(|| io::Error::other("child has pid 0"))?;
        kill_process_group(pid, signal).map_err(io::Error::from)
    }

    /// SIGTERM to the child's process group: ask it to shut down.
    pub fn terminate(&mut self) -> io::Result<()> {
        self.signal(Signal::TERM)
    }

    /// SIGTERM, then SIGKILL if the process is still there after `grace`. Returns the exit status.
    pub fn stop(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        self.terminate()?;
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(status) = self.exit_status() {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill()
    }

    /// SIGKILL the process group and reap the child.
    pub fn kill(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.exit_status() {
            return Ok(status);
        }
        self.signal(Signal::KILL)?;
        let status = self.child.wait()?;
        self.exited = Some(status);
        Ok(status)
    }

    /// The last `lines` lines of the log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.spec.log, lines)
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// Whether `pid` is running: present, and not a zombie waiting for its parent to reap it.
pub fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.rsplit(')').next().unwrap_or_default().trim_start().starts_with('Z'))
        .unwrap_or(false)
}

/// CPU time `pid` has used so far, user plus system (`utime` + `stime` of `/proc/<pid>/stat`,
/// in the kernel's fixed 100 ticks per second); `None` if it cannot be read.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    stat_cpu_time(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?, 14)
}

/// CPU time of the children `pid` has waited for, user plus system (`cutime` + `cstime` of
/// `/proc/<pid>/stat`): the kernel adds a child's to it when the child is reaped.
pub fn waited_children_cpu_time(pid: u32) -> Option<Duration> {
    stat_cpu_time(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?, 16)
}

/// Fields `user` and `user + 1` (numbered from 1, as `man 5 proc` does) of a `/proc/<pid>/stat`
/// line added up, in the kernel's fixed 100 ticks per second. Counted after the command name in
/// parentheses, which may itself hold spaces and parentheses: the first field after it is the
/// 3rd (the state).
fn stat_cpu_time(stat: &str, user: usize) -> Option<Duration> {
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(user.checked_sub(3)?);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((user + system) * 10))
}

/// The last `lines` lines of a log file (empty if unreadable).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_times_are_read_after_the_command_name() {
        // Fields 3 to 17: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime, then the rest.
        let tail = "S 1 2 3 4 5 6 7 8 9 10 11 12 130 40 20 0 1";
        let ms = |ms: u64| Some(Duration::from_millis(ms));
        for (stat, own, children) in [
            (format!("42 (xtask) {tail}"), ms(230), ms(1700)),
            (format!("42 (a (b) c) {tail}"), ms(230), ms(1700)),
            (format!("42 (x) y) {tail}"), ms(230), ms(1700)),
            ("42 (xtask) S 1 2 3".to_owned(), None, None),
            ("42 xtask S 1 2 3 4 5 6 7 8 9 10 11 12 130 40".to_owned(), None, None),
            (format!("42 (xtask) {}", tail.replace("130", "-")), ms(230), None),
            (String::new(), None, None),
        ] {
            assert_eq!(stat_cpu_time(&stat, 14), own, "utime + stime of {stat:?}");
            assert_eq!(stat_cpu_time(&stat, 16), children, "cutime + cstime of {stat:?}");
        }
    }

    #[test]
    fn a_waited_child_is_counted() {
        // `true` costs next to nothing: the reading is a figure, not an error.
        let before = waited_children_cpu_time(std::process::id()).expect("/proc/self/stat");
        std::process::Command::new("true").status().expect("true");
        assert!(waited_children_cpu_time(std::process::id()).expect("/proc/self/stat") >= before);
    }
}
