//! A dropped connection (a network blip, a sleeping laptop, a gateway restart) taken up again:
//! the same session asked for by id, tried with backoff (250 ms doubling to 5 s) until the
//! grace runs out, each try bounded by what is left of it. Meanwhile keystrokes
//! wait to be sent, the window's size is kept, and the detach keys or a signal stop trying (the
//! session goes on either way). The holder's replay redraws the screen once joined.

use std::time::Duration;

use myownshell_runtime::time::format_duration;
use myownshell_session::protocol::Which;
use tokio::io::AsyncWrite;
use tokio::time::Instant;

use super::ending::Ending;
use super::input::Keys;
use super::options::Options;
use super::terminal::Terminal;
use super::transport::{Joined, Link, OpenError, Request, Transport, Up};

/// The first wait between tries.
pub const FIRST_DELAY: Duration = Duration::from_millis(250);
/// The longest wait between tries.
pub const MAX_DELAY: Duration = Duration::from_secs(5);

/// The wait after `delay`.
pub fn next_delay(delay: Duration) -> Duration {
    (delay * 2).min(MAX_DELAY)
}

/// Join the session `request` names (`Which::Attach`) again within the grace; said once.
pub async fn reattach<T: Transport, W: AsyncWrite + Unpin>(
    transport: &mut T,
    request: &Request,
    why: String,
    options: &Options,
    term: &mut Terminal<W>,
    keys: &mut Keys,
) -> Result<(Link, Joined), Ending> {
    let id = match &request.which {
        Which::Attach { id } => id.clone(),
        _ => String::new(),
    };
    term.say(&format!("connection lost, reattaching to session {id}… ({why})"));
    let deadline = Instant::now() + options.grace;
    let mut delay = FIRST_DELAY;
    let mut last = why;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until((Instant::now() + delay).min(deadline)) => {}
            ending = watch(term, keys, &id) => return Err(ending),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Ending::Lost { id, why: last });
        }
        let opened = tokio::select! {
            opened = tokio::time::timeout(left, transport.open(request)) => opened,
            ending = watch(term, keys, &id) => return Err(ending),
        };
        match opened {
            Ok(Ok(first)) => return Ok(first),
            Ok(Err(OpenError::Refused(why))) => return Err(Ending::Ended { id, why }),
            Ok(Err(OpenError::NoHolder(why) | OpenError::Failed(why))) => last = why,
            Err(_) => last = format!("the last try had no answer in {}", format_duration(left)),
        }
        delay = next_delay(delay);
    }
}

/// The keyboard, the window and the signals while there is no link: the detach keys or a
/// signal end the wait, other input and sizes wait to be sent.
async fn watch<W>(term: &mut Terminal<W>, keys: &mut Keys, id: &str) -> Ending {
    loop {
        tokio::select! {
            chunk = term.input.recv(), if keys.may_read() => {
                if keys.take(chunk) {
                    return Ending::Detached { id: id.to_owned() };
                }
            }
            Some(size) = term.resized.recv() => keys.push(Up::Resize(size)),
            Some(signal) = term.stop.recv() => return Ending::Signal { id: id.to_owned(), signal },
            else => std::future::pending::<()>().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_250_ms_to_5_s() {
        let delays: Vec<u64> = std::iter::successors(Some(FIRST_DELAY), |d| Some(next_delay(*d)))
            .take(8)
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(delays, [250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
    }
}
