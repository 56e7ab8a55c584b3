//! The store test suite, written once against the `Store` trait and run by
//! `store_sqlite.rs` and `store_postgres.rs`. Each test builds its own fresh store
//! through the backend's `make` function.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "a module shared by test binaries, each using the parts it needs"
)]

use std::future::Future;
pub mod blanket;
pub mod drift;
pub mod evidence;
pub mod identities;
pub mod recovery;
pub mod verification;

use infra_talos::config_digest;
use infra_talos::contract::classify::{Classification, UnresolvedReason};
use infra_talos::contract::comparison::Comparison;
use infra_talos::contract::evidence::{ObservationPurpose, ResponseClass, TransportOutcome};
use infra_talos::contract::operation::{ControllerId, OperationState, OwnerToken};
use infra_talos::contract::plan::{PlanState, SelfApproval, SelfApprovalBasis};
use infra_talos::contract::recovery::ScopeState;
use infra_talos::contract::{InstantMs, Role, SpanMs};
use infra_talos::digest::Digest;
use infra_talos::keys::{self, KeyBinding};
use infra_talos::store::{
    AccountingRequest, Actor, AdoptPlanSpec, AdoptionOutcome, AttemptAccounting, BootstrapSpec,
    Committed, ContributionKind, DependencyCheck, Guards, IdentityKey, MachineSpec, ManualClock,
    ObservationRequest, ObservedFacts, OperationView, PlanSpec, PrincipalKind, PrincipalSpec,
    RecoveryEntry, ReleaseSpec, RestoredBackup, ScopeAccounting, SealedArtifact, SealedReleaseSpec,
    Settings, Store, StoreError,
};

/// A fresh store, its hand-moved clock, and whatever must live as long as it.
pub struct Env<S> {
    pub store: S,
    pub clock: ManualClock,
    pub keep: Box<dyn Send + Sync>,
}

/// Build settings with a manual clock and these guards.
pub fn settings(guards: Guards) -> (Settings, ManualClock) {
    let clock = ManualClock::starting_at(T0);
    (
        Settings {
            guards,
            clock: Some(clock.clone()),
            ..Settings::default()
        },
        clock,
    )
}

pub const T0: InstantMs = InstantMs(1_800_000_000_000);
/// Present in every artifact's plaintext, which the store never receives.
pub const MARKER: &str = "PLAINTEXT-MARKER-7f3a9c";

/// How long the suite's blanket approvals stand.
pub const WEEK: SpanMs = SpanMs(7 * 86_400_000);

pub const A: ControllerId = ControllerId(0xa1);
pub const B: ControllerId = ControllerId(0xb2);

pub fn alice() -> Actor {
    Actor::new("alice", Role::Publisher)
}
pub fn bob() -> Actor {
    Actor::new("bob", Role::Approver)
}
pub fn carol() -> Actor {
    Actor::new("carol", Role::Approver)
}
pub fn root() -> Actor {
    Actor::new("root", Role::RecoveryAdmin)
}
pub fn ann() -> Actor {
    Actor::new("ann", Role::Author)
}

pub fn base_digest(machine: &str) -> Digest {
    config_digest(format!("machine: {machine}\nversion: base\n").as_bytes())
}

pub fn plaintext(machine: &str, release: &str) -> Vec<u8> {
    format!("machine: {machine}\nrelease: {release}\nsecret: {MARKER}\n").into_bytes()
}

/// A stand-in seal: the store only ever sees these bytes.
pub fn seal(plain: &[u8]) -> Vec<u8> {
    plain.iter().map(|b| b ^ 0x5a).collect()
}

pub fn artifact_digest(machine: &str, release: &str) -> Digest {
    config_digest(&plaintext(machine, release))
}

pub fn sealed(machine: &str, release: &str) -> SealedArtifact {
    let plain = plaintext(machine, release);
    SealedArtifact {
        key_provider: "transit".into(),
        key_id: format!("k-{machine}"),
        key_version: 1,
        ciphertext: seal(&plain),
        digest: config_digest(&plain),
    }
}

pub fn machine_spec(id: &str, rollout: &str) -> MachineSpec {
    MachineSpec {
        id: id.into(),
        identity: IdentityKey::SmbiosUuid(format!("uuid-{id}")),
        cluster_id: "cluster-1".into(),
        endpoint: format!("{id}.nodes:50000"),
        rollout_scope: rollout.into(),
        talos_minor: "1.13".into(),
        import_digest: Some(base_digest(id)),
    }
}

/// Principals, and machines m1 (rollout r1), m2 (rollout r1), m3 (rollout r3, keyed
/// by node ID), each imported at its base digest and handed over through an adoption
/// of release rel-0 ([`hand_over`]), then with release rel-1 published.
pub async fn world<S: Store>(s: &S) {
    world_under(s, infra_talos::store::ApprovalPolicy::default()).await;
}

/// [`world`], in an installation bootstrapped with approval policy `policy`.
pub async fn world_under<S: Store>(s: &S, policy: infra_talos::store::ApprovalPolicy) {
    people(s, policy).await;
    inventory(s, true).await;
    publish(s, "rel-0").await;
    for m in ["m1", "m2", "m3"] {
        hand_over(s, m).await;
    }
    publish(s, "rel-1").await;
}

/// [`world`] as a store written before imports (schema versions 1–6) holds it: the
/// inventory set Applied itself, with no adoption. The rows are written as that
/// release wrote them; the current acts refuse to.
pub async fn world_before_imports<S: Store>(s: &S) {
    people_before_identities(s).await;
    inventory(s, false).await;
    let cases: Vec<String> = ["m1", "m2", "m3"]
        .iter()
        .map(|m| format!("WHEN '{m}' THEN '{}'", base_digest(m).to_hex()))
        .collect();
    let sql = format!(
        "UPDATE machines SET applied_digest = CASE id {} END, \
         applied_source = 'inventory adoption'",
        cases.join(" ")
    );
    s.raw_execute(Box::leak(sql.into_boxed_str()))
        .await
        .unwrap();
    publish(s, "rel-1").await;
}

/// The certificate authority the suite's installations are bootstrapped with (the
/// store keeps it; authenticating against it is the command set's).
pub const TEST_CA: &str = "-----BEGIN CERTIFICATE-----\nTUlJQg==\n-----END CERTIFICATE-----\n";

/// The suite's principals: root (recovery-admin) named by the bootstrap, then the
/// rest registered by root.
const PEOPLE: [(&str, &[Role]); 5] = [
    ("alice", &[Role::Publisher]),
    ("bob", &[Role::Approver]),
    ("carol", &[Role::Approver]),
    ("dave", &[Role::Publisher, Role::Approver]),
    ("ann", &[Role::Author]),
];

/// The suite's tokens: each an automation publisher, one with its responsible
/// person on record and one without.
fn tokens() -> [PrincipalSpec; 2] {
    [
        PrincipalSpec {
            id: "bot".into(),
            kind: PrincipalKind::Token {
                responsible: Some("alice".into()),
            },
            roles: vec![Role::Automation, Role::Publisher],
        },
        PrincipalSpec {
            id: "orphan".into(),
            kind: PrincipalKind::Token { responsible: None },
            roles: vec![Role::Automation, Role::Publisher],
        },
    ]
}

/// The bootstrap that names root the first administrator.
pub fn bootstrap_spec() -> BootstrapSpec {
    BootstrapSpec {
        ca_certificate: TEST_CA.into(),
        administrator: PrincipalSpec {
            id: "root".into(),
            kind: PrincipalKind::Human,
            roles: vec![Role::RecoveryAdmin],
        },
        approval_policy: infra_talos::store::ApprovalPolicy::default(),
        administrator_certificate: None,
    }
}

/// The suite's principals, through the bootstrap and root's registrations.
async fn people<S: Store>(s: &S, policy: infra_talos::store::ApprovalPolicy) {
    s.bootstrap(BootstrapSpec {
        approval_policy: policy,
        ..bootstrap_spec()
    })
    .await
    .unwrap();
    for (id, roles) in PEOPLE {
        s.register_principal(
            &root(),
            PrincipalSpec {
                id: id.into(),
                kind: PrincipalKind::Human,
                roles: roles.to_vec(),
            },
        )
        .await
        .unwrap();
    }
    for token in tokens() {
        s.register_principal(&root(), token).await.unwrap();
    }
}

/// The suite's principals as a store written before identities were authenticated
/// (schema versions 1–7) holds them: rows with no bootstrap.
async fn people_before_identities<S: Store>(s: &S) {
    let mut specs: Vec<PrincipalSpec> = PEOPLE
        .iter()
        .chain([("root", &[Role::RecoveryAdmin][..])].iter())
        .map(|(id, roles)| PrincipalSpec {
            id: (*id).into(),
            kind: PrincipalKind::Human,
            roles: roles.to_vec(),
        })
        .collect();
    specs.extend(tokens());
    for spec in specs {
        let (kind, responsible) = match &spec.kind {
            PrincipalKind::Human => ("human", "NULL".to_owned()),
            PrincipalKind::Token { responsible } => (
                "token",
                responsible
                    .as_ref()
                    .map_or("NULL".to_owned(), |r| format!("'{r}'")),
            ),
        };
        let sql = format!(
            "INSERT INTO principals (id, kind, responsible) VALUES ('{}', '{kind}', {responsible})",
            spec.id
        );
        s.raw_execute(Box::leak(sql.into_boxed_str()))
            .await
            .unwrap();
        for role in &spec.roles {
            let sql = format!(
                "INSERT INTO principal_roles (principal_id, role) VALUES ('{}', '{role}')",
                spec.id
            );
            s.raw_execute(Box::leak(sql.into_boxed_str()))
                .await
                .unwrap();
        }
    }
}

/// Machines m1, m2 and m3, with their import digests when `imported`.
async fn inventory<S: Store>(s: &S, imported: bool) {
    for (id, rollout) in [("m1", "r1"), ("m2", "r1"), ("m3", "r3")] {
        let mut spec = machine_spec(id, rollout);
        if id == "m3" {
            spec.identity = IdentityKey::NodeId("node-m3".into());
        }
        if !imported {
            spec.import_digest = None;
        }
        s.create_machine(&ann(), spec).await.unwrap();
    }
}

/// The operations of `machine` besides its handover's adoption.
pub async fn plan_operations<S: Store>(s: &S, machine: &str) -> Vec<OperationView> {
    let mut ops = s.operations_of(machine).await.unwrap();
    ops.retain(|o| !o.plan.starts_with("handover-"));
    ops
}

/// The controller instance that records the handovers' adoptions.
pub const HANDOVER: ControllerId = ControllerId(0xad0);

/// Hand imported `machine` over (§6.3): an adopt plan `handover-<machine>` naming its
/// Desired release, approved by bob, and its adoption recorded against a fresh
/// observation of the base digest.
pub async fn hand_over<S: Store>(s: &S, machine: &str) {
    let plan = format!("handover-{machine}");
    let desired = s.machine(machine).await.unwrap().desired_release.unwrap();
    s.create_adopt_plan(
        &alice(),
        AdoptPlanSpec {
            id: plan.clone(),
            machine: machine.into(),
            release: desired,
            expires_at: T0.plus(SpanMs::from_secs(3600)),
            max_evidence_age: SpanMs::from_secs(60),
        },
    )
    .await
    .unwrap();
    s.approve(&bob(), &plan).await.unwrap();
    let mut read = facts(machine, base_digest(machine));
    read.cluster_id = Some(s.machine(machine).await.unwrap().cluster_id);
    observe(
        s,
        machine,
        ObservationPurpose::Evidence,
        Some(&plan),
        HANDOVER,
        read,
    )
    .await;
    let outcome = s.record_adoption(&plan, HANDOVER).await.unwrap();
    assert!(
        matches!(outcome, AdoptionOutcome::Recorded { .. }),
        "{machine}: {outcome:?}"
    );
}

pub async fn publish<S: Store>(s: &S, release: &str) {
    s.publish_release(
        &alice(),
        ReleaseSpec {
            id: release.into(),
            artifacts: ["m1", "m2", "m3"]
                .iter()
                .map(|m| ((*m).to_owned(), sealed(m, release)))
                .collect(),
            contributions: vec![
                ("ann".into(), ContributionKind::Authored),
                ("alice".into(), ContributionKind::Published),
            ],
        },
    )
    .await
    .unwrap();
}

pub fn spec(id: &str, machine: &str, release: &str, now: InstantMs) -> PlanSpec {
    PlanSpec {
        id: id.into(),
        machine: machine.into(),
        release: release.into(),
        expires_at: now.plus(SpanMs::from_secs(3600)),
        max_evidence_age: SpanMs::from_secs(60),
        transport_deadline: SpanMs::from_secs(5),
        verification_deadline: SpanMs::from_secs(30),
        max_attempts: 3,
        revert: false,
    }
}

/// Create plan `id` for `machine` on `release` and have bob approve it.
pub async fn approved<S: Store>(env: &Env<S>, id: &str, machine: &str, release: &str) {
    env.store
        .create_plan(&alice(), spec(id, machine, release, env.clock.now()))
        .await
        .unwrap();
    env.store.approve(&bob(), id).await.unwrap();
}

/// What a healthy node reports before dispatch.
pub fn facts(machine: &str, digest: Digest) -> ObservedFacts {
    let (smbios_uuid, node_id) = if machine == "m3" {
        (None, Some("node-m3".to_owned()))
    } else {
        (
            Some(format!("uuid-{machine}")),
            Some(format!("node-{machine}")),
        )
    };
    ObservedFacts {
        smbios_uuid,
        node_id,
        cluster_id: Some("cluster-1".into()),
        talos_version: Some("v1.13.6".into()),
        digest: Some(digest),
        config_version: Some(5),
        access_version: Some("access-v3".into()),
    }
}

/// The committed operation `c` on `machine`, carried by its owner to completed: its
/// attempt, the node's acceptance, and a completion observation showing `shown`.
pub async fn sent_and_completed<S: Store>(s: &S, c: &Committed, machine: &str, shown: Digest) {
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    s.record_response(&c.operation, 1, c.owner, ResponseClass::Accepted)
        .await
        .unwrap();
    observe(
        s,
        machine,
        ObservationPurpose::Completion,
        None,
        c.owner.controller,
        facts(machine, shown),
    )
    .await;
    assert_eq!(
        s.classify(&c.operation, c.owner).await.unwrap(),
        Classification::Completed
    );
}

/// Take an observation (start, then record) and return its basis.
pub async fn observe<S: Store>(
    s: &S,
    machine: &str,
    purpose: ObservationPurpose,
    plan: Option<&str>,
    controller: ControllerId,
    read: ObservedFacts,
) -> u64 {
    let ticket = s
        .begin_observation(ObservationRequest {
            machine: machine.into(),
            purpose,
            plan: plan.map(str::to_owned),
            controller,
        })
        .await
        .unwrap();
    s.record_observation(&ticket, read).await.unwrap();
    ticket.basis.0
}

/// §3.1: evidence and a use-time check for `plan` by `controller`.
pub async fn evidence<S: Store>(
    s: &S,
    plan: &str,
    machine: &str,
    controller: ControllerId,
    read: ObservedFacts,
) {
    observe(
        s,
        machine,
        ObservationPurpose::Evidence,
        Some(plan),
        controller,
        read,
    )
    .await;
    s.record_dependency_check(DependencyCheck {
        plan: plan.into(),
        controller,
        access_path: "talos/cluster-1/access".into(),
        access_version: "access-v3".into(),
        artifact_decrypts: true,
    })
    .await
    .unwrap();
}

/// A plan approved with good evidence by `controller`, ready to commit.
pub async fn ready<S: Store>(env: &Env<S>, id: &str, machine: &str, controller: ControllerId) {
    approved(env, id, machine, "rel-1").await;
    evidence(
        &env.store,
        id,
        machine,
        controller,
        facts(machine, base_digest(machine)),
    )
    .await;
}

pub async fn refusal_on_timeline<S: Store>(
    s: &S,
    machine: &str,
    kind: &str,
    comparison: Comparison,
) {
    let timeline = s.timeline(machine).await.unwrap();
    assert!(
        timeline
            .iter()
            .any(|e| e.kind == kind && e.comparison == Some(comparison)),
        "no {kind} entry with comparison {comparison}: {timeline:#?}"
    );
}

/// Commit and expect a refusal by `comparison`, recorded on the timeline.
pub async fn refused_by<S: Store>(
    s: &S,
    plan: &str,
    machine: &str,
    controller: ControllerId,
    comparison: Comparison,
) {
    let err = s.commit(plan, controller).await.unwrap_err();
    assert_eq!(err.comparison(), Some(comparison), "{err}");
    assert!(matches!(err, StoreError::CommitmentRefused { .. }), "{err}");
    refusal_on_timeline(s, machine, "commitment_refused", comparison).await;
    assert!(
        s.operations_of(machine)
            .await
            .unwrap()
            .iter()
            .all(|o| o.plan != plan),
        "a refused commitment created an operation"
    );
}

/// `err` is the store's refusal of `act` (as the store names it), saying `says`.
pub fn refused_as(err: &StoreError, act: &str, says: &str) {
    assert!(
        matches!(err, StoreError::Refused { act: a, reason } if *a == act && reason.contains(says)),
        "expected {act:?} refused saying {says:?}, got {err:?}"
    );
}

/// `err` is the schema refusing a change to an append-only table.
pub fn append_only(err: &StoreError, table: &str) {
    assert!(
        matches!(err, StoreError::Database(m) if m.contains(&format!("{table} is append-only"))),
        "expected table {table} refused as append-only, got {err:?}"
    );
}

fn holding(states: &[OperationState]) -> usize {
    states.iter().filter(|s| !s.is_terminal()).count()
}

// ---------------------------------------------------------------------------------
// The happy path.

pub async fn happy_path<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    s.preflight("p1").await.unwrap();
    let before = s.machine("m1").await.unwrap();
    let Committed { operation, owner } = s.commit("p1", A).await.unwrap();
    assert_eq!(owner.generation, 1);
    assert_eq!(owner.epoch, s.current_epoch().await.unwrap());
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Committed);
    let proof = s.attempt(&operation, owner).await.unwrap();
    assert_eq!(proof.operation_id(), operation);
    assert_eq!(proof.attempt(), 1);
    assert_eq!(proof.machine(), "m1");
    assert_eq!(proof.artifact_digest(), artifact_digest("m1", "rel-1"));
    assert_eq!(proof.transport_deadline().as_secs(), 5);
    assert_eq!(
        s.operation(&operation).await.unwrap().state,
        OperationState::Sending
    );
    let state = s
        .record_response(&operation, 1, owner, ResponseClass::Accepted)
        .await
        .unwrap();
    assert_eq!(state, OperationState::Verifying);
    env.clock.advance(SpanMs(500));
    observe(
        s,
        "m1",
        ObservationPurpose::Completion,
        None,
        A,
        facts("m1", artifact_digest("m1", "rel-1")),
    )
    .await;
    let c = s.classify(&operation, owner).await.unwrap();
    assert_eq!(c, Classification::Completed);
    let op = s.operation(&operation).await.unwrap();
    assert_eq!(op.state, OperationState::Completed);
    let after = s.machine("m1").await.unwrap();
    assert_eq!(after.applied_digest, Some(artifact_digest("m1", "rel-1")));
    assert_eq!(after.applied_release.as_deref(), Some("rel-1"));
    assert!(after.baseline_revision > before.baseline_revision);
    // The timeline shows commitment, then attempt, then response, in revision order.
    let timeline = s.timeline("m1").await.unwrap();
    let pos = |k: &str| timeline.iter().position(|e| e.kind == k).unwrap();
    assert!(pos("commitment") < pos("attempt"));
    assert!(pos("attempt") < pos("response"));
    let last_applied = timeline
        .iter()
        .rposition(|e| e.kind == "applied_changed")
        .unwrap();
    assert!(pos("response") < last_applied);
    let revisions: Vec<u64> = timeline.iter().map(|e| e.revision.0).collect();
    assert!(
        revisions.windows(2).all(|w| w[1] == w[0] + 1),
        "{revisions:?}"
    );
    // The scope is free: a fresh plan on the new baseline commits.
    publish(s, "rel-2").await;
    approved(&env, "p2", "m1", "rel-2").await;
    evidence(
        s,
        "p2",
        "m1",
        A,
        facts("m1", artifact_digest("m1", "rel-1")),
    )
    .await;
    s.commit("p2", A).await.unwrap();
}

// ---------------------------------------------------------------------------------
// Commitment comparisons.

pub async fn c0_plan_committed_twice<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    evidence(s, "p1", "m1", B, facts("m1", base_digest("m1"))).await;
    s.commit("p1", A).await.unwrap();
    let err = s.commit("p1", B).await.unwrap_err();
    assert_eq!(
        err.comparison(),
        Some(Comparison::PlanHasNoOperation),
        "{err}"
    );
    refusal_on_timeline(
        s,
        "m1",
        "commitment_refused",
        Comparison::PlanHasNoOperation,
    )
    .await;
    let of_p1 = s.operations_of("m1").await.unwrap();
    assert_eq!(of_p1.iter().filter(|o| o.plan == "p1").count(), 1);
}

pub async fn c1_approval_revoked<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    s.revoke_approval(&carol(), "p1").await.unwrap();
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Revoked);
    refused_by(s, "p1", "m1", A, Comparison::Authority).await;
}

pub async fn c1_expired<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    env.clock.advance(SpanMs::from_secs(3600));
    evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    refused_by(s, "p1", "m1", A, Comparison::Authority).await;
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Expired);
}

pub async fn c1_cancelled<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    s.cancel_plan(&alice(), "p1").await.unwrap();
    refused_by(s, "p1", "m1", A, Comparison::Authority).await;
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Cancelled);
}

pub async fn c1_identity_revoked<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    s.revoke_identity(&root(), "bob").await.unwrap();
    refused_by(s, "p1", "m1", A, Comparison::Authority).await;
    // A revoked identity approves nothing further.
    s.create_plan(&alice(), spec("p2", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap();
    let err = s.approve(&bob(), "p2").await.unwrap_err();
    refused_as(&err, "approving", "the identity bob is revoked");
    assert_eq!(s.plan("p2").await.unwrap().state, PlanState::Proposed);
}

pub async fn c1_foreign_epoch<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    s.enter_recovery(&root(), entry_now(s, B).await)
        .await
        .unwrap();
    release_after_restore(&env, &["m1"]).await;
    evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    let err = s.commit("p1", A).await.unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::Authority), "{err}");
    assert!(err.to_string().contains("epoch"), "{err}");
    // Control: a renewed approval in the present epoch passes comparison 1, on
    // evidence begun after it (choice §10.28).
    s.approve(&carol(), "p1").await.unwrap();
    evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    s.commit("p1", A).await.unwrap();
}

pub async fn c2_assignment_changed<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    s.change_assignment(&ann(), "m1").await.unwrap();
    refused_by(s, "p1", "m1", A, Comparison::Bindings).await;
}

pub async fn c2_desired_moved<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    publish(s, "rel-2").await;
    refused_by(s, "p1", "m1", A, Comparison::Bindings).await;
}

/// §8 "stale request blocks newer plans": B, planned on the old baseline, fails
/// comparison 4 while A holds the scope and comparison 2 once A completed.
pub async fn c2_baseline_moved<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "pa", "m1", A).await;
    ready(&env, "pb", "m1", A).await;
    let c = s.commit("pa", A).await.unwrap();
    refused_by(s, "pb", "m1", A, Comparison::MachineScope).await;
    sent_and_completed(s, &c, "m1", artifact_digest("m1", "rel-1")).await;
    evidence(
        s,
        "pb",
        "m1",
        A,
        facts("m1", artifact_digest("m1", "rel-1")),
    )
    .await;
    refused_by(s, "pb", "m1", A, Comparison::Bindings).await;
}

/// Missing evidence commits nothing and refuses nothing (choice §10.28): none by
/// this controller, too old, begun before the approval, or with the configuration
/// or identity unread. No refusal entry is written; fresh evidence commits each.
pub async fn c3_missing_evidence<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p-old", "m1", A).await;
    env.clock.advance(SpanMs::from_secs(61));
    evidence_missing(s, "p-old", "m1", A, "old").await;
    ready(&env, "p-other", "m2", B).await;
    evidence_missing(s, "p-other", "m2", A, "no evidence").await;
    s.create_plan(&alice(), spec("p-early", "m3", "rel-1", env.clock.now()))
        .await
        .unwrap();
    evidence(s, "p-early", "m3", A, facts("m3", base_digest("m3"))).await;
    s.approve(&bob(), "p-early").await.unwrap();
    evidence_missing(s, "p-early", "m3", A, "before the approval").await;
    for (plan, machine) in [("p-old", "m1"), ("p-early", "m3")] {
        evidence(s, plan, machine, A, facts(machine, base_digest(machine))).await;
        s.commit(plan, A).await.unwrap();
    }
    // m2 shares m1's rollout scope: with fresh evidence p-other passes comparison 3
    // and stops at 5, behind p-old.
    evidence(s, "p-other", "m2", A, facts("m2", base_digest("m2"))).await;
    refused_by(s, "p-other", "m2", A, Comparison::RolloutSlot).await;
    let mut unread = world_with_fresh_machine(s, "m4").await;
    approved(&env, "p-unread", "m4", "rel-4").await;
    unread.digest = None;
    evidence(s, "p-unread", "m4", A, unread.clone()).await;
    evidence_missing(s, "p-unread", "m4", A, "configuration digest").await;
    unread = facts("m4", base_digest("m4"));
    unread.smbios_uuid = None;
    unread.node_id = None;
    unread.cluster_id = None;
    evidence(s, "p-unread", "m4", A, unread).await;
    evidence_missing(s, "p-unread", "m4", A, "identity").await;
    evidence(s, "p-unread", "m4", A, facts("m4", base_digest("m4"))).await;
    s.commit("p-unread", A).await.unwrap();
}

/// Add machine `id` (its own rollout scope) with release `rel-4` published for it;
/// returns what a healthy read of it shows.
async fn world_with_fresh_machine<S: Store>(s: &S, id: &str) -> ObservedFacts {
    s.create_machine(&ann(), machine_spec(id, "r4"))
        .await
        .unwrap();
    s.publish_release(
        &alice(),
        ReleaseSpec {
            id: "rel-0-fresh".into(),
            artifacts: vec![(id.to_owned(), sealed(id, "rel-0-fresh"))],
            contributions: vec![("ann".into(), ContributionKind::Authored)],
        },
    )
    .await
    .unwrap();
    hand_over(s, id).await;
    s.publish_release(
        &alice(),
        ReleaseSpec {
            id: "rel-4".into(),
            artifacts: vec![(id.to_owned(), sealed(id, "rel-4"))],
            contributions: vec![("ann".into(), ContributionKind::Authored)],
        },
    )
    .await
    .unwrap();
    facts(id, base_digest(id))
}

/// The settle floor the recovery helpers use (the smallest a deployment may set).
pub const SETTLE: SpanMs = SpanMs::from_secs(30);

/// What a recovery-mode entry records in these tests: the instances stopped at the
/// store's present time, and the database restored from a backup taken an hour
/// before (or at time zero).
pub async fn entry_now<S: Store + ?Sized>(s: &S, controller: ControllerId) -> RecoveryEntry {
    let now = s.now().await.expect("store time");
    RecoveryEntry {
        controller,
        stopped_at: now,
        backups: vec![RestoredBackup {
            family: "database".into(),
            backup: "store.dump".into(),
            taken_at: InstantMs(now.0.saturating_sub(3_600_000)),
        }],
    }
}

/// A read of `machine` as it stands: its recorded identity and Applied's digest.
pub async fn as_it_stands<S: Store>(s: &S, machine: &str) -> ObservedFacts {
    let applied = s.machine(machine).await.unwrap().applied_digest;
    // A machine not handed over yet runs what its import read.
    facts(machine, applied.unwrap_or_else(|| base_digest(machine)))
}

/// After `enter_recovery`, the §7.3 step 1 decision over `machines`: the recovery
/// reads it needs (the first after the entry plus the deployment's maximum
/// transport deadline, the last a settle floor later), then the joint decision.
pub async fn account_after_restore<S: Store>(env: &Env<S>, machines: &[&str]) {
    let s = &env.store;
    let ceiling = infra_talos::store::DEFAULT_MAX_TRANSPORT_DEADLINE;
    env.clock.advance(SpanMs(ceiling.0 + 1000));
    for m in machines {
        let read = as_it_stands(s, m).await;
        observe(s, m, ObservationPurpose::Recovery, None, B, read).await;
    }
    env.clock.advance(SETTLE);
    for m in machines {
        let read = as_it_stands(s, m).await;
        observe(s, m, ObservationPurpose::Recovery, None, B, read).await;
    }
    s.account_scopes(
        &root(),
        ScopeAccounting {
            machines: machines.iter().map(|m| (*m).to_owned()).collect(),
            settle_floor: SETTLE,
            explanation: None,
        },
    )
    .await
    .unwrap();
}

/// The rest of §7.3 as far as release, for scopes no restored operation holds: the
/// step 1 decision, a restoration observation of each machine, its mark (ready),
/// and the release.
pub async fn release_after_restore<S: Store>(env: &Env<S>, machines: &[&str]) {
    let s = &env.store;
    account_after_restore(env, machines).await;
    for m in machines {
        let read = as_it_stands(s, m).await;
        observe(s, m, ObservationPurpose::Restoration, None, B, read).await;
        assert_eq!(
            s.mark_scope(&root(), m, None).await.unwrap(),
            ScopeState::Ready
        );
        s.release_scope(&root(), m).await.unwrap();
    }
}

/// Commit and expect "fresh evidence needed": nothing committed, no refusal entry.
pub async fn evidence_missing<S: Store>(
    s: &S,
    plan: &str,
    machine: &str,
    controller: ControllerId,
    says: &str,
) {
    let before = s.timeline(machine).await.unwrap().len();
    let err = s.commit(plan, controller).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::EvidenceMissing { reason } if reason.contains(says)),
        "expected missing evidence ({says}), got {err}"
    );
    assert_eq!(
        s.timeline(machine).await.unwrap().len(),
        before,
        "{err} wrote an entry"
    );
    assert_eq!(s.plan(plan).await.unwrap().operation, None);
}

/// Evidence that shows another value refuses by comparison 3, with an entry.
pub async fn c3_evidence_cases<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    // Wrong SMBIOS UUID.
    approved(&env, "p-uuid", "m1", "rel-1").await;
    let mut f = facts("m1", base_digest("m1"));
    f.smbios_uuid = Some("uuid-somebody-else".into());
    evidence(s, "p-uuid", "m1", A, f).await;
    refused_by(s, "p-uuid", "m1", A, Comparison::Evidence).await;
    // Wrong cluster ID.
    approved(&env, "p-cluster", "m1", "rel-1").await;
    let mut f = facts("m1", base_digest("m1"));
    f.cluster_id = Some("cluster-2".into());
    evidence(s, "p-cluster", "m1", A, f).await;
    refused_by(s, "p-cluster", "m1", A, Comparison::Evidence).await;
    // A machine keyed by node ID: a wrong node ID, and an SMBIOS UUID where none is
    // expected.
    approved(&env, "p-node", "m3", "rel-1").await;
    let mut f = facts("m3", base_digest("m3"));
    f.node_id = Some("node-other".into());
    evidence(s, "p-node", "m3", A, f).await;
    refused_by(s, "p-node", "m3", A, Comparison::Evidence).await;
    approved(&env, "p-node2", "m3", "rel-1").await;
    let mut f = facts("m3", base_digest("m3"));
    f.smbios_uuid = Some("uuid-m3".into());
    evidence(s, "p-node2", "m3", A, f).await;
    refused_by(s, "p-node2", "m3", A, Comparison::Evidence).await;
    // Control: the node-ID machine with its own identity commits.
    ready(&env, "p-node3", "m3", A).await;
    s.commit("p-node3", A).await.unwrap();
    // Contradicted by a newer observation.
    ready(&env, "p-contra", "m1", A).await;
    let mut f = facts("m1", base_digest("m1"));
    f.cluster_id = Some("cluster-2".into());
    observe(s, "m1", ObservationPurpose::Drift, None, B, f).await;
    refused_by(s, "p-contra", "m1", A, Comparison::Evidence).await;
    // Control: fresh evidence after it commits.
    evidence(s, "p-contra", "m1", A, facts("m1", base_digest("m1"))).await;
    s.commit("p-contra", A).await.unwrap();
}

/// A digest other than the pre-dispatch one refuses by 3 and runs the drift rules
/// (§3.2, §6.1): a drift record opens; a revert bound to it commits, completes and
/// closes it.
pub async fn c3_wrong_digest_opens_drift<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    approved(&env, "p1", "m1", "rel-1").await;
    let drifted = config_digest(b"edited out of band\n");
    evidence(s, "p1", "m1", A, facts("m1", drifted)).await;
    refused_by(s, "p1", "m1", A, Comparison::Evidence).await;
    assert!(
        s.machine("m1").await.unwrap().open_drift.is_some(),
        "the refused evidence opened no drift record"
    );
    let mut revert = spec("p-revert", "m1", "rel-1", env.clock.now());
    revert.revert = true;
    s.create_plan(&alice(), revert).await.unwrap();
    s.approve(&bob(), "p-revert").await.unwrap();
    evidence(s, "p-revert", "m1", A, facts("m1", drifted)).await;
    let c = s.commit("p-revert", A).await.unwrap();
    sent_and_completed(s, &c, "m1", artifact_digest("m1", "rel-1")).await;
    assert_eq!(s.machine("m1").await.unwrap().open_drift, None);
    assert!(
        s.timeline("m1")
            .await
            .unwrap()
            .iter()
            .any(|e| e.kind == "drift_closed")
    );
}

/// An open drift record the plan does not bind shuts the gate: comparison 6.
pub async fn c6_unbound_drift<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    // Evidence from a plan on m2 shows a drifted digest: refused by 3, record opened.
    approved(&env, "p-m2", "m2", "rel-1").await;
    let drifted = config_digest(b"hand edit\n");
    evidence(s, "p-m2", "m2", A, facts("m2", drifted)).await;
    refused_by(s, "p-m2", "m2", A, Comparison::Evidence).await;
    assert!(s.machine("m2").await.unwrap().open_drift.is_some());
    // A plan that does not bind the open record, with evidence matching what it
    // expects: the gate refuses. The revert bound to the record is the control.
    let mut revert = spec("p-revert", "m2", "rel-1", env.clock.now());
    revert.revert = true;
    s.create_plan(&alice(), revert).await.unwrap();
    s.approve(&bob(), "p-revert").await.unwrap();
    approved(&env, "p-plain", "m2", "rel-1").await;
    evidence(s, "p-plain", "m2", A, facts("m2", base_digest("m2"))).await;
    refused_by(s, "p-plain", "m2", A, Comparison::Gate).await;
    evidence(s, "p-revert", "m2", A, facts("m2", drifted)).await;
    s.commit("p-revert", A).await.unwrap();
}

pub async fn c4_scope_held<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    ready(&env, "p2", "m1", A).await;
    s.commit("p1", A).await.unwrap();
    refused_by(s, "p2", "m1", A, Comparison::MachineScope).await;
}

pub async fn c5_rollout_slot<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    ready(&env, "p2", "m2", A).await;
    ready(&env, "p3", "m3", A).await;
    s.commit("p1", A).await.unwrap();
    refused_by(s, "p2", "m2", A, Comparison::RolloutSlot).await;
    // Control: another rollout scope is free.
    s.commit("p3", A).await.unwrap();
}

pub async fn c6_frozen<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    s.freeze(&ann(), "m1", "maintenance window").await.unwrap();
    refused_by(s, "p1", "m1", A, Comparison::Gate).await;
    // Only an approver lifts a freeze; then the same plan commits.
    let err = s.unfreeze(&ann(), "m1", "done").await.unwrap_err();
    refused_as(&err, "unfreezing", "author may not");
    assert!(s.machine("m1").await.unwrap().frozen);
    s.unfreeze(&bob(), "m1", "done").await.unwrap();
    s.commit("p1", A).await.unwrap();
}

/// Recovery mode without a present-epoch release shuts the gate. Approving is
/// refused on an unreleased scope in recovery mode, so a present-epoch approval
/// cannot exist there; with comparison 1 switched off (control) comparison 6 is
/// what refuses, and a release lets the same commitment through.
pub async fn c6_recovery_without_release<S: Store>(make: impl AsyncFnOnce(Guards) -> Env<S>) {
    let env = make(Guards {
        approval_in_transaction: false,
        ..Guards::default()
    })
    .await;
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    s.enter_recovery(&root(), entry_now(s, B).await)
        .await
        .unwrap();
    let err = s.approve(&carol(), "p1").await.unwrap_err();
    refused_as(
        &err,
        "approving",
        "recovery mode: the scope is not released",
    );
    refused_by(s, "p1", "m1", A, Comparison::Gate).await;
    release_after_restore(&env, &["m1"]).await;
    evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    s.commit("p1", A).await.unwrap();
}

// ---------------------------------------------------------------------------------
// Attempt comparisons, ownership and the fence.

pub async fn attempt_refusals_7<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    evidence(s, "p1", "m1", B, facts("m1", base_digest("m1"))).await;
    let c = s.commit("p1", A).await.unwrap();
    // Not the owner.
    let other = OwnerToken {
        controller: B,
        ..c.owner
    };
    let err = s.attempt(&c.operation, other).await.unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::Ownership), "{err}");
    // A token from another epoch.
    let foreign = OwnerToken {
        epoch: infra_talos::contract::epoch::Epoch::from_bytes([9; 16]),
        ..c.owner
    };
    let err = s.attempt(&c.operation, foreign).await.unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::Ownership), "{err}");
    assert!(err.to_string().contains("epoch"), "{err}");
    // A stale generation.
    let stale = OwnerToken {
        generation: 7,
        ..c.owner
    };
    let err = s.attempt(&c.operation, stale).await.unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::Ownership), "{err}");
    refusal_on_timeline(s, "m1", "attempt_refused", Comparison::Ownership).await;
    // Refusals by 7 only record: the operation is still committed, and its owner
    // goes through.
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Committed
    );
    let timeline = s.timeline("m1").await.unwrap();
    assert!(!timeline.iter().any(|e| e.kind == "attempt"));
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
}

/// §3.4: a takeover bumps the generation and the old owner's attempt is refused.
/// Control (DS row 008): without the fence the stale owner's attempt is recorded.
pub async fn takeover_fence<S: Store>(make: impl AsyncFn(Guards) -> Env<S>) {
    for fenced in [true, false] {
        let env = make(Guards {
            ownership_fence: fenced,
            ..Guards::default()
        })
        .await;
        let s = &env.store;
        world(s).await;
        ready(&env, "p1", "m1", A).await;
        let c = s.commit("p1", A).await.unwrap();
        let new = s.takeover(&c.operation, 1, B).await.unwrap();
        assert_eq!(new.generation, 2);
        assert_eq!(
            s.operation(&c.operation).await.unwrap().state,
            OperationState::Unresolved
        );
        // A second takeover of generation 1 loses.
        let err = s.takeover(&c.operation, 1, B).await.unwrap_err();
        refused_as(&err, "taking over", "generation");
        assert_eq!(s.operation(&c.operation).await.unwrap().owner, new);
        // The stale executor gathers fresh evidence, so only ownership can stop it.
        evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
        let stale = s.attempt(&c.operation, c.owner).await;
        if fenced {
            let err = stale.unwrap_err();
            assert_eq!(err.comparison(), Some(Comparison::Ownership), "{err}");
            assert_eq!(s.operation(&c.operation).await.unwrap().attempts, 0);
        } else {
            let proof = stale.expect("without the fence the stale owner records an attempt");
            assert_eq!(proof.attempt(), 1);
            assert_eq!(s.operation(&c.operation).await.unwrap().attempts, 1);
        }
    }
}

/// The attempt budget (3) used up through the store's own acts: three attempts, each
/// answered by another refusal (which accounts for it and decides nothing), each
/// followed by a recovery read at the pre-dispatch digest and classification. The
/// first two classifications are safe to retry and admit a retry on fresh evidence;
/// the third is unresolved, the retry blocked by the budget (§5: safe to retry needs
/// budget left). The next attempt, on fresh evidence, is refused and recorded as
/// refused, and nothing is recorded as sent: with no safe-to-retry classification to
/// rely on, comparison 7 refuses it before the budget term is read, which is why no
/// sequence of acts reaches comparison 9 (`attempt_refusals_9`).
pub async fn attempt_budget_used_up_through_the_store<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    for n in 1..=3u32 {
        if n > 1 {
            evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
        }
        let proof = s.attempt(&c.operation, c.owner).await.unwrap();
        assert_eq!(proof.attempt(), n);
        assert_eq!(
            s.record_response(&c.operation, n, c.owner, ResponseClass::OtherRefusal)
                .await
                .unwrap(),
            OperationState::Unresolved
        );
        observe(
            s,
            "m1",
            ObservationPurpose::Recovery,
            None,
            A,
            facts("m1", base_digest("m1")),
        )
        .await;
        let expected = if n < 3 {
            Classification::SafeToRetry
        } else {
            Classification::Unresolved(UnresolvedReason::RetryBlocked(
                infra_talos::contract::classify::RetryBlocker::NoAttemptsLeft,
            ))
        };
        assert_eq!(
            s.classify(&c.operation, c.owner).await.unwrap(),
            expected,
            "classification after attempt {n}"
        );
    }
    evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    let before = s.timeline("m1").await.unwrap().len();
    let err = s.attempt(&c.operation, c.owner).await.unwrap_err();
    assert_eq!(
        err,
        StoreError::AttemptRefused {
            comparison: Comparison::Ownership,
            reason: "comparison 7: the unresolved operation has no safe-to-retry classification"
                .into(),
        }
    );
    let timeline = s.timeline("m1").await.unwrap();
    let appended: Vec<(&str, Option<Comparison>)> = timeline[before..]
        .iter()
        .map(|e| (e.kind.as_str(), e.comparison))
        .collect();
    assert_eq!(appended, [("attempt_refused", Some(Comparison::Ownership))]);
    let op = s.operation(&c.operation).await.unwrap();
    assert_eq!((op.state, op.attempts), (OperationState::Unresolved, 3));
    assert_eq!(s.attempts(&c.operation).await.unwrap().len(), 3);
}

/// Comparison 9, the budget term of the update that records an attempt. No sequence
/// of the store's acts reaches it (`attempt_budget_used_up_through_the_store`: a
/// retry needs a safe-to-retry classification, which needs budget left, and a
/// committed operation has made no attempt), so the recorded count is moved to the
/// budget behind the store's back, on an operation still committed.
pub async fn attempt_refusals_9<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    s.raw_execute("UPDATE operations SET attempts = 3")
        .await
        .unwrap();
    let err = s.attempt(&c.operation, c.owner).await.unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::AttemptsLeft), "{err}");
    refusal_on_timeline(s, "m1", "attempt_refused", Comparison::AttemptsLeft).await;
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Committed
    );
}

/// A transport outcome accounts for nothing; only a §5.2 decision does, and only once
/// its three conditions hold; a retry classification is undone by a newer fact
/// (comparison 8).
pub async fn accounting_and_retry<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    let state = s
        .record_response(
            &c.operation,
            1,
            c.owner,
            ResponseClass::Transport(TransportOutcome::DeadlineExceeded),
        )
        .await
        .unwrap();
    assert_eq!(state, OperationState::Unresolved);
    // The node shows the artifact, yet the attempt is unaccounted: no completion.
    observe(
        s,
        "m1",
        ObservationPurpose::Completion,
        None,
        A,
        facts("m1", artifact_digest("m1", "rel-1")),
    )
    .await;
    let cl = s.classify(&c.operation, c.owner).await.unwrap();
    assert!(
        matches!(
            cl,
            Classification::Unresolved(UnresolvedReason::UnaccountedAttempts { count: 1 })
        ),
        "{cl}"
    );
    assert_eq!(
        s.machine("m1").await.unwrap().applied_digest,
        Some(base_digest("m1"))
    );
    let request = AccountingRequest {
        operation: c.operation.clone(),
        attempt: 1,
        settle_floor: SpanMs::from_secs(30),
        explanation: None,
    };
    // Not recovery-admin.
    let err = s
        .record_accounting_decision(&bob(), request.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AccountingRefused {
                condition: None,
                ..
            }
        ),
        "{err}"
    );
    // Condition 1: the executor was not taken over.
    let err = s
        .record_accounting_decision(&root(), request.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AccountingRefused {
                condition: Some(1),
                ..
            }
        ),
        "{err}"
    );
    let owner = s.takeover(&c.operation, 1, B).await.unwrap();
    // Condition 2: no read began after the transport deadline (5 s).
    let err = s
        .record_accounting_decision(&root(), request.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AccountingRefused {
                condition: Some(2),
                ..
            }
        ),
        "{err}"
    );
    env.clock.advance(SpanMs::from_secs(6));
    observe(
        s,
        "m1",
        ObservationPurpose::Recovery,
        None,
        B,
        facts("m1", base_digest("m1")),
    )
    .await;
    // Condition 2: the settle floor has not passed.
    let err = s
        .record_accounting_decision(&root(), request.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AccountingRefused {
                condition: Some(2),
                ..
            }
        ),
        "{err}"
    );
    env.clock.advance(SpanMs::from_secs(31));
    // Condition 3: no recovery observation after the floor.
    let err = s
        .record_accounting_decision(&root(), request.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AccountingRefused {
                condition: Some(3),
                ..
            }
        ),
        "{err}"
    );
    observe(
        s,
        "m1",
        ObservationPurpose::Recovery,
        None,
        B,
        facts("m1", base_digest("m1")),
    )
    .await;
    s.record_accounting_decision(&root(), request.clone())
        .await
        .unwrap();
    assert!(
        s.timeline("m1")
            .await
            .unwrap()
            .iter()
            .any(|e| e.kind == "accounting")
    );
    // Only a read begun after the accounting counts for classification (§4.1).
    observe(
        s,
        "m1",
        ObservationPurpose::Recovery,
        None,
        B,
        facts("m1", base_digest("m1")),
    )
    .await;
    // Accounted, and the node shows the pre-dispatch digest: safe to retry.
    assert_eq!(
        s.classify(&c.operation, owner).await.unwrap(),
        Classification::SafeToRetry
    );
    // A late acceptance of attempt 1 lands on the timeline after the classification.
    s.record_response(&c.operation, 1, c.owner, ResponseClass::Accepted)
        .await
        .unwrap();
    evidence(s, "p1", "m1", B, facts("m1", base_digest("m1"))).await;
    let err = s.attempt(&c.operation, owner).await.unwrap_err();
    assert_eq!(
        err.comparison(),
        Some(Comparison::TimelineUnchanged),
        "{err}"
    );
    refusal_on_timeline(s, "m1", "attempt_refused", Comparison::TimelineUnchanged).await;
}

/// A retry after a safe-to-retry classification goes through its own attempt
/// transaction with fresh evidence.
pub async fn retry_after_classification<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    // Another InvalidArgument: accounts for the attempt, decides nothing.
    assert_eq!(
        s.record_response(&c.operation, 1, c.owner, ResponseClass::OtherRefusal)
            .await
            .unwrap(),
        OperationState::Unresolved
    );
    observe(
        s,
        "m1",
        ObservationPurpose::Recovery,
        None,
        A,
        facts("m1", base_digest("m1")),
    )
    .await;
    assert_eq!(
        s.classify(&c.operation, c.owner).await.unwrap(),
        Classification::SafeToRetry
    );
    // Without fresh evidence the retry is refused by 3 (and, the owner refused by 3,
    // the operation stays unresolved).
    let err = s.attempt(&c.operation, c.owner).await.unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::Evidence), "{err}");
    evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    let proof = s.attempt(&c.operation, c.owner).await.unwrap();
    assert_eq!(proof.attempt(), 2);
}

/// A freeze after commitment refuses the attempt by 6; the owner's refusal moves
/// committed → unresolved but not to cancelled, since a gate reopens (choice
/// §10.30). Once unfrozen, a recovery observation at the pre-dispatch digest makes
/// it safe to retry, and a retry with fresh evidence is admitted.
pub async fn attempt_refused_by_gate<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    s.freeze(&ann(), "m1", "incident").await.unwrap();
    let err = s.attempt(&c.operation, c.owner).await.unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::Gate), "{err}");
    refusal_on_timeline(s, "m1", "attempt_refused", Comparison::Gate).await;
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Unresolved
    );
    // Frozen, the retry conditions fail: nothing is classified safe to retry.
    observe(
        s,
        "m1",
        ObservationPurpose::Recovery,
        None,
        A,
        facts("m1", base_digest("m1")),
    )
    .await;
    assert!(matches!(
        s.classify(&c.operation, c.owner).await.unwrap(),
        Classification::Unresolved(_)
    ));
    s.unfreeze(&bob(), "m1", "incident over").await.unwrap();
    observe(
        s,
        "m1",
        ObservationPurpose::Recovery,
        None,
        A,
        facts("m1", base_digest("m1")),
    )
    .await;
    assert_eq!(
        s.classify(&c.operation, c.owner).await.unwrap(),
        Classification::SafeToRetry
    );
    evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    let proof = s.attempt(&c.operation, c.owner).await.unwrap();
    assert_eq!(proof.attempt(), 1);
}

/// With zero attempts an apply-config operation never completes (§4), even when a
/// completion observation shows its artifact on the node: the classification is
/// unresolved because nothing was sent, the operation stays committed, and Applied
/// stays put.
pub async fn no_completion_without_attempt<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    observe(
        s,
        "m1",
        ObservationPurpose::Completion,
        None,
        A,
        facts("m1", artifact_digest("m1", "rel-1")),
    )
    .await;
    let cl = s.classify(&c.operation, c.owner).await.unwrap();
    assert_eq!(
        cl,
        Classification::Unresolved(UnresolvedReason::NothingSent)
    );
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Committed
    );
    assert_eq!(
        s.machine("m1").await.unwrap().applied_digest,
        Some(base_digest("m1"))
    );
}

/// §8 scenario "revocation vs. commitment", after commitment and before the
/// attempt: the attempt is refused by 1, committed → unresolved → cancelled.
pub async fn revocation_after_commitment<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    s.revoke_approval(&bob(), "p1").await.unwrap();
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Committed);
    let err = s.attempt(&c.operation, c.owner).await.unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::Authority), "{err}");
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Cancelled
    );
    let kinds: Vec<String> = s
        .timeline("m1")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert!(!kinds.iter().any(|k| k == "attempt"), "{kinds:?}");
}

/// DS row 006: a revocation after the quick early check and before commitment is
/// seen inside the transaction. Control: without the in-transaction check the
/// commitment goes through on a revoked approval.
pub async fn revocation_after_preflight<S: Store>(make: impl AsyncFn(Guards) -> Env<S>) {
    for checked in [true, false] {
        let env = make(Guards {
            approval_in_transaction: checked,
            ..Guards::default()
        })
        .await;
        let s = &env.store;
        world(s).await;
        ready(&env, "p1", "m1", A).await;
        s.preflight("p1").await.unwrap();
        s.revoke_approval(&bob(), "p1").await.unwrap();
        let result = s.commit("p1", A).await;
        if checked {
            assert_eq!(
                result.unwrap_err().comparison(),
                Some(Comparison::Authority)
            );
        } else {
            result.expect("without the in-transaction check the revoked plan commits");
        }
    }
}

/// DS rows 010/011: a second plan for a held machine is refused by the scope index.
/// Control: without it both commit and two operations hold one machine.
pub async fn scope_index_control<S: Store>(make: impl AsyncFn(Guards) -> Env<S>) {
    for indexed in [true, false] {
        let env = make(Guards {
            scope_index: indexed,
            ..Guards::default()
        })
        .await;
        let s = &env.store;
        world(s).await;
        ready(&env, "p1", "m1", A).await;
        ready(&env, "p2", "m1", A).await;
        s.commit("p1", A).await.unwrap();
        let second = s.commit("p2", A).await;
        let states: Vec<OperationState> = s
            .operations_of("m1")
            .await
            .unwrap()
            .iter()
            .map(|o| o.state)
            .collect();
        if indexed {
            assert_eq!(
                second.unwrap_err().comparison(),
                Some(Comparison::MachineScope)
            );
            assert_eq!(holding(&states), 1);
        } else {
            second.expect("without the scope index both plans commit");
            assert_eq!(holding(&states), 2, "{states:?}");
        }
    }
}

pub async fn assignment_change_while_held<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    let err = s.change_assignment(&ann(), "m1").await.unwrap_err();
    assert!(matches!(err, StoreError::Refused { .. }), "{err}");
    assert_eq!(s.machine("m1").await.unwrap().assignment_revision, 1);
    // Control: once the operation is final, the assignment may change.
    s.revoke_approval(&bob(), "p1").await.unwrap();
    let err = s.attempt(&c.operation, c.owner).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::AttemptRefused { comparison: Comparison::Authority, reason } if reason.contains("revoked")),
        "{err:?}"
    );
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Cancelled
    );
    assert_eq!(s.change_assignment(&ann(), "m1").await.unwrap(), 2);
}

pub async fn timeline_is_append_only<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let before = s.timeline("m1").await.unwrap();
    let err = s
        .raw_execute("UPDATE timeline SET detail = 'rewritten'")
        .await
        .unwrap_err();
    append_only(&err, "timeline");
    let err = s.raw_execute("DELETE FROM timeline").await.unwrap_err();
    append_only(&err, "timeline");
    let err = s.raw_execute("DELETE FROM observations").await.unwrap_err();
    append_only(&err, "observations");
    let err = s
        .raw_execute("UPDATE observation_starts SET purpose = 'drift'")
        .await
        .unwrap_err();
    append_only(&err, "observation_starts");
    assert_eq!(s.timeline("m1").await.unwrap(), before);
    // Control: the same kind of statement on a state table goes through.
    assert!(
        s.raw_execute("UPDATE machines SET frozen = frozen")
            .await
            .unwrap()
            > 0
    );
}

pub async fn no_plaintext_stored<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    s.record_response(&c.operation, 1, c.owner, ResponseClass::Accepted)
        .await
        .unwrap();
    let dump = s.dump_all_rows().await.unwrap();
    assert!(!dump.contains(MARKER), "plaintext reached a table");
    // Control: the dump does see artifact data — the sealed bytes, as hex.
    let hex: String = seal(&plaintext("m1", "rel-1"))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(dump.contains(&hex), "the dump misses the ciphertext");
    assert!(dump.contains(&artifact_digest("m1", "rel-1").to_hex()));
}

pub async fn roles_and_self_approval<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let now = env.clock.now();
    s.create_plan(&alice(), spec("p1", "m1", "rel-1", now))
        .await
        .unwrap();
    // Automation and recovery-admin never approve; a publisher does not either.
    let err = s
        .approve(&Actor::new("bot", Role::Automation), "p1")
        .await
        .unwrap_err();
    refused_as(&err, "approving", "the role automation may not do this");
    let err = s.approve(&root(), "p1").await.unwrap_err();
    refused_as(&err, "approving", "the role recovery-admin may not do this");
    let err = s
        .approve(&Actor::new("alice", Role::Approver), "p1")
        .await
        .unwrap_err();
    refused_as(&err, "approving", "alice does not hold the role approver");
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Proposed);
    assert_eq!(
        s.approve(&bob(), "p1").await.unwrap(),
        SelfApproval::NotSelfApproval
    );
    // The approver made the plan.
    s.create_plan(
        &Actor::new("dave", Role::Publisher),
        spec("p2", "m2", "rel-1", now),
    )
    .await
    .unwrap();
    assert_eq!(
        s.approve(&Actor::new("dave", Role::Approver), "p2")
            .await
            .unwrap(),
        SelfApproval::SelfApproval(SelfApprovalBasis::CreatedPlan)
    );
    // The approver authored content in the release.
    s.register_principal(
        &root(),
        PrincipalSpec {
            id: "erin".into(),
            kind: PrincipalKind::Human,
            roles: vec![Role::Approver, Role::Author],
        },
    )
    .await
    .unwrap();
    s.publish_release(
        &alice(),
        ReleaseSpec {
            id: "rel-e".into(),
            artifacts: vec![("m3".into(), sealed("m3", "rel-e"))],
            contributions: vec![("erin".into(), ContributionKind::Authored)],
        },
    )
    .await
    .unwrap();
    s.create_plan(&alice(), spec("p3", "m3", "rel-e", now))
        .await
        .unwrap();
    assert_eq!(
        s.approve(&Actor::new("erin", Role::Approver), "p3")
            .await
            .unwrap(),
        SelfApproval::SelfApproval(SelfApprovalBasis::AuthoredContent)
    );
    // A token with no responsibility record made the plan: undetermined.
    s.create_plan(
        &Actor::new("orphan", Role::Publisher),
        spec("p4", "m1", "rel-1", now),
    )
    .await
    .unwrap();
    assert_eq!(
        s.approve(&carol(), "p4").await.unwrap(),
        SelfApproval::Undetermined
    );
    // A token whose responsible person approves.
    s.register_principal(
        &root(),
        PrincipalSpec {
            id: "frank".into(),
            kind: PrincipalKind::Human,
            roles: vec![Role::Approver],
        },
    )
    .await
    .unwrap();
    s.register_principal(
        &root(),
        PrincipalSpec {
            id: "bot2".into(),
            kind: PrincipalKind::Token {
                responsible: Some("frank".into()),
            },
            roles: vec![Role::Publisher],
        },
    )
    .await
    .unwrap();
    s.create_plan(
        &Actor::new("bot2", Role::Publisher),
        spec("p5", "m2", "rel-1", now),
    )
    .await
    .unwrap();
    assert_eq!(
        s.approve(&Actor::new("frank", Role::Approver), "p5")
            .await
            .unwrap(),
        SelfApproval::SelfApproval(SelfApprovalBasis::ResponsibleForToken)
    );
    let timeline = s.timeline("m1").await.unwrap();
    assert!(
        timeline
            .iter()
            .any(|e| e.kind == "approval" && e.detail.contains("self_approval_undetermined"))
    );
}

// ---------------------------------------------------------------------------------
// The structured reads.

/// A sealed artifact with its full binding; the key's name and identity differ.
pub fn bound_sealed(machine: &str, release: &str) -> keys::SealedArtifact {
    let plain = plaintext(machine, release);
    keys::SealedArtifact {
        binding: KeyBinding {
            provider: "local".into(),
            key_name: format!("artifacts-{machine}"),
            key_identity: format!("artifacts-{machine}@1790000000"),
            version: 3,
        },
        ciphertext: seal(&plain),
        digest: config_digest(&plain),
    }
}

pub async fn publish_bound<S: Store>(s: &S, release: &str) {
    s.publish_sealed_release(
        &alice(),
        SealedReleaseSpec {
            id: release.into(),
            artifacts: ["m1", "m2", "m3"]
                .iter()
                .map(|m| ((*m).to_owned(), bound_sealed(m, release)))
                .collect(),
            contributions: vec![("ann".into(), ContributionKind::Authored)],
        },
    )
    .await
    .unwrap();
}

pub async fn sealed_artifact_read<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    // A plan on an artifact published with only the key's identifier.
    approved(&env, "p1", "m2", "rel-1").await;
    publish_bound(s, "rel-2").await;
    approved(&env, "p2", "m1", "rel-2").await;
    // Exactly the ciphertext and binding given.
    let read = s.sealed_artifact("p2").await.unwrap();
    assert_eq!(read, bound_sealed("m1", "rel-2"));
    assert_eq!(read.binding.key_name, "artifacts-m1");
    assert_eq!(read.binding.key_identity, "artifacts-m1@1790000000");
    // The plan binds that artifact: it commits and its attempt passes comparison 2.
    evidence(s, "p2", "m1", A, facts("m1", base_digest("m1"))).await;
    let c = s.commit("p2", A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    // An artifact published with only the key's identifier has no name to open it by.
    let err = s.sealed_artifact("p1").await.unwrap_err();
    assert!(matches!(err, StoreError::Refused { .. }), "{err}");
    assert!(matches!(
        s.sealed_artifact("nope").await,
        Err(StoreError::NotFound { .. })
    ));
    // No plaintext marker in any row; the control sees the ciphertext.
    let dump = s.dump_all_rows().await.unwrap();
    assert!(!dump.contains(MARKER), "plaintext reached a table");
    let hex: String = bound_sealed("m1", "rel-2")
        .ciphertext
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(dump.contains(&hex), "the dump misses the ciphertext");
    assert!(dump.contains("key_name=artifacts-m1 "), "{dump}");
}

pub async fn attempts_read<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    assert!(s.attempts(&c.operation).await.unwrap().is_empty());
    env.clock.advance(SpanMs(250));
    let at = env.clock.now();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    let attempts = s.attempts(&c.operation).await.unwrap();
    assert_eq!(attempts.len(), 1);
    let a = &attempts[0];
    assert_eq!(a.operation, c.operation);
    assert_eq!(a.number, 1);
    assert_eq!(a.at, at);
    assert_eq!(a.owner, c.owner);
    // The plan's bound spans from the attempt's time (spec(): 5 s and 30 s).
    assert_eq!(a.transport_deadline, at.plus(SpanMs::from_secs(5)));
    assert_eq!(a.verification_deadline, at.plus(SpanMs::from_secs(30)));
    assert_eq!(a.response, ResponseClass::Pending);
    assert_eq!(a.accounting, AttemptAccounting::Unaccounted);
    assert!(!a.accounted());
    let timeline = s.timeline("m1").await.unwrap();
    let entry = timeline.iter().rfind(|e| e.kind == "attempt").unwrap();
    assert_eq!(a.revision, entry.revision);
    // A transport outcome accounts for nothing.
    env.clock.advance(SpanMs(6000));
    s.record_response(
        &c.operation,
        1,
        c.owner,
        ResponseClass::Transport(TransportOutcome::ConnectionLost),
    )
    .await
    .unwrap();
    let a = s.attempts(&c.operation).await.unwrap().remove(0);
    assert_eq!(
        a.response,
        ResponseClass::Transport(TransportOutcome::ConnectionLost)
    );
    assert!(a.response_revision.is_some());
    assert_eq!(a.response_text, None);
    assert_eq!(a.accounting, AttemptAccounting::Unaccounted);

    // On another machine: a response with the dispatch client's redacted message.
    ready(&env, "p3", "m3", A).await;
    let c3 = s.commit("p3", A).await.unwrap();
    let _proof = s.attempt(&c3.operation, c3.owner).await.unwrap();
    s.record_response_text(
        &c3.operation,
        1,
        c3.owner,
        ResponseClass::ValidationRejection,
        Some("1 error occurred: bad \"<withheld>\"".into()),
    )
    .await
    .unwrap();
    let a3 = s.attempts(&c3.operation).await.unwrap().remove(0);
    assert_eq!(a3.response, ResponseClass::ValidationRejection);
    assert_eq!(
        a3.response_text.as_deref(),
        Some("1 error occurred: bad \"<withheld>\"")
    );
    let rev = a3.response_revision.expect("recorded");
    assert_eq!(a3.accounting, AttemptAccounting::Response(rev));
    assert!(a3.accounted());
    assert!(matches!(
        s.attempts("nope").await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn observations_read<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    // The handover's observation of m3 comes first; this test reads the ones after.
    let handover = s.observations("m3").await.unwrap();
    assert_eq!(handover.len(), 1);
    assert_eq!(handover[0].plan.as_deref(), Some("handover-m3"));
    let after_handover = || async {
        let mut views = s.observations("m3").await.unwrap();
        views.remove(0);
        views
    };
    approved(&env, "p1", "m3", "rel-1").await;
    let started = env.clock.now();
    let ticket = s
        .begin_observation(ObservationRequest {
            machine: "m3".into(),
            purpose: ObservationPurpose::Evidence,
            plan: Some("p1".into()),
            controller: A,
        })
        .await
        .unwrap();
    // Started, not recorded.
    let views = after_handover().await;
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].basis, ticket.basis);
    assert_eq!(views[0].recorded_at, None);
    assert_eq!(views[0].read, None);
    env.clock.advance(SpanMs(700));
    let read = facts("m3", base_digest("m3"));
    let recorded = s.record_observation(&ticket, read.clone()).await.unwrap();
    // A recovery observation without a plan, reading nothing.
    env.clock.advance(SpanMs(100));
    let second = observe(
        s,
        "m3",
        ObservationPurpose::Recovery,
        None,
        B,
        ObservedFacts::default(),
    )
    .await;
    let views = after_handover().await;
    assert_eq!(views.len(), 2);
    let v = &views[0];
    assert_eq!(v.machine, "m3");
    assert_eq!(v.basis, ticket.basis);
    assert_eq!(v.purpose, ObservationPurpose::Evidence);
    assert_eq!(v.plan.as_deref(), Some("p1"));
    assert_eq!(v.controller, Some(A));
    assert_eq!(v.started_at, started);
    assert_eq!(v.recorded_at, Some(started.plus(SpanMs(700))));
    assert_eq!(v.recorded_revision, Some(recorded));
    assert_eq!(v.read.as_ref(), Some(&read));
    assert_eq!(v.digest(), Some(base_digest("m3")));
    assert_eq!(v.config_version(), Some(5));
    assert_eq!(
        v.read.as_ref().and_then(|r| r.node_id.as_deref()),
        Some("node-m3")
    );
    let w = &views[1];
    assert_eq!(w.basis.0, second);
    assert_eq!(w.purpose, ObservationPurpose::Recovery);
    assert_eq!(w.plan, None);
    assert_eq!(w.controller, Some(B));
    assert_eq!(w.digest(), None);
    assert!(w.recorded_at.is_some());
    // Per machine: m1 has only its handover's.
    let of_m1 = s.observations("m1").await.unwrap();
    assert_eq!(of_m1.len(), 1);
    assert_eq!(of_m1[0].plan.as_deref(), Some("handover-m1"));
    assert!(matches!(
        s.observations("nope").await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn machines_and_open_operations<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let machines = s.machines().await.unwrap();
    let ids: Vec<&str> = machines.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["m1", "m2", "m3"]);
    assert_eq!(machines[0].endpoint, "m1.nodes:50000");
    assert_eq!(
        machines[0].identity,
        IdentityKey::SmbiosUuid("uuid-m1".into())
    );
    assert_eq!(machines[0].cluster_id, "cluster-1");
    assert_eq!(machines[2].identity, IdentityKey::NodeId("node-m3".into()));
    assert_eq!(s.machine("m3").await.unwrap(), machines[2]);
    assert!(s.open_operations().await.unwrap().is_empty());

    // m1: completed; m3: sending; m2: committed, then taken over (unresolved).
    ready(&env, "p1", "m1", A).await;
    let c1 = s.commit("p1", A).await.unwrap();
    sent_and_completed(s, &c1, "m1", artifact_digest("m1", "rel-1")).await;
    ready(&env, "p3", "m3", A).await;
    let c3 = s.commit("p3", A).await.unwrap();
    let _proof = s.attempt(&c3.operation, c3.owner).await.unwrap();
    ready(&env, "p2", "m2", A).await;
    let c2 = s.commit("p2", A).await.unwrap();
    s.takeover(&c2.operation, 1, B).await.unwrap();

    let open = s.open_operations().await.unwrap();
    let listed: Vec<(&str, OperationState)> =
        open.iter().map(|o| (o.machine.as_str(), o.state)).collect();
    assert_eq!(
        listed,
        [
            ("m2", OperationState::Unresolved),
            ("m3", OperationState::Sending)
        ]
    );
    assert_eq!(open[0].id, c2.operation);
    assert_eq!(open[0].owner.controller, B);
    assert_eq!(open[1].id, c3.operation);
}

pub async fn now_and_plan_deadlines<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    assert_eq!(s.now().await.unwrap(), env.clock.now());
    env.clock.advance(SpanMs(1234));
    assert_eq!(s.now().await.unwrap(), T0.plus(SpanMs(1234)));
    let mut plan = spec("p1", "m1", "rel-1", env.clock.now());
    plan.transport_deadline = SpanMs(2500);
    plan.verification_deadline = SpanMs(45_000);
    let made = s.create_plan(&alice(), plan).await.unwrap();
    assert_eq!(made.transport_deadline, SpanMs(2500));
    assert_eq!(made.verification_deadline, SpanMs(45_000));
    let read = s.plan("p1").await.unwrap();
    assert_eq!(read.transport_deadline, SpanMs(2500));
    assert_eq!(read.verification_deadline, SpanMs(45_000));
    // §7.3 step 1: a transport deadline above the deployment's maximum is refused
    // at creation, not first by the executor; the maximum itself is accepted.
    let ceiling = infra_talos::store::DEFAULT_MAX_TRANSPORT_DEADLINE;
    let mut over = spec("p-over", "m2", "rel-1", env.clock.now());
    over.transport_deadline = SpanMs(ceiling.0 + 1);
    over.verification_deadline = SpanMs(ceiling.0 * 2);
    let err = s.create_plan(&alice(), over).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Refused { reason, .. } if reason.contains("maximum")),
        "{err}"
    );
    assert!(matches!(
        s.plan("p-over").await,
        Err(StoreError::NotFound { .. })
    ));
    let mut at = spec("p-at", "m2", "rel-1", env.clock.now());
    at.transport_deadline = ceiling;
    at.verification_deadline = SpanMs(ceiling.0 * 2);
    s.create_plan(&alice(), at).await.unwrap();
}

pub async fn takeover_request_recorded<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    // Only recovery-admin may ask; a refused request changes nothing.
    let err = s
        .takeover_requested(&c.operation, 1, B, Some(&bob()))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused { .. }), "{err}");
    let err = s
        .takeover_requested(
            &c.operation,
            1,
            B,
            Some(&Actor::new("bob", Role::RecoveryAdmin)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused { .. }), "{err}");
    assert_eq!(s.operation(&c.operation).await.unwrap().owner, c.owner);
    let token = s
        .takeover_requested(&c.operation, 1, B, Some(&root()))
        .await
        .unwrap();
    assert_eq!(token.controller, B);
    assert_eq!(token.generation, 2);
    // A plain takeover names nobody.
    s.takeover(&c.operation, 2, A).await.unwrap();
    let takeovers: Vec<_> = s
        .timeline("m1")
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "takeover")
        .collect();
    assert_eq!(takeovers.len(), 2);
    assert_eq!(takeovers[0].requested_by.as_deref(), Some("root"));
    assert_eq!(takeovers[1].requested_by, None);
}

// ---------------------------------------------------------------------------------
// Migrations.

/// What a store at schema version 1 holds, as the acts before version 2 made it.
pub struct AtVersionOne {
    pub operation: String,
    /// The token its attempt was made with.
    pub owner: OwnerToken,
    /// Every row, as text.
    pub rows: String,
    pub machine: infra_talos::store::MachineView,
}

/// Fill a store whose schema is at version 1, through acts that need nothing newer.
pub async fn fill_version_one<S: Store>(env: &Env<S>) -> AtVersionOne {
    let s = &env.store;
    world_before_imports(s).await;
    ready(env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    s.takeover(&c.operation, 1, B).await.unwrap();
    AtVersionOne {
        operation: c.operation,
        owner: c.owner,
        rows: s.dump_all_rows().await.unwrap(),
        machine: s.machine("m1").await.unwrap(),
    }
}

/// The same store after migrating to the current version: everything is still
/// there, and what versions 2 and 3 added works.
pub async fn check_current_version<S: Store>(s: &S, clock: &ManualClock, before: AtVersionOne) {
    // Every row is still there with its values; the new columns follow them.
    let after = s.dump_all_rows().await.unwrap();
    assert_eq!(after.lines().count(), before.rows.lines().count());
    for row in before.rows.lines() {
        assert!(
            after
                .lines()
                .any(|r| r == row || r.starts_with(&format!("{row} "))),
            "row lost or changed by the migration: {row}"
        );
    }
    assert_eq!(s.machine("m1").await.unwrap(), before.machine);
    let timeline = s.timeline("m1").await.unwrap();
    assert!(timeline.iter().any(|e| e.kind == "takeover"));
    assert!(timeline.iter().all(|e| e.requested_by.is_none()));
    let op = s.operation(&before.operation).await.unwrap();
    assert_eq!(op.state, OperationState::Unresolved);
    assert_eq!(op.owner.controller, B);
    let attempts = s.attempts(&before.operation).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].response_text, None);
    assert_eq!(
        attempts[0].transport_deadline,
        attempts[0].at.plus(SpanMs::from_secs(5))
    );
    // The old artifacts: ciphertext intact, the identifier kept as the key's identity.
    let dump = s.dump_all_rows().await.unwrap();
    let hex: String = seal(&plaintext("m1", "rel-1"))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(dump.contains(&hex), "the ciphertext did not survive");
    assert!(dump.contains("key_identity=k-m1"), "{dump}");
    assert!(matches!(
        s.sealed_artifact("p1").await,
        Err(StoreError::Refused { .. })
    ));
    // The new columns take writes.
    s.record_response_text(
        &before.operation,
        1,
        before.owner,
        ResponseClass::Accepted,
        Some("applied".into()),
    )
    .await
    .unwrap();
    assert_eq!(
        s.attempts(&before.operation).await.unwrap()[0]
            .response_text
            .as_deref(),
        Some("applied")
    );
    publish_bound(s, "rel-2").await;
    let env_like = s.machine("m2").await.unwrap();
    assert_eq!(env_like.desired_release.as_deref(), Some("rel-2"));
    s.create_plan(&alice(), spec("p2", "m2", "rel-2", clock.now()))
        .await
        .unwrap();
    assert_eq!(
        s.sealed_artifact("p2").await.unwrap(),
        bound_sealed("m2", "rel-2")
    );
    // Version 3: blanket approvals, over identities and plans made before it.
    s.grant_blanket_approval(&bob(), "cluster-1", "after the upgrade", WEEK)
        .await
        .unwrap();
    s.approve_under_blanket(&Actor::new("bot", Role::Automation), "p2")
        .await
        .unwrap();
    assert_eq!(s.plan("p2").await.unwrap().state, PlanState::Approved);
}

/// A response that arrives after a takeover is recorded as the answer to the attempt
/// that was sent, under the token that made that attempt, not the new owner's.
pub async fn response_after_takeover_is_the_attempts<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    s.takeover(&c.operation, 1, B).await.unwrap();
    s.record_response(&c.operation, 1, c.owner, ResponseClass::Accepted)
        .await
        .unwrap();
    let timeline = s.timeline("m1").await.unwrap();
    let response = timeline.iter().rfind(|e| e.kind == "response").unwrap();
    assert!(
        response
            .actor
            .starts_with(&format!("controller {:032x} generation 1 ", A.0)),
        "{response:?}"
    );
    let takeover = timeline.iter().rfind(|e| e.kind == "takeover").unwrap();
    assert!(
        takeover.actor.contains(&format!("{:032x}", B.0)),
        "{takeover:?}"
    );
}

/// Begin an observation of `machine` by controller A; its ticket.
async fn begin<S: Store>(
    s: &S,
    machine: &str,
    purpose: ObservationPurpose,
) -> infra_talos::store::ObservationTicket {
    s.begin_observation(ObservationRequest {
        machine: machine.into(),
        purpose,
        plan: None,
        controller: A,
    })
    .await
    .unwrap()
}

/// Two observations of `machine` begun one after the other and recorded the other
/// way round: the higher-basis one first, reading `high`, then the lower-basis one,
/// reading `low`. The store lists them by basis, the later-recorded one first.
async fn recorded_out_of_order<S: Store>(
    s: &S,
    machine: &str,
    purpose: ObservationPurpose,
    low: Digest,
    high: Digest,
) {
    let first = begin(s, machine, purpose).await;
    let second = begin(s, machine, purpose).await;
    assert!(first.basis < second.basis, "{first:?} {second:?}");
    let high_at = s
        .record_observation(&second, facts(machine, high))
        .await
        .unwrap();
    let low_at = s
        .record_observation(&first, facts(machine, low))
        .await
        .unwrap();
    assert!(high_at < low_at, "recorded {high_at:?} then {low_at:?}");
    let listed: Vec<(u64, Option<Digest>, Option<u64>)> = s
        .observations(machine)
        .await
        .unwrap()
        .iter()
        .filter(|o| o.basis == first.basis || o.basis == second.basis)
        .map(|o| (o.basis.0, o.digest(), o.recorded_revision.map(|r| r.0)))
        .collect();
    assert_eq!(
        listed,
        [
            (first.basis.0, Some(low), Some(low_at.0)),
            (second.basis.0, Some(high), Some(high_at.0)),
        ]
    );
}

/// §4.1, §4 and §6.1: observations are ordered by basis, the revision of their
/// "observation started" entry, not by when their result was recorded. A
/// higher-basis completion read recorded before a lower-basis one still decides: on
/// m1 it shows the artifact and the operation completes although the read recorded
/// last shows the pre-dispatch digest; on m3, the mirror, it shows the pre-dispatch
/// digest and the operation fails on it although the read recorded last shows the
/// artifact. A drift read with a higher basis that read Applied's digest, recorded
/// first, keeps a lower-basis read of another digest from opening a drift record
/// (§6.1 basis rules); the same read alone opens one.
pub async fn observations_decide_in_basis_order<S: Store>(env: Env<S>) {
    use infra_talos::contract::classify::FailedReason;
    use infra_talos::contract::evidence::DigestMatch;
    let s = &env.store;
    world(s).await;
    for m in ["m1", "m3"] {
        ready(&env, &format!("p-{m}"), m, A).await;
    }
    for (m, low, high, expected) in [
        (
            "m1",
            base_digest("m1"),
            artifact_digest("m1", "rel-1"),
            Classification::Completed,
        ),
        (
            "m3",
            artifact_digest("m3", "rel-1"),
            base_digest("m3"),
            Classification::Failed(FailedReason::Digest(DigestMatch::PreDispatch)),
        ),
    ] {
        let c = s.commit(&format!("p-{m}"), A).await.unwrap();
        let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
        s.record_response(&c.operation, 1, c.owner, ResponseClass::Accepted)
            .await
            .unwrap();
        env.clock.advance(SpanMs(500));
        recorded_out_of_order(s, m, ObservationPurpose::Completion, low, high).await;
        assert_eq!(
            s.classify(&c.operation, c.owner).await.unwrap(),
            expected,
            "{m}"
        );
        let applied = s.machine(m).await.unwrap().applied_digest;
        let expected_applied = if m == "m1" { high } else { base_digest(m) };
        assert_eq!(applied, Some(expected_applied), "{m}");
    }
    // Drift on m2, which no operation holds.
    let drifted = config_digest(b"edited by hand\n");
    recorded_out_of_order(
        s,
        "m2",
        ObservationPurpose::Drift,
        drifted,
        base_digest("m2"),
    )
    .await;
    assert_eq!(s.machine("m2").await.unwrap().open_drift, None);
    let opened: Vec<String> = s
        .timeline("m2")
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "drift_opened")
        .map(|e| e.detail)
        .collect();
    assert_eq!(opened, Vec::<String>::new());
    let alone = observe(
        s,
        "m2",
        ObservationPurpose::Drift,
        None,
        A,
        facts("m2", drifted),
    )
    .await;
    let timeline = s.timeline("m2").await.unwrap();
    let opened = timeline
        .iter()
        .rfind(|e| e.kind == "drift_opened")
        .expect("the read alone opens a drift record");
    assert!(
        opened
            .detail
            .starts_with(&format!("digest mismatch: observation basis r{alone} ")),
        "{opened:?}"
    );
    assert_eq!(
        s.machine("m2").await.unwrap().open_drift,
        Some(opened.revision)
    );
}

/// Run every suite test that takes a plain environment.
pub async fn run_plain<S, F, Fut>(name: &str, make: F)
where
    S: Store,
    F: Fn(Guards) -> Fut,
    Fut: Future<Output = Env<S>>,
{
    let env = make(Guards::default()).await;
    match name {
        "happy_path" => happy_path(env).await,
        "c0_plan_committed_twice" => c0_plan_committed_twice(env).await,
        "c1_approval_revoked" => c1_approval_revoked(env).await,
        "c1_expired" => c1_expired(env).await,
        "c1_cancelled" => c1_cancelled(env).await,
        "c1_identity_revoked" => c1_identity_revoked(env).await,
        "c1_foreign_epoch" => c1_foreign_epoch(env).await,
        "c2_assignment_changed" => c2_assignment_changed(env).await,
        "c2_desired_moved" => c2_desired_moved(env).await,
        "c2_baseline_moved" => c2_baseline_moved(env).await,
        "c3_evidence_cases" => c3_evidence_cases(env).await,
        "c3_missing_evidence" => c3_missing_evidence(env).await,
        "c3_wrong_digest_opens_drift" => c3_wrong_digest_opens_drift(env).await,
        "c6_unbound_drift" => c6_unbound_drift(env).await,
        "c4_scope_held" => c4_scope_held(env).await,
        "c5_rollout_slot" => c5_rollout_slot(env).await,
        "c6_frozen" => c6_frozen(env).await,
        "attempt_refusals_7" => attempt_refusals_7(env).await,
        "attempt_refusals_9" => attempt_refusals_9(env).await,
        "attempt_budget_used_up_through_the_store" => {
            attempt_budget_used_up_through_the_store(env).await;
        }
        "observations_decide_in_basis_order" => observations_decide_in_basis_order(env).await,
        "accounting_and_retry" => accounting_and_retry(env).await,
        "retry_after_classification" => retry_after_classification(env).await,
        "no_completion_without_attempt" => no_completion_without_attempt(env).await,
        "attempt_refused_by_gate" => attempt_refused_by_gate(env).await,
        "revocation_after_commitment" => revocation_after_commitment(env).await,
        "assignment_change_while_held" => assignment_change_while_held(env).await,
        "timeline_is_append_only" => timeline_is_append_only(env).await,
        "no_plaintext_stored" => no_plaintext_stored(env).await,
        "roles_and_self_approval" => roles_and_self_approval(env).await,
        "sealed_artifact_read" => sealed_artifact_read(env).await,
        "attempts_read" => attempts_read(env).await,
        "observations_read" => observations_read(env).await,
        "machines_and_open_operations" => machines_and_open_operations(env).await,
        "now_and_plan_deadlines" => now_and_plan_deadlines(env).await,
        "takeover_request_recorded" => takeover_request_recorded(env).await,
        "response_after_takeover_is_the_attempts" => {
            response_after_takeover_is_the_attempts(env).await;
        }
        other => panic!("no suite test {other}"),
    }
}

/// Declare one `#[tokio::test]` per suite test, each calling `$make`.
#[macro_export]
macro_rules! store_suite {
    ($make:path) => {
        $crate::store_suite!(@plain $make;
            happy_path, c0_plan_committed_twice, c1_approval_revoked, c1_expired,
            c1_cancelled, c1_identity_revoked, c1_foreign_epoch, c2_assignment_changed,
            c2_desired_moved, c2_baseline_moved, c3_evidence_cases, c3_missing_evidence,
            c3_wrong_digest_opens_drift, c6_unbound_drift, c4_scope_held, c5_rollout_slot,
            c6_frozen, attempt_refusals_7, attempt_refusals_9,
            attempt_budget_used_up_through_the_store, observations_decide_in_basis_order,
            accounting_and_retry,
            retry_after_classification, no_completion_without_attempt, attempt_refused_by_gate,
            revocation_after_commitment, assignment_change_while_held,
            timeline_is_append_only, no_plaintext_stored, roles_and_self_approval,
            sealed_artifact_read, attempts_read, observations_read,
            machines_and_open_operations, now_and_plan_deadlines, takeover_request_recorded,
            response_after_takeover_is_the_attempts);

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn takeover_fence() {
            if let Some(make) = $make() {
                store_suite::takeover_fence(async |g| make(g).await).await;
            }
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn revocation_after_preflight() {
            if let Some(make) = $make() {
                store_suite::revocation_after_preflight(async |g| make(g).await).await;
            }
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn scope_index_control() {
            if let Some(make) = $make() {
                store_suite::scope_index_control(async |g| make(g).await).await;
            }
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn c6_recovery_without_release() {
            if let Some(make) = $make() {
                store_suite::c6_recovery_without_release(async |g| make(g).await).await;
            }
        }
    };
    (@plain $make:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if let Some(make) = $make() {
                    store_suite::run_plain(stringify!($name), make).await;
                }
            }
        )*
    };
}
