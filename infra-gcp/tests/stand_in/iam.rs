//! Targeted tests of the `iam` module against its stand-in.

#[allow(unused_imports)]
use super::*;
