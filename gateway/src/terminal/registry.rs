//! The open terminals of this replica, by id, with their limits: at most `per_user` for one
//! user and `total` in all, so that neither one user nor everyone together can hold execs (and
//! their scrollbacks) without bound. Terminals being opened (a page waiting for its shell's pod,
//! up to `--connect-timeout`) count too, from the moment the page asks ([`Terminals::reserve`]).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::session::{Terminal, UserKey};

/// Why a terminal cannot be opened.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Full {
    /// The user has as many as allowed.
    #[error("you have {0} terminals open or opening, the most allowed; close one first")]
    User(usize),
    /// The gateway has as many as allowed.
    #[error("the gateway has {0} terminals open or opening, the most it allows; try again later")]
    Total(usize),
}

/// The open terminals.
pub struct Terminals {
    open: Mutex<HashMap<String, Arc<Terminal>>>,
    /// Terminals being opened, by user.
    opening: Arc<Mutex<HashMap<UserKey, usize>>>,
    per_user: usize,
    total: usize,
}

/// A terminal being opened, counted against the limits until it is dropped (once the terminal
/// is open, or has failed to open).
pub struct Reservation {
    opening: Arc<Mutex<HashMap<UserKey, usize>>>,
    user: UserKey,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut opening = self.opening.lock();
        if let Some(count) = opening.get_mut(&self.user) {
            *count -= 1;
            if *count == 0 {
                opening.remove(&self.user);
            }
        }
    }
}

impl Terminals {
    /// At most `per_user` for one user, `total` in all.
    pub fn new(per_user: usize, total: usize) -> Self {
        Self { open: Mutex::new(HashMap::new()), opening: Arc::default(), per_user, total }
    }

    /// Count one terminal `user` is about to open, if the limits leave room for it.
    pub fn reserve(&self, user: &UserKey) -> Result<Reservation, Full> {
        let open = self.open.lock();
        let mut opening = self.opening.lock();
        check(&open, &opening, user, self.per_user, self.total)?;
        *opening.entry(user.clone()).or_default() += 1;
        Ok(Reservation { opening: self.opening.clone(), user: user.clone() })
    }

    /// Keep `terminal`, opened under `reservation` (which it now replaces in the count).
    pub fn add(&self, terminal: Arc<Terminal>, reservation: Reservation) {
        self.open.lock().insert(terminal.id.clone(), terminal);
        drop(reservation);
    }

    /// The terminal `id`, if `user` owns it and it has not ended. Someone else's id is as good
    /// as an unknown one: no answer tells the two apart.
    pub fn get(&self, id: &str, user: &UserKey) -> Option<Arc<Terminal>> {
        let open = self.open.lock();
        open.get(id).filter(|t| &t.user == user && !t.has_ended()).cloned()
    }

    /// Forget `id`.
    pub fn remove(&self, id: &str) {
        self.open.lock().remove(id);
    }

    /// Every open terminal.
    pub fn all(&self) -> Vec<Arc<Terminal>> {
        self.open.lock().values().cloned().collect()
    }

    /// How many are open.
    pub fn len(&self) -> usize {
        self.open.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether one more fits: `open` and `opening` (by user) against `per_user` and `total`.
fn check(
    open: &HashMap<String, Arc<Terminal>>,
    opening: &HashMap<UserKey, usize>,
    user: &UserKey,
    per_user: usize,
    total: usize,
) -> Result<(), Full> {
    if open.len() + opening.values().sum::<usize>() >= total {
        return Err(Full::Total(total));
    }
    let mine = open.values().filter(|t| &t.user == user).count() + opening.get(user).copied().unwrap_or(0);
    if mine >= per_user {
        return Err(Full::User(per_user));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> UserKey {
        UserKey { name: name.into(), uid: None }
    }

    #[test]
    fn terminals_being_opened_count_against_the_limits() {
        let terminals = Terminals::new(2, 3);
        let a1 = terminals.reserve(&user("alice")).expect("room");
        let a2 = terminals.reserve(&user("alice")).expect("room");
        assert_eq!(terminals.reserve(&user("alice")).err(), Some(Full::User(2)), "alice has 2 opening");
        let b1 = terminals.reserve(&user("bob")).expect("room");
        assert_eq!(terminals.reserve(&user("carol")).err(), Some(Full::Total(3)), "3 opening in all");
        drop(a1);
        assert!(terminals.reserve(&user("carol")).is_ok(), "a failed open gives its place back");
        drop((a2, b1));
        assert!(terminals.opening.lock().is_empty());
    }
}
