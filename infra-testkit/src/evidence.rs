//! Which (kind, act) pairs of a provider a test held against a record this project did
//! not write: traffic recorded against the live API, the cloud's official SDK run as a
//! second client, the published schema, the cloud's emulator, moto.
//!
//! A test collects the pairs it checked in an [`Evidence`] and calls
//! [`Evidence::publish`] once it has passed: the count is printed, and, when
//! `INFRA_EVIDENCE_DIR` names a directory, the pairs are written there one per line
//! (`kind act`), in a file named after the provider, the record and the suite. CI reads
//! the directory back to show, per provider and record, how many pairs were checked.
//!
//! ```
//! use infra_testkit::evidence::{Evidence, Record};
//!
//! let mut evidence = Evidence::new("scaleway", Record::RecordedTraffic, "secrets");
//! evidence.checked("secrets", "create");
//! evidence.checked("secrets", "create"); // counted once
//! assert_eq!(evidence.len(), 1);
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

/// The variable naming the directory the pairs are written to.
pub const EVIDENCE_DIR: &str = "INFRA_EVIDENCE_DIR";

/// A record this project did not write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Record {
    /// Traffic recorded against the live API by someone else's tests.
    RecordedTraffic,
    /// The cloud's official SDK, run as a second client against a stand-in.
    OfficialSdk,
    /// The cloud's published schema of its API (Google's discovery documents).
    DiscoverySchema,
    /// The cloud's own emulator.
    Emulator,
    /// moto's server.
    Moto,
}

impl Record {
    /// The record's name, as the evidence files and CI's summary spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Record::RecordedTraffic => "recorded-traffic",
            Record::OfficialSdk => "official-sdk",
            Record::DiscoverySchema => "discovery-schema",
            Record::Emulator => "emulator",
            Record::Moto => "moto",
        }
    }
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The (kind, act) pairs one suite held against one record.
#[derive(Clone, Debug)]
pub struct Evidence {
    provider: String,
    record: Record,
    suite: String,
    pairs: BTreeSet<(String, String)>,
}

impl Evidence {
    /// No pair yet, for `provider`'s suite `suite` against `record`.
    pub fn new(provider: &str, record: Record, suite: &str) -> Self {
        Evidence {
            provider: provider.to_owned(),
            record,
            suite: suite.to_owned(),
            pairs: BTreeSet::new(),
        }
    }

    /// Notes that `act` of `kind` (`create`, `read`, `list`, `update`, `delete`, or an
    /// act of the provider's own such as `activate`) was checked.
    pub fn checked(&mut self, kind: &str, act: &str) {
        self.pairs.insert((kind.to_owned(), act.to_owned()));
    }

    /// How many pairs were checked.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether no pair was checked.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The pairs, sorted.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, a)| (k.as_str(), a.as_str()))
    }

    /// Prints the count and, when [`EVIDENCE_DIR`] is set, writes the pairs there.
    ///
    /// # Panics
    ///
    /// When no pair was checked (a suite that checked nothing proves nothing), or when
    /// the file cannot be written.
    pub fn publish(&self) {
        self.publish_to(std::env::var_os(EVIDENCE_DIR).map(PathBuf::from));
    }

    /// Prints the count and, when `dir` is given, writes the pairs in a file there.
    ///
    /// # Panics
    ///
    /// As [`Evidence::publish`].
    pub fn publish_to(&self, dir: Option<PathBuf>) {
        assert!(
            !self.is_empty(),
            "the {} suite `{}` checked no pair against {}",
            self.provider,
            self.suite,
            self.record
        );
        println!(
            "independent evidence: {} {} {}: {} (kind, act) pairs",
            self.provider,
            self.record,
            self.suite,
            self.len()
        );
        let Some(dir) = dir else {
            return;
        };
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let file = dir.join(format!(
            "{}.{}.{}.txt",
            self.provider, self.record, self.suite
        ));
        let text: String = self.pairs().map(|(k, a)| format!("{k} {a}\n")).collect();
        std::fs::write(&file, text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_counted_once_and_written_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let mut evidence = Evidence::new("gcp", Record::DiscoverySchema, "storage");
        evidence.checked("objectStore", "update");
        evidence.checked("objectStore", "create");
        evidence.checked("objectStore", "create");
        assert_eq!(evidence.len(), 2);
        evidence.publish_to(Some(dir.path().to_owned()));
        let written =
            std::fs::read_to_string(dir.path().join("gcp.discovery-schema.storage.txt")).unwrap();
        assert_eq!(written, "objectStore create\nobjectStore update\n");
    }

    #[test]
    #[should_panic(expected = "checked no pair")]
    fn a_suite_that_checked_nothing_does_not_publish() {
        Evidence::new("aws", Record::Moto, "empty").publish();
    }
}
