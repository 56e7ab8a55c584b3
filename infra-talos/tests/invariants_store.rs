//! §8 invariants 1–13 as properties of random interleavings of acts, run against
//! the embedded SQLite store and against PostgreSQL.
//!
//! One driver plays a random sequence of acts over three machines (m1 and m2 share
//! rollout scope r1, m3 is alone in r3), several plans, the suite's principals and
//! two controller instances. After every act it reads the store back (machines,
//! operations, attempts, timelines, observations, plans, the present epoch) and
//! checks every invariant the store alone can hold against that reading, the
//! previous one, and what the driver itself was told (proofs, tokens, approvals).
//! A violation names its invariant; proptest shrinks the sequence and prints it.
//!
//! Invariant 13 is checked on what the store holds: each machine's recovery scope
//! state before and after the act, and the entries the act appended. A commitment or
//! attempt entry needs a normal scope, or one whose latest release follows the latest
//! recovery-mode entry and names the present epoch; plan creation, approval and
//! unfreezing need a scope that is not pre-restore unaccounted (§7.5); a release
//! needs a scope the store held ready, marked so since the last entry with Desired
//! unmoved (§7.3 step 7, §7.4). Separate runs weighted towards the §7.3 steps (entry,
//! the step 1 decision, restoration reads, marks, releases, leaving) exercise it.
//!
//! PostgreSQL runs read `INFRA_TEST_DATABASE_URL` and work in a fresh schema each;
//! without the variable they print a skip line, and fail when `CI=true`.

mod pg_support;
mod store_suite;

use std::collections::{BTreeMap, BTreeSet};

use infra_talos::attempt::CommittedAttempt;
use infra_talos::config_digest;
use infra_talos::contract::classify::Classification;
use infra_talos::contract::epoch::Epoch;
use infra_talos::contract::evidence::{ObservationPurpose, ResponseClass, TransportOutcome};
use infra_talos::contract::operation::{ControllerId, OperationState, OwnerToken};
use infra_talos::contract::plan::PlanState;
use infra_talos::contract::recovery::{Dependency, ScopeState};
use infra_talos::contract::{Role, SpanMs};
use infra_talos::digest::Digest;
use infra_talos::store::postgres::PgStore;
use infra_talos::store::sqlite::SqliteStore;
use infra_talos::store::{
    AccountingRequest, Actor, AttemptAccounting, AttemptView, ContributionKind,
    DEFAULT_MAX_TRANSPORT_DEADLINE, DependencyCheck, Guards, MachineView, ObservationRequest,
    ObservationView, ObservedFacts, OperationView, PlanView, ReleaseSpec, ScopeAccounting,
    SealedArtifact, Store, TimelineEntry,
};
use proptest::prelude::*;
use store_suite::{
    A, B, Env, MARKER, alice, ann, base_digest, bob, carol, entry_now, facts, root, seal, settings,
    spec, world,
};

const MACHINES: [&str; 3] = ["m1", "m2", "m3"];
/// The machines of rollout scope r1 (limit one, choice §10.5).
const SHARED_SLOT: [&str; 2] = ["m1", "m2"];
/// Placed in the plaintext of every release the driver publishes.
const DRIVER_MARKER: &str = "INVARIANT-DRIVER-PLAINTEXT-41c7e2";
/// The deployment's settle floor for accounting decisions.
const SETTLE_FLOOR: SpanMs = SpanMs(30_000);

// ---------------------------------------------------------------------------------
// Acts.

/// What the node's configuration digest reads in an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// The machine's Applied digest, as before dispatch.
    PreDispatch,
    /// The plan's artifact digest.
    Artifact,
    /// Something else.
    Other,
}

/// What the node answered an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    Accepted,
    ValidationRejection,
    OtherCode,
    Transport(TransportOutcome),
}

impl Reply {
    fn class(self) -> ResponseClass {
        match self {
            Self::Accepted => ResponseClass::Accepted,
            Self::ValidationRejection => ResponseClass::ValidationRejection,
            Self::OtherCode => ResponseClass::OtherRefusal,
            Self::Transport(t) => ResponseClass::Transport(t),
        }
    }
}

/// One act. Plan and operation indexes count back from the most recent one (0),
/// modulo how many exist so far; an act naming one when none exists does nothing.
#[derive(Debug, Clone)]
enum Act {
    /// Publish a new release for every machine (moves each machine's Desired).
    Publish,
    /// Alice makes a plan for a machine from its Desired release.
    CreatePlan {
        machine: usize,
    },
    /// The three acts that make a plan ready to commit, in a row: create it for a
    /// machine, approve it (bob, else carol, else dave), and gather evidence reading
    /// the pre-dispatch digest with the right identity.
    Ready {
        machine: usize,
        by_b: bool,
    },
    /// bob, carol or dave approves.
    Approve {
        plan: usize,
        approver: usize,
    },
    /// The automation token (`false`) or recovery-admin (`true`) tries to approve;
    /// both must be refused.
    ApproveWithoutRole {
        plan: usize,
        admin: bool,
    },
    /// carol revokes the plan's approval.
    RevokeApproval {
        plan: usize,
    },
    /// Recovery-admin revokes bob (`false`) or carol (`true`).
    RevokeIdentity {
        carol: bool,
    },
    /// The creator (0), an approver (1) or recovery-admin (2) cancels.
    Cancel {
        plan: usize,
        by: u8,
    },
    /// Dispatch evidence for a plan: observation started and recorded, plus the
    /// use-time dependency check.
    Evidence {
        plan: usize,
        by_b: bool,
        seen: Seen,
        identity_ok: bool,
    },
    /// The commitment transaction by the controller that last gathered evidence for
    /// the plan (A when none did), or by the other instance.
    Commit {
        plan: usize,
        other: bool,
    },
    /// An attempt under the latest token the driver holds (`None`) or an older one.
    Attempt {
        op: usize,
        stale: Option<u8>,
    },
    /// Record the answer to the operation's latest attempt.
    Respond {
        op: usize,
        reply: Reply,
    },
    /// The other controller instance takes the operation over.
    Takeover {
        op: usize,
    },
    /// A §5.2 accounting decision for the latest attempt, by recovery-admin or (to
    /// be refused) an approver; with `conditions` the driver first makes its three
    /// conditions hold.
    Decide {
        op: usize,
        conditions: bool,
        admin: bool,
    },
    /// A completion observation, then classification by the present owner.
    Complete {
        op: usize,
        seen: Seen,
        identity_ok: bool,
    },
    /// The author changes a machine's assignment.
    ChangeAssignment {
        machine: usize,
    },
    Freeze {
        machine: usize,
    },
    Unfreeze {
        machine: usize,
    },
    /// Recovery-admin enters recovery mode; controller A or B takes everything over.
    EnterRecovery {
        by_b: bool,
    },
    /// The whole §7.3 way to a release as the driver tries it: the step 1 decision
    /// when the scope awaits one, a restoration observation, the mark, the release.
    ReleaseScope {
        machine: usize,
    },
    /// recovery-admin's §7.3 step 1 decision over one scope, after the recovery reads
    /// it needs (the first past the deployment's maximum transport deadline, the last a
    /// settle floor later).
    AccountScope {
        machine: usize,
    },
    /// A restoration observation of a machine (§7.3 step 4), reading its own identity
    /// or another's.
    Restoration {
        machine: usize,
        identity_ok: bool,
    },
    /// recovery-admin marks a scope (§7.3 step 6), the dependency check finding the
    /// key version missing or nothing missing.
    MarkScope {
        machine: usize,
        missing: bool,
    },
    /// recovery-admin releases a scope (§7.3 step 7), whatever state it is in.
    Release {
        machine: usize,
    },
    LeaveRecovery,
    /// bob (`false`) or carol (`true`) grants a blanket approval for cluster-1 (every
    /// machine).
    GrantBlanket {
        carol: bool,
    },
    /// The automation token asks for a proposed plan to be approved under the
    /// cluster's blanket approval.
    ApproveUnderBlanket {
        plan: usize,
    },
    /// carol revokes the blanket approval in force.
    RevokeBlanket,
    /// Let store time pass.
    Wait {
        secs: u8,
    },
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        3 => Just(Reply::Accepted),
        1 => Just(Reply::ValidationRejection),
        1 => Just(Reply::OtherCode),
        1 => Just(Reply::Transport(TransportOutcome::DeadlineExceeded)),
        1 => Just(Reply::Transport(TransportOutcome::ConnectionLost)),
        1 => Just(Reply::Transport(TransportOutcome::Unavailable)),
    ]
}

fn seen() -> impl Strategy<Value = Seen> {
    prop_oneof![
        2 => Just(Seen::PreDispatch),
        4 => Just(Seen::Artifact),
        1 => Just(Seen::Other),
    ]
}

/// Identity right five times in six.
fn identity_ok() -> impl Strategy<Value = bool> {
    prop_oneof![5 => Just(true), 1 => Just(false)]
}

/// Controller B one time in five, so evidence and commitment often agree.
fn by_b() -> impl Strategy<Value = bool> {
    prop_oneof![4 => Just(false), 1 => Just(true)]
}

/// A plan or operation counted back from the most recent one.
fn recent() -> impl Strategy<Value = usize> {
    prop_oneof![8 => Just(0usize), 2 => Just(1usize), 1 => 2..4usize]
}

fn act() -> impl Strategy<Value = Act> {
    let ix = recent;
    let m = || 0..3usize;
    let evidence_seen = prop_oneof![
        5 => Just(Seen::PreDispatch),
        1 => Just(Seen::Artifact),
        1 => Just(Seen::Other),
    ];
    prop_oneof![
        1 => Just(Act::Publish),
        4 => m().prop_map(|machine| Act::CreatePlan { machine }),
        5 => (m(), by_b()).prop_map(|(machine, by_b)| Act::Ready { machine, by_b }),
        8 => (ix(), 0..3usize).prop_map(|(plan, approver)| Act::Approve { plan, approver }),
        1 => (ix(), any::<bool>()).prop_map(|(plan, admin)| Act::ApproveWithoutRole { plan, admin }),
        1 => ix().prop_map(|plan| Act::RevokeApproval { plan }),
        1 => any::<bool>().prop_map(|carol| Act::RevokeIdentity { carol }),
        1 => (ix(), 0..3u8).prop_map(|(plan, by)| Act::Cancel { plan, by }),
        10 => (ix(), by_b(), evidence_seen, identity_ok()).prop_map(
            |(plan, by_b, seen, identity_ok)| Act::Evidence { plan, by_b, seen, identity_ok }
        ),
        10 => (ix(), prop_oneof![4 => Just(false), 1 => Just(true)]).prop_map(|(plan, other)| Act::Commit { plan, other }),
        10 => (ix(), prop::option::weighted(0.2, 0..4u8))
            .prop_map(|(op, stale)| Act::Attempt { op, stale }),
        8 => (ix(), reply()).prop_map(|(op, reply)| Act::Respond { op, reply }),
        2 => ix().prop_map(|op| Act::Takeover { op }),
        3 => (ix(), prop_oneof![3 => Just(true), 1 => Just(false)], prop_oneof![4 => Just(true), 1 => Just(false)])
            .prop_map(|(op, conditions, admin)| Act::Decide { op, conditions, admin }),
        6 => (ix(), seen(), identity_ok())
            .prop_map(|(op, seen, identity_ok)| Act::Complete { op, seen, identity_ok }),
        1 => m().prop_map(|machine| Act::ChangeAssignment { machine }),
        1 => m().prop_map(|machine| Act::Freeze { machine }),
        1 => m().prop_map(|machine| Act::Unfreeze { machine }),
        1 => any::<bool>().prop_map(|by_b| Act::EnterRecovery { by_b }),
        1 => m().prop_map(|machine| Act::ReleaseScope { machine }),
        1 => Just(Act::LeaveRecovery),
        1 => recovery_step(),
        1 => any::<bool>().prop_map(|carol| Act::GrantBlanket { carol }),
        3 => ix().prop_map(|plan| Act::ApproveUnderBlanket { plan }),
        1 => Just(Act::RevokeBlanket),
        1 => (1..40u8).prop_map(|secs| Act::Wait { secs }),
    ]
}

/// One §7.3 step taken alone: the step 1 decision, a restoration read, a mark, a
/// release.
fn recovery_step() -> impl Strategy<Value = Act> {
    let m = || 0..3usize;
    prop_oneof![
        2 => m().prop_map(|machine| Act::AccountScope { machine }),
        3 => (m(), identity_ok())
            .prop_map(|(machine, identity_ok)| Act::Restoration { machine, identity_ok }),
        3 => (m(), prop_oneof![4 => Just(false), 1 => Just(true)])
            .prop_map(|(machine, missing)| Act::MarkScope { machine, missing }),
        3 => m().prop_map(|machine| Act::Release { machine }),
    ]
}

/// Acts for a run in recovery mode: the §7.3 steps often, a new entry or leaving
/// now and then, and the ordinary acts (which the scope rules must refuse or allow).
fn recovery_act() -> impl Strategy<Value = Act> {
    prop_oneof![
        5 => recovery_step(),
        1 => (0..3usize).prop_map(|machine| Act::ReleaseScope { machine }),
        1 => any::<bool>().prop_map(|by_b| Act::EnterRecovery { by_b }),
        1 => Just(Act::LeaveRecovery),
        1 => Just(Act::Publish),
        8 => act(),
    ]
}

// ---------------------------------------------------------------------------------
// What the driver knows.

struct PlanModel {
    id: String,
    machine: String,
    release: String,
    /// The plan as `create_plan` returned it.
    created: PlanView,
    /// The standing approval: who gave it and in which epoch.
    approval: Option<(String, Epoch)>,
    /// Whether that approval was made under a blanket approval.
    under_blanket: bool,
    cancelled: bool,
    /// The controller that last gathered evidence for it.
    evidence_by: Option<ControllerId>,
    /// Whether a commitment returned an operation for it.
    committed: bool,
}

struct OpModel {
    id: String,
    plan: String,
    machine: String,
    /// Every owner token the driver was handed for it, oldest first.
    tokens: Vec<OwnerToken>,
    /// Every proof of attempt the driver received for it.
    proofs: Vec<ProofSeen>,
}

#[derive(Debug, Clone)]
struct ProofSeen {
    operation: String,
    attempt: u32,
    machine: String,
    digest: Digest,
}

impl ProofSeen {
    fn of(p: &CommittedAttempt) -> Self {
        Self {
            operation: p.operation_id().to_owned(),
            attempt: p.attempt(),
            machine: p.machine().to_owned(),
            digest: p.artifact_digest(),
        }
    }
}

#[derive(Default)]
struct Model {
    plans: Vec<PlanModel>,
    ops: Vec<OpModel>,
    releases: usize,
    revoked: BTreeSet<String>,
    recovery: bool,
    /// Scopes released in the present recovery epoch.
    released: BTreeSet<String>,
    /// The blanket approval the driver last saw granted and not revoked: its
    /// approver and epoch.
    blanket: Option<(String, Epoch)>,
}

impl Model {
    fn plan(&self, id: &str) -> &PlanModel {
        self.plans.iter().find(|p| p.id == id).expect("known plan")
    }

    /// The plan's approval stands in `epoch`: given there, not revoked, by an
    /// identity still standing, and the plan not cancelled.
    fn approval_stands(&self, plan: &str, epoch: Epoch) -> Result<(), String> {
        let p = self.plan(plan);
        match &p.approval {
            None => Err(format!("plan {plan} has no standing approval")),
            Some((_, e)) if *e != epoch => Err(format!(
                "plan {plan} was approved in epoch {e:?}, the present one is {epoch:?}"
            )),
            Some((who, _)) if self.revoked.contains(who) => Err(format!(
                "plan {plan} was approved by revoked identity {who}"
            )),
            Some(_) if p.cancelled => Err(format!("plan {plan} was cancelled")),
            Some(_) => Ok(()),
        }
    }

    /// The gate is open for a machine: not frozen, and outside recovery mode or
    /// released in the present epoch.
    fn gate(&self, before: &Snapshot, machine: &str) -> Result<(), String> {
        if before.machines[machine].frozen {
            return Err(format!("{machine} is frozen"));
        }
        if self.recovery && !self.released.contains(machine) {
            return Err(format!(
                "{machine} is unreleased in recovery mode (epoch {:?})",
                before.epoch
            ));
        }
        Ok(())
    }
}

/// What one act did, as the driver saw it.
enum Done {
    Nothing,
    Committed {
        plan: String,
        owner: OwnerToken,
    },
    Attempted {
        op: String,
        token: OwnerToken,
    },
    Responded {
        op: String,
        attempt: u32,
        class: ResponseClass,
    },
    Classified {
        op: String,
        classification: Classification,
    },
    DecisionByNonAdmin,
    ApprovedWithoutRole(String),
    /// An approval under a blanket approval succeeded; the blanket as the driver knew
    /// it before the act.
    ApprovedUnderBlanket {
        plan: String,
        blanket: Option<(String, Epoch)>,
    },
    /// `release_scope` alone succeeded on this machine.
    Released {
        machine: String,
    },
    /// `enter_recovery` succeeded.
    EnteredRecovery,
}

// ---------------------------------------------------------------------------------
// The store read back.

#[derive(Clone)]
struct Snapshot {
    epoch: Epoch,
    machines: BTreeMap<String, MachineView>,
    ops: BTreeMap<String, OperationView>,
    attempts: BTreeMap<String, Vec<AttemptView>>,
    timelines: BTreeMap<String, Vec<TimelineEntry>>,
    observations: BTreeMap<String, Vec<ObservationView>>,
    plans: BTreeMap<String, PlanView>,
    open: Vec<OperationView>,
}

impl Snapshot {
    fn ops_of<'a>(&'a self, machine: &'a str) -> impl Iterator<Item = &'a OperationView> + 'a {
        self.ops.values().filter(move |o| o.machine == machine)
    }

    fn holding(&self, machine: &str) -> usize {
        self.ops_of(machine)
            .filter(|o| o.state.holds_machine_scope())
            .count()
    }

    fn entry(&self, machine: &str, revision: u64) -> Option<&TimelineEntry> {
        self.timelines[machine]
            .iter()
            .find(|e| e.revision.0 == revision)
    }
}

async fn snapshot<S: Store>(s: &S, model: &Model) -> Snapshot {
    let mut snap = Snapshot {
        epoch: s.current_epoch().await.unwrap(),
        machines: BTreeMap::new(),
        ops: BTreeMap::new(),
        attempts: BTreeMap::new(),
        timelines: BTreeMap::new(),
        observations: BTreeMap::new(),
        plans: BTreeMap::new(),
        open: s.open_operations().await.unwrap(),
    };
    for m in MACHINES {
        snap.machines
            .insert(m.to_owned(), s.machine(m).await.unwrap());
        for o in s.operations_of(m).await.unwrap() {
            snap.attempts
                .insert(o.id.clone(), s.attempts(&o.id).await.unwrap());
            snap.ops.insert(o.id.clone(), o);
        }
        snap.timelines
            .insert(m.to_owned(), s.timeline(m).await.unwrap());
        snap.observations
            .insert(m.to_owned(), s.observations(m).await.unwrap());
    }
    for p in &model.plans {
        snap.plans
            .insert(p.id.clone(), s.plan(&p.id).await.unwrap());
    }
    snap
}

// ---------------------------------------------------------------------------------
// The checker.

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// The highest revision that accounts for any of these attempts, or records them.
fn last_accounting(attempts: &[AttemptView]) -> u64 {
    attempts
        .iter()
        .flat_map(|a| {
            let by_decision = match a.accounting {
                AttemptAccounting::Decision(r) | AttemptAccounting::Response(r) => Some(r.0),
                AttemptAccounting::Unaccounted => None,
            };
            [Some(a.revision.0), by_decision]
        })
        .flatten()
        .max()
        .unwrap_or(0)
}

/// A completion or recovery observation begun after every attempt was accounted
/// for, reading `digest`.
fn settled_observation(obs: &[ObservationView], after: u64, digest: Digest) -> bool {
    obs.iter().any(|o| {
        matches!(
            o.purpose,
            ObservationPurpose::Completion | ObservationPurpose::Recovery
        ) && o.basis.0 > after
            && o.digest() == Some(digest)
    })
}

/// Check every invariant the store can hold across one act; `Err` names the
/// invariant broken.
#[allow(clippy::too_many_lines, reason = "one section per invariant")]
fn check(model: &Model, before: &Snapshot, after: &Snapshot, done: &Done) -> Result<(), String> {
    // 1: at most one operation in committed/sending/verifying/unresolved per machine
    // scope; the open-operations view agrees.
    for m in MACHINES {
        let n = after.holding(m);
        ensure!(
            n <= 1,
            "invariant 1: {n} operations hold machine scope {m}: {:?}",
            after.ops_of(m).collect::<Vec<_>>()
        );
    }
    let mut open: Vec<&str> = after.open.iter().map(|o| o.id.as_str()).collect();
    open.sort_unstable();
    let holding: Vec<&str> = after
        .ops
        .values()
        .filter(|o| o.state.holds_machine_scope())
        .map(|o| o.id.as_str())
        .collect();
    ensure!(
        open == holding,
        "invariant 1: open operations {open:?} but holding {holding:?}"
    );

    // 2: every attempt entry follows its operation's commitment entry on the same
    // timeline, and the attempts recorded are exactly the proofs handed out. An
    // adoption record's operation (§6.3) is created by its `adoption` entry and has
    // no attempt.
    for op in after.ops.values() {
        let timeline = &after.timelines[&op.machine];
        let created = timeline.iter().find(|e| {
            matches!(e.kind.as_str(), "commitment" | "adoption")
                && e.operation.as_deref() == Some(&op.id)
        });
        ensure!(
            created.is_some(),
            "invariant 2: operation {} has no commitment or adoption entry",
            op.id
        );
        ensure!(
            created.is_none_or(|e| e.kind == "commitment" || op.attempts == 0),
            "invariant 2: adopt operation {} records {} attempts",
            op.id,
            op.attempts
        );
        let commitment = created.map(|e| e.revision.0);
        let commitment = commitment.unwrap_or_default();
        let attempts = &after.attempts[&op.id];
        ensure!(
            attempts.len() == op.attempts as usize,
            "invariant 2: operation {} counts {} attempts but lists {}",
            op.id,
            op.attempts,
            attempts.len()
        );
        for a in attempts {
            let entry = after.entry(&op.machine, a.revision.0);
            ensure!(
                entry
                    .is_some_and(|e| e.kind == "attempt" && e.operation.as_deref() == Some(&op.id)),
                "invariant 2: attempt {} of {} has no attempt entry at revision {}",
                a.number,
                op.id,
                a.revision.0
            );
            ensure!(
                a.revision.0 > commitment,
                "invariant 2: attempt {} of {} (revision {}) precedes its commitment ({commitment})",
                a.number,
                op.id,
                a.revision.0
            );
        }
        let proofs: &[ProofSeen] = model
            .ops
            .iter()
            .find(|m| m.id == op.id)
            .map_or(&[], |m| &m.proofs);
        ensure!(
            proofs.len() == attempts.len(),
            "invariant 2: operation {} records {} attempts, the driver holds {} proofs",
            op.id,
            attempts.len(),
            proofs.len()
        );
        let digest = after.plans.get(&op.plan).map(|p| p.artifact_digest);
        for p in proofs {
            ensure!(
                p.operation == op.id
                    && p.machine == op.machine
                    && Some(p.digest) == digest
                    && attempts.iter().any(|a| a.number == p.attempt),
                "invariant 2: proof {p:?} matches no recorded attempt of {}",
                op.id
            );
        }
    }

    // 3: Applied moves only when an operation enters completed, to its plan's release
    // and digest, backed by a completion observation after every attempt was
    // accounted for; and every entry into completed moves it.
    for m in MACHINES {
        let (was, is) = (&before.machines[m], &after.machines[m]);
        let entered: Vec<&OperationView> = after
            .ops_of(m)
            .filter(|o| {
                o.state == OperationState::Completed
                    && before
                        .ops
                        .get(&o.id)
                        .is_some_and(|b| b.state != OperationState::Completed)
            })
            .collect();
        let moved = (
            &was.applied_release,
            was.applied_digest,
            was.baseline_revision,
        ) != (&is.applied_release, is.applied_digest, is.baseline_revision);
        ensure!(
            moved != entered.is_empty() && entered.len() <= 1,
            "invariant 3: Applied of {m} moved={moved} while {} operations entered completed \
             ({:?} -> {:?})",
            entered.len(),
            (&was.applied_release, was.applied_digest),
            (&is.applied_release, is.applied_digest)
        );
        if let Some(op) = entered.first() {
            let plan = model.plan(&op.plan);
            let view = &after.plans[&op.plan];
            ensure!(
                is.applied_release.as_deref() == Some(plan.release.as_str())
                    && is.applied_digest == Some(view.artifact_digest),
                "invariant 3: {} completed but Applied of {m} is {:?}/{:?}, not {}/{}",
                op.id,
                is.applied_release,
                is.applied_digest,
                plan.release,
                view.artifact_digest
            );
            let attempts = &after.attempts[&op.id];
            ensure!(
                !attempts.is_empty() && attempts.iter().all(AttemptView::accounted),
                "invariant 3: {} completed with attempts {attempts:?}",
                op.id
            );
            ensure!(
                settled_observation(
                    &after.observations[m],
                    last_accounting(attempts),
                    view.artifact_digest
                ),
                "invariant 3: {} completed without a completion observation after its \
                 attempts were accounted for",
                op.id
            );
        }
    }

    // 4: what a plan binds never changes.
    for p in &model.plans {
        let (c, now) = (&p.created, &after.plans[&p.id]);
        ensure!(
            (
                &c.id,
                &c.machine,
                c.artifact_digest,
                c.baseline_revision,
                c.transport_deadline,
                c.verification_deadline
            ) == (
                &now.id,
                &now.machine,
                now.artifact_digest,
                now.baseline_revision,
                now.transport_deadline,
                now.verification_deadline
            ),
            "invariant 4: plan {} changed its bindings: {c:?} -> {now:?}",
            p.id
        );
    }

    // 5: scope and slot are given back only on entering a final state, never with an
    // attempt unaccounted; final states stay final.
    for op in after.ops.values() {
        if let Some(b) = before.ops.get(&op.id)
            && b.state.is_terminal()
        {
            ensure!(
                op.state == b.state,
                "invariant 5: final operation {} moved {} -> {}",
                op.id,
                b.state,
                op.state
            );
        }
        if op.state.is_terminal() {
            let unaccounted: Vec<u32> = after.attempts[&op.id]
                .iter()
                .filter(|a| !a.accounted())
                .map(|a| a.number)
                .collect();
            ensure!(
                unaccounted.is_empty(),
                "invariant 5: {} is {} with unaccounted attempts {unaccounted:?}",
                op.id,
                op.state
            );
        }
    }
    let slot: usize = SHARED_SLOT.iter().map(|m| after.holding(m)).sum();
    ensure!(
        slot <= 1,
        "invariant 5: {slot} operations hold rollout slot r1"
    );

    // 6: a transport outcome accounts for nothing; no final state and no
    // safe-to-retry without the evidence for it.
    for op in after.ops.values() {
        let attempts = &after.attempts[&op.id];
        for a in attempts {
            ensure!(
                !matches!(a.accounting, AttemptAccounting::Response(_)) || a.response.from_target(),
                "invariant 6: attempt {} of {} accounted by response {:?}",
                a.number,
                op.id,
                a.response
            );
        }
        let entered = before.ops.get(&op.id).is_none_or(|b| b.state != op.state);
        if !entered {
            continue;
        }
        let all_accounted = !attempts.is_empty() && attempts.iter().all(AttemptView::accounted);
        match op.state {
            OperationState::Completed | OperationState::Failed => ensure!(
                all_accounted,
                "invariant 6: {} entered {} with attempts {attempts:?}",
                op.id,
                op.state
            ),
            OperationState::Rejected => ensure!(
                !attempts.is_empty()
                    && attempts
                        .iter()
                        .all(|a| a.response == ResponseClass::ValidationRejection),
                "invariant 6: {} rejected with attempts {attempts:?}",
                op.id
            ),
            OperationState::Cancelled => ensure!(
                attempts.is_empty(),
                "invariant 6: {} cancelled with attempts {attempts:?}",
                op.id
            ),
            _ => {}
        }
    }
    if let Done::Classified {
        op,
        classification: Classification::SafeToRetry,
    } = done
    {
        let attempts = &after.attempts[op];
        ensure!(
            attempts.iter().all(AttemptView::accounted),
            "invariant 6: {op} classified safe to retry with attempts {attempts:?}"
        );
    }
    if let Done::Responded {
        op,
        attempt,
        class: ResponseClass::Transport(t),
    } = done
    {
        let find = |s: &Snapshot| {
            s.attempts
                .get(op)
                .and_then(|v| v.iter().find(|a| a.number == *attempt))
                .map(|a| a.accounting)
        };
        ensure!(
            find(before) == find(after),
            "invariant 6: transport outcome {t:?} changed the accounting of attempt {attempt} \
             of {op}: {:?} -> {:?}",
            find(before),
            find(after)
        );
        for o in after.ops.values() {
            let was = before.ops.get(&o.id).map(|b| b.state);
            ensure!(
                !o.state.is_terminal() || was == Some(o.state),
                "invariant 6: transport outcome {t:?} moved {} to {}",
                o.id,
                o.state
            );
        }
    }

    // 8 and 10 (with comparison 1 and the §3.4 fence): a commitment or attempt that
    // succeeded did so on a present-epoch approval and token, with the gate open.
    match done {
        Done::Committed { plan, owner } => {
            let machine = &model.plan(plan).machine;
            if let Err(why) = model.approval_stands(plan, before.epoch) {
                return Err(format!(
                    "invariant 8: commitment of {plan} succeeded although {why}"
                ));
            }
            if let Err(why) = model.gate(before, machine) {
                return Err(format!(
                    "invariant 10: commitment of {plan} succeeded although {why}"
                ));
            }
            ensure!(
                owner.epoch == before.epoch && owner.generation == 1,
                "invariant 8: commitment of {plan} issued token {owner:?} in epoch {:?}",
                before.epoch
            );
        }
        Done::Attempted { op, token } => {
            let o = &before.ops[op];
            ensure!(
                token.epoch == before.epoch,
                "invariant 8: attempt on {op} succeeded with a token from epoch {:?}, \
                 present {:?}",
                token.epoch,
                before.epoch
            );
            ensure!(
                *token == o.owner,
                "invariant 8: attempt on {op} succeeded with token {token:?}; the owner is {:?}",
                o.owner
            );
            if let Err(why) = model.approval_stands(&o.plan, before.epoch) {
                return Err(format!(
                    "invariant 8: attempt on {op} succeeded although {why}"
                ));
            }
            if let Err(why) = model.gate(before, &o.machine) {
                return Err(format!(
                    "invariant 10: attempt on {op} succeeded although {why}"
                ));
            }
        }
        _ => {}
    }

    // 9: the assignment stays put while the scope is held.
    for m in MACHINES {
        if before.holding(m) > 0 {
            let (was, is) = (
                before.machines[m].assignment_revision,
                after.machines[m].assignment_revision,
            );
            ensure!(
                was == is,
                "invariant 9: assignment of held {m} moved {was} -> {is}"
            );
        }
    }

    // 11: accounting decisions are recovery-admin's.
    if matches!(done, Done::DecisionByNonAdmin) {
        return Err("invariant 11: an approver's accounting decision was recorded".into());
    }
    for (m, timeline) in &after.timelines {
        for e in timeline.iter().filter(|e| e.kind == "accounting") {
            ensure!(
                e.actor_role == "recovery-admin" && e.actor == "root",
                "invariant 11: accounting entry on {m} by {} as {}",
                e.actor,
                e.actor_role
            );
        }
    }
    for op in after.ops.values() {
        for a in &after.attempts[&op.id] {
            if let AttemptAccounting::Decision(r) = a.accounting {
                ensure!(
                    after
                        .entry(&op.machine, r.0)
                        .is_some_and(|e| e.kind == "accounting" && e.actor_role == "recovery-admin"),
                    "invariant 11: attempt {} of {} accounted by revision {} which is no \
                     recovery-admin decision",
                    a.number,
                    op.id,
                    r.0
                );
            }
        }
    }
    // (§2) approving needs the approver role.
    if let Done::ApprovedWithoutRole(who) = done {
        return Err(format!("§2: {who} approved without the approver role"));
    }
    // (Reading 13) an approval under a blanket needs one granted in the present
    // epoch by an identity still standing, and the approvals' gate.
    if let Done::ApprovedUnderBlanket { plan, blanket } = done {
        let machine = &model.plan(plan).machine;
        match blanket {
            None => return Err(format!("reading 13: {plan} approved under no blanket")),
            Some((_, e)) if *e != before.epoch => {
                return Err(format!(
                    "reading 13: {plan} approved under a blanket from epoch {e:?}"
                ));
            }
            Some((who, _)) if model.revoked.contains(who) => {
                return Err(format!(
                    "reading 13: {plan} approved under the blanket of revoked {who}"
                ));
            }
            Some(_) => {}
        }
        ensure!(
            !model.recovery || model.released.contains(machine),
            "reading 13: {plan} approved under a blanket for unreleased {machine} in recovery mode"
        );
    }

    // 12: one plan, one operation; none before commitment.
    for o in &model.ops {
        ensure!(
            after
                .ops
                .get(&o.id)
                .is_some_and(|v| v.plan == o.plan && v.machine == o.machine),
            "invariant 12: operation {} committed for plan {} on {} is not recorded so",
            o.id,
            o.plan,
            o.machine
        );
    }
    for p in &model.plans {
        let view = &after.plans[&p.id];
        let ops: Vec<&OperationView> = after.ops.values().filter(|o| o.plan == p.id).collect();
        ensure!(
            ops.len() <= 1,
            "invariant 12: plan {} has {} operations",
            p.id,
            ops.len()
        );
        ensure!(
            view.operation.as_deref() == ops.first().map(|o| o.id.as_str()),
            "invariant 12: plan {} names operation {:?}, the store holds {:?}",
            p.id,
            view.operation,
            ops.first().map(|o| &o.id)
        );
        ensure!(
            p.committed != ops.is_empty(),
            "invariant 12: plan {} committed={} with {} operations",
            p.id,
            p.committed,
            ops.len()
        );
        ensure!(
            (view.state == PlanState::Committed) != ops.is_empty(),
            "invariant 12: plan {} is {} with {} operations",
            p.id,
            view.state,
            ops.len()
        );
    }

    check_scopes(before, after, done)
}

/// The latest entry of one of `kinds` on `machine`'s timeline in `snap`, below
/// revision `below`.
fn latest_of<'a>(
    snap: &'a Snapshot,
    machine: &str,
    kinds: &[&str],
    below: u64,
) -> Option<&'a TimelineEntry> {
    snap.timelines[machine]
        .iter()
        .rev()
        .filter(|e| e.revision.0 < below)
        .find(|e| kinds.contains(&e.kind.as_str()))
}

/// Whether `machine`'s latest release in `snap` follows its latest recovery-mode
/// entry and names the present epoch: released in the current epoch (§7.3 step 7).
fn released_in_present_epoch(snap: &Snapshot, machine: &str) -> Result<(), String> {
    let released = latest_of(snap, machine, &["scope_released"], u64::MAX);
    let entered = latest_of(snap, machine, &["recovery_entry"], u64::MAX);
    match (released, entered) {
        (Some(r), Some(e)) if r.revision > e.revision => {
            let epoch = snap.epoch.to_string();
            ensure!(
                r.detail.contains(&epoch),
                "its release at r{} ({}) does not name the present epoch {epoch}",
                r.revision.0,
                r.detail
            );
            Ok(())
        }
        (r, e) => Err(format!(
            "its latest release {:?} does not follow its latest recovery-mode entry {:?}",
            r.map(|r| r.revision.0),
            e.map(|e| e.revision.0)
        )),
    }
}

/// Invariant 13 (§7.4, §7.5) on what the store holds: the scope states before and
/// after the act, and the entries the act appended.
fn check_scopes(before: &Snapshot, after: &Snapshot, done: &Done) -> Result<(), String> {
    // Recovery mode is installation-wide: every scope is normal, or none is; entry
    // sends every scope to pre-restore unaccounted.
    let normal = MACHINES
        .iter()
        .filter(|m| after.machines[**m].scope == ScopeState::Normal)
        .count();
    ensure!(
        normal == 0 || normal == MACHINES.len(),
        "invariant 13: {normal} of {} scopes are normal: {:?}",
        MACHINES.len(),
        MACHINES
            .iter()
            .map(|m| after.machines[*m].scope)
            .collect::<Vec<_>>()
    );
    if matches!(done, Done::EnteredRecovery) {
        for m in MACHINES {
            ensure!(
                after.machines[m].scope == ScopeState::PreRestoreUnaccounted,
                "invariant 13: after recovery-mode entry {m} is {}",
                after.machines[m].scope
            );
        }
    }
    for m in MACHINES {
        let was = before.machines[m].scope;
        let is = after.machines[m].scope;
        let appended = after.timelines[m]
            .iter()
            .filter(|e| e.revision > before.machines[m].revision);
        for e in appended {
            match e.kind.as_str() {
                // Nothing able to send succeeds on a scope without a present-epoch
                // release.
                "commitment" | "attempt" | "adoption" => match was {
                    ScopeState::Normal => {}
                    ScopeState::Released => {
                        if let Err(why) = released_in_present_epoch(before, m) {
                            return Err(format!(
                                "invariant 13: {} on released {m} at r{}, but {why}",
                                e.kind, e.revision.0
                            ));
                        }
                    }
                    _ => {
                        return Err(format!(
                            "invariant 13: {} on {m} at r{} while its scope is {was}",
                            e.kind, e.revision.0
                        ));
                    }
                },
                // Nothing able to approve succeeds on a pre-restore unaccounted scope.
                "plan_created" | "approval" | "unfrozen" => ensure!(
                    was != ScopeState::PreRestoreUnaccounted,
                    "invariant 13: {} on {m} at r{} while its scope is pre-restore unaccounted",
                    e.kind,
                    e.revision.0
                ),
                // Only a ready scope is released: the last scope decision before the
                // release marked it ready, and Desired has not moved since.
                "scope_released" => {
                    let decided = after.timelines[m].iter().rev().find(|d| {
                        d.revision < e.revision
                            && (matches!(
                                d.kind.as_str(),
                                "recovery_entry" | "scope_marked" | "scope_released"
                            ) || (d.kind == "accounting" && d.operation.is_none()))
                    });
                    let Some(mark) = decided.filter(|d| {
                        d.kind == "scope_marked" && d.detail.starts_with("marked ready ")
                    }) else {
                        return Err(format!(
                            "invariant 13: {m} released at r{} after {:?}, not after a mark \
                             that found it ready",
                            e.revision.0,
                            decided.map(|d| (&d.kind, &d.detail))
                        ));
                    };
                    let moved = after.timelines[m].iter().find(|d| {
                        d.kind == "desired_changed"
                            && d.revision > mark.revision
                            && d.revision < e.revision
                    });
                    ensure!(
                        moved.is_none(),
                        "invariant 13: {m} released at r{} though Desired moved at r{:?} \
                         after its mark at r{}",
                        e.revision.0,
                        moved.map(|d| d.revision.0),
                        mark.revision.0
                    );
                }
                _ => {}
            }
        }
        if is == ScopeState::Released
            && let Err(why) = released_in_present_epoch(after, m)
        {
            return Err(format!("invariant 13: {m} is released, but {why}"));
        }
    }
    if let Done::Released { machine } = done {
        let was = before.machines[machine].scope;
        ensure!(
            was == ScopeState::Ready,
            "invariant 13: {machine} was released from {was}, not from ready"
        );
        ensure!(
            after.machines[machine].scope == ScopeState::Released,
            "invariant 13: {machine} is {} after its release",
            after.machines[machine].scope
        );
    }
    Ok(())
}

/// Invariant 7: no plaintext marker in any stored row.
async fn check_no_plaintext<S: Store>(s: &S) -> Result<(), String> {
    let dump = s.dump_all_rows().await.unwrap();
    ensure!(
        !dump.contains(MARKER) && !dump.contains(DRIVER_MARKER),
        "invariant 7: artifact plaintext reached a table"
    );
    // The dump is the real thing: it holds the releases the driver published.
    ensure!(
        dump.contains("rel-1"),
        "the row dump holds no release: {}",
        dump.len()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------
// The driver.

fn plaintext(machine: &str, release: &str) -> Vec<u8> {
    format!("machine: {machine}\nrelease: {release}\ntoken: {DRIVER_MARKER}\n").into_bytes()
}

fn sealed(machine: &str, release: &str) -> SealedArtifact {
    let plain = plaintext(machine, release);
    SealedArtifact {
        key_provider: "transit".into(),
        key_id: format!("k-{machine}"),
        key_version: 1,
        ciphertext: seal(&plain),
        digest: config_digest(&plain),
    }
}

fn other_digest() -> Digest {
    config_digest(b"machine: elsewhere\n")
}

fn controller(by_b: bool) -> ControllerId {
    if by_b { B } else { A }
}

fn other(c: ControllerId) -> ControllerId {
    if c == A { B } else { A }
}

/// What a node reports: the recorded identity (or another one), this digest and the
/// rest of a healthy read.
fn read(machine: &MachineView, digest: Digest, identity_ok: bool) -> ObservedFacts {
    let mut f = facts(&machine.id, digest);
    if !identity_ok {
        f.smbios_uuid = Some("uuid-elsewhere".into());
        f.node_id = Some("node-elsewhere".into());
    }
    f
}

async fn observe<S: Store>(
    s: &S,
    machine: &str,
    purpose: ObservationPurpose,
    plan: Option<&str>,
    controller: ControllerId,
    facts: ObservedFacts,
) {
    if let Ok(ticket) = s
        .begin_observation(ObservationRequest {
            machine: machine.into(),
            purpose,
            plan: plan.map(str::to_owned),
            controller,
        })
        .await
    {
        let _ = s.record_observation(&ticket, facts).await;
    }
}

struct Driver<'a, S> {
    env: &'a Env<S>,
    model: Model,
}

impl<S: Store> Driver<'_, S> {
    /// The plan `k` names: counting back from the most recent among those in one of
    /// the `wanted` states (for 0 and 1), or among all plans (for larger `k`, or when
    /// none is in a wanted state), so most acts reach a plan they can move and some
    /// try one they cannot.
    fn plan_at(
        &self,
        k: usize,
        wanted: &[PlanState],
        before: &Snapshot,
    ) -> Option<(String, String)> {
        let fitting: Vec<&PlanModel> = self
            .model
            .plans
            .iter()
            .filter(|p| wanted.contains(&before.plans[&p.id].state))
            .collect();
        let pool: Vec<&PlanModel> = if k < 2 && !fitting.is_empty() {
            fitting
        } else {
            self.model.plans.iter().collect()
        };
        let len = pool.len();
        (len > 0).then(|| {
            let p = pool[len - 1 - k % len];
            (p.id.clone(), p.machine.clone())
        })
    }

    /// The operation `k` names, chosen as [`Driver::plan_at`] chooses plans.
    fn op_at(&self, k: usize, wanted: &[OperationState], before: &Snapshot) -> Option<usize> {
        let all: Vec<usize> = (0..self.model.ops.len()).collect();
        let fitting: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&i| wanted.contains(&before.ops[&self.model.ops[i].id].state))
            .collect();
        let pool = if k < 2 && !fitting.is_empty() {
            fitting
        } else {
            all
        };
        let len = pool.len();
        (len > 0).then(|| pool[len - 1 - k % len])
    }

    /// The §7.3 step 1 decision over `machine`'s scope alone, after the recovery reads
    /// it needs. True when it was recorded.
    async fn account_scope(&self, machine: &str, read: &ObservedFacts) -> bool {
        let s = &self.env.store;
        let clock = &self.env.clock;
        clock.advance(SpanMs(DEFAULT_MAX_TRANSPORT_DEADLINE.0 + 1_000));
        observe(
            s,
            machine,
            ObservationPurpose::Recovery,
            None,
            B,
            read.clone(),
        )
        .await;
        clock.advance(SETTLE_FLOOR);
        observe(
            s,
            machine,
            ObservationPurpose::Recovery,
            None,
            B,
            read.clone(),
        )
        .await;
        let decision = ScopeAccounting {
            machines: vec![machine.to_owned()],
            settle_floor: SETTLE_FLOOR,
            explanation: None,
        };
        s.account_scopes(&root(), decision).await.is_ok()
    }

    /// The §7.3 steps a release needs, as the driver tries them: the step 1 decision
    /// while the scope still awaits one (its recovery reads first), a restoration
    /// observation, the mark and the release. True when the scope was released.
    async fn release(&mut self, machine: &str) -> bool {
        let s = &self.env.store;
        let Ok(view) = s.machine(machine).await else {
            return false;
        };
        let read = || {
            facts(
                machine,
                view.applied_digest.unwrap_or_else(|| base_digest(machine)),
            )
        };
        if view.scope == ScopeState::PreRestoreUnaccounted
            && !self.account_scope(machine, &read()).await
        {
            return false;
        }
        observe(s, machine, ObservationPurpose::Restoration, None, B, read()).await;
        if s.mark_scope(&root(), machine, None).await.is_err() {
            return false;
        }
        s.release_scope(&root(), machine).await.is_ok()
    }

    /// Learn owner tokens the store handed out without telling the driver (a
    /// recovery-mode entry takes every open operation over).
    async fn learn_owners(&mut self) {
        for o in &mut self.model.ops {
            let owner = self.env.store.operation(&o.id).await.unwrap().owner;
            if o.tokens.last() != Some(&owner) {
                o.tokens.push(owner);
            }
        }
    }

    #[allow(clippy::too_many_lines, reason = "one arm per act")]
    async fn play(&mut self, n: usize, act: &Act, before: &Snapshot) -> Done {
        let s = &self.env.store;
        let clock = &self.env.clock;
        match *act {
            Act::Publish => {
                self.model.releases += 1;
                let id = format!("rel-{}", self.model.releases + 1);
                s.publish_release(
                    &alice(),
                    ReleaseSpec {
                        id: id.clone(),
                        artifacts: MACHINES
                            .iter()
                            .map(|m| ((*m).to_owned(), sealed(m, &id)))
                            .collect(),
                        contributions: vec![("ann".into(), ContributionKind::Authored)],
                    },
                )
                .await
                .unwrap();
            }
            Act::CreatePlan { machine } => {
                let machine = MACHINES[machine];
                let release = before.machines[machine]
                    .desired_release
                    .clone()
                    .expect("a published release");
                let id = format!("p{n}");
                if let Ok(view) = s
                    .create_plan(&alice(), spec(&id, machine, &release, clock.now()))
                    .await
                {
                    self.model.plans.push(PlanModel {
                        id,
                        machine: machine.to_owned(),
                        release,
                        created: view,
                        approval: None,
                        under_blanket: false,
                        cancelled: false,
                        evidence_by: None,
                        committed: false,
                    });
                }
            }
            Act::Ready { machine, by_b } => {
                let before_plans = self.model.plans.len();
                Box::pin(self.play(n, &Act::CreatePlan { machine }, before)).await;
                if self.model.plans.len() == before_plans {
                    return Done::Nothing;
                }
                for approver in 0..3 {
                    let now = snapshot(&self.env.store, &self.model).await;
                    Box::pin(self.play(n, &Act::Approve { plan: 0, approver }, &now)).await;
                    if self
                        .model
                        .plans
                        .last()
                        .is_some_and(|p| p.approval.is_some())
                    {
                        break;
                    }
                }
                let now = snapshot(&self.env.store, &self.model).await;
                let evidence = Act::Evidence {
                    plan: 0,
                    by_b,
                    seen: Seen::PreDispatch,
                    identity_ok: true,
                };
                Box::pin(self.play(n, &evidence, &now)).await;
            }
            Act::Approve { plan, approver } => {
                let Some((plan, _)) = self.plan_at(plan, &[PlanState::Proposed], before) else {
                    return Done::Nothing;
                };
                let who = ["bob", "carol", "dave"][approver];
                let r = s.approve(&Actor::new(who, Role::Approver), &plan).await;
                if r.is_ok() {
                    let p = self.model.plans.iter_mut().find(|p| p.id == plan).unwrap();
                    p.approval = Some((who.to_owned(), before.epoch));
                }
            }
            Act::ApproveWithoutRole { plan, admin } => {
                let Some((plan, _)) = self.plan_at(plan, &[], before) else {
                    return Done::Nothing;
                };
                let actors = if admin {
                    [root(), Actor::new("root", Role::Approver)]
                } else {
                    [
                        Actor::new("bot", Role::Automation),
                        Actor::new("bot", Role::Approver),
                    ]
                };
                for actor in actors {
                    if s.approve(&actor, &plan).await.is_ok() {
                        return Done::ApprovedWithoutRole(actor.id);
                    }
                }
            }
            Act::RevokeApproval { plan } => {
                let Some((plan, _)) =
                    self.plan_at(plan, &[PlanState::Approved, PlanState::Committed], before)
                else {
                    return Done::Nothing;
                };
                if s.revoke_approval(&carol(), &plan).await.is_ok() {
                    let p = self.model.plans.iter_mut().find(|p| p.id == plan).unwrap();
                    p.approval = None;
                }
            }
            Act::RevokeIdentity { carol } => {
                let who = if carol { "carol" } else { "bob" };
                if s.revoke_identity(&root(), who).await.is_ok() {
                    self.model.revoked.insert(who.to_owned());
                    if self.model.blanket.as_ref().is_some_and(|(b, _)| b == who) {
                        self.model.blanket = None;
                    }
                }
            }
            Act::Cancel { plan, by } => {
                let Some((plan, _)) =
                    self.plan_at(plan, &[PlanState::Proposed, PlanState::Approved], before)
                else {
                    return Done::Nothing;
                };
                let actor = match by {
                    0 => alice(),
                    1 => Actor::new("dave", Role::Approver),
                    _ => root(),
                };
                if s.cancel_plan(&actor, &plan).await.is_ok() {
                    let p = self.model.plans.iter_mut().find(|p| p.id == plan).unwrap();
                    p.cancelled = true;
                }
            }
            Act::Evidence {
                plan,
                by_b,
                seen,
                identity_ok,
            } => {
                let Some((plan, machine)) = self.plan_at(plan, &[PlanState::Approved], before)
                else {
                    return Done::Nothing;
                };
                let m = &before.machines[&machine];
                let digest = match seen {
                    Seen::PreDispatch => m.applied_digest.unwrap_or_else(other_digest),
                    Seen::Artifact => self.model.plan(&plan).created.artifact_digest,
                    Seen::Other => other_digest(),
                };
                let c = controller(by_b);
                if let Some(p) = self.model.plans.iter_mut().find(|p| p.id == plan) {
                    p.evidence_by = Some(c);
                }
                observe(
                    s,
                    &machine,
                    ObservationPurpose::Evidence,
                    Some(&plan),
                    c,
                    read(m, digest, identity_ok),
                )
                .await;
                let _ = s
                    .record_dependency_check(DependencyCheck {
                        plan: plan.clone(),
                        controller: c,
                        access_path: "talos/cluster-1/access".into(),
                        access_version: "access-v3".into(),
                        artifact_decrypts: true,
                    })
                    .await;
            }
            Act::Commit { plan, other } => {
                let Some((plan, machine)) = self.plan_at(plan, &[PlanState::Approved], before)
                else {
                    return Done::Nothing;
                };
                let mut by = self.model.plan(&plan).evidence_by.unwrap_or(A);
                if other {
                    by = self::other(by);
                }
                let r = s.commit(&plan, by).await;
                if let Ok(c) = r {
                    self.model
                        .plans
                        .iter_mut()
                        .find(|p| p.id == plan)
                        .unwrap()
                        .committed = true;
                    self.model.ops.push(OpModel {
                        id: c.operation,
                        plan: plan.clone(),
                        machine,
                        tokens: vec![c.owner],
                        proofs: Vec::new(),
                    });
                    return Done::Committed {
                        plan,
                        owner: c.owner,
                    };
                }
            }
            Act::Attempt { op, stale } => {
                let Some(k) = self.op_at(
                    op,
                    &[OperationState::Committed, OperationState::Unresolved],
                    before,
                ) else {
                    return Done::Nothing;
                };
                let o = &self.model.ops[k];
                let token = match stale {
                    None => *o.tokens.last().unwrap(),
                    Some(j) => o.tokens[usize::from(j) % o.tokens.len()],
                };
                let id = o.id.clone();
                if let Ok(proof) = s.attempt(&id, token).await {
                    self.model.ops[k].proofs.push(ProofSeen::of(&proof));
                    return Done::Attempted { op: id, token };
                }
            }
            Act::Respond { op, reply } => {
                let Some(k) = self.op_at(
                    op,
                    &[OperationState::Sending, OperationState::Unresolved],
                    before,
                ) else {
                    return Done::Nothing;
                };
                let id = self.model.ops[k].id.clone();
                let attempt = before.ops[&id].attempts.max(1);
                let class = reply.class();
                // The answer is recorded under the token its attempt was made with.
                let Some(token) = before
                    .attempts
                    .get(&id)
                    .and_then(|a| a.iter().find(|a| a.number == attempt))
                    .map(|a| a.owner)
                else {
                    return Done::Nothing;
                };
                if s.record_response(&id, attempt, token, class).await.is_ok() {
                    return Done::Responded {
                        op: id,
                        attempt,
                        class,
                    };
                }
            }
            Act::Takeover { op } => {
                let Some(k) = self.op_at(
                    op,
                    &[
                        OperationState::Committed,
                        OperationState::Sending,
                        OperationState::Verifying,
                        OperationState::Unresolved,
                    ],
                    before,
                ) else {
                    return Done::Nothing;
                };
                let id = self.model.ops[k].id.clone();
                let owner = before.ops[&id].owner;
                if let Ok(t) = s
                    .takeover(&id, owner.generation, other(owner.controller))
                    .await
                {
                    self.model.ops[k].tokens.push(t);
                }
            }
            Act::Decide {
                op,
                conditions,
                admin,
            } => {
                let Some(k) = self.op_at(op, &[OperationState::Unresolved], before) else {
                    return Done::Nothing;
                };
                let id = self.model.ops[k].id.clone();
                let view = &before.ops[&id];
                let attempt = view.attempts.max(1);
                if conditions {
                    // 1: the executor that made the attempt was taken over.
                    let mut owner = view.owner;
                    if before.attempts[&id]
                        .last()
                        .is_some_and(|a| a.owner.generation == owner.generation)
                        && let Ok(t) = s
                            .takeover(&id, owner.generation, other(owner.controller))
                            .await
                    {
                        self.model.ops[k].tokens.push(t);
                        owner = t;
                    }
                    // 2 and 3: a read after the transport deadline, the settle floor
                    // passed, and a recovery observation after it.
                    let machine = &before.machines[&view.machine];
                    let digest = machine.applied_digest.unwrap_or_else(other_digest);
                    clock.advance(SpanMs::from_secs(6));
                    observe(
                        s,
                        &view.machine,
                        ObservationPurpose::Recovery,
                        None,
                        owner.controller,
                        read(machine, digest, true),
                    )
                    .await;
                    clock.advance(SpanMs(SETTLE_FLOOR.0 + 1_000));
                    observe(
                        s,
                        &view.machine,
                        ObservationPurpose::Recovery,
                        None,
                        owner.controller,
                        read(machine, digest, true),
                    )
                    .await;
                }
                let actor = if admin { root() } else { bob() };
                let decided = s
                    .record_accounting_decision(
                        &actor,
                        AccountingRequest {
                            operation: id,
                            attempt,
                            settle_floor: SETTLE_FLOOR,
                            explanation: None,
                        },
                    )
                    .await;
                if decided.is_ok() && !admin {
                    return Done::DecisionByNonAdmin;
                }
            }
            Act::Complete {
                op,
                seen,
                identity_ok,
            } => {
                let Some(k) = self.op_at(
                    op,
                    &[
                        OperationState::Committed,
                        OperationState::Verifying,
                        OperationState::Unresolved,
                    ],
                    before,
                ) else {
                    return Done::Nothing;
                };
                let id = self.model.ops[k].id.clone();
                let view = &before.ops[&id];
                let machine = &before.machines[&view.machine];
                let digest = match seen {
                    Seen::PreDispatch => machine.applied_digest.unwrap_or_else(other_digest),
                    Seen::Artifact => before.plans[&view.plan].artifact_digest,
                    Seen::Other => other_digest(),
                };
                clock.advance(SpanMs(500));
                observe(
                    s,
                    &view.machine,
                    ObservationPurpose::Completion,
                    None,
                    view.owner.controller,
                    read(machine, digest, identity_ok),
                )
                .await;
                if let Ok(classification) = s.classify(&id, view.owner).await {
                    return Done::Classified {
                        op: id,
                        classification,
                    };
                }
            }
            Act::ChangeAssignment { machine } => {
                let _ = s.change_assignment(&ann(), MACHINES[machine]).await;
            }
            Act::Freeze { machine } => {
                let _ = s.freeze(&ann(), MACHINES[machine], "window").await;
            }
            Act::Unfreeze { machine } => {
                let _ = s.unfreeze(&bob(), MACHINES[machine], "done").await;
            }
            Act::EnterRecovery { by_b } => {
                if s.enter_recovery(&root(), entry_now(s, controller(by_b)).await)
                    .await
                    .is_ok()
                {
                    self.model.recovery = true;
                    self.model.released.clear();
                    self.learn_owners().await;
                    return Done::EnteredRecovery;
                }
            }
            Act::ReleaseScope { machine } => {
                if self.release(MACHINES[machine]).await {
                    self.model.released.insert(MACHINES[machine].to_owned());
                }
            }
            Act::AccountScope { machine } => {
                let m = MACHINES[machine];
                let view = &before.machines[m];
                let digest = view.applied_digest.unwrap_or_else(|| base_digest(m));
                self.account_scope(m, &read(view, digest, true)).await;
            }
            Act::Restoration {
                machine,
                identity_ok,
            } => {
                let m = MACHINES[machine];
                let view = &before.machines[m];
                let digest = view.applied_digest.unwrap_or_else(|| base_digest(m));
                let facts = read(view, digest, identity_ok);
                observe(s, m, ObservationPurpose::Restoration, None, B, facts).await;
            }
            Act::MarkScope { machine, missing } => {
                let missing = missing.then_some(Dependency::KeyVersion);
                let _ = s.mark_scope(&root(), MACHINES[machine], missing).await;
            }
            Act::Release { machine } => {
                let m = MACHINES[machine];
                if s.release_scope(&root(), m).await.is_ok() {
                    self.model.released.insert(m.to_owned());
                    return Done::Released {
                        machine: m.to_owned(),
                    };
                }
            }
            Act::LeaveRecovery => {
                if s.leave_recovery(&root()).await.is_ok() {
                    self.model.recovery = false;
                    self.model.released.clear();
                }
            }
            Act::GrantBlanket { carol: by_carol } => {
                let who = if by_carol { carol() } else { bob() };
                if s.grant_blanket_approval(&who, "cluster-1", "direct mode", store_suite::WEEK)
                    .await
                    .is_ok()
                {
                    self.model.blanket = Some((who.id, before.epoch));
                }
            }
            Act::ApproveUnderBlanket { plan } => {
                let Some((plan, _)) = self.plan_at(plan, &[PlanState::Proposed], before) else {
                    return Done::Nothing;
                };
                let bot = Actor::new("bot", Role::Automation);
                if s.approve_under_blanket(&bot, &plan).await.is_ok() {
                    let blanket = self.model.blanket.clone();
                    let p = self.model.plans.iter_mut().find(|p| p.id == plan).unwrap();
                    p.approval = blanket.as_ref().map(|(who, _)| (who.clone(), before.epoch));
                    p.under_blanket = true;
                    return Done::ApprovedUnderBlanket { plan, blanket };
                }
            }
            Act::RevokeBlanket => {
                let live = s
                    .blanket_approvals()
                    .await
                    .expect("blanket approvals")
                    .into_iter()
                    .find(|b| b.revoked.is_none());
                if let Some(live) = live
                    && s.revoke_blanket_approval(&carol(), &live.id).await.is_ok()
                {
                    self.model.blanket = None;
                    for p in &mut self.model.plans {
                        if p.under_blanket {
                            p.approval = None;
                        }
                    }
                }
            }
            Act::Wait { secs } => clock.advance(SpanMs::from_secs(u64::from(secs))),
        }
        Done::Nothing
    }
}

/// What a run reached, for tests that check the driver makes progress.
#[derive(Debug, Default)]
struct Reached {
    commitments: usize,
    attempts: usize,
    /// Approvals made under a blanket approval.
    blanket_approvals: usize,
    /// Scopes released by `release_scope` alone.
    releases: usize,
    finals: BTreeMap<String, usize>,
}

/// Play `acts` on a fresh world in `env`, checking every invariant after each act.
/// `Err` names the act and the invariant broken.
async fn run_acts<S: Store>(env: &Env<S>, acts: &[Act]) -> Result<Reached, String> {
    world(&env.store).await;
    let mut driver = Driver {
        env,
        model: Model::default(),
    };
    let mut before = snapshot(&env.store, &driver.model).await;
    let mut blanket_approvals = 0;
    let mut releases = 0;
    for (n, act) in acts.iter().enumerate() {
        let done = driver.play(n, act, &before).await;
        if matches!(done, Done::ApprovedUnderBlanket { .. }) {
            blanket_approvals += 1;
        }
        if matches!(done, Done::Released { .. }) {
            releases += 1;
        }
        let after = snapshot(&env.store, &driver.model).await;
        check(&driver.model, &before, &after, &done)
            .map_err(|e| format!("after act {n} {act:?}: {e}"))?;
        before = after;
    }
    check_no_plaintext(&env.store).await?;
    let mut reached = Reached {
        commitments: driver.model.ops.len(),
        attempts: driver.model.ops.iter().map(|o| o.proofs.len()).sum(),
        blanket_approvals,
        releases,
        finals: BTreeMap::new(),
    };
    // The world's handovers are adoptions, not the driver's work.
    let driven = |o: &&OperationView| !o.plan.starts_with("handover-");
    for o in before
        .ops
        .values()
        .filter(driven)
        .filter(|o| o.state.is_terminal())
    {
        *reached.finals.entry(o.state.to_string()).or_default() += 1;
    }
    Ok(reached)
}

fn acts_strategy(max: usize) -> impl Strategy<Value = Vec<Act>> {
    prop::collection::vec(act(), 1..max)
}

/// Up to `before` ordinary acts, recovery-mode entry, then up to `during` acts
/// weighted towards the §7.3 steps.
fn recovery_acts_strategy(before: usize, during: usize) -> impl Strategy<Value = Vec<Act>> {
    (
        prop::collection::vec(act(), 0..before),
        any::<bool>(),
        prop::collection::vec(recovery_act(), 1..during),
    )
        .prop_map(|(mut acts, by_b, during)| {
            acts.push(Act::EnterRecovery { by_b });
            acts.extend(during);
            acts
        })
}

/// Play `acts` on a fresh world in `env`, checking every invariant after each act but
/// the last; return what the driver knew, the store read before and after the last
/// act, and what it did, for a test to alter and hand to the checker.
async fn run_to_last<S: Store>(env: &Env<S>, acts: &[Act]) -> (Model, Snapshot, Snapshot, Done) {
    let (last, first) = acts.split_last().expect("at least one act");
    world(&env.store).await;
    let mut driver = Driver {
        env,
        model: Model::default(),
    };
    let mut before = snapshot(&env.store, &driver.model).await;
    for (n, act) in first.iter().enumerate() {
        let done = driver.play(n, act, &before).await;
        let after = snapshot(&env.store, &driver.model).await;
        check(&driver.model, &before, &after, &done)
            .unwrap_or_else(|e| panic!("after act {n} {act:?}: {e}"));
        before = after;
    }
    let done = driver.play(first.len(), last, &before).await;
    let after = snapshot(&env.store, &driver.model).await;
    (driver.model, before, after, done)
}

// ---------------------------------------------------------------------------------
// Runners: the embedded store.

async fn sqlite_env(guards: Guards) -> Env<SqliteStore> {
    let (settings, clock) = settings(guards);
    Env {
        store: SqliteStore::open_for_tests(None, settings).await.unwrap(),
        clock,
        keep: Box::new(()),
    }
}

/// How many cases to run: `PROPTEST_CASES` when set, for longer searches.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), ..ProptestConfig::default() })]

    /// Random interleavings on the embedded store keep invariants 1–13.
    #[test]
    fn sqlite_interleavings_keep_invariants(acts in acts_strategy(64)) {
        let outcome = current_thread().block_on(async {
            let env = sqlite_env(Guards::default()).await;
            run_acts(&env, &acts).await
        });
        if let Err(violation) = outcome {
            return Err(TestCaseError::fail(violation));
        }
    }

    /// Random interleavings that enter recovery mode and then take the §7.3 steps
    /// (step 1 decisions, restoration reads, marks, releases, leaving, new entries)
    /// among the ordinary acts, on the embedded store: invariant 13 holds on the
    /// scope states and entries the store keeps, and 1–12 with it.
    #[test]
    fn sqlite_recovery_interleavings_keep_invariant_13(acts in recovery_acts_strategy(16, 48)) {
        let outcome = current_thread().block_on(async {
            let env = sqlite_env(Guards::default()).await;
            run_acts(&env, &acts).await
        });
        if let Err(violation) = outcome {
            return Err(TestCaseError::fail(violation));
        }
    }
}

/// A fixed way through recovery mode step by step: the scope is refused a release
/// while pre-restore unaccounted, while awaiting its mark, after a foreign identity
/// and a missing dependency blocked it; a commitment on another, unreleased scope is
/// refused; once marked ready the scope is released, and a plan approved anew in the
/// present epoch commits on it.
fn recovery_sequence() -> Vec<Act> {
    let evidence = Act::Evidence {
        plan: 0,
        by_b: false,
        seen: Seen::PreDispatch,
        identity_ok: true,
    };
    let m3 = 2;
    vec![
        Act::Ready {
            machine: 0,
            by_b: false,
        },
        Act::Ready {
            machine: m3,
            by_b: false,
        },
        Act::EnterRecovery { by_b: false },
        Act::Release { machine: m3 },
        Act::AccountScope { machine: m3 },
        Act::Release { machine: m3 },
        Act::MarkScope {
            machine: m3,
            missing: false,
        },
        Act::Restoration {
            machine: m3,
            identity_ok: false,
        },
        Act::MarkScope {
            machine: m3,
            missing: false,
        },
        Act::Release { machine: m3 },
        Act::Restoration {
            machine: m3,
            identity_ok: true,
        },
        Act::MarkScope {
            machine: m3,
            missing: true,
        },
        Act::Release { machine: m3 },
        Act::MarkScope {
            machine: m3,
            missing: false,
        },
        Act::Release { machine: m3 },
        // m1 is unreleased: a renewed approval is refused (pre-restore unaccounted),
        // and so is its commitment.
        Act::Approve {
            plan: 1,
            approver: 1,
        },
        Act::Commit {
            plan: 1,
            other: false,
        },
        // m3 is released: a renewed approval, fresh evidence, a commitment.
        Act::Approve {
            plan: 0,
            approver: 1,
        },
        evidence,
        Act::Commit {
            plan: 0,
            other: false,
        },
    ]
}

/// The recovery sequence releases one scope, once, and commits once, on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_releases_a_scope_step_by_step() {
    let env = sqlite_env(Guards::default()).await;
    let reached = run_acts(&env, &recovery_sequence()).await.unwrap();
    assert_eq!(reached.releases, 1, "{reached:?}");
    assert_eq!(reached.commitments, 1, "{reached:?}");
    let s = &env.store;
    assert_eq!(s.machine("m3").await.unwrap().scope, ScopeState::Released);
    assert_eq!(
        s.machine("m1").await.unwrap().scope,
        ScopeState::PreRestoreUnaccounted
    );
    let held: Vec<String> = s
        .open_operations()
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.machine)
        .collect();
    assert_eq!(held, ["m3"]);
}

/// The invariant 13 checks can fail: on store readings where they pass, the same
/// readings altered to show a commitment on a scope that was only ready, a
/// commitment on a scope whose release names another epoch, a release from a scope
/// awaiting its mark, and a release whose last mark found the scope blocked, are
/// each reported as invariant 13.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checker_reports_invariant_13() {
    // A commitment on released m3.
    let env = sqlite_env(Guards::default()).await;
    let (model, before, after, done) = run_to_last(&env, &recovery_sequence()).await;
    assert!(
        matches!(done, Done::Committed { .. }),
        "the commitment went through"
    );
    check(&model, &before, &after, &done).unwrap();
    let mut only_ready = before.clone();
    only_ready.machines.get_mut("m3").unwrap().scope = ScopeState::Ready;
    let err = check(&model, &only_ready, &after, &done).unwrap_err();
    assert!(err.starts_with("invariant 13: commitment on m3"), "{err}");
    let mut foreign = only_ready;
    foreign.machines.get_mut("m3").unwrap().scope = ScopeState::Released;
    let release = foreign
        .timelines
        .get_mut("m3")
        .unwrap()
        .iter_mut()
        .rfind(|e| e.kind == "scope_released")
        .unwrap();
    release.detail = format!("released in epoch {}", Epoch::from_bytes([7; 16]));
    let err = check(&model, &foreign, &after, &done).unwrap_err();
    assert!(
        err.starts_with("invariant 13: commitment on released m3") && err.contains("epoch"),
        "{err}"
    );

    // A release of m1 on the way the store takes it.
    let acts = [
        Act::EnterRecovery { by_b: false },
        Act::AccountScope { machine: 0 },
        Act::Restoration {
            machine: 0,
            identity_ok: true,
        },
        Act::MarkScope {
            machine: 0,
            missing: false,
        },
        Act::Release { machine: 0 },
    ];
    let env = sqlite_env(Guards::default()).await;
    let (model, mut before, mut after, done) = run_to_last(&env, &acts).await;
    assert!(
        matches!(done, Done::Released { .. }),
        "the release went through"
    );
    check(&model, &before, &after, &done).unwrap();
    let awaiting = ScopeState::Blocked(infra_talos::contract::recovery::BlockedOn::AwaitingMark);
    before.machines.get_mut("m1").unwrap().scope = awaiting;
    let err = check(&model, &before, &after, &done).unwrap_err();
    assert_eq!(
        err,
        format!("invariant 13: m1 was released from {awaiting}, not from ready")
    );
    before.machines.get_mut("m1").unwrap().scope = ScopeState::Ready;
    let mark = after
        .timelines
        .get_mut("m1")
        .unwrap()
        .iter_mut()
        .rfind(|e| e.kind == "scope_marked")
        .unwrap();
    mark.detail = mark.detail.replacen("marked ready", "marked blocked", 1);
    let err = check(&model, &before, &after, &done).unwrap_err();
    assert!(
        err.starts_with("invariant 13: m1 released at") && err.contains("not after a mark"),
        "{err}"
    );
}

/// A fixed sequence through commitment, attempts, acceptance, a validation
/// rejection, a lost response, accounting, classification and recovery: the checker
/// passes it and the driver reaches final states, so the random runs can too.
fn progress_sequence() -> Vec<Act> {
    vec![
        // m1: commit, accept, complete.
        Act::CreatePlan { machine: 0 },
        Act::Approve {
            plan: 0,
            approver: 0,
        },
        Act::Evidence {
            plan: 0,
            by_b: false,
            seen: Seen::PreDispatch,
            identity_ok: true,
        },
        Act::Commit {
            plan: 0,
            other: false,
        },
        Act::Attempt { op: 0, stale: None },
        Act::Respond {
            op: 0,
            reply: Reply::Accepted,
        },
        Act::Complete {
            op: 0,
            seen: Seen::Artifact,
            identity_ok: true,
        },
        // m3: a validation rejection.
        Act::CreatePlan { machine: 2 },
        Act::Approve {
            plan: 0,
            approver: 1,
        },
        Act::Evidence {
            plan: 0,
            by_b: true,
            seen: Seen::PreDispatch,
            identity_ok: true,
        },
        Act::Commit {
            plan: 0,
            other: false,
        },
        Act::Attempt { op: 0, stale: None },
        Act::Respond {
            op: 0,
            reply: Reply::ValidationRejection,
        },
        // m2: a lost response, a takeover, an accounting decision, safe to retry.
        Act::CreatePlan { machine: 1 },
        Act::Approve {
            plan: 0,
            approver: 2,
        },
        Act::Evidence {
            plan: 0,
            by_b: false,
            seen: Seen::PreDispatch,
            identity_ok: true,
        },
        Act::Commit {
            plan: 0,
            other: false,
        },
        Act::Attempt { op: 0, stale: None },
        Act::Respond {
            op: 0,
            reply: Reply::Transport(TransportOutcome::DeadlineExceeded),
        },
        Act::Decide {
            op: 0,
            conditions: false,
            admin: false,
        },
        Act::Decide {
            op: 0,
            conditions: true,
            admin: true,
        },
        Act::Complete {
            op: 0,
            seen: Seen::PreDispatch,
            identity_ok: true,
        },
        Act::Attempt {
            op: 0,
            stale: Some(0),
        },
        // Recovery: the old epoch's approval of a fresh plan grants nothing.
        Act::CreatePlan { machine: 2 },
        Act::Approve {
            plan: 0,
            approver: 0,
        },
        Act::EnterRecovery { by_b: true },
        Act::ReleaseScope { machine: 2 },
        Act::Evidence {
            plan: 0,
            by_b: false,
            seen: Seen::PreDispatch,
            identity_ok: true,
        },
        Act::Commit {
            plan: 0,
            other: false,
        },
        Act::Approve {
            plan: 0,
            approver: 1,
        },
        // Evidence begun after the renewed approval (choice §10.28).
        Act::Evidence {
            plan: 0,
            by_b: false,
            seen: Seen::PreDispatch,
            identity_ok: true,
        },
        Act::Commit {
            plan: 0,
            other: false,
        },
    ]
}

/// A case the interleavings found: an attempt restored unanswered, then the scope's
/// step 1 decision on the way to its release. The attempt is accounted by that
/// decision, which is recovery-admin's `accounting` entry (invariant 11).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_attempt_is_accounted_by_the_scopes_decision() {
    let env = sqlite_env(Guards::default()).await;
    let acts = [
        Act::Ready {
            machine: 2,
            by_b: false,
        },
        Act::Commit {
            plan: 0,
            other: false,
        },
        Act::Attempt { op: 0, stale: None },
        Act::EnterRecovery { by_b: false },
        Act::ReleaseScope { machine: 2 },
    ];
    let reached = run_acts(&env, &acts).await.unwrap();
    assert_eq!(reached.attempts, 1, "{reached:?}");
}

/// The fixed sequence completes one operation and rejects another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_reaches_final_states() {
    let env = sqlite_env(Guards::default()).await;
    let reached = run_acts(&env, &progress_sequence()).await.unwrap();
    assert_eq!(reached.commitments, 4, "{reached:?}");
    assert!(reached.attempts >= 3, "{reached:?}");
    assert_eq!(reached.finals.get("completed"), Some(&1), "{reached:?}");
    assert_eq!(reached.finals.get("rejected"), Some(&1), "{reached:?}");
}

/// The driver's blanket acts do what they say: no approval under a blanket before one
/// is granted, one after, a commitment on it, and none after its revocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_approves_under_a_blanket() {
    let evidence = Act::Evidence {
        plan: 0,
        by_b: false,
        seen: Seen::PreDispatch,
        identity_ok: true,
    };
    let acts = [
        Act::CreatePlan { machine: 0 },
        Act::ApproveUnderBlanket { plan: 0 },
        Act::GrantBlanket { carol: false },
        Act::ApproveUnderBlanket { plan: 0 },
        evidence,
        Act::Commit {
            plan: 0,
            other: false,
        },
        Act::RevokeBlanket,
        Act::CreatePlan { machine: 1 },
        Act::ApproveUnderBlanket { plan: 0 },
        Act::GrantBlanket { carol: true },
        Act::ApproveUnderBlanket { plan: 0 },
    ];
    let env = sqlite_env(Guards::default()).await;
    let reached = run_acts(&env, &acts).await.unwrap();
    assert_eq!(reached.blanket_approvals, 2, "{reached:?}");
    assert_eq!(reached.commitments, 1, "{reached:?}");
}

/// The checker catches what a disabled guard lets through: without the scope
/// indexes (and comparisons 4 and 5) two plans for one machine both commit, and
/// invariant 1 is reported; without the ownership fence a superseded token's
/// attempt is recorded, and invariant 8's token check reports it; without
/// comparison 1 inside the commitment, an approval from before recovery-mode entry
/// commits on a released scope, and invariant 8 reports it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checker_reports_disabled_guards() {
    let ready = |machine: usize| {
        vec![
            Act::CreatePlan { machine },
            Act::Approve {
                plan: 0,
                approver: 0,
            },
            Act::Evidence {
                plan: 0,
                by_b: false,
                seen: Seen::PreDispatch,
                identity_ok: true,
            },
        ]
    };
    let commit = |plan: usize| Act::Commit { plan, other: false };

    // Scope index.
    let mut acts = ready(0);
    acts.extend(ready(0));
    acts.extend([commit(0), commit(1)]);
    let env = sqlite_env(Guards::default()).await;
    run_acts(&env, &acts).await.unwrap();
    let env = sqlite_env(Guards {
        scope_index: false,
        ..Guards::default()
    })
    .await;
    let err = run_acts(&env, &acts).await.unwrap_err();
    assert!(err.contains("invariant 1:"), "{err}");

    // Ownership fence.
    let mut acts = ready(0);
    acts.extend([
        commit(0),
        Act::Takeover { op: 0 },
        Act::Evidence {
            plan: 0,
            by_b: false,
            seen: Seen::PreDispatch,
            identity_ok: true,
        },
        Act::Attempt {
            op: 0,
            stale: Some(0),
        },
    ]);
    let env = sqlite_env(Guards::default()).await;
    run_acts(&env, &acts).await.unwrap();
    let env = sqlite_env(Guards {
        ownership_fence: false,
        ..Guards::default()
    })
    .await;
    let err = run_acts(&env, &acts).await.unwrap_err();
    assert!(err.contains("invariant 8:"), "{err}");

    // Comparison 1 inside the commitment.
    let mut acts = ready(0);
    acts.extend([
        Act::EnterRecovery { by_b: false },
        Act::ReleaseScope { machine: 0 },
        // The release's reads moved the clock on: evidence taken after it.
        Act::Evidence {
            plan: 0,
            by_b: false,
            seen: Seen::PreDispatch,
            identity_ok: true,
        },
        commit(0),
    ]);
    let env = sqlite_env(Guards::default()).await;
    run_acts(&env, &acts).await.unwrap();
    let env = sqlite_env(Guards {
        approval_in_transaction: false,
        ..Guards::default()
    })
    .await;
    let err = run_acts(&env, &acts).await.unwrap_err();
    assert!(err.contains("invariant 8:"), "{err}");
}

// ---------------------------------------------------------------------------------
// Runners: PostgreSQL.

fn database_url() -> Option<String> {
    pg_support::database_url("invariant test")
}

async fn pg_env(url: &str, guards: Guards) -> Env<PgStore> {
    let (schema, options) = pg_support::schema(url, "inv").await;
    let (settings, clock) = settings(guards);
    let store = PgStore::connect_for_tests(options, 2, settings)
        .await
        .unwrap();
    Env {
        store,
        clock,
        keep: Box::new(schema),
    }
}

/// Random interleavings on PostgreSQL keep invariants 1–12. The database is looked
/// up once, so a missing one skips (or fails under CI) once, not per case.
#[test]
fn postgres_interleavings_keep_invariants() {
    let Some(url) = database_url() else { return };
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: cases(16),
        ..ProptestConfig::default()
    });
    let outcome = runner.run(&acts_strategy(40), |acts| {
        current_thread()
            .block_on(async {
                let env = pg_env(&url, Guards::default()).await;
                run_acts(&env, &acts).await
            })
            .map(|_| ())
            .map_err(TestCaseError::fail)
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// Random interleavings in recovery mode on PostgreSQL keep invariant 13 (and 1–12),
/// and the fixed recovery sequence releases its one scope and commits on it.
#[test]
fn postgres_recovery_interleavings_keep_invariant_13() {
    let Some(url) = database_url() else { return };
    let reached = current_thread().block_on(async {
        let env = pg_env(&url, Guards::default()).await;
        run_acts(&env, &recovery_sequence()).await
    });
    let reached = reached.unwrap();
    assert_eq!(
        (reached.releases, reached.commitments),
        (1, 1),
        "{reached:?}"
    );
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: cases(12),
        ..ProptestConfig::default()
    });
    let outcome = runner.run(&recovery_acts_strategy(12, 32), |acts| {
        current_thread()
            .block_on(async {
                let env = pg_env(&url, Guards::default()).await;
                run_acts(&env, &acts).await
            })
            .map(|_| ())
            .map_err(TestCaseError::fail)
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// On PostgreSQL too the driver reaches a completion, and the checker reports two
/// commitments on one machine once the scope indexes are dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_driver_reaches_final_states() {
    let Some(url) = database_url() else { return };
    let env = pg_env(&url, Guards::default()).await;
    let reached = run_acts(&env, &progress_sequence()).await.unwrap();
    assert_eq!(reached.finals.get("completed"), Some(&1), "{reached:?}");
    let env = pg_env(
        &url,
        Guards {
            scope_index: false,
            ..Guards::default()
        },
    )
    .await;
    let mut acts = Vec::new();
    for _ in 0..2 {
        acts.extend([
            Act::CreatePlan { machine: 0 },
            Act::Approve {
                plan: 0,
                approver: 0,
            },
            Act::Evidence {
                plan: 0,
                by_b: false,
                seen: Seen::PreDispatch,
                identity_ok: true,
            },
        ]);
    }
    acts.extend([
        Act::Commit {
            plan: 0,
            other: false,
        },
        Act::Commit {
            plan: 1,
            other: false,
        },
    ]);
    let err = run_acts(&env, &acts).await.unwrap_err();
    assert!(err.contains("invariant 1:"), "{err}");
}
