#![doc = include_str!("../README.md")]

mod classify;
mod clock;
pub mod codes;
mod handoff;
mod retry;
mod setup;

pub use classify::{Answer, Outcome, classify, retry_after};
pub use clock::{ClockSleep, ClockTime};
pub use retry::{Operations, PolicyClassifier, PolicyInterceptor, failure_of};
pub use setup::ClientSetup;
