//! One session: a task that owns its PTY, scrollback and clients, and reacts to one thing at a
//! time: a client's request, input to write, output to read, a client's queue getting room, a
//! deadline (gathered output, a stalled watcher, the detached TTL), or its command's exit.
//!
//! Input and requests come on two channels: input (`Typed`) is only taken while less than
//! [`MAX_PENDING_INPUT`] waits for the terminal, so a paste into a program that does not read
//! backs up to the client instead of into the holder; requests (`Control`) are always taken.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, sleep_until};

use super::members::{MAX_CLIENTS, Members, Outlet, frame};
use super::output::{self, Gather, Held, Outcome};
use super::pty::Pty;
use super::roles::{self, Act, Standing};
use super::scrollback::Scrollback;
use crate::procs::reaper::Status;
use myownshell_session::protocol::{
    Attached, EndReason, Ended, Exited, HolderMessage, MAX_DATA, Presence, SessionInfo, Size, VERSION,
};

/// How a holder runs its sessions (from `serve`'s flags).
#[derive(Debug, Clone)]
pub struct Config {
    pub max_sessions: usize,
    pub detached_ttl: std::time::Duration,
    pub scrollback: usize,
    /// A session's command when the hello names none.
    pub shell: String,
    /// From SIGHUP to SIGKILL when a session ends.
    pub grace: std::time::Duration,
}

/// Input waiting for the terminal beyond which no more is taken from clients.
pub const MAX_PENDING_INPUT: usize = 64 * 1024;

/// A client joining.
#[derive(Debug)]
pub struct Join {
    pub user: String,
    pub read_only: bool,
    pub size: Option<Size>,
    pub resumed: bool,
    pub outlet: Outlet,
    /// The member id, or the refusal (already sent to the client as its last word).
    pub reply: oneshot::Sender<Result<u64, String>>,
}

/// A request to the session.
#[derive(Debug)]
pub enum Control {
    Join(Join),
    /// The client went (`word`: its last frame, for a refusal).
    Leave {
        member: u64,
        word: Option<HolderMessage>,
    },
    Resize {
        member: u64,
        size: Size,
    },
    AllowDrive {
        member: u64,
        allow: bool,
    },
    End {
        member: u64,
    },
    /// End it: `kill`, or the pod stopping.
    Finish(Ended),
}

/// Input from a client.
#[derive(Debug)]
pub enum Typed {
    Input { member: u64, bytes: Vec<u8> },
    Eof { member: u64 },
}

/// How the session's loop ended.
enum End {
    Exited(Option<Status>),
    Ended(Ended),
}

/// A session's state, owned by its task.
pub struct Session {
    pub id: String,
    pub creator: String,
    pub pid: i32,
    pub pty: Arc<Pty>,
    pub info: Arc<Mutex<SessionInfo>>,
    pub config: Arc<Config>,
    members: Members,
    scrollback: Scrollback,
    gather: Gather,
    held: Option<Held>,
    input: VecDeque<u8>,
    pty_open: bool,
    allow_drive: bool,
    next_member: u64,
    detached_since: Option<Instant>,
}

/// The channels a session is reached by.
pub struct Inbox {
    pub control: mpsc::Receiver<Control>,
    pub typed: mpsc::Receiver<Typed>,
    pub exit: oneshot::Receiver<Status>,
}

impl Session {
    /// A session for a command just spawned.
    pub fn new(
        id: String,
        creator: String,
        pid: i32,
        pty: Pty,
        info: Arc<Mutex<SessionInfo>>,
        config: Arc<Config>,
    ) -> Self {
        Session {
            id,
            creator,
            pid,
            pty: Arc::new(pty),
            info,
            scrollback: Scrollback::new(config.scrollback),
            config,
            members: Members::default(),
            gather: Gather::default(),
            held: None,
            input: VecDeque::new(),
            pty_open: true,
            allow_drive: false,
            next_member: 0,
            detached_since: Some(Instant::now()),
        }
    }

    /// Run until the command exits or the session is ended; then end what is left of it.
    pub async fn run(mut self, mut inbox: Inbox) {
        let end = loop {
            // A client too far behind for even a notice (or gone) is dropped wherever that is
            // found; the others hear of it here. Each round drops someone, so this ends.
            while self.members.take_lost() {
                self.presence();
            }
            let pty = self.pty.clone();
            let waiting = self.held.is_some();
            let room = self.held.as_ref().map(|h| h.room(&self.members));
            let room = async move {
                match room {
                    Some(room) => room.await,
                    None => std::future::pending().await,
                }
            };
            let stall = self.held.as_ref().and_then(|h| h.stall_deadline(&self.members));
            let gathered = self.gather.deadline;
            let idle = self.detached_since.map(|since| since + self.config.detached_ttl);
            tokio::select! {
                status = &mut inbox.exit => break End::Exited(status.ok()),
                Some(control) = inbox.control.recv() => if let Some(end) = self.on_control(control) { break end },
                Some(typed) = inbox.typed.recv(), if self.input.len() < MAX_PENDING_INPUT => self.on_typed(typed),
                ready = pty.writable(), if !self.input.is_empty() => self.write_input(ready),
                ready = pty.readable(), if self.pty_open && !waiting => {
                    let (send, outcome) = if ready.is_ok() { output::read_now(&pty, &mut self.gather) } else { (true, Outcome::Closed) };
                    self.pty_open = outcome == Outcome::Open;
                    if send { self.flush() }
                }
                () = sleep_until(gathered.unwrap_or_else(Instant::now)), if gathered.is_some() => self.flush(),
                () = room, if waiting => self.retry_held(),
                () = sleep_until(stall.unwrap_or_else(Instant::now)), if stall.is_some() => self.detach_stalled(),
                () = sleep_until(idle.unwrap_or_else(Instant::now)), if idle.is_some() => break End::Ended(self.idle()),
            }
        };
        self.finish(end, inbox.exit).await;
    }

    fn idle(&self) -> Ended {
        let ttl = crate::duration::format(self.config.detached_ttl);
        Ended {
            reason: EndReason::IdleTtl,
            message: format!("nobody was attached for {ttl} (the holder's --detached-ttl)"),
        }
    }

    fn on_control(&mut self, control: Control) -> Option<End> {
        match control {
            Control::Join(join) => self.join(join),
            Control::Leave { member, word } => self.leave(member, word),
            Control::Resize { member, size } => {
                if self.permit(member, Act::Resize) {
                    if let Some(m) = self.members.get_mut(member) {
                        m.size = Some(size);
                    }
                    self.drive(member, true);
                }
            }
            Control::AllowDrive { member, allow } => {
                if self.permit(member, Act::AllowDrive) && self.allow_drive != allow {
                    self.allow_drive = allow;
                    self.presence();
                }
            }
            Control::End { member } => {
                if self.permit(member, Act::End) {
                    let by = self.members.get_mut(member).map(|m| m.user.clone()).unwrap_or_default();
                    return Some(End::Ended(Ended { reason: EndReason::Killed, message: format!("ended by {by}") }));
                }
            }
            Control::Finish(ended) => return Some(End::Ended(ended)),
        }
        None
    }

    fn join(&mut self, join: Join) {
        if self.members.len() >= MAX_CLIENTS {
            let refusal = format!(
                "session {} already has {MAX_CLIENTS} clients attached, the most one session takes; detach one first",
                self.id
            );
            if let Some(word) = frame(&HolderMessage::Refused(refusal.clone())) {
                let _ = join.outlet.last_word.send(word);
            }
            let _ = join.reply.send(Err(refusal));
            return;
        }
        self.next_member += 1;
        let id = self.next_member;
        let creator = join.user == self.creator;
        self.members.add(id, join.user, creator, join.read_only, join.size, join.outlet);
        let standing = Standing { creator, read_only: join.read_only };
        if self.members.driver.is_none() && roles::may(standing, Act::Resize, self.allow_drive).is_ok() {
            self.drive(id, false);
        }
        self.welcome(id, join.read_only, join.resumed);
        self.detached_since = None;
        self.presence();
        if join.resumed {
            self.pty.redraw();
        }
        let _ = join.reply.send(Ok(id));
    }

    /// The new client's `Attached` and the replay of recent output.
    fn welcome(&mut self, id: u64, read_only: bool, resumed: bool) {
        let size = self.pty.size().unwrap_or(Size { cols: 80, rows: 24 });
        let info = self.info();
        let attached = Attached {
            id: self.id.clone(),
            version: VERSION,
            created: info.created,
            user: self.creator.clone(),
            command: info.command,
            pid: self.pid.unsigned_abs(),
            cols: size.cols,
            rows: size.rows,
            read_only,
            resumed,
            allow_drive: self.allow_drive,
            attached: self.members.attendees(),
        };
        let mut frames = vec![HolderMessage::Attached(attached)];
        frames.extend(self.scrollback.replay().chunks(MAX_DATA).map(|c| HolderMessage::Output(c.to_vec())));
        for message in frames {
            if let Some(frame) = frame(&message)
                && !self.members.send(id, &frame)
            {
                return;
            }
        }
    }

    fn leave(&mut self, member: u64, word: Option<HolderMessage>) {
        self.held = self.held.take().and_then(|h| h.forget(member));
        if self.members.close(member, word.as_ref().and_then(frame)) {
            self.presence();
        }
    }

    /// Tell everyone who is attached, and keep `list`'s copy.
    fn presence(&mut self) {
        if self.members.is_empty() {
            self.detached_since.get_or_insert_with(Instant::now);
        }
        let attached = self.members.attendees();
        if let Some(frame) =
            frame(&HolderMessage::Presence(Presence { attached: attached.clone(), allow_drive: self.allow_drive }))
        {
            self.members.broadcast(&frame);
        }
        let mut info = self.info.lock().unwrap_or_else(PoisonError::into_inner);
        info.attached = self.members.attendees();
        info.allow_drive = self.allow_drive;
    }

    /// Whether `member` may `act`; if not, it is told once.
    fn permit(&mut self, member: u64, act: Act) -> bool {
        let allow_drive = self.allow_drive;
        let Some(m) = self.members.get_mut(member) else { return false };
        let verdict = roles::may(Standing { creator: m.creator, read_only: m.read_only }, act, allow_drive);
        match verdict {
            Ok(()) => true,
            Err(notice) => {
                if !m.warned {
                    m.warned = true;
                    if let Some(frame) = frame(&HolderMessage::Notice(notice.into())) {
                        self.members.send(member, &frame);
                    }
                }
                false
            }
        }
    }

    /// `member` drives: the terminal takes its size. `announce`: tell everyone if the driver changed.
    fn drive(&mut self, member: u64, announce: bool) {
        let changed = self.members.driver != Some(member);
        self.members.driver = Some(member);
        let size = self.members.get_mut(member).and_then(|m| m.size);
        if let Some(size) = size.filter(|s| self.pty.size().ok() != Some(*s)) {
            let _ = self.pty.resize(size);
        }
        if changed && announce {
            self.presence();
        }
    }

    fn on_typed(&mut self, typed: Typed) {
        let (member, bytes) = match typed {
            Typed::Input { member, bytes } => (member, bytes),
            Typed::Eof { member } => (member, vec![self.pty.eof_char()]),
        };
        if self.permit(member, Act::Type) {
            self.drive(member, true);
            self.input.extend(bytes);
            self.info.lock().unwrap_or_else(PoisonError::into_inner).last_input = Some(crate::duration::now());
        }
    }

    fn write_input(&mut self, ready: std::io::Result<()>) {
        if ready.is_err() {
            return self.input.clear();
        }
        match self.pty.write(self.input.make_contiguous()) {
            Ok(Some(n)) => drop(self.input.drain(..n)),
            Ok(None) => {}
            // The terminal is gone: the command's exit ends the session.
            Err(_) => self.input.clear(),
        }
    }

    fn flush(&mut self) {
        let (len, held) = output::flush(&mut self.gather, &mut self.scrollback, &mut self.members);
        if len > 0 {
            self.info.lock().unwrap_or_else(PoisonError::into_inner).last_output = Some(crate::duration::now());
        }
        self.held = held;
    }

    fn retry_held(&mut self) {
        self.held = self.held.take().and_then(|h| h.retry(&mut self.members));
    }

    fn detach_stalled(&mut self) {
        let Some(held) = self.held.take() else { return };
        let stalled = held.stalled(&self.members);
        let notice = format!(
            "detached: your connection fell {}s behind the shell's output; attach again to catch up",
            output::STALL.as_secs()
        );
        let mut held = Some(held);
        for id in stalled {
            let _ = self.members.close(id, frame(&HolderMessage::Notice(notice.clone())));
            held = held.and_then(|h| h.forget(id));
        }
        self.held = held;
        self.presence();
    }

    fn info(&self) -> SessionInfo {
        self.info.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// End what is left of the session and tell its clients why.
    async fn finish(mut self, end: End, exit: oneshot::Receiver<Status>) {
        let result = crate::procs::end::session(self.pid, self.config.grace).await;
        if let Err(error) = &result {
            crate::log::line(&format!("session {}: {error}", self.id));
        }
        let word = match end {
            End::Exited(status) => {
                self.drain().await;
                let status = status.unwrap_or(Status { code: 255, signal: None });
                HolderMessage::Exited(Exited { code: status.code, signal: status.signal })
            }
            End::Ended(ended) => {
                // The main process is reaped by now or soon; its status is not news to anyone.
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), exit).await;
                HolderMessage::Ended(ended)
            }
        };
        self.members.close_all(frame(&word));
    }

    /// Send what the session's processes wrote before they went, within a second.
    async fn drain(&mut self) {
        let deadline = Instant::now() + std::time::Duration::from_secs(1);
        while self.pty_open && Instant::now() < deadline {
            let pty = self.pty.clone();
            let Ok(ready) = tokio::time::timeout_at(deadline, pty.readable()).await else { break };
            let (_, outcome) =
                if ready.is_ok() { output::read_now(&pty, &mut self.gather) } else { (true, Outcome::Closed) };
            self.pty_open = outcome == Outcome::Open;
            self.flush();
            while let Some(held) = self.held.as_ref() {
                let room = held.room(&self.members);
                if tokio::time::timeout_at(deadline, room).await.is_err() {
                    return;
                }
                self.retry_held();
            }
        }
        self.flush();
    }
}
