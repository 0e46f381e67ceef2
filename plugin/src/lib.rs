//! `kubectl myownshell`'s session client as a library, so that it can be tested against a real
//! holder from `tests/`.

pub mod attach;
