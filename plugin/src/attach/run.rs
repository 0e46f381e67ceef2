//! The session logic, the same through every transport: join, then relay keystrokes, window
//! sizes and output until the session exits or ends, the person detaches, or a signal stops the
//! client; a dropped connection is taken up again (`reconnect`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use myownshell_session::protocol::Which;
use tokio::io::AsyncWrite;
use tokio::time::Instant;

use super::ending::Ending;
use super::input::Keys;
use super::options::Options;
use super::reconnect;
use super::step::{CLEAR, Join, Step, View, greet, react};
use super::terminal::Terminal;
use super::transport::{Joined, Link, OpenError, Request, Transport, Up};

/// How long a detach waits for the holder (or the gateway) to close the connection.
const DETACH_WAIT: Duration = Duration::from_secs(2);

/// Join the session `request` asks for: the link and the session, or how that ended.
pub async fn open<T: Transport>(transport: &mut T, request: &Request) -> Result<(Link, Joined), Ending> {
    transport.open(request).await.map_err(|e| match e {
        OpenError::Refused(why) => Ending::Refused(why),
        OpenError::NoHolder(why) => Ending::NoHolder(why),
        OpenError::Failed(why) => Ending::Failed(why),
    })
}

/// Attached through `first` (from [`open`]), relay until the end; a dropped connection is
/// reattached through `transport` within the grace.
pub async fn run<T: Transport, W: AsyncWrite + Unpin>(
    transport: &mut T,
    first: (Link, Joined),
    mut request: Request,
    options: &Options,
    term: &mut Terminal<W>,
) -> Ending {
    let (mut link, joined) = first;
    let mut keys = Keys::new(options.detach_keys.clone(), options.screen);
    let mut view = View::new(&options.shell, &joined);
    if let Err(e) = welcome(term, &joined, Join::First(&request.which), options).await {
        return Ending::Failed(e);
    }
    loop {
        let why = match relay(&mut link, &mut view, &mut keys, term, &mut request).await {
            Relayed::Finish(ending) => return ending,
            Relayed::Dropped(why) => why,
        };
        drop(link);
        request.which = Which::Attach { id: view.id.clone() };
        let (again, joined) = match reconnect::reattach(transport, &request, why, options, term, &mut keys).await {
            Ok(first) => first,
            Err(ending) => return ending,
        };
        link = again;
        view.rejoin(&joined);
        if let Err(e) = welcome(term, &joined, Join::Again, options).await {
            return Ending::Failed(e);
        }
    }
}

/// Said and done on joining: the line, and a cleared screen for the replay of one's own.
async fn welcome<W: AsyncWrite + Unpin>(
    term: &mut Terminal<W>,
    joined: &Joined,
    join: Join<'_>,
    options: &Options,
) -> Result<(), String> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (clear, line) = greet(joined, join, options.screen, now);
    if clear {
        term.show(CLEAR).await?;
    }
    if let Some(line) = line {
        term.say(&line);
    }
    Ok(())
}

/// How relaying over one link ended.
enum Relayed {
    Finish(Ending),
    Dropped(String),
}

/// Relay over `link` until the end or a drop. Input waits in `keys` until the link has room,
/// so output is read all along.
async fn relay<W: AsyncWrite + Unpin>(
    link: &mut Link,
    view: &mut View,
    keys: &mut Keys,
    term: &mut Terminal<W>,
    request: &mut Request,
) -> Relayed {
    let up = link.up.clone();
    let mut sending = true;
    let mut detach_by: Option<Instant> = None;
    loop {
        tokio::select! {
            permit = up.reserve(), if sending && keys.waiting() => match (permit, keys.pop()) {
                (Ok(permit), Some(message)) => permit.send(message),
                // The writer is gone: the reader says why, or that the session ended.
                (Err(_), Some(message)) => {
                    sending = false;
                    keys.push_front(message);
                }
                (_, None) => {}
            },
            chunk = term.input.recv(), if keys.may_read() && detach_by.is_none() => {
                if keys.take(chunk) {
                    keys.push(Up::Detach);
                    view.detaching = true;
                    detach_by = Some(Instant::now() + DETACH_WAIT);
                }
            }
            Some(size) = term.resized.recv() => {
                request.size = Some(size);
                keys.push(Up::Resize(size));
            }
            Some(signal) = term.stop.recv() => return Relayed::Finish(Ending::Signal { id: view.id.clone(), signal }),
            down = link.recv() => match react(view, down) {
                Step::Show(bytes) => {
                    if let Err(e) = term.show(&bytes).await {
                        return Relayed::Finish(Ending::Failed(e));
                    }
                }
                Step::Say(line) => term.say(&line),
                Step::Reattach(why) => return Relayed::Dropped(why),
                Step::Finish(ending) => return Relayed::Finish(ending),
                Step::Nothing => {}
            },
            () = tokio::time::sleep_until(detach_by.unwrap_or_else(Instant::now)), if detach_by.is_some() => {
                return Relayed::Finish(Ending::Detached { id: view.id.clone() });
            }
        }
    }
}
