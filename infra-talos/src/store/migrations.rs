//! The store's versioned migrations and their bookkeeping.
//!
//! Each backend builds in its own list of [`Migration`]s ([`POSTGRES`] from
//! `migrations/postgres/`, [`SQLITE`] from `migrations/sqlite/`), numbered alike on
//! both; `super::migrate` applies them. The table `store_migrations` records
//! each applied migration with its version, name and checksum (the SHA-256 of its SQL,
//! hex). Before anything is applied, what is recorded is compared with this build's
//! list ([`check_applied`]): a database at a newer version, a migration whose checksum
//! differs, or one this build does not have, is refused and left as it is.
//!
//! Migrations applied by a build from before checksums were recorded have none; the
//! first build that records them writes its own digest for those rows (there is
//! nothing to compare them with).

use sha2::{Digest as _, Sha256};

use super::open::OpenProblem;

/// The bookkeeping table, created if missing on every open.
#[cfg(feature = "sqlite")]
pub(super) const BOOKKEEPING_TABLE: &str = "store_migrations";

/// The bookkeeping table's definition, the same on both backends.
pub(super) const CREATE_BOOKKEEPING: &str = "CREATE TABLE IF NOT EXISTS store_migrations (\
     version BIGINT NOT NULL PRIMARY KEY, name TEXT NOT NULL, checksum TEXT)";

/// PostgreSQL's migrations (`migrations/postgres/`), applied in order on open.
#[cfg(feature = "postgres")]
pub(super) const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "contract_store",
        sql: include_str!("../../migrations/postgres/0001_contract_store.sql"),
    },
    Migration {
        version: 2,
        name: "sealed_bindings_and_records",
        sql: include_str!("../../migrations/postgres/0002_sealed_bindings_and_records.sql"),
    },
    Migration {
        version: 3,
        name: "blanket_approvals",
        sql: include_str!("../../migrations/postgres/0003_blanket_approvals.sql"),
    },
    Migration {
        version: 4,
        name: "not_null_identifiers",
        sql: include_str!("../../migrations/postgres/0004_not_null_identifiers.sql"),
    },
    Migration {
        version: 5,
        name: "recovery_scopes",
        sql: include_str!("../../migrations/postgres/0005_recovery_scopes.sql"),
    },
    Migration {
        version: 6,
        name: "recovery_entries",
        sql: include_str!("../../migrations/postgres/0006_recovery_entries.sql"),
    },
    Migration {
        version: 7,
        name: "machine_imports",
        sql: include_str!("../../migrations/postgres/0007_machine_imports.sql"),
    },
    Migration {
        version: 8,
        name: "authenticated_identities",
        sql: include_str!("../../migrations/postgres/0008_authenticated_identities.sql"),
    },
    Migration {
        version: 9,
        name: "installation_approval_policy",
        sql: include_str!("../../migrations/postgres/0009_installation_approval_policy.sql"),
    },
    Migration {
        version: 10,
        name: "certificate_bindings",
        sql: include_str!("../../migrations/postgres/0010_certificate_bindings.sql"),
    },
];

/// SQLite's migrations (`migrations/sqlite/`), numbered as PostgreSQL's.
#[cfg(feature = "sqlite")]
pub(super) const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "contract_store",
        sql: include_str!("../../migrations/sqlite/0001_contract_store.sql"),
    },
    Migration {
        version: 2,
        name: "sealed_bindings_and_records",
        sql: include_str!("../../migrations/sqlite/0002_sealed_bindings_and_records.sql"),
    },
    Migration {
        version: 3,
        name: "blanket_approvals",
        sql: include_str!("../../migrations/sqlite/0003_blanket_approvals.sql"),
    },
    Migration {
        version: 4,
        name: "not_null_identifiers",
        sql: include_str!("../../migrations/sqlite/0004_not_null_identifiers.sql"),
    },
    Migration {
        version: 5,
        name: "recovery_scopes",
        sql: include_str!("../../migrations/sqlite/0005_recovery_scopes.sql"),
    },
    Migration {
        version: 6,
        name: "recovery_entries",
        sql: include_str!("../../migrations/sqlite/0006_recovery_entries.sql"),
    },
    Migration {
        version: 7,
        name: "machine_imports",
        sql: include_str!("../../migrations/sqlite/0007_machine_imports.sql"),
    },
    Migration {
        version: 8,
        name: "authenticated_identities",
        sql: include_str!("../../migrations/sqlite/0008_authenticated_identities.sql"),
    },
    Migration {
        version: 9,
        name: "installation_approval_policy",
        sql: include_str!("../../migrations/sqlite/0009_installation_approval_policy.sql"),
    },
    Migration {
        version: 10,
        name: "certificate_bindings",
        sql: include_str!("../../migrations/sqlite/0010_certificate_bindings.sql"),
    },
];

/// One versioned migration, as built into this binary.
#[derive(Debug, Clone, Copy)]
pub(super) struct Migration {
    /// Its version, from 1, one more than the previous one's.
    pub(super) version: i64,
    /// Its name, recorded with it.
    pub(super) name: &'static str,
    /// Its SQL.
    pub(super) sql: &'static str,
}

impl Migration {
    /// The SHA-256 of its SQL, as 64 lowercase hex digits.
    pub(super) fn checksum(&self) -> String {
        sha256_hex(self.sql.as_bytes())
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One row of the bookkeeping table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Applied {
    /// The migration's version.
    pub(super) version: i64,
    /// Its name.
    pub(super) name: String,
    /// Its recorded checksum; `None` when a build from before checksums applied it.
    pub(super) checksum: Option<String>,
}

/// The newest version in `known`.
pub(super) fn newest(known: &[Migration]) -> i64 {
    known.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Compares what the database records with this build's migrations: refuses a
/// database at a newer version, a migration this build does not have, and an
/// applied migration whose recorded checksum is not this build's.
pub(super) fn check_applied(applied: &[Applied], known: &[Migration]) -> Result<(), OpenProblem> {
    let newest_known = newest(known);
    if let Some(found) = applied.iter().map(|a| a.version).max()
        && found > newest_known
    {
        return Err(OpenProblem::NewerSchema {
            found,
            known: newest_known,
        });
    }
    applied.iter().try_for_each(|a| check_one(a, known))
}

fn check_one(applied: &Applied, known: &[Migration]) -> Result<(), OpenProblem> {
    let Some(ours) = known.iter().find(|m| m.version == applied.version) else {
        return Err(OpenProblem::UnknownMigration {
            version: applied.version,
            name: applied.name.clone(),
        });
    };
    match &applied.checksum {
        Some(recorded) if *recorded != ours.checksum() => Err(OpenProblem::ChecksumMismatch {
            version: applied.version,
            name: applied.name.clone(),
            recorded: recorded.clone(),
            built_in: ours.checksum(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[Migration] = &[
        Migration {
            version: 1,
            name: "one",
            sql: "CREATE TABLE a (x TEXT);",
        },
        Migration {
            version: 2,
            name: "two",
            sql: "CREATE TABLE b (y TEXT);",
        },
    ];

    fn applied(version: i64, checksum: Option<String>) -> Applied {
        Applied {
            version,
            name: format!("m{version}"),
            checksum,
        }
    }

    #[test]
    fn the_checksum_is_the_sha256_of_the_sql() {
        assert_eq!(
            Migration {
                version: 1,
                name: "empty",
                sql: ""
            }
            .checksum(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn matching_and_unrecorded_checksums_pass() {
        let rows = [applied(1, Some(KNOWN[0].checksum())), applied(2, None)];
        assert_eq!(check_applied(&rows, KNOWN), Ok(()));
        assert_eq!(check_applied(&[], KNOWN), Ok(()));
    }

    #[test]
    fn a_changed_migration_is_refused_with_both_digests() {
        let rows = [applied(1, Some("0".repeat(64)))];
        assert_eq!(
            check_applied(&rows, KNOWN),
            Err(OpenProblem::ChecksumMismatch {
                version: 1,
                name: "m1".into(),
                recorded: "0".repeat(64),
                built_in: KNOWN[0].checksum(),
            })
        );
    }

    #[test]
    fn a_newer_or_unknown_version_is_refused() {
        let rows = [applied(1, None), applied(3, None)];
        assert_eq!(
            check_applied(&rows, KNOWN),
            Err(OpenProblem::NewerSchema { found: 3, known: 2 })
        );
        assert_eq!(
            check_applied(&[applied(0, None)], KNOWN),
            Err(OpenProblem::UnknownMigration {
                version: 0,
                name: "m0".into()
            })
        );
    }
}
