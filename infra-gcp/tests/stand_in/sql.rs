//! Targeted tests of the `sql` module against its stand-in.

#[allow(unused_imports)]
use super::*;
