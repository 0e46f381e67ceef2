//! The apiserver side of a terminal: requests made as the user (`as_user`, with the headers of
//! `impersonate`), the pod a terminal opens in (`target`), the exec's WebSocket (`upgrade`) and
//! its frames (`channel`), and a command run to its end for its output (`run`).
//!
//! Must not: authorize anything itself. Whether a user may read a shell, list its pods or exec
//! into them is the apiserver's and the connect gate's decision, asked as the user.

pub mod as_user;
pub mod channel;
pub mod impersonate;
pub mod run;
pub mod target;
pub mod upgrade;
