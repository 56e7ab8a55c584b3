//! What the tests that run the quickstart binary share.

use std::path::{Path, PathBuf};

/// The quickstart example, built beside the test by `cargo test`.
pub(crate) fn quickstart() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("tests run from <target>/<profile>/deps");
    let path = profile.join("examples").join("quickstart");
    assert!(path.exists(), "{} is not built", path.display());
    path
}
