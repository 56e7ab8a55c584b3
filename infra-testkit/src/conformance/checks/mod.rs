//! The checks: plain async functions, one per behaviour, each named for what it pins.
//!
//! A check of one kind takes the run's [`Context`](super::Context) and a
//! [`KindSample`](super::KindSample) and answers a [`Verdict`](super::Verdict); it
//! gates itself (on the backend's capabilities, the sample's variants, a second region,
//! the hooks) and says why when it skips. The applier checks share one scenario of
//! applies ([`applier::apply_scenario`]) and judge its log.

pub mod applier;
pub mod backend;
pub mod cleanup;
pub mod lifecycle;
pub mod listing;
pub mod observation;
