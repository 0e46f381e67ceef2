//! The operator deployed from config/ onto the real node, end to end.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
