//! Targeted tests of the `secrets` module against its stand-in.

#[allow(unused_imports)]
use super::*;
