//! Why a store's database was not opened, and how a database is named in errors.
//!
//! Every error from opening, connecting or migrating is a [`StoreError::Open`] naming
//! the store: a SQLite file's path, or a PostgreSQL URL with any password removed
//! ([`postgres_url_without_password`]).

use std::fmt;

use super::StoreError;

/// Why a store's database was not opened. Except where the text says otherwise,
/// nothing in the database was changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenProblem {
    /// The SQLite file does not exist and creating it was not asked for
    /// ([`super::sqlite::SqliteStore::open_or_create`], `--create`).
    Missing,
    /// The path names no file (it is empty or SQLite's `:memory:`).
    NotAFile,
    /// The SQLite file holds tables, none of them this store's.
    Foreign {
        /// The tables it holds, by name.
        tables: Vec<String>,
    },
    /// The database is at a schema version this build does not know.
    NewerSchema {
        /// The newest migration recorded in the database.
        found: i64,
        /// The newest migration this build has.
        known: i64,
    },
    /// An applied migration was recorded with another checksum than this build's
    /// migration of the same version.
    ChecksumMismatch {
        /// The migration's version.
        version: i64,
        /// Its name as recorded.
        name: String,
        /// The SHA-256 recorded when it was applied.
        recorded: String,
        /// The SHA-256 of this build's migration of that version.
        built_in: String,
    },
    /// A migration is recorded that this build has no migration for, below its
    /// newest one.
    UnknownMigration {
        /// The recorded version.
        version: i64,
        /// The recorded name.
        name: String,
    },
    /// The database could not be reached, read or migrated.
    Failed {
        /// What could not be done.
        what: String,
        /// The database's or the system's words.
        reason: String,
    },
}

impl fmt::Display for OpenProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing => write!(
                f,
                "the file does not exist, and creating a new store was not asked for"
            ),
            Self::NotAFile => write!(f, "this names no file"),
            Self::Foreign { tables } => write!(
                f,
                "the file holds another application's tables ({}) and none of this store's; \
                 it was left untouched",
                table_list(tables)
            ),
            Self::NewerSchema { found, known } => write!(
                f,
                "the database is at schema version {found}, newer than this build knows \
                 (up to {known}); a store is never migrated down, and it was left untouched: \
                 use a build that knows version {found}"
            ),
            Self::ChecksumMismatch {
                version,
                name,
                recorded,
                built_in,
            } => write!(
                f,
                "migration {version} ({name}) was applied with checksum {recorded}, but this \
                 build's migration {version} has checksum {built_in}: the database was changed \
                 outside this tool or by another build; it was left untouched"
            ),
            Self::UnknownMigration { version, name } => write!(
                f,
                "migration {version} ({name}) is recorded in the database, but this build has \
                 no migration {version}; it was left untouched"
            ),
            Self::Failed { what, reason } => write!(f, "{what}: {reason}"),
        }
    }
}

/// At most five table names, then how many more.
fn table_list(tables: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = tables
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if tables.len() > SHOWN {
        text.push_str(&format!(" and {} more", tables.len() - SHOWN));
    }
    text
}

#[cfg_attr(
    not(any(feature = "postgres", feature = "sqlite")),
    allow(dead_code, reason = "used by the database backends")
)]
impl StoreError {
    /// The store named `store` was not opened, for `problem`.
    pub(crate) fn open(store: &str, problem: OpenProblem) -> Self {
        Self::Open {
            store: store.to_owned(),
            problem,
        }
    }

    /// The store named `store` could not do `what`, for the database's `reason`.
    pub(crate) fn open_failed(
        store: &str,
        what: impl Into<String>,
        reason: impl fmt::Display,
    ) -> Self {
        Self::open(
            store,
            OpenProblem::Failed {
                what: what.into(),
                reason: reason.to_string(),
            },
        )
    }

    /// The open problem, if this is one.
    #[must_use]
    pub fn open_problem(&self) -> Option<&OpenProblem> {
        match self {
            Self::Open { problem, .. } => Some(problem),
            _ => None,
        }
    }
}

/// A PostgreSQL URL as errors may show it: any password in the user information or
/// in a `password` parameter is removed; the rest is kept as written.
#[must_use]
pub fn postgres_url_without_password(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let (user, host_and_tail) = match user_info_end(rest) {
        Some(at) => {
            let info = &rest[..at];
            let user = info.split_once(':').map_or(info, |(user, _)| user);
            (format!("{user}@"), &rest[at + 1..])
        }
        None => (String::new(), rest),
    };
    let host_end = host_and_tail
        .find(['/', '?', '#'])
        .unwrap_or(host_and_tail.len());
    let (host, tail) = host_and_tail.split_at(host_end);
    format!("{scheme}{user}{host}{}", without_password_parameters(tail))
}

/// Where the user information ends: the last `@` before the first `/` that follows
/// the first `@`, so a password holding `@`, `/` or `?` is taken whole.
fn user_info_end(rest: &str) -> Option<usize> {
    let first = rest.find('@')?;
    let path = rest[first..].find('/').map_or(rest.len(), |p| first + p);
    rest[..path].rfind('@')
}

/// `tail` (path, query, fragment) without any query parameter naming a password.
fn without_password_parameters(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_owned();
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, format!("#{f}")),
        None => (query, String::new()),
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let key = pair.split_once('=').map_or(*pair, |(k, _)| k);
            !key.to_ascii_lowercase().contains("password")
        })
        .collect();
    if kept.is_empty() {
        format!("{path}{fragment}")
    } else {
        format!("{path}?{}{fragment}", kept.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::postgres_url_without_password as shown;

    #[test]
    fn passwords_are_removed_from_urls() {
        assert_eq!(
            shown("postgres://alice:s3cret@db.example:5432/infra"),
            "postgres://alice@db.example:5432/infra"
        );
        assert_eq!(
            shown("postgresql://alice:p%40ss@host/db?sslmode=require&password=again#x"),
            "postgresql://alice@host/db?sslmode=require#x"
        );
        assert_eq!(
            shown("postgres://host/db?password=only"),
            "postgres://host/db"
        );
        assert_eq!(
            shown("postgres://alice@host/db"),
            "postgres://alice@host/db"
        );
        // A password holding '@', '/' or '?' is still removed whole.
        assert_eq!(
            shown("postgres://bob:a@b@host/db"),
            "postgres://bob@host/db"
        );
        assert_eq!(
            shown("postgres://bob:a/b?c@host/db"),
            "postgres://bob@host/db"
        );
        assert_eq!(
            shown("postgres://alice@host/db?password=x@y"),
            "postgres://alice@host/db"
        );
    }
}
