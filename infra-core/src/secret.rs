//! Secret values: held only on the apply path, never printed, serialised or stored.

use std::fmt;

use serde::{Serialize, Serializer};

/// A secret's plaintext.
///
/// It has no `Display`, its `Debug` and `Serialize` print a fixed placeholder, and it
/// is only ever produced by a backend's `secret_value` (or by composing such values), so
/// that a plan, a record, a log line or an error message cannot carry the value.
///
/// ```
/// use infra_core::prelude::SecretString;
/// let s = SecretString::new("hunter2");
/// assert_eq!(format!("{s:?}"), "SecretString(<redacted>)");
/// assert_eq!(serde_json::to_string(&s).unwrap(), "\"<redacted>\"");
/// ```
///
/// ```compile_fail
/// use infra_core::prelude::SecretString;
/// // No `Display`: a secret cannot be formatted into a message by accident.
/// println!("{}", SecretString::new("hunter2"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

/// What a secret looks like wherever it would otherwise be shown.
pub const REDACTED: &str = "<redacted>";

impl SecretString {
    /// Wraps a plaintext value. Backends call this when reading a secret's value.
    pub fn new(plaintext: impl Into<String>) -> Self {
        SecretString(plaintext.into())
    }

    /// The plaintext, for the one call that sends it to a cloud.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretString({REDACTED})")
    }
}

impl Serialize for SecretString {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}
