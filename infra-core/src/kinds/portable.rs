//! The portable kinds: one spec each, realised by every cloud its own way.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{
    Conflict, Dep, Env, Expr, Field, Key, Merge, NotYet, Partial, Refines, SecretString, Settle,
};

#[cfg(any(test, feature = "testing"))]
use infra_derive::Sample;
use infra_derive::Spec;

use super::{Access, EnvVars, Tags, check_range};

/// An identity that workloads run as, with the permissions it is granted: an AWS IAM
/// role, a GCP service account, a Scaleway IAM application.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "iam", observed = IamObserved)]
pub struct Iam {
    /// Policies granted, by the provider's identifier (an ARN, a role name). A set.
    pub policies: Expr<BTreeSet<String>>,
    /// Services allowed to act as this identity (`lambda.amazonaws.com`). A set.
    pub assumed_by: Expr<BTreeSet<String>>,
    /// A human description.
    pub description: Partial<Expr<String>>,
    /// Labels.
    pub tags: Partial<Expr<Tags>>,
}

/// What the cloud reports about an [`Iam`] identity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IamObserved {
    /// The identity's id (an ARN, an email, an application id).
    pub id: String,
}

/// A bucket of objects: S3, Cloud Storage, Scaleway Object Storage.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "objectStore", observed = ObjectStoreObserved, name_rule = bucket_name)]
pub struct ObjectStore {
    /// Keep every version of every object.
    pub versioning: Partial<Expr<bool>>,
    /// Delete objects this many days after creation; `None` says "never".
    pub expire_after_days: Partial<Expr<Option<u32>>>,
    /// Labels.
    pub tags: Partial<Expr<Tags>>,
}

impl ObjectStore {
    /// A bucket with nothing said beyond its existence.
    pub fn new() -> Self {
        ObjectStore {
            versioning: Partial::Unknown,
            expire_after_days: Partial::Unknown,
            tags: Partial::Unknown,
        }
    }
}

impl Default for ObjectStore {
    fn default() -> Self {
        Self::new()
    }
}

/// What the cloud reports about an [`ObjectStore`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectStoreObserved {
    /// The bucket's id (its name, or an ARN).
    pub id: String,
    /// Where objects are reached, when the cloud says.
    pub endpoint: Partial<String>,
}

/// Bucket names: 3 to 63 characters of lowercase letters, digits, `-` and `.`, starting
/// and ending with a letter or digit.
pub fn bucket_name(name: &str) -> Result<(), String> {
    if !(3..=63).contains(&name.len()) {
        return Err(format!(
            "must be 3 to 63 characters long (it has {})",
            name.len()
        ));
    }
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !name.starts_with(alnum) || !name.ends_with(alnum) {
        return Err("must start and end with a lowercase letter or a digit".into());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(alnum(*c) || *c == '-' || *c == '.'))
    {
        return Err(format!(
            "may hold only lowercase letters, digits, `-` and `.` (found {bad:?})"
        ));
    }
    if name.contains("..") {
        return Err("must not hold two adjacent periods".into());
    }
    Ok(())
}

/// A serverless function: Lambda, Cloud Run functions, Scaleway Functions.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "compute", observed = ComputeObserved, check = Compute::check_fields)]
pub struct Compute {
    /// The language runtime (`python3.12`, `nodejs22.x`).
    pub runtime: Expr<String>,
    /// The entry point (`app.handler`).
    pub handler: Expr<String>,
    /// Where the code artifact is (an object URL, an image reference).
    pub code: Expr<String>,
    /// The SHA-256 digest of the code artifact, base64-encoded, as the cloud reports the
    /// deployed code's ([`code_digest`] makes it from the artifact's bytes). Clouds do
    /// not report where code came from, so a new artifact behind an unchanged `code`
    /// is seen only through this digest: when it is said and differs from the deployed
    /// code's, the code is deployed again. Where a cloud reports no digest of the
    /// deployed code, the field is never compared (its backend's documentation says so).
    pub code_sha256: Partial<Expr<String>>,
    /// Memory in MiB (128 to 10240).
    pub memory_mb: Partial<Expr<u32>>,
    /// Longest run in seconds (1 to 900).
    pub timeout_seconds: Partial<Expr<u32>>,
    /// Plain environment variables.
    pub environment: Partial<Expr<EnvVars>>,
    /// Environment variables whose values are this fleet's secrets, passed by reference.
    pub secret_environment: Partial<BTreeMap<String, Key<Secrets>>>,
    /// The identity the function runs as; `None` says "the provider's default".
    pub role: Option<Key<Iam>>,
    /// Who may call it over HTTP: [`Access::Private`] unless the fleet says otherwise.
    pub access: Expr<Access>,
    /// Labels.
    pub tags: Partial<Expr<Tags>>,
}

impl Compute {
    fn check_fields(&self, problems: &mut Vec<String>) {
        check_range(problems, "memoryMb", &self.memory_mb, 128..=10240);
        check_range(problems, "timeoutSeconds", &self.timeout_seconds, 1..=900);
        if let Some(digest) = self.code_sha256.known().and_then(|e| e.as_lit())
            && !is_sha256_base64(digest)
        {
            problems.push(format!(
                "`codeSha256` is {digest:?}, which is not a base64 SHA-256 digest (44 \
                 characters ending in `=`); make it with `code_digest` from the artifact's bytes"
            ));
        }
    }
}

/// The digest a cloud reports of deployed code: SHA-256 of the artifact's bytes,
/// base64-encoded (Lambda's `CodeSha256`). Declare it in [`Compute::code_sha256`] so
/// that a new artifact under the same `code` location is deployed.
///
/// ```
/// use infra_core::kinds::code_digest;
/// assert_eq!(code_digest(b""), "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
/// ```
pub fn code_digest(artifact: &[u8]) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(artifact))
}

fn is_sha256_base64(text: &str) -> bool {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .is_ok_and(|bytes| bytes.len() == 32)
}

/// What the cloud reports about a [`Compute`] function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComputeObserved {
    /// The function's id (an ARN, a name).
    pub id: String,
    /// Its invocation URL, when it has one.
    pub url: Partial<String>,
    /// The deployed version, when the cloud versions functions.
    pub version: Partial<String>,
}

/// A message queue: SQS, Pub/Sub, Scaleway Queues.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "queues", observed = QueuesObserved, check = Queues::check_fields, name_rule = queue_name)]
pub struct Queues {
    /// First-in-first-out delivery. Cannot change after creation.
    #[spec(replace)]
    pub fifo: Expr<bool>,
    /// Seconds a received message stays invisible to other consumers (0 to 43200).
    pub visibility_timeout_seconds: Partial<Expr<u32>>,
    /// Seconds a message is kept (60 to 1209600).
    pub retention_seconds: Partial<Expr<u32>>,
    /// Where messages go after too many receives; `None` says "nowhere".
    pub dead_letter: Partial<Option<Key<Queues>>>,
    /// Receives before a message moves to the dead-letter queue (1 to 1000).
    pub max_receive_count: Partial<Expr<u32>>,
    /// Labels.
    pub tags: Partial<Expr<Tags>>,
}

impl Queues {
    fn check_fields(&self, problems: &mut Vec<String>) {
        check_range(
            problems,
            "visibilityTimeoutSeconds",
            &self.visibility_timeout_seconds,
            0..=43_200,
        );
        check_range(
            problems,
            "retentionSeconds",
            &self.retention_seconds,
            60..=1_209_600,
        );
        check_range(
            problems,
            "maxReceiveCount",
            &self.max_receive_count,
            1..=1000,
        );
    }
}

/// Queue names: 1 to 80 characters of letters, digits, `-` and `_`.
pub fn queue_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 80 {
        return Err(format!(
            "must be 1 to 80 characters long (it has {})",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "may hold only letters, digits, `-` and `_` (found {bad:?})"
        ));
    }
    Ok(())
}

/// What the cloud reports about a [`Queues`] queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueuesObserved {
    /// The queue's id (its URL on SQS).
    pub id: String,
    /// Its ARN or resource name, when the cloud has one.
    pub arn: Partial<String>,
}

/// Where a secret's value comes from. Exactly one of two sources, so "both" and
/// "neither" cannot be written.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SecretSource {
    /// Read from this environment variable of the process that applies, at apply time.
    FromEnv(String),
    /// Composed from other secrets and observed values of the fleet
    /// ([`compose_secret!`](crate::compose_secret)).
    Composed(Expr<SecretString>),
    /// Generated by the provider when the secret is created (a random password of this
    /// many characters), so that no person and no process of ours ever types it.
    Generated {
        /// How many characters.
        length: u16,
    },
}

/// A [`SecretSource`] after settling.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum SecretSourceSettled {
    /// The environment variable to read at apply time.
    FromEnv(String),
    /// The composed value.
    Composed(SecretString),
    /// A value the provider generates on create.
    #[serde(rename_all = "camelCase")]
    Generated {
        /// How many characters.
        length: u16,
    },
}

impl SecretSourceSettled {
    /// How long a value the provider must generate, for a generated secret.
    pub fn generated_length(&self) -> Option<u16> {
        match self {
            SecretSourceSettled::Generated { length } => Some(*length),
            _ => None,
        }
    }

    /// The secret's value: read from the apply process's environment, or the composed
    /// value. Backends call this in the create or update that writes the secret, and
    /// nowhere else.
    pub fn resolve(&self) -> Result<SecretString, crate::BackendError> {
        match self {
            SecretSourceSettled::Generated { .. } => Err(crate::BackendError::invalid(
                "a generated secret has no value before the provider generates it",
            )),
            SecretSourceSettled::Composed(value) => Ok(value.clone()),
            SecretSourceSettled::FromEnv(var) => {
                std::env::var(var).map(SecretString::new).map_err(|_| {
                    crate::BackendError::invalid(format!(
                        "the environment variable {var} that holds this secret's value is not set \
                     (or not valid UTF-8) in the process that applies"
                    ))
                })
            }
        }
    }
}

impl Serialize for SecretSource {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(1))?;
        match self {
            SecretSource::FromEnv(var) => map.serialize_entry("fromEnv", var)?,
            SecretSource::Composed(expr) => map.serialize_entry("composed", expr)?,
            SecretSource::Generated { length } => {
                map.serialize_entry("generated", &serde_json::json!({ "length": length }))?
            }
        }
        map.end()
    }
}

impl Refines for SecretSource {
    fn refines(&self, other: &Self) -> bool {
        match (self, other) {
            (SecretSource::FromEnv(a), SecretSource::FromEnv(b)) => a == b,
            (SecretSource::Composed(a), SecretSource::Composed(b)) => a.refines(b),
            (SecretSource::Generated { length: a }, SecretSource::Generated { length: b }) => {
                a == b
            }
            _ => false,
        }
    }
}

impl PartialEq for SecretSource {
    fn eq(&self, other: &Self) -> bool {
        self.refines(other)
    }
}

impl Merge for SecretSource {
    fn merge(&self, other: &Self) -> Result<Self, Conflict> {
        if self.refines(other) {
            Ok(self.clone())
        } else {
            Err(Conflict::between(self, other))
        }
    }
}

impl Settle for SecretSource {
    type Settled = SecretSourceSettled;

    fn settle(&self, env: &dyn Env) -> Result<SecretSourceSettled, NotYet> {
        match self {
            SecretSource::FromEnv(var) => Ok(SecretSourceSettled::FromEnv(var.clone())),
            SecretSource::Composed(expr) => expr.eval(env).map(SecretSourceSettled::Composed),
            SecretSource::Generated { length } => {
                Ok(SecretSourceSettled::Generated { length: *length })
            }
        }
    }
}

impl Field for SecretSource {
    fn deps(&self, out: &mut Vec<Dep>) {
        if let SecretSource::Composed(expr) = self {
            out.extend_from_slice(expr.deps());
        }
    }
}

/// A secret held by the cloud's secret manager. Its value is never cached, stored or
/// shown. A composed secret is written again when what it is composed from changes: the
/// engine composes the value afresh and compares it, in memory, with the value the
/// cloud holds (both read through `secret_value`); a generated one is never rewritten.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "secrets", observed = SecretsObserved, check = Secrets::check_source, name_rule = secret_name)]
pub struct Secrets {
    /// Where the value comes from.
    pub value_from: SecretSource,
    /// A human description.
    pub description: Partial<Expr<String>>,
    /// Labels.
    pub tags: Partial<Expr<Tags>>,
}

impl Secrets {
    /// A secret whose value is read from an environment variable at apply time.
    pub fn from_env(var: impl Into<String>) -> Self {
        Secrets {
            value_from: SecretSource::FromEnv(var.into()),
            description: Partial::Unknown,
            tags: Partial::Unknown,
        }
    }

    /// A secret whose value the provider generates on create (`length` characters).
    pub fn generated(length: u16) -> Self {
        Secrets {
            value_from: SecretSource::Generated { length },
            description: Partial::Unknown,
            tags: Partial::Unknown,
        }
    }

    /// A secret composed from the fleet's other secrets and observed values.
    pub fn composed(value: Expr<SecretString>) -> Self {
        Secrets {
            value_from: SecretSource::Composed(value),
            description: Partial::Unknown,
            tags: Partial::Unknown,
        }
    }

    fn check_source(&self, problems: &mut Vec<String>) {
        match &self.value_from {
            SecretSource::Composed(expr) if expr.deps().is_empty() => problems.push(
                "`valueFrom` is composed from nothing in the fleet: it is a plaintext constant \
                 written into the declaration. Read it from the environment with \
                 `SecretSource::FromEnv`, or compose it from other secrets with `Expr::secret`"
                    .into(),
            ),
            SecretSource::Generated { length } if !(8..=4096).contains(length) => problems.push(
                format!("`valueFrom` generates {length} characters; ask for 8 to 4096"),
            ),
            SecretSource::FromEnv(var)
                if var.is_empty()
                    || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    || var.starts_with(|c: char| c.is_ascii_digit()) =>
            {
                problems.push(format!(
                    "`valueFrom` names the environment variable {var:?}, which is not a valid \
                     variable name (letters, digits and `_`, not starting with a digit)"
                ))
            }
            _ => {}
        }
    }
}

/// Secret names: 1 to 128 characters of letters, digits and `-_/.`.
pub fn secret_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 128 {
        return Err(format!(
            "must be 1 to 128 characters long (it has {})",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_/.".contains(*c)))
    {
        return Err(format!(
            "may hold only letters, digits and `-_/.` (found {bad:?})"
        ));
    }
    Ok(())
}

/// What the cloud reports about a [`Secrets`] secret: a handle and a version, never a
/// value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecretsObserved {
    /// The secret's id (an ARN, a resource name).
    pub id: String,
    /// The current version's id, when the cloud versions secrets.
    pub version: Partial<String>,
}

/// A container image registry: ECR, Artifact Registry, Scaleway Container Registry.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "imageRegistry", observed = ImageRegistryObserved)]
pub struct ImageRegistry {
    /// Scan each image when it is pushed.
    pub scan_on_push: Partial<Expr<bool>>,
    /// Refuse to overwrite a tag.
    pub immutable_tags: Partial<Expr<bool>>,
    /// Labels.
    pub tags: Partial<Expr<Tags>>,
}

/// What the cloud reports about an [`ImageRegistry`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageRegistryObserved {
    /// The registry's id.
    pub id: String,
    /// Where images are pushed (`123.dkr.ecr.eu-west-3.amazonaws.com/app`).
    pub uri: String,
}

/// Aurora Serverless v2 capacity units, counted in halves (the finest step).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
pub struct Acu(u16);

impl Acu {
    /// `n` whole capacity units.
    pub const fn whole(n: u16) -> Acu {
        Acu(n * 2)
    }

    /// `n` half capacity units (`Acu::halves(1)` is 0.5 ACU).
    pub const fn halves(n: u16) -> Acu {
        Acu(n)
    }

    /// The capacity in half units.
    pub fn in_halves(&self) -> u16 {
        self.0
    }
}

impl fmt::Display for Acu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(2) {
            write!(f, "{}", self.0 / 2)
        } else {
            write!(f, "{}.5", self.0 / 2)
        }
    }
}

impl Serialize for Acu {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(f64::from(self.0) / 2.0)
    }
}

/// How a PostgreSQL database is sized: a fixed instance class, or a serverless capacity
/// range. One of the two, by construction.
///
/// A database names its capacity, in one of the two shapes:
///
/// ```
/// use infra_core::{prelude::Key, kinds::{Acu, Capacity, Postgres, Secrets}};
/// fn database(capacity: Capacity, password: Key<Secrets>) -> Postgres {
///     Postgres {
///         engine_version: "16".into(),
///         capacity: capacity.into(),
///         storage_gb: Default::default(),
///         master_username: "admin".into(),
///         master_password: password,
///         backup_retention_days: Default::default(),
///         tags: Default::default(),
///     }
/// }
/// let _ = [
///     Capacity::Classic { instance_class: "db.t4g.micro".into() },
///     Capacity::Serverless { min_capacity: Acu::halves(1), max_capacity: Acu::whole(4) },
/// ];
/// ```
///
/// A database with neither an instance class nor a capacity range cannot be written:
/// the field is required,
///
/// ```compile_fail,E0063
/// use infra_core::{prelude::Key, kinds::{Postgres, Secrets}};
/// fn database(password: Key<Secrets>) -> Postgres {
///     Postgres {
///         engine_version: "16".into(),
///         storage_gb: Default::default(),
///         master_username: "admin".into(),
///         master_password: password,
///         backup_retention_days: Default::default(),
///         tags: Default::default(),
///     }
/// }
/// ```
///
/// and each shape requires what it is sized by.
///
/// ```compile_fail,E0063
/// use infra_core::kinds::Capacity;
/// let _ = Capacity::Classic {};
/// ```
///
/// ```compile_fail,E0063
/// use infra_core::kinds::{Acu, Capacity};
/// let _ = Capacity::Serverless { min_capacity: Acu::halves(1) };
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "shape")]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[non_exhaustive]
pub enum Capacity {
    /// A provisioned instance of this class (`db.t4g.micro`, `DB-DEV-S`).
    #[serde(rename_all = "camelCase")]
    Classic {
        /// The instance class.
        instance_class: String,
    },
    /// A serverless cluster scaling between two capacities.
    #[serde(rename_all = "camelCase")]
    Serverless {
        /// Lowest capacity.
        min_capacity: Acu,
        /// Highest capacity.
        max_capacity: Acu,
    },
}

impl Capacity {
    /// Whether a change of capacity, from the reported value to the target (both as
    /// they serialise), moves between the classic and the serverless shape: two
    /// different resources on every cloud (an RDS instance and an Aurora cluster), so
    /// the change is a replace, never an update.
    pub fn changes_shape(before: &serde_json::Value, after: &serde_json::Value) -> bool {
        before.get("shape") != after.get("shape")
    }
}

/// A managed PostgreSQL database: RDS/Aurora, Cloud SQL, Scaleway Managed Databases.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "postgres", observed = PostgresObserved, check = Postgres::check_fields)]
pub struct Postgres {
    /// The major version (`16`).
    pub engine_version: Expr<String>,
    /// How it is sized. Moving between a classic and a serverless shape is a replace;
    /// changing the class or the range within one shape is an update.
    #[spec(replace_when = Capacity::changes_shape)]
    pub capacity: Expr<Capacity>,
    /// Allocated storage in GiB, for the classic shape (20 to 65536). It grows in place;
    /// no cloud shrinks a database's storage, so a smaller size is a replace.
    #[spec(replace_when = Postgres::storage_shrinks)]
    pub storage_gb: Partial<Expr<u32>>,
    /// The administrator's user name. Cannot change after creation.
    #[spec(replace)]
    pub master_username: Expr<String>,
    /// The administrator's password: one of this fleet's secrets, by reference.
    pub master_password: Key<Secrets>,
    /// Days of automated backups (0 to 35).
    pub backup_retention_days: Partial<Expr<u32>>,
    /// Labels.
    pub tags: Partial<Expr<Tags>>,
}

/// The parts of a provisioned database, named so that no two strings can be swapped:
/// the argument of [`Postgres::classic`].
#[derive(Clone, Copy, Debug)]
pub struct PostgresClassic<'a> {
    /// The engine's major version (`"16"`).
    pub engine_version: &'a str,
    /// The instance class (`"db.t4g.micro"`).
    pub instance_class: &'a str,
    /// The administrator's user name.
    pub master_username: &'a str,
    /// The administrator's password: one of this fleet's secrets.
    pub master_password: Key<Secrets>,
}

/// The parts of a serverless database, named: the argument of [`Postgres::serverless`].
#[derive(Clone, Copy, Debug)]
pub struct PostgresServerless<'a> {
    /// The engine's major version (`"16"`).
    pub engine_version: &'a str,
    /// The least capacity it scales down to.
    pub min_capacity: Acu,
    /// The most capacity it scales up to.
    pub max_capacity: Acu,
    /// The administrator's user name.
    pub master_username: &'a str,
    /// The administrator's password: one of this fleet's secrets.
    pub master_password: Key<Secrets>,
}

impl Postgres {
    /// A provisioned database of an instance class, from its named parts:
    ///
    /// ```
    /// # use infra_core::prelude::*;
    /// # use infra_core::kinds::*;
    /// # let mut f = Fleet::builder("shop");
    /// # let password = f.declare(AwsRegion::EuWest3, "db-password", Secrets::generated(32));
    /// let db = Postgres::classic(PostgresClassic {
    ///     engine_version: "16",
    ///     instance_class: "db.t4g.micro",
    ///     master_username: "app",
    ///     master_password: password,
    /// });
    /// # let _ = db;
    /// ```
    pub fn classic(parts: PostgresClassic<'_>) -> Self {
        Postgres {
            engine_version: Expr::lit(parts.engine_version.to_owned()),
            capacity: Expr::lit(Capacity::Classic {
                instance_class: parts.instance_class.to_owned(),
            }),
            storage_gb: Partial::Unknown,
            master_username: Expr::lit(parts.master_username.to_owned()),
            master_password: parts.master_password,
            backup_retention_days: Partial::Unknown,
            tags: Partial::Unknown,
        }
    }

    /// A serverless database scaling between two capacities, from its named parts.
    pub fn serverless(parts: PostgresServerless<'_>) -> Self {
        Postgres {
            engine_version: Expr::lit(parts.engine_version.to_owned()),
            capacity: Expr::lit(Capacity::Serverless {
                min_capacity: parts.min_capacity,
                max_capacity: parts.max_capacity,
            }),
            storage_gb: Partial::Unknown,
            master_username: Expr::lit(parts.master_username.to_owned()),
            master_password: parts.master_password,
            backup_retention_days: Partial::Unknown,
            tags: Partial::Unknown,
        }
    }

    /// Whether a change of allocated storage, from the reported size to the target (both
    /// as they serialise), makes it smaller: RDS, Cloud SQL and Scaleway only ever grow
    /// a database's storage, so the change is a replace, never an update.
    pub fn storage_shrinks(before: &serde_json::Value, after: &serde_json::Value) -> bool {
        matches!((before.as_u64(), after.as_u64()), (Some(b), Some(a)) if a < b)
    }

    fn check_fields(&self, problems: &mut Vec<String>) {
        match self.capacity.as_lit() {
            Some(Capacity::Serverless {
                min_capacity,
                max_capacity,
            }) => {
                if min_capacity > max_capacity {
                    problems.push(format!(
                        "`capacity` ranges from {min_capacity} down to {max_capacity} ACU: \
                         the minimum must not exceed the maximum"
                    ));
                }
                if min_capacity.in_halves() == 0 {
                    problems.push("`capacity` has a minimum of 0 ACU; the least is 0.5".into());
                }
                if *max_capacity > Acu::whole(256) {
                    problems.push(format!(
                        "`capacity` has a maximum of {max_capacity} ACU; the most is 256"
                    ));
                }
            }
            Some(Capacity::Classic { instance_class }) if instance_class.trim().is_empty() => {
                problems.push("`capacity` names an empty instance class".into());
            }
            _ => {}
        }
        check_range(problems, "storageGb", &self.storage_gb, 20..=65_536);
        check_range(
            problems,
            "backupRetentionDays",
            &self.backup_retention_days,
            0..=35,
        );
    }
}

/// What the cloud reports about a [`Postgres`] database.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PostgresObserved {
    /// The database's id.
    pub id: String,
    /// The host name clients connect to.
    pub endpoint: String,
    /// The port clients connect to.
    pub port: u16,
}
