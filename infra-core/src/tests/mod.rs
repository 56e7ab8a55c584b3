//! Tests that need this crate's `testing` module (compiled only for tests).

mod laws;
