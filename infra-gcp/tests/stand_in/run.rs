//! Targeted tests of the `run` module against its stand-in.

#[allow(unused_imports)]
use super::*;
