//! Targeted tests of the `pubsub` module against its stand-in.

#[allow(unused_imports)]
use super::*;
