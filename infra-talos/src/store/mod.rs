//! The controller's store: the contract's transactions (`docs/contract.md` §2–§7),
//! behind one trait, on PostgreSQL ([`postgres`]) and on an embedded SQLite database
//! ([`sqlite`]).
//!
//! [`Store`] is not a table API. Each method is one act of the contract, run as one
//! database transaction that takes the locks the contract names, compares what it
//! must compare, and appends what happened to the machine's timeline (§4.1). The pure
//! functions in [`crate::contract`] decide; the store reads their inputs under lock
//! and makes their answers durable.
//!
//! Three properties are structural rather than conventions:
//!
//! - **No send without a recorded attempt.** [`Store::attempt`] is the only way to
//!   obtain a [`CommittedAttempt`], and it returns one only after the attempt
//!   transaction committed (§3.3, §8 invariant 2).
//! - **Refusals are recorded afterwards.** A refused commitment or attempt rolls
//!   back, and a second transaction writes the refusal, naming the comparison
//!   (§3.2, choice §10.30).
//! - **Only sealed artifacts.** The store takes an artifact as ciphertext plus the
//!   key coordinates and the configuration digest ([`SealedArtifact`], or with the
//!   full key binding through [`Store::publish_sealed_release`]) and gives back no
//!   more ([`Store::sealed_artifact`]); plaintext never reaches a table (§4.1, §8
//!   invariant 7).
//!
//! Besides the acts, the store offers structured reads for the executor: machines
//! with their endpoint and identity key, the operations holding a scope, each
//! operation's attempts with their deadlines and accounting, each machine's
//! observations, and the store's own time.
//!
//! Revisions come from one counter per machine, advanced under the machine row's lock,
//! so revision order is commit order within a machine (§4.1).
//!
//! Opening a store checks its database before changing it: a SQLite file is read
//! without writing first (module `sqlite_file`) and another application's file is
//! refused; each applied migration is recorded with the SHA-256 of its SQL, and a
//! database whose record differs from this build's migrations, or that is at a newer
//! schema version, is refused (module `migrations`). Every such error is a
//! [`StoreError::Open`] naming the file, or the PostgreSQL URL without its password
//! ([`OpenProblem`], module `open`).
//!
//! Each act is written once, for both databases: the transactions are methods of one
//! engine (module `engine`) grouped by what they act on (module `acts`), over a small
//! dialect layer that holds what differs between PostgreSQL and SQLite (module
//! `sql`). The transaction runner and the timeline writer (`transaction`), the shared
//! reads and locks (`lookups`), the row decoders (`rows`), the read views (`views`)
//! and the migration runner (`migrate`) are modules of their own; [`postgres`] and
//! [`sqlite`] only open their stores.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::attempt::CommittedAttempt;
use crate::contract::Role;
use crate::contract::adoption::Hold;
use crate::contract::classify::Classification;
use crate::contract::comparison::Comparison;
use crate::contract::epoch::Epoch;
use crate::contract::evidence::{ObservationPurpose, ResponseClass};
use crate::contract::operation::{ControllerId, OperationKind, OperationState, OwnerToken};
use crate::contract::plan::{PlanState, SelfApproval};
use crate::contract::recovery::{Dependency, ScopeState};
use crate::contract::{InstantMs, Revision, SpanMs};
use crate::digest::Digest;
use crate::keys;

#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod acts;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod common;
#[cfg(all(feature = "controls", any(feature = "postgres", feature = "sqlite")))]
mod dump;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod engine;
#[cfg(all(feature = "grpc", any(feature = "postgres", feature = "sqlite")))]
mod inventory;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod lookups;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod migrate;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod migrations;
mod open;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod rows;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod sql;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(feature = "sqlite")]
mod sqlite_file;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod transaction;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod views;

#[cfg(all(feature = "grpc", any(feature = "postgres", feature = "sqlite")))]
pub(crate) use engine::OnEngine;
pub use open::{OpenProblem, postgres_url_without_password};

/// Who performs an act: a principal and the role it acts in (§2).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Actor {
    /// The principal's identifier.
    pub id: String,
    /// The role the principal acts in; the store checks the principal holds it.
    pub role: Role,
}

impl Actor {
    /// `id` acting as `role`.
    #[must_use]
    pub fn new(id: impl Into<String>, role: Role) -> Self {
        Self {
            id: id.into(),
            role,
        }
    }
}

/// What kind of principal an identity is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PrincipalKind {
    /// A person.
    Human,
    /// An automation token, with the person its issuing record holds responsible
    /// (`None` when no such record exists, §2).
    Token {
        /// The responsible person, if recorded.
        responsible: Option<String>,
    },
}

/// An identity to register, with the roles it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrincipalSpec {
    /// The identifier.
    pub id: String,
    /// Human or token.
    pub kind: PrincipalKind,
    /// The roles held. A token never holds approver (§2).
    pub roles: Vec<Role>,
}

/// The installation's identity root, made once (`Store::bootstrap`): the certificate
/// authority whose client certificates name principals, and the first administrator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapSpec {
    /// The certificate authority's certificate, PEM. A principal is authenticated by
    /// a client certificate it issued; the subject's common name is the principal.
    pub ca_certificate: String,
    /// The first administrator: a person holding recovery-admin, the role every act
    /// on principals needs. Registered by the bootstrap unless already registered
    /// (a store made before identities were authenticated), in which case it must
    /// already hold that role and not be revoked.
    pub administrator: PrincipalSpec,
    /// Whether approvals need a second person; the contract's reading unless the
    /// installation chooses otherwise.
    pub approval_policy: ApprovalPolicy,
    /// The fingerprint (64 lowercase hex digits of the SHA-256 of its DER) of the
    /// administrator's certificate, bound to it by the bootstrap and journaled with
    /// it. `None` binds none: the administrator then authenticates with no
    /// certificate until one is bound.
    #[serde(default)]
    pub administrator_certificate: Option<String>,
}

/// Who may approve a plan: the installation's choice, made at its bootstrap and kept
/// in its settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalPolicy {
    /// The contract's reading (§2, choice §10.4): an approver may approve a plan it
    /// created, or whose release it contributed to, and the approval is recorded
    /// with its self-approval mark.
    #[default]
    SelfApprovalMarked,
    /// Approvals need a second person: an approval the self-approval rule would mark
    /// (the approver created the plan, authored content in its release, or is
    /// responsible for a token that did) or could not decide for (a token without a
    /// responsibility record) is refused, by every road, and nothing is recorded.
    SecondPerson,
}

impl ApprovalPolicy {
    /// The setting's value as a person reads it: `yes` when approvals need a second
    /// person.
    #[must_use]
    pub fn needs_second_person(self) -> bool {
        self == ApprovalPolicy::SecondPerson
    }
}

impl fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ApprovalPolicy::SelfApprovalMarked => {
                "approvals need a second person: no (a self-approval is recorded with its mark)"
            }
            ApprovalPolicy::SecondPerson => {
                "approvals need a second person: yes (a self-approval is refused)"
            }
        })
    }
}

/// The installation's identity root as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallationIdentity {
    /// The certificate authority's certificate, PEM.
    pub ca_certificate: String,
    /// The administrator the bootstrap named.
    pub administrator: String,
    /// Store time of the bootstrap.
    pub bootstrapped_at: InstantMs,
    /// The installation's approval policy.
    #[serde(default)]
    pub approval_policy: ApprovalPolicy,
}

/// What an entry of the identity journal records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityEventKind {
    /// The installation's bootstrap, naming its first administrator.
    Bootstrap,
    /// A principal registered with its roles.
    Registered,
    /// A principal's roles replaced.
    RolesChanged,
    /// A principal's identity revoked.
    Revoked,
    /// A client certificate bound to a principal by its fingerprint: one issued by
    /// the command line, or an existing one bound by recovery-admin.
    CertificateBound,
}

impl IdentityEventKind {
    /// The name the journal stores.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Bootstrap => "bootstrap",
            Self::Registered => "registered",
            Self::RolesChanged => "roles_changed",
            Self::Revoked => "revoked",
            Self::CertificateBound => "certificate_bound",
        }
    }
}

/// Where a bound certificate came from, as the journal says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CertificateOrigin {
    /// Issued by the command line from the installation's authority, in this act.
    Issued,
    /// An existing certificate (one issued before certificates were bound, or by an
    /// existing authority) bound by recovery-admin.
    Existing,
}

impl CertificateOrigin {
    /// How the journal's detail names it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Issued => "issued",
            Self::Existing => "existing certificate bound",
        }
    }
}

/// A certificate to bind to its principal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateSpec {
    /// The principal its subject names.
    pub principal: String,
    /// Its fingerprint: the SHA-256 of its DER, 64 lowercase hex digits.
    pub fingerprint: String,
    /// Where it came from.
    pub origin: CertificateOrigin,
}

/// A certificate bound to a principal (`Store::bind_certificate`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateBinding {
    /// Its fingerprint: 64 lowercase hex digits.
    pub fingerprint: String,
    /// The principal it is bound to.
    pub principal: String,
    /// Store time of the binding.
    pub bound_at: InstantMs,
    /// Who bound it (the bootstrap's administrator for its own).
    pub bound_by: String,
    /// Store time the binding ended (its identity was revoked); `None` while it
    /// stands.
    pub ended_at: Option<InstantMs>,
}

/// A registered principal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrincipalView {
    /// The identifier.
    pub id: String,
    /// Human or token.
    pub kind: PrincipalKind,
    /// The roles held, by name, sorted.
    pub roles: Vec<Role>,
    /// Whether the identity is revoked.
    pub revoked: bool,
}

/// One entry of the installation's append-only identity journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityEvent {
    /// Its place in the journal, from 1.
    pub seq: u64,
    /// What happened.
    pub kind: IdentityEventKind,
    /// Store time.
    pub at: InstantMs,
    /// Who did it (the bootstrap names its administrator).
    pub actor: String,
    /// The role it acted in.
    pub actor_role: String,
    /// The principal acted on.
    pub principal: String,
    /// The roles recorded, or why.
    pub detail: String,
}

/// The identity key a machine is recorded under (choice §10.26).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IdentityKey {
    /// The SMBIOS UUID.
    SmbiosUuid(String),
    /// The Talos node ID, for a machine without a usable SMBIOS UUID.
    NodeId(String),
}

/// A machine to add to the inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineSpec {
    /// The machine's identifier.
    pub id: String,
    /// Its identity key.
    pub identity: IdentityKey,
    /// The Talos cluster ID it belongs to.
    pub cluster_id: String,
    /// Its own Talos endpoint, the only route a plan may bind (§3.5).
    pub endpoint: String,
    /// The rollout scope it belongs to (limit one, choice §10.5).
    pub rollout_scope: String,
    /// The Talos minor version the machine's artifacts are built for, e.g. `1.13`.
    pub talos_minor: String,
    /// The digest of the configuration an existing-cluster import read from the
    /// machine. It is recorded, not accepted: the machine has no Applied until an
    /// approved adopt plan's adoption record, made against a fresh observation of
    /// this digest, hands it over (§6.3, §8 invariant 3). `None` for a machine that
    /// was not imported.
    pub import_digest: Option<Digest>,
}

/// An encrypted artifact as the store keeps it: never plaintext (§8 invariant 7).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedArtifact {
    /// The key provider's name.
    pub key_provider: String,
    /// The key's identifier, one the provider never reuses.
    pub key_id: String,
    /// The key version that sealed it.
    pub key_version: u64,
    /// The sealed bytes.
    pub ciphertext: Vec<u8>,
    /// The configuration digest of the plaintext, recorded by compilation.
    pub digest: Digest,
}

impl fmt::Debug for SealedArtifact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealedArtifact")
            .field("key_provider", &self.key_provider)
            .field("key_id", &self.key_id)
            .field("key_version", &self.key_version)
            .field("ciphertext_len", &self.ciphertext.len())
            .field("digest", &self.digest)
            .finish()
    }
}

/// How a principal contributed to a release, for the self-approval rule (§2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ContributionKind {
    /// Wrote a revision the release contains.
    Authored,
    /// Published content in it.
    Published,
}

/// A release to publish: per-machine sealed artifacts, and who contributed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseSpec {
    /// The release's identifier.
    pub id: String,
    /// One artifact per machine; publishing selects the release as each machine's
    /// Desired.
    pub artifacts: Vec<(String, SealedArtifact)>,
    /// Who authored or published content in it.
    pub contributions: Vec<(String, ContributionKind)>,
}

/// What a publisher fixes when making a plan; everything else the plan binds is
/// read from the database at creation (§2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanSpec {
    /// The plan's identifier (its idempotency key).
    pub id: String,
    /// The target machine.
    pub machine: String,
    /// The release to apply; it must be the machine's Desired.
    pub release: String,
    /// When the plan expires.
    pub expires_at: InstantMs,
    /// How old dispatch evidence may be, counted from when its read started.
    pub max_evidence_age: SpanMs,
    /// The transport deadline of each request.
    pub transport_deadline: SpanMs,
    /// The verification deadline (at least the transport deadline).
    pub verification_deadline: SpanMs,
    /// The attempt budget.
    pub max_attempts: u32,
    /// A revert: bind the machine's open drift record and expect its digest.
    pub revert: bool,
}

/// A publisher's parameters for an adopt plan (§6.3). What it adopts is read from
/// the database under the machine row's lock: the open drift record's latest digest
/// for a machine that drifted, or the digest its import read for a machine with no
/// Applied (a handover). Nothing is ever typed in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdoptPlanSpec {
    /// The plan's identifier (its idempotency key).
    pub id: String,
    /// The machine.
    pub machine: String,
    /// The release Applied is to name; it must be the machine's Desired.
    pub release: String,
    /// When the plan expires.
    pub expires_at: InstantMs,
    /// How old the observation the adoption record relies on may be, counted from
    /// when its read started.
    pub max_evidence_age: SpanMs,
}

/// What the adoption record transaction did (§6.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum AdoptionOutcome {
    /// The adoption is recorded: the adopt operation, created completed.
    Recorded {
        /// The operation.
        operation: String,
    },
    /// Nothing is decided and nothing was written; a fresh observation or a free
    /// scope lets a later try decide.
    Held(Hold),
}

/// What a read of a machine returned; `None` where a value could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedFacts {
    /// The SMBIOS UUID the node reported.
    pub smbios_uuid: Option<String>,
    /// The Talos node ID the node reported.
    pub node_id: Option<String>,
    /// The Talos cluster ID.
    pub cluster_id: Option<String>,
    /// The running Talos version tag, e.g. `v1.13.6`.
    pub talos_version: Option<String>,
    /// The configuration digest read back.
    pub digest: Option<Digest>,
    /// The machine-config resource version.
    pub config_version: Option<u64>,
    /// The version of the cluster's Talos access configuration the read used.
    pub access_version: Option<String>,
}

/// Who an observation is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservationRequest {
    /// The machine.
    pub machine: String,
    /// Why it is taken.
    pub purpose: ObservationPurpose,
    /// The plan it is evidence for, if any.
    pub plan: Option<String>,
    /// The controller instance taking it.
    pub controller: ControllerId,
}

/// An observation whose read has started: its basis is the revision of the
/// "observation started" entry (§4.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservationTicket {
    /// The machine.
    pub machine: String,
    /// The basis revision.
    pub basis: Revision,
}

/// The use-time dependency check of §3.1 item 2: where the Talos access
/// configuration was read and at which version, and whether the artifact decrypts
/// with the bound key version. The access value itself is never passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DependencyCheck {
    /// The plan it was made for.
    pub plan: String,
    /// The controller that made it.
    pub controller: ControllerId,
    /// Path of the access configuration in the secret store.
    pub access_path: String,
    /// Its version.
    pub access_version: String,
    /// Whether the artifact decrypted with the bound key version.
    pub artifact_decrypts: bool,
}

/// A successful commitment: the plan's one operation and its owner token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committed {
    /// The operation created.
    pub operation: String,
    /// The committing controller's token: generation 1 in the present epoch.
    pub owner: OwnerToken,
}

/// A §5.2 accounting decision request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountingRequest {
    /// The operation.
    pub operation: String,
    /// The attempt number.
    pub attempt: u32,
    /// The deployment's settle floor, kept outside the database.
    pub settle_floor: SpanMs,
    /// Why the resource version moved during the settle, if it did.
    pub explanation: Option<String>,
}

/// A blanket approval: an approver's recorded decision that the plans for one
/// cluster's machines are approved as they are made (direct mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlanketApproval {
    /// Its identifier.
    pub id: String,
    /// The Talos cluster ID it covers.
    pub cluster_id: String,
    /// The approver who granted it.
    pub approver: String,
    /// Why, as the approver gave it.
    pub reason: String,
    /// Store time of the grant.
    pub granted_at: InstantMs,
    /// Whether it was granted in the installation's current epoch (it holds in no
    /// other).
    pub current_epoch: bool,
    /// Who revoked it, and when (store time); `None` while in force.
    pub revoked: Option<(String, InstantMs)>,
    /// Store time it lapses at: no approval is made under it from then on.
    pub expires_at: InstantMs,
    /// Whether it had lapsed when it was read.
    pub expired: bool,
}

impl BlanketApproval {
    /// Whether approvals could be made under it when it was read.
    #[must_use]
    pub fn in_force(&self) -> bool {
        self.revoked.is_none() && self.current_epoch && !self.expired
    }
}

/// The longest a blanket approval may be granted for: 90 days.
pub const BLANKET_MAX: crate::contract::SpanMs = crate::contract::SpanMs(90 * 86_400_000);

/// A plan as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanView {
    /// Identifier.
    pub id: String,
    /// Target machine.
    pub machine: String,
    /// Plan state (§2).
    pub state: PlanState,
    /// Its operation, once committed.
    pub operation: Option<String>,
    /// The bound artifact digest.
    pub artifact_digest: Digest,
    /// The bound baseline revision.
    pub baseline_revision: Revision,
    /// The bound transport deadline of each request.
    pub transport_deadline: SpanMs,
    /// The bound verification deadline.
    pub verification_deadline: SpanMs,
    /// The drift record the plan binds (its opening revision): a revert's, or a
    /// drift adoption's.
    pub bound_drift: Option<Revision>,
    /// What its operation does: apply the release, or adopt the running
    /// configuration (§6.3).
    pub kind: OperationKind,
}

impl PlanView {
    /// Whether approving this plan approves overwriting a configuration no reviewer
    /// has seen (§6.4, choice §10.16): a revert replaces a drifted configuration that
    /// has no sanitized form unless it is adopted. Derived from the plan alone, so
    /// every approval of it carries the same mark.
    #[must_use]
    pub fn unseen_overwrite(&self) -> bool {
        self.kind == OperationKind::ApplyConfig && self.bound_drift.is_some()
    }
}

/// An operation as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationView {
    /// Identifier.
    pub id: String,
    /// Its plan.
    pub plan: String,
    /// Its machine.
    pub machine: String,
    /// State (§4).
    pub state: OperationState,
    /// The recorded owner.
    pub owner: OwnerToken,
    /// Attempts recorded.
    pub attempts: u32,
}

/// What a recovery-mode entry records (§7.2): who takes the open operations over,
/// when every pre-restore controller instance was stopped, and what was restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryEntry {
    /// The controller instance that takes every open operation over.
    pub controller: ControllerId,
    /// When every pre-restore controller instance was stopped (store time, not after
    /// the entry): the time §5.2 condition 2 counts from for every restored scope.
    pub stopped_at: InstantMs,
    /// The backup families restored, at least one, each family once.
    pub backups: Vec<RestoredBackup>,
}

/// One restored backup, as the entry records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoredBackup {
    /// The backup family: `database`, `keys`, `credentials`, …
    pub family: String,
    /// The backup's identity (a file name, a snapshot ID).
    pub backup: String,
    /// When the backup was taken (store time); its age at the entry is recorded.
    pub taken_at: InstantMs,
}

/// recovery-admin's §7.3 step 1 accounting decision over restored scopes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeAccounting {
    /// The machine scopes it covers; every one must pass.
    pub machines: Vec<String>,
    /// The deployment's settle floor (at least 30 s), kept outside the database.
    pub settle_floor: SpanMs,
    /// How a resource version that moved during a settle is explained.
    pub explanation: Option<String>,
}

/// A machine's three values and scope facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineView {
    /// Identifier.
    pub id: String,
    /// Desired release.
    pub desired_release: Option<String>,
    /// Applied release (`None` before the first adoption or completed operation).
    pub applied_release: Option<String>,
    /// Applied digest.
    pub applied_digest: Option<Digest>,
    /// Baseline revision: the revision at which Applied last moved.
    pub baseline_revision: Revision,
    /// Assignment revision.
    pub assignment_revision: u64,
    /// Frozen (§6.2).
    pub frozen: bool,
    /// The opening revision of the open drift record, if any.
    pub open_drift: Option<Revision>,
    /// The machine's latest timeline revision.
    pub revision: Revision,
    /// Its own Talos endpoint, recorded when the machine was added (§3.5).
    pub endpoint: String,
    /// The identity key it is recorded under.
    pub identity: IdentityKey,
    /// The Talos cluster ID it belongs to.
    pub cluster_id: String,
    /// Its recovery scope state (§7.4): normal outside recovery mode.
    pub scope: ScopeState,
}

/// One timeline entry (§4.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    /// Its revision on the machine's timeline.
    pub revision: Revision,
    /// What happened.
    pub kind: String,
    /// Store time of the transaction that wrote it.
    pub at: InstantMs,
    /// Who: a principal or a controller token.
    pub actor: String,
    /// The actor's role, or `controller`.
    pub actor_role: String,
    /// The plan concerned.
    pub plan: Option<String>,
    /// The operation concerned.
    pub operation: Option<String>,
    /// For a refusal: the comparison that refused (§3.2, §3.3, §11.1); the timeline
    /// records its number.
    pub comparison: Option<Comparison>,
    /// Details (never configuration or secret values).
    pub detail: String,
    /// The principal at whose request a controller acted, when one asked (a
    /// takeover requested by recovery-admin).
    pub requested_by: Option<String>,
}

/// A release to publish with each artifact's full key binding: the key's name and
/// its identity recorded apart, so the artifact can be opened from the store alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedReleaseSpec {
    /// The release's identifier.
    pub id: String,
    /// One sealed artifact per machine; publishing selects the release as each
    /// machine's Desired.
    pub artifacts: Vec<(String, keys::SealedArtifact)>,
    /// Who authored or published content in it.
    pub contributions: Vec<(String, ContributionKind)>,
}

/// What accounts for an attempt (§5.1, §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttemptAccounting {
    /// Neither a response from the node nor a decision is on record.
    Unaccounted,
    /// The node's response, recorded at this revision.
    Response(Revision),
    /// Recovery-admin's §5.2 decision, recorded at this revision.
    Decision(Revision),
}

/// One attempt of an operation as the store holds it (§3.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptView {
    /// The operation.
    pub operation: String,
    /// The attempt's number, from 1.
    pub number: u32,
    /// The revision of its attempt entry.
    pub revision: Revision,
    /// Store time of the attempt transaction.
    pub at: InstantMs,
    /// The owner token it was made under.
    pub owner: OwnerToken,
    /// Its transport deadline: the attempt's time plus the plan's bound span.
    pub transport_deadline: InstantMs,
    /// Its verification deadline: the attempt's time plus the plan's bound span.
    pub verification_deadline: InstantMs,
    /// The recorded response class (`Pending` until one is recorded).
    pub response: ResponseClass,
    /// The revision the response was recorded at.
    pub response_revision: Option<Revision>,
    /// The node's message as the dispatch client gave it, already redacted.
    pub response_text: Option<String>,
    /// What accounts for it.
    pub accounting: AttemptAccounting,
}

impl AttemptView {
    /// A response from the node or a §5.2 decision is on record.
    #[must_use]
    pub fn accounted(&self) -> bool {
        self.accounting != AttemptAccounting::Unaccounted
    }
}

/// One observation of a machine: its start and, once recorded, what it read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservationView {
    /// The machine.
    pub machine: String,
    /// Its basis: the revision of its "observation started" entry.
    pub basis: Revision,
    /// Why it was taken.
    pub purpose: ObservationPurpose,
    /// The plan it is evidence for, if any.
    pub plan: Option<String>,
    /// The controller instance that took it.
    pub controller: Option<ControllerId>,
    /// Store time when its read started.
    pub started_at: InstantMs,
    /// Store time when its result was recorded; `None` while unrecorded.
    pub recorded_at: Option<InstantMs>,
    /// The revision of its record entry; `None` while unrecorded.
    pub recorded_revision: Option<Revision>,
    /// What the read returned (digest, resource version, identity…); `None` while
    /// unrecorded.
    pub read: Option<ObservedFacts>,
}

impl ObservationView {
    /// The configuration digest read, if recorded and read.
    #[must_use]
    pub fn digest(&self) -> Option<Digest> {
        self.read.as_ref().and_then(|r| r.digest)
    }

    /// The machine-config resource version read, if recorded and read.
    #[must_use]
    pub fn config_version(&self) -> Option<u64> {
        self.read.as_ref().and_then(|r| r.config_version)
    }
}

/// Why the store did not perform an act.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The §3.2 commitment transaction refused; the refusal is on the timeline.
    #[error("commitment refused by comparison {comparison}: {reason}")]
    CommitmentRefused {
        /// The comparison, one of 0–6.
        comparison: Comparison,
        /// Why.
        reason: String,
    },
    /// The commitment had nothing it could judge (choice §10.28): this controller
    /// recorded no evidence for the plan, or its latest read started ahead of the
    /// standing approval, is past the plan's age limit, could not read who the node is,
    /// its configuration digest or its Talos version, or no use-time check follows it.
    /// Nothing was committed or refused and nothing is on the timeline; a new read
    /// decides.
    #[error("commitment needs fresh evidence: {reason}")]
    EvidenceMissing {
        /// What is missing.
        reason: String,
    },
    /// A §3.3 attempt transaction refused; the refusal is on the timeline.
    #[error("attempt refused by comparison {comparison}: {reason}")]
    AttemptRefused {
        /// The comparison: 1, 2, 3, 6, 7, 8 or 9.
        comparison: Comparison,
        /// Why.
        reason: String,
    },
    /// The §6.3 adoption record refused; the refusal is on the timeline, once, and
    /// ends the plan's tries (a new plan is the retry, choice §10.27).
    #[error("adoption record refused by {reason}")]
    AdoptionRefused {
        /// The §6.3 requirement that failed: 2, 3 or 4.
        requirement: u8,
        /// Why.
        reason: String,
    },
    /// A §5.2 accounting decision whose conditions do not hold.
    #[error("accounting decision refused: {reason}")]
    AccountingRefused {
        /// The failing §5.2 condition, `None` for a role or setting refusal.
        condition: Option<u8>,
        /// Why.
        reason: String,
    },
    /// The act is not allowed on the recorded facts (role, state, held scope…).
    #[error("{act} refused: {reason}")]
    Refused {
        /// The act.
        act: &'static str,
        /// Why.
        reason: String,
    },
    /// Something named does not exist.
    #[error("{what} {id} does not exist")]
    NotFound {
        /// What kind of thing.
        what: &'static str,
        /// Its identifier.
        id: String,
    },
    /// Something to create exists already.
    #[error("{what} {id} exists already")]
    Exists {
        /// What kind of thing.
        what: &'static str,
        /// Its identifier.
        id: String,
    },
    /// The database failed.
    #[error("database error: {0}")]
    Database(String),
    /// The store's database was not opened: it could not be reached, read or
    /// migrated, or it was refused as it is ([`OpenProblem`]).
    #[error("store {store}: {problem}")]
    Open {
        /// The SQLite file's path, or the PostgreSQL URL without its password.
        store: String,
        /// Why.
        problem: OpenProblem,
    },
}

impl StoreError {
    /// The comparison of a commitment or attempt refusal.
    #[must_use]
    pub fn comparison(&self) -> Option<Comparison> {
        match self {
            Self::CommitmentRefused { comparison, .. }
            | Self::AttemptRefused { comparison, .. } => Some(*comparison),
            _ => None,
        }
    }
}

/// The store's result type.
pub type StoreResult<T> = Result<T, StoreError>;

/// The contract's transactions (see the module documentation).
#[async_trait::async_trait]
pub trait Store: Send + Sync {
    /// Make the installation's identity root, once: the certificate authority and the
    /// first administrator (see [`BootstrapSpec`]); recorded in the identity journal.
    /// A second bootstrap is refused.
    async fn bootstrap(&self, spec: BootstrapSpec) -> StoreResult<()>;
    /// The installation's identity root, `None` before the bootstrap.
    async fn installation_identity(&self) -> StoreResult<Option<InstallationIdentity>>;
    /// Register an identity with its roles (recovery-admin, after the bootstrap);
    /// recorded in the identity journal.
    async fn register_principal(&self, actor: &Actor, spec: PrincipalSpec) -> StoreResult<()>;
    /// Replace a principal's roles (recovery-admin; never one's own, so no one
    /// grants themselves a role); recorded in the identity journal. A token never
    /// holds approver and a person never holds automation, as at registration.
    async fn change_roles(
        &self,
        actor: &Actor,
        principal: &str,
        roles: Vec<Role>,
    ) -> StoreResult<()>;
    /// The identity journal, oldest first.
    async fn identity_journal(&self) -> StoreResult<Vec<IdentityEvent>>;
    /// Every registered principal, by identifier.
    async fn principals(&self) -> StoreResult<Vec<PrincipalView>>;
    /// Add a machine with its identity key (and the digest its import read, §6.3).
    async fn create_machine(&self, actor: &Actor, spec: MachineSpec) -> StoreResult<()>;
    /// Publish a release: store its sealed artifacts and select it as each machine's
    /// Desired.
    async fn publish_release(&self, actor: &Actor, spec: ReleaseSpec) -> StoreResult<()>;
    /// Make an immutable plan from the machine's Desired release (§2).
    async fn create_plan(&self, actor: &Actor, spec: PlanSpec) -> StoreResult<PlanView>;
    /// Approve a plan (or renew an approval from another epoch); returns the
    /// self-approval mark recorded with it.
    async fn approve(&self, actor: &Actor, plan: &str) -> StoreResult<SelfApproval>;
    /// Revoke a plan's approval; locks the machine row, then the approval.
    async fn revoke_approval(&self, actor: &Actor, plan: &str) -> StoreResult<()>;
    /// Revoke an identity (recovery-admin); locks the principal row. Its
    /// certificate bindings end with it.
    async fn revoke_identity(&self, actor: &Actor, principal: &str) -> StoreResult<()>;
    /// Bind a certificate to its principal by its fingerprint (recovery-admin, the
    /// principal registered and unrevoked, the fingerprint bound to no one yet);
    /// recorded in the identity journal in the same transaction.
    async fn bind_certificate(&self, actor: &Actor, spec: CertificateSpec) -> StoreResult<()>;
    /// Every certificate binding, ended ones included, by principal and time.
    async fn certificates(&self) -> StoreResult<Vec<CertificateBinding>>;
    /// Cancel a plan (its creator, an approver or recovery-admin).
    async fn cancel_plan(&self, actor: &Actor, plan: &str) -> StoreResult<()>;
    /// Record a blanket approval for cluster `cluster_id` (an approver, a person):
    /// plans for its machines may then be approved as they are made
    /// ([`Store::approve_under_blanket`]). The cluster must have a machine in the
    /// inventory. One may be in force per cluster; it holds only in the installation
    /// epoch it is granted in, and for `lasting` from the grant (at most
    /// [`BLANKET_MAX`]).
    async fn grant_blanket_approval(
        &self,
        actor: &Actor,
        cluster_id: &str,
        reason: &str,
        lasting: crate::contract::SpanMs,
    ) -> StoreResult<BlanketApproval>;
    /// Revoke a blanket approval (an approver or recovery-admin), and with it every
    /// approval made under it, as [`Store::revoke_approval`] would each. Locks the
    /// cluster's machine rows first, as every approval and commitment does.
    async fn revoke_blanket_approval(&self, actor: &Actor, blanket: &str) -> StoreResult<()>;
    /// Approve a proposed plan under the blanket approval in force for its machine's
    /// cluster (a publisher or automation asks; the approval is recorded as the
    /// blanket's approver's, naming the blanket). Refused without one in force, when
    /// it was granted in another epoch, when its approver's identity is revoked, and
    /// where [`Store::approve`] would refuse.
    async fn approve_under_blanket(&self, actor: &Actor, plan: &str) -> StoreResult<SelfApproval>;
    /// Every blanket approval, in force or revoked, oldest first.
    async fn blanket_approvals(&self) -> StoreResult<Vec<BlanketApproval>>;
    /// §3.1's quick, non-atomic check that the plan stands and the gate is open.
    async fn preflight(&self, plan: &str) -> StoreResult<()>;
    /// Record "observation started"; its revision is the observation's basis.
    async fn begin_observation(
        &self,
        request: ObservationRequest,
    ) -> StoreResult<ObservationTicket>;
    /// Record what the observation with this basis read.
    async fn record_observation(
        &self,
        ticket: &ObservationTicket,
        facts: ObservedFacts,
    ) -> StoreResult<Revision>;
    /// Record a use-time dependency check (§3.1 item 2).
    async fn record_dependency_check(&self, check: DependencyCheck) -> StoreResult<Revision>;
    /// Make an adopt plan (§6.3): it binds what the machine row holds under its lock
    /// and adopts the open drift record's configuration, or a handover's import.
    async fn create_adopt_plan(&self, actor: &Actor, spec: AdoptPlanSpec) -> StoreResult<PlanView>;
    /// The §6.3 adoption record transaction for an approved adopt plan: requirements
    /// 1–5 under the machine row's lock; nothing is sent.
    async fn record_adoption(
        &self,
        plan: &str,
        controller: ControllerId,
    ) -> StoreResult<AdoptionOutcome>;
    /// The §3.2 commitment transaction, comparisons 0–6.
    async fn commit(&self, plan: &str, controller: ControllerId) -> StoreResult<Committed>;
    /// A §3.3 attempt transaction: comparisons 1, 2, 3, 6, then 7–9 inside the update
    /// that records the attempt. Returns the proof that authorises one send.
    async fn attempt(&self, operation: &str, token: OwnerToken) -> StoreResult<CommittedAttempt>;
    /// Record the class of an attempt's response (or its transport outcome). `token`
    /// is the owner's token the attempt was made under: an answer is recorded by the
    /// attempt's owner only, so one from any other controller is refused (after a
    /// takeover, the answer to a request already sent is still its sender's).
    async fn record_response(
        &self,
        operation: &str,
        attempt: u32,
        token: OwnerToken,
        response: ResponseClass,
    ) -> StoreResult<OperationState>;
    /// Take an operation over (§3.4): one update conditioned on the generation.
    async fn takeover(
        &self,
        operation: &str,
        expected_generation: u64,
        controller: ControllerId,
    ) -> StoreResult<OwnerToken>;
    /// Record a §5.2 accounting decision (recovery-admin) after checking its three
    /// conditions.
    async fn record_accounting_decision(
        &self,
        actor: &Actor,
        request: AccountingRequest,
    ) -> StoreResult<()>;
    /// Classify the operation from the recorded evidence (§5) and perform the move it
    /// decides; completed moves Applied and advances the baseline revision.
    async fn classify(&self, operation: &str, token: OwnerToken) -> StoreResult<Classification>;
    /// Change a machine's assignment; refused while the scope is held (§8
    /// invariant 9). Returns the new assignment revision.
    async fn change_assignment(&self, actor: &Actor, machine: &str) -> StoreResult<u64>;
    /// Freeze a machine scope (§6.2).
    async fn freeze(&self, actor: &Actor, machine: &str, reason: &str) -> StoreResult<()>;
    /// Lift a freeze (§6.2).
    async fn unfreeze(&self, actor: &Actor, machine: &str, reason: &str) -> StoreResult<()>;
    /// Enter recovery mode (recovery-admin): a new random epoch, every non-terminal
    /// operation taken over by `entry.controller` into it, every scope's gate shut,
    /// and the entry's record — the stop of the pre-restore instances, each restored
    /// backup and its age — kept with it (§7.2). The recorded stop is the time §7.3
    /// step 1 counts from.
    async fn enter_recovery(&self, actor: &Actor, entry: RecoveryEntry) -> StoreResult<Epoch>;
    /// Release a scope in the present epoch (recovery-admin, §7.3 step 7).
    async fn release_scope(&self, actor: &Actor, machine: &str) -> StoreResult<()>;
    /// recovery-admin's §7.3 step 1 decision over pre-restore unaccounted scopes: the
    /// §5.2 conditions per scope, with the recorded entry standing for every
    /// pre-restore instance's stop and the deployment's maximum transport deadline
    /// for an erased attempt's; all pass or nothing is recorded. Each scope moves to
    /// unresolved while a restored operation with attempts holds it, otherwise to
    /// blocked until marked; restored operations with no attempt end cancelled.
    async fn account_scopes(&self, actor: &Actor, request: ScopeAccounting) -> StoreResult<()>;
    /// recovery-admin's mark (§7.3 step 6) from the scope's latest restoration
    /// observation and the caller's step 3 dependency check (`missing`, the first
    /// dependency it found missing); returns the state the evidence supports.
    async fn mark_scope(
        &self,
        actor: &Actor,
        machine: &str,
        missing: Option<Dependency>,
    ) -> StoreResult<ScopeState>;
    /// Leave recovery mode once every scope is released (§7.6).
    async fn leave_recovery(&self, actor: &Actor) -> StoreResult<()>;
    /// The present recovery epoch.
    async fn current_epoch(&self) -> StoreResult<Epoch>;
    /// A plan.
    async fn plan(&self, plan: &str) -> StoreResult<PlanView>;
    /// Every plan, by machine then identifier.
    async fn plans(&self) -> StoreResult<Vec<PlanView>>;
    /// An operation.
    async fn operation(&self, operation: &str) -> StoreResult<OperationView>;
    /// Every operation of a machine, oldest first.
    async fn operations_of(&self, machine: &str) -> StoreResult<Vec<OperationView>>;
    /// A machine.
    async fn machine(&self, machine: &str) -> StoreResult<MachineView>;
    /// A machine's timeline, in revision order.
    async fn timeline(&self, machine: &str) -> StoreResult<Vec<TimelineEntry>>;
    /// Publish a release whose artifacts carry their full key binding; otherwise as
    /// [`Store::publish_release`].
    async fn publish_sealed_release(
        &self,
        actor: &Actor,
        spec: SealedReleaseSpec,
    ) -> StoreResult<()>;
    /// The sealed artifact a plan binds: ciphertext, key binding and digest, never
    /// plaintext. Refused for an artifact published without its key name.
    async fn sealed_artifact(&self, plan: &str) -> StoreResult<keys::SealedArtifact>;
    /// The sealed artifact `release` holds for `machine`, with its key binding (for
    /// §7.3 step 3's dependency check); `None` when the release has none for it.
    /// Refused for an artifact published without its key name.
    async fn keyed_artifact(
        &self,
        release: &str,
        machine: &str,
    ) -> StoreResult<Option<keys::SealedArtifact>>;
    /// Record the class of an attempt's response with the node's message as the
    /// dispatch client gave it (already redacted); otherwise as
    /// [`Store::record_response`].
    async fn record_response_text(
        &self,
        operation: &str,
        attempt: u32,
        token: OwnerToken,
        response: ResponseClass,
        text: Option<String>,
    ) -> StoreResult<OperationState>;
    /// Take an operation over at a principal's request (recovery-admin), recording
    /// who asked; with `None`, as [`Store::takeover`].
    async fn takeover_requested(
        &self,
        operation: &str,
        expected_generation: u64,
        controller: ControllerId,
        requested_by: Option<&Actor>,
    ) -> StoreResult<OwnerToken>;
    /// The store's present time: the database's clock on PostgreSQL, the store's
    /// clock on SQLite.
    async fn now(&self) -> StoreResult<InstantMs>;
    /// Every machine, by identifier.
    async fn machines(&self) -> StoreResult<Vec<MachineView>>;
    /// Every operation holding its scope (committed, sending, verifying,
    /// unresolved), by machine and then commitment order.
    async fn open_operations(&self) -> StoreResult<Vec<OperationView>>;
    /// An operation's attempts, oldest first.
    async fn attempts(&self, operation: &str) -> StoreResult<Vec<AttemptView>>;
    /// Every observation started on a machine, recorded or not, by basis.
    async fn observations(&self, machine: &str) -> StoreResult<Vec<ObservationView>>;
    /// Every row of every table as text, for tests that search the stored bytes.
    #[cfg(feature = "controls")]
    #[doc(hidden)]
    async fn dump_all_rows(&self) -> StoreResult<String>;
    /// Run one raw statement, for tests that try what the schema must refuse.
    #[cfg(feature = "controls")]
    #[doc(hidden)]
    async fn raw_execute(&self, sql: &'static str) -> StoreResult<u64>;
}

/// Guards a test may disable to show what each one prevents. Every guard is on in
/// [`Guards::default`]; only the `controls` feature lets a store be built otherwise.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guards {
    /// Comparison 1 inside the commitment transaction.
    pub approval_in_transaction: bool,
    /// Owner, generation and epoch inside the update that records an attempt.
    pub ownership_fence: bool,
    /// The machine-scope and rollout-slot unique indexes, and comparisons 4 and 5
    /// that read them (on a one-machine rollout scope the slot stands for the
    /// machine scope too).
    pub scope_index: bool,
}

impl Default for Guards {
    fn default() -> Self {
        Self {
            approval_in_transaction: true,
            ownership_fence: true,
            scope_index: true,
        }
    }
}

/// A point inside a transaction where a test hook runs.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookPoint {
    /// The commitment transaction holds the machine row and has read the approval.
    CommitmentLocked {
        /// The plan.
        plan: String,
        /// The committing controller.
        controller: ControllerId,
    },
    /// The commitment transaction has passed comparisons 0–6 and is about to insert
    /// the operation.
    CommitmentChecked {
        /// The plan.
        plan: String,
        /// The committing controller.
        controller: ControllerId,
    },
    /// The attempt transaction holds the machine row and has read the approval.
    AttemptLocked {
        /// The operation.
        operation: String,
    },
    /// The accounting-decision transaction holds the machine row and has checked
    /// the actor's role.
    AccountingLocked {
        /// The operation.
        operation: String,
    },
    /// The blanket-revocation transaction holds its cluster's machine rows and has
    /// checked the actor's role.
    BlanketRevocationLocked {
        /// The blanket approval.
        blanket: String,
    },
}

/// A test hook: awaited at each [`HookPoint`].
#[doc(hidden)]
pub type Hook = Arc<dyn Fn(HookPoint) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A clock a test moves by hand.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock reading `start`.
    #[must_use]
    pub fn starting_at(start: InstantMs) -> Self {
        Self(Arc::new(AtomicU64::new(start.0)))
    }

    /// The current reading.
    #[must_use]
    pub fn now(&self) -> InstantMs {
        InstantMs(self.0.load(Ordering::SeqCst))
    }

    /// Move the clock forward.
    pub fn advance(&self, span: SpanMs) {
        self.0.fetch_add(span.0, Ordering::SeqCst);
    }
}

/// The deployment's maximum transport deadline unless configured otherwise (§7.3
/// step 1): a static setting held outside the database, the ceiling plan creation
/// refuses to exceed and the executor's default.
pub const DEFAULT_MAX_TRANSPORT_DEADLINE: SpanMs = SpanMs(60_000);

/// How a store is built: guards, clock, hooks and the deployment's transport-deadline
/// ceiling. Outside tests only the default exists: every guard on, the database's
/// clock, no hook, [`DEFAULT_MAX_TRANSPORT_DEADLINE`].
#[doc(hidden)]
#[derive(Clone)]
pub struct Settings {
    /// The guards.
    pub guards: Guards,
    /// A hand-moved clock instead of the database's.
    pub clock: Option<ManualClock>,
    /// A hook awaited at each [`HookPoint`].
    pub hook: Option<Hook>,
    /// The deployment's maximum transport deadline: plan creation refuses a plan
    /// binding more (§7.3 step 1), since the restore procedure takes it as the
    /// latest an erased attempt's deadline could have been.
    pub max_transport_deadline: SpanMs,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            guards: Guards::default(),
            clock: None,
            hook: None,
            max_transport_deadline: DEFAULT_MAX_TRANSPORT_DEADLINE,
        }
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("guards", &self.guards)
            .field("clock", &self.clock)
            .field("hook", &self.hook.is_some())
            .field("max_transport_deadline", &self.max_transport_deadline)
            .finish()
    }
}

/// A fresh random 128-bit value from the operating system's secure source.
#[cfg_attr(
    not(any(feature = "postgres", feature = "sqlite")),
    allow(dead_code, reason = "used by the database backends")
)]
pub(crate) fn random_128() -> Result<[u8; 16], StoreError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::Database(format!("no secure random source: {e}")))?;
    Ok(bytes)
}
