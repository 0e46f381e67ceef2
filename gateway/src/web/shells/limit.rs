//! How many live lists of shells each person has open: each holds a watch per namespace at the
//! apiserver, so one person's tabs are bounded, and one token cannot make the gateway hold
//! watches for everyone else's share.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Live lists one user may have open at once (tabs).
pub const MAX_PER_USER: usize = 8;

/// Live lists open, per user.
#[derive(Debug, Default)]
pub struct Streams {
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open live list, counted until dropped (with its stream).
pub struct Counted {
    open: Arc<Mutex<HashMap<String, usize>>>,
    user: String,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut open = self.open.lock();
        if let Some(n) = open.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.user);
            }
        }
    }
}

impl Streams {
    /// Count one more live list of `user`, unless they have [`MAX_PER_USER`] open.
    pub fn take(&self, user: &str) -> Option<Counted> {
        let mut open = self.open.lock();
        let n = open.entry(user.to_owned()).or_default();
        if *n >= MAX_PER_USER {
            return None;
        }
        *n += 1;
        Some(Counted { open: self.open.clone(), user: user.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_PER_USER, Streams};

    #[test]
    fn each_person_has_at_most_eight_and_a_closed_one_counts_down() {
        let streams = Streams::default();
        let alices: Vec<_> = (0..MAX_PER_USER).map(|_| streams.take("alice")).collect();
        assert!(alices.iter().all(Option::is_some));
        assert!(streams.take("alice").is_none(), "the ninth");
        assert!(streams.take("bob").is_some(), "someone else's are their own");
        drop(alices);
        assert!(streams.take("alice").is_some(), "counted down when closed");
    }
}
