//! Example fleets, written as a consumer of `infra-core` would write them.
//!
//! Each module builds one fleet; the binaries in `src/bin/` run them.

pub mod quickstart;
pub mod shop;
