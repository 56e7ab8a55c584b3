//! Example fleets, written as a consumer of `infra-core` would write them.
//!
//! Each module builds one fleet; the binaries in `src/bin/` run them.

pub mod quickstart;
pub mod shop;

/// The Rust snippets of the repository's README, compiled (and those without
/// `no_run` run) as doctests, so that none shows an API that does not exist.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeSnippets;

/// The Rust snippets of the tutorial, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/tutorial.md")]
pub struct TutorialSnippets;
