//! What acts ask and answer, as plain data that crosses the service's API unchanged.

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::backend::InventoryRecord;
use crate::contract::operation::OperationState;
use crate::contract::recovery::{Dependency, ScopeState};
use crate::contract::{InstantMs, SpanMs};
use crate::controller::ExecutorSettings;
use crate::store::{MachineView, OperationView, PlanView, RestoredBackup, TimelineEntry};

/// An inventoried machine: its record and its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryRow {
    /// What the inventory records.
    pub record: InventoryRecord,
    /// Its state in the store.
    pub view: MachineView,
}

/// A machine's configuration for a release, as its publisher uploads it.
#[derive(Clone, Serialize, Deserialize)]
pub struct ArtifactUpload {
    /// The machine.
    pub machine: String,
    /// The configuration's bytes (base64 on the wire); sealed on arrival, never
    /// kept, logged or answered.
    #[serde(with = "base64_bytes")]
    pub configuration: Zeroizing<Vec<u8>>,
}

impl std::fmt::Debug for ArtifactUpload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactUpload")
            .field("machine", &self.machine)
            .field("bytes", &self.configuration.len())
            .finish()
    }
}

mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};
    use zeroize::Zeroizing;

    pub(super) fn serialize<S: Serializer>(
        bytes: &Zeroizing<Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let text = Zeroizing::new(STANDARD.encode(bytes.as_slice()));
        s.serialize_str(&text)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Zeroizing<Vec<u8>>, D::Error> {
        let text = Zeroizing::new(String::deserialize(d)?);
        STANDARD
            .decode(text.as_bytes())
            .map(Zeroizing::new)
            .map_err(|_| serde::de::Error::custom("a configuration is not valid base64"))
    }
}

/// `publish`: a release of one configuration per machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublishRequest {
    /// The release's identifier.
    pub release: String,
    /// The key to seal with (made if the keyring has none by that name).
    pub key: String,
    /// Who authored content in the release.
    pub authors: Vec<String>,
    /// The configurations.
    pub artifacts: Vec<ArtifactUpload>,
}

/// A published release: each machine's sealed artifact digest (hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// The release.
    pub release: String,
    /// The key it was sealed with.
    pub key: String,
    /// `(machine, digest)`, in the order given.
    pub digests: Vec<(String, String)>,
}

/// `plan`: what to plan for a machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRequest {
    /// The machine.
    pub machine: String,
    /// The plan's identifier (default `<machine>-<release>-b<baseline>`).
    pub id: Option<String>,
    /// A revert of the open drift record.
    pub revert: bool,
    /// An adopt plan.
    pub adopt: bool,
    /// Seconds until it expires.
    pub expires_in_secs: u64,
    /// How old dispatch evidence may be, in seconds.
    pub max_evidence_age_secs: u64,
    /// Each request's transport deadline, in seconds.
    pub transport_deadline_secs: u64,
    /// The verification deadline, in seconds.
    pub verification_deadline_secs: u64,
    /// The attempt budget.
    pub max_attempts: u32,
}

impl PlanRequest {
    /// A plan's lifetime unless asked otherwise: a day.
    pub const EXPIRES_IN_SECS: u64 = 86_400;
    /// How old dispatch evidence may be unless asked otherwise.
    pub const MAX_EVIDENCE_AGE_SECS: u64 = 60;
    /// Each request's transport deadline unless asked otherwise.
    pub const TRANSPORT_DEADLINE_SECS: u64 = 30;
    /// The verification deadline unless asked otherwise.
    pub const VERIFICATION_DEADLINE_SECS: u64 = 120;
    /// The attempt budget unless asked otherwise.
    pub const MAX_ATTEMPTS: u32 = 3;

    /// An apply-config plan for `machine` with the default deadlines and budget.
    #[must_use]
    pub fn new(machine: impl Into<String>) -> PlanRequest {
        PlanRequest {
            machine: machine.into(),
            id: None,
            revert: false,
            adopt: false,
            expires_in_secs: Self::EXPIRES_IN_SECS,
            max_evidence_age_secs: Self::MAX_EVIDENCE_AGE_SECS,
            transport_deadline_secs: Self::TRANSPORT_DEADLINE_SECS,
            verification_deadline_secs: Self::VERIFICATION_DEADLINE_SECS,
            max_attempts: Self::MAX_ATTEMPTS,
        }
    }
}

/// A plan made, with the release it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedPlan {
    /// The plan.
    pub plan: PlanView,
    /// The Desired release it was made from.
    pub release: String,
}

/// An approval recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The self-approval mark, as the store states it.
    pub mark: String,
    /// The drift record a revert overwrites unseen by any reviewer, if so.
    pub unseen_overwrite: Option<u64>,
}

/// The settle floor and transport deadline an executor is made with. The service's
/// own settings govern the acts it makes; these are the command line's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deadlines {
    /// The settle floor, in seconds.
    pub settle_floor_secs: u64,
    /// The deployment's maximum transport deadline, in seconds.
    pub max_transport_deadline_secs: u64,
}

impl Deadlines {
    /// As the executor's settings.
    #[must_use]
    pub fn settings(self) -> ExecutorSettings {
        ExecutorSettings {
            settle_floor: SpanMs::from_secs(self.settle_floor_secs),
            max_transport_deadline: SpanMs::from_secs(self.max_transport_deadline_secs),
        }
    }
}

/// A recovery observation taken for an operation waiting on its accounting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchedRead {
    /// Its basis revision.
    pub basis: u64,
    /// The digest read (hex), if read.
    pub digest: Option<String>,
    /// The configuration version read, if read.
    pub config_version: Option<u64>,
}

/// Where one operation stands after a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// The plan.
    pub plan: String,
    /// Its operation.
    pub operation: String,
    /// The operation's state.
    pub state: OperationState,
    /// Requests sent.
    pub sends: u32,
    /// The last classification, as stated.
    pub classification: Option<String>,
    /// The refusal that ended the pass, as a user reads it.
    pub refusal: Option<String>,
    /// Whether an attempt waits for a response or recovery-admin's decision.
    pub awaits_accounting: bool,
    /// The recovery observations taken for it (`run --resume`).
    pub reads: Vec<WatchedRead>,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "ran")]
pub enum RunReport {
    /// An adopt plan: the adoption recorded against a fresh observation.
    Adoption {
        /// The plan.
        plan: String,
        /// Its operation.
        operation: String,
        /// The release now Applied.
        release: String,
        /// The observed digest now Applied (hex).
        digest: String,
    },
    /// The operations carried.
    Operations {
        /// Each operation's outcome.
        outcomes: Vec<RunOutcome>,
        /// Whether this was `run --resume`.
        resume: bool,
    },
}

/// A machine's state, timeline and operations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineHistory {
    /// Its state.
    pub machine: MachineView,
    /// Its timeline, oldest first.
    pub entries: Vec<TimelineEntry>,
    /// Its operations.
    pub operations: Vec<OperationView>,
}

/// One machine's recovery scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeLine {
    /// The machine.
    pub machine: String,
    /// Its scope's state.
    pub scope: ScopeState,
}

/// Where recovery mode stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryStatus {
    /// Whether some scope is not normal.
    pub recovery_mode: bool,
    /// The current epoch.
    pub epoch: String,
    /// Each machine's scope.
    pub scopes: Vec<ScopeLine>,
}

/// A scope marked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marked {
    /// Its state after the mark.
    pub scope: ScopeState,
    /// The first dependency the check found missing.
    pub missing: Option<Dependency>,
}

/// `recovery enter`: when every pre-restore controller instance was stopped, and
/// each backup family restored (§7.2). The controller instance the entry names is
/// the road's own choice, so it is not asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryRequest {
    /// When the last pre-restore controller instance was stopped (ms since the Unix
    /// epoch); not after the entry.
    pub stopped_at: InstantMs,
    /// The backups restored: at least one, each family once.
    pub backups: Vec<RestoredBackup>,
}

impl EntryRequest {
    /// An entry from an operator's text: the stop as a UTC time
    /// (`2026-12-02T15:04:05Z`) and each backup as `FAMILY=ID@TIME`, as the command
    /// line's `recovery enter` and the page's form take them.
    ///
    /// # Errors
    ///
    /// A time or a backup that does not parse, saying which and why. What the store
    /// checks (the stop not after now, at least one backup, each family once) is
    /// left to it, so that both roads refuse in its words.
    pub fn parse<S: AsRef<str>>(stopped_at: &str, backups: &[S]) -> Result<EntryRequest, String> {
        let stopped_at = crate::civil::parse_iso(stopped_at.trim())?;
        let backups = backups
            .iter()
            .map(|b| restored_backup(b.as_ref().trim()))
            .collect::<Result<_, _>>()?;
        Ok(EntryRequest {
            stopped_at: InstantMs(stopped_at),
            backups,
        })
    }
}

/// `FAMILY=ID@TIME` as a restored backup.
fn restored_backup(text: &str) -> Result<RestoredBackup, String> {
    let bad = |why: &str| format!("--backup {text:?}: {why}");
    let (family, rest) = text
        .split_once('=')
        .ok_or_else(|| bad("expected FAMILY=ID@TIME"))?;
    let (backup, taken) = rest
        .rsplit_once('@')
        .ok_or_else(|| bad("expected FAMILY=ID@TIME"))?;
    if family.trim().is_empty() || backup.trim().is_empty() {
        return Err(bad(
            "the family and the backup's identity must not be blank",
        ));
    }
    Ok(RestoredBackup {
        family: family.to_owned(),
        backup: backup.to_owned(),
        taken_at: InstantMs(crate::civil::parse_iso(taken).map_err(|why| bad(&why))?),
    })
}

/// Recovery mode entered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entered {
    /// The new epoch.
    pub epoch: String,
    /// The machine scopes now pre-restore unaccounted.
    pub scopes: usize,
}
