//! Targeted tests of the `artifacts` module against its stand-in.

#[allow(unused_imports)]
use super::*;
