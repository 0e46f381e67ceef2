//! The open terminals of this replica, by id, with their limits: at most `per_user` for one
//! user and `total` in all, so that neither one user nor everyone together can hold execs (and
//! their scrollbacks) without bound.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::session::{Terminal, UserKey};

/// Why a terminal cannot be opened.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Full {
    /// The user has as many as allowed.
    #[error("you have {0} terminals open, the most allowed; close one first")]
    User(usize),
    /// The gateway has as many as allowed.
    #[error("the gateway has {0} terminals open, the most it allows; try again later")]
    Total(usize),
}

/// The open terminals.
pub struct Terminals {
    open: Mutex<HashMap<String, Arc<Terminal>>>,
    per_user: usize,
    total: usize,
}

impl Terminals {
    /// At most `per_user` for one user, `total` in all.
    pub fn new(per_user: usize, total: usize) -> Self {
        Self { open: Mutex::new(HashMap::new()), per_user, total }
    }

    /// Whether `user` may open one more (checked again, racily but harmlessly, at [`Self::add`]).
    pub fn room_for(&self, user: &UserKey) -> Result<(), Full> {
        let open = self.open.lock();
        check(&open, user, self.per_user, self.total)
    }

    /// Keep `terminal`; refused (and to be closed by the caller) when a limit was reached.
    pub fn add(&self, terminal: Arc<Terminal>) -> Result<(), Full> {
        let mut open = self.open.lock();
        check(&open, &terminal.user, self.per_user, self.total)?;
        open.insert(terminal.id.clone(), terminal);
        Ok(())
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

fn check(open: &HashMap<String, Arc<Terminal>>, user: &UserKey, per_user: usize, total: usize) -> Result<(), Full> {
    if open.len() >= total {
        return Err(Full::Total(total));
    }
    if open.values().filter(|t| &t.user == user).count() >= per_user {
        return Err(Full::User(per_user));
    }
    Ok(())
}
