//! Targeted tests of the `storage` module against its stand-in.

#[allow(unused_imports)]
use super::*;
