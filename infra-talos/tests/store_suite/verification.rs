//! Store cases from the verification map that the rest of the suite does not
//! reach, run on both stores: identity cases for a commitment and for a retry's
//! attempt, cancellation, expiry and identity revocation after commitment with no
//! attempt, a publication after commitment, and the assignment held in every
//! non-terminal state.

use infra_talos::contract::SpanMs;
use infra_talos::contract::classify::Classification;
use infra_talos::contract::evidence::{ObservationPurpose, ResponseClass, TransportOutcome};
use infra_talos::contract::operation::OperationState;
use infra_talos::contract::plan::PlanState;
use infra_talos::store::{ObservedFacts, Store, StoreError};

use super::*;

/// An operation of plan `plan` on `machine`, with one attempt answered by a
/// non-validation refusal (accounted, decides nothing) and a recovery observation at
/// the pre-dispatch digest: classified safe to retry.
async fn safe_to_retry<S: Store>(env: &Env<S>, plan: &str, machine: &str) -> Committed {
    let s = &env.store;
    ready(env, plan, machine, A).await;
    let c = s.commit(plan, A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    assert_eq!(
        s.record_response(&c.operation, 1, c.owner, ResponseClass::OtherRefusal)
            .await
            .unwrap(),
        OperationState::Unresolved
    );
    observe(
        s,
        machine,
        ObservationPurpose::Recovery,
        None,
        A,
        facts(machine, base_digest(machine)),
    )
    .await;
    assert_eq!(
        s.classify(&c.operation, c.owner).await.unwrap(),
        Classification::SafeToRetry
    );
    c
}

/// The retry's fresh evidence shows `read`: its attempt is refused by comparison 3,
/// nothing is recorded, and the operation keeps its one attempt.
async fn retry_refused<S: Store>(
    s: &S,
    c: &Committed,
    plan: &str,
    machine: &str,
    read: ObservedFacts,
) {
    evidence(s, plan, machine, A, read.clone()).await;
    let err = s.attempt(&c.operation, c.owner).await.unwrap_err();
    assert_eq!(
        err.comparison(),
        Some(Comparison::Evidence),
        "{read:?}: {err}"
    );
    assert!(matches!(err, StoreError::AttemptRefused { .. }), "{err}");
    assert_eq!(
        s.operation(&c.operation).await.unwrap().attempts,
        1,
        "{read:?}"
    );
}

/// A retry's attempt on evidence showing another machine identity is refused, for
/// every identity case; the controls (a matching identity with another node ID on a
/// machine keyed by SMBIOS UUID, and the node-ID machine's own identity with no
/// SMBIOS UUID) are admitted.
pub async fn retry_refused_on_another_identity<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;

    // m1 is recorded by SMBIOS UUID.
    let c = safe_to_retry(&env, "p1", "m1").await;
    let good = facts("m1", base_digest("m1"));
    let mut other_uuid = good.clone();
    other_uuid.smbios_uuid = Some("uuid-somebody-else".into());
    let mut no_uuid = good.clone();
    no_uuid.smbios_uuid = None;
    let mut other_cluster = good.clone();
    other_cluster.cluster_id = Some("cluster-2".into());
    let mut unread = good.clone();
    unread.smbios_uuid = None;
    unread.node_id = None;
    unread.cluster_id = None;
    for read in [other_uuid, no_uuid, other_cluster, unread] {
        retry_refused(s, &c, "p1", "m1", read).await;
    }
    refusal_on_timeline(s, "m1", "attempt_refused", Comparison::Evidence).await;
    // Control: the same UUID and cluster with another node ID is the planned machine.
    let mut other_node = good.clone();
    other_node.node_id = Some("node-renamed".into());
    evidence(s, "p1", "m1", A, other_node).await;
    assert_eq!(s.attempt(&c.operation, c.owner).await.unwrap().attempt(), 2);

    // m3 is recorded by Talos node ID.
    let c = safe_to_retry(&env, "p3", "m3").await;
    let good = facts("m3", base_digest("m3"));
    let mut with_uuid = good.clone();
    with_uuid.smbios_uuid = Some("uuid-m3".into());
    let mut other_node = good.clone();
    other_node.node_id = Some("node-other".into());
    let mut other_cluster = good.clone();
    other_cluster.cluster_id = Some("cluster-2".into());
    let mut no_node = good.clone();
    no_node.node_id = None;
    for read in [with_uuid, other_node, other_cluster, no_node] {
        retry_refused(s, &c, "p3", "m3", read).await;
    }
    // Control: its own node ID and no SMBIOS UUID.
    evidence(s, "p3", "m3", A, good).await;
    assert_eq!(s.attempt(&c.operation, c.owner).await.unwrap().attempt(), 2);
}

/// Commitment identity cases `c3_evidence_cases` leaves out: no SMBIOS UUID for a
/// machine recorded by one, and an identity that could not be read at all; the
/// control, another node ID with the recorded UUID and cluster, commits.
pub async fn commitment_identity_cases<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    approved(&env, "p-none", "m1", "rel-1").await;
    let mut f = facts("m1", base_digest("m1"));
    f.smbios_uuid = None;
    evidence(s, "p-none", "m1", A, f).await;
    refused_by(s, "p-none", "m1", A, Comparison::Evidence).await;

    approved(&env, "p-unread", "m1", "rel-1").await;
    let mut f = facts("m1", base_digest("m1"));
    f.smbios_uuid = None;
    f.node_id = None;
    f.cluster_id = None;
    evidence(s, "p-unread", "m1", A, f).await;
    // An identity that was not read at all is missing evidence, not a mismatch
    // (choice §10.28): nothing is refused and fresh evidence decides.
    evidence_missing(s, "p-unread", "m1", A, "identity").await;

    approved(&env, "p-m3-nocluster", "m3", "rel-1").await;
    let mut f = facts("m3", base_digest("m3"));
    f.cluster_id = None;
    evidence(s, "p-m3-nocluster", "m3", A, f).await;
    refused_by(s, "p-m3-nocluster", "m3", A, Comparison::Evidence).await;

    approved(&env, "p-node", "m1", "rel-1").await;
    let mut f = facts("m1", base_digest("m1"));
    f.node_id = Some("node-renamed".into());
    evidence(s, "p-node", "m1", A, f).await;
    s.commit("p-node", A).await.unwrap();
}

/// A newer recorded read showing an SMBIOS UUID on a machine recorded by node ID,
/// where the evidence read none, is another machine answering (choice §10.26): it
/// refuses the commitment by comparison 3, with the same entry and wording as a
/// newer read contradicting a value, and no operation exists. Control: the same
/// newer read without a UUID lets the plan commit.
pub async fn newer_read_showing_a_uuid_refuses_commitment<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    // m3 is recorded by Talos node ID; its evidence reads no SMBIOS UUID.
    ready(&env, "p-uuid", "m3", A).await;
    let mut with_uuid = facts("m3", base_digest("m3"));
    with_uuid.smbios_uuid = Some("uuid-appeared".into());
    observe(s, "m3", ObservationPurpose::Drift, None, B, with_uuid).await;
    let before = s.timeline("m3").await.unwrap().len();
    let err = s.commit("p-uuid", A).await.unwrap_err();
    assert!(
        matches!(
            &err,
            StoreError::CommitmentRefused { comparison: Comparison::Evidence, reason }
                if reason.contains("a newer observation") && reason.contains("contradicts the evidence")
        ),
        "{err}"
    );
    let timeline = s.timeline("m3").await.unwrap();
    let written: Vec<_> = timeline[before..].iter().collect();
    assert!(
        matches!(
            written.as_slice(),
            [e] if e.kind == "commitment_refused"
                && e.comparison == Some(Comparison::Evidence)
                && e.plan.as_deref() == Some("p-uuid")
                && e.detail.contains("a newer observation")
        ),
        "{written:#?}"
    );
    assert_eq!(s.plan("p-uuid").await.unwrap().operation, None);
    assert!(
        s.operations_of("m3")
            .await
            .unwrap()
            .iter()
            .all(|o| o.plan != "p-uuid"),
        "a refused commitment created an operation"
    );

    // Control: the same newer read showing no UUID commits.
    ready(&env, "p-none", "m3", A).await;
    observe(
        s,
        "m3",
        ObservationPurpose::Drift,
        None,
        B,
        facts("m3", base_digest("m3")),
    )
    .await;
    s.commit("p-none", A).await.unwrap();
}

/// The same rule at a retry's attempt: the fresh evidence reads no SMBIOS UUID on
/// the node-ID machine, a newer recorded read shows one, and the attempt is refused
/// by comparison 3 with the operation keeping its one attempt. Control: fresh
/// evidence after that read is admitted.
pub async fn newer_read_showing_a_uuid_refuses_retry<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let c = safe_to_retry(&env, "p3", "m3").await;
    evidence(s, "p3", "m3", A, facts("m3", base_digest("m3"))).await;
    let mut with_uuid = facts("m3", base_digest("m3"));
    with_uuid.smbios_uuid = Some("uuid-appeared".into());
    observe(s, "m3", ObservationPurpose::Drift, None, B, with_uuid).await;
    let err = s.attempt(&c.operation, c.owner).await.unwrap_err();
    assert!(
        matches!(
            &err,
            StoreError::AttemptRefused { comparison: Comparison::Evidence, reason }
                if reason.contains("a newer observation")
        ),
        "{err}"
    );
    assert_eq!(s.operation(&c.operation).await.unwrap().attempts, 1);
    refusal_on_timeline(s, "m3", "attempt_refused", Comparison::Evidence).await;
    // Control: fresh evidence after that read.
    evidence(s, "p3", "m3", A, facts("m3", base_digest("m3"))).await;
    assert_eq!(s.attempt(&c.operation, c.owner).await.unwrap().attempt(), 2);
}

/// After commitment, with no attempt, what ends the plan's authority refuses the
/// attempt by comparison 1 and ends the operation cancelled, nothing recorded as
/// sent.
async fn ended_after_commitment<S: Store>(env: Env<S>, end: impl AsyncFnOnce(&Env<S>)) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    end(&env).await;
    // Fresh evidence, so that only comparison 1 can refuse.
    evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    let err = s.attempt(&c.operation, c.owner).await.unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::Authority), "{err}");
    let op = s.operation(&c.operation).await.unwrap();
    assert_eq!(op.state, OperationState::Cancelled);
    assert_eq!(op.attempts, 0);
    let timeline = s.timeline("m1").await.unwrap();
    assert!(
        !timeline.iter().any(|e| e.kind == "attempt"),
        "{timeline:#?}"
    );
    // The scope is free again (carol approves: bob may be revoked).
    s.create_plan(&alice(), spec("p2", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap();
    s.approve(&carol(), "p2").await.unwrap();
    evidence(s, "p2", "m1", A, facts("m1", base_digest("m1"))).await;
    s.commit("p2", A).await.unwrap();
}

pub async fn cancellation_after_commitment<S: Store>(env: Env<S>) {
    ended_after_commitment(env, async |env: &Env<S>| {
        env.store.cancel_plan(&alice(), "p1").await.unwrap();
    })
    .await;
}

pub async fn expiry_after_commitment<S: Store>(env: Env<S>) {
    ended_after_commitment(env, async |env: &Env<S>| {
        env.clock.advance(SpanMs::from_secs(3600));
    })
    .await;
}

pub async fn identity_revoked_after_commitment<S: Store>(env: Env<S>) {
    ended_after_commitment(env, async |env: &Env<S>| {
        env.store.revoke_identity(&root(), "bob").await.unwrap();
    })
    .await;
}

/// A publication after commitment does not stop the committed operation: its
/// attempt is admitted for the bound release, and the machine's Desired is the new
/// one. Comparison 2's Desired term is compared at commitment only.
pub async fn publication_after_commitment<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    publish(s, "rel-2").await;
    assert_eq!(
        s.machine("m1").await.unwrap().desired_release.as_deref(),
        Some("rel-2")
    );
    let proof = s.attempt(&c.operation, c.owner).await.unwrap();
    assert_eq!(proof.artifact_digest(), artifact_digest("m1", "rel-1"));
    // Control: a plan for the old release made now is refused at creation.
    let err = s
        .create_plan(&alice(), spec("p-old", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap_err();
    refused_as(
        &err,
        "creating a plan",
        "an apply-config plan must target the machine's Desired release",
    );
}

/// The assignment stays held while the operation is sending and unresolved, not
/// only committed (`assignment_change_while_held`).
pub async fn assignment_held_in_every_state<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Sending
    );
    assert!(matches!(
        s.change_assignment(&ann(), "m1").await,
        Err(StoreError::Refused { .. })
    ));
    s.record_response(
        &c.operation,
        1,
        c.owner,
        ResponseClass::Transport(TransportOutcome::DeadlineExceeded),
    )
    .await
    .unwrap();
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Unresolved
    );
    assert!(matches!(
        s.change_assignment(&ann(), "m1").await,
        Err(StoreError::Refused { .. })
    ));
    assert_eq!(s.machine("m1").await.unwrap().assignment_revision, 1);
    // Control: another machine's assignment changes.
    assert_eq!(s.change_assignment(&ann(), "m2").await.unwrap(), 2);
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Committed);
    // Verifying: a second machine's operation accepted by its node.
    ready(&env, "p3", "m3", A).await;
    let c3 = s.commit("p3", A).await.unwrap();
    let _proof = s.attempt(&c3.operation, c3.owner).await.unwrap();
    s.record_response(&c3.operation, 1, c3.owner, ResponseClass::Accepted)
        .await
        .unwrap();
    assert_eq!(
        s.operation(&c3.operation).await.unwrap().state,
        OperationState::Verifying
    );
    assert!(matches!(
        s.change_assignment(&ann(), "m3").await,
        Err(StoreError::Refused { .. })
    ));
    assert_eq!(s.machine("m3").await.unwrap().assignment_revision, 1);
}

/// Dispatch-safety case 023's first half: a retry's evidence may show the bound
/// artifact's digest instead of the pre-dispatch one (an earlier attempt may have
/// landed); a commitment's evidence may not, and is refused by comparison 3.
pub async fn retry_evidence_may_show_the_artifact<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let c = safe_to_retry(&env, "p1", "m1").await;
    evidence(
        s,
        "p1",
        "m1",
        A,
        facts("m1", artifact_digest("m1", "rel-1")),
    )
    .await;
    assert_eq!(s.attempt(&c.operation, c.owner).await.unwrap().attempt(), 2);
    // Control: the same reading at commitment.
    approved(&env, "p3", "m3", "rel-1").await;
    evidence(
        s,
        "p3",
        "m3",
        A,
        facts("m3", artifact_digest("m3", "rel-1")),
    )
    .await;
    refused_by(s, "p3", "m3", A, Comparison::Evidence).await;
}

/// Run the verification case `name` on a plain environment.
pub async fn run<S, F, Fut>(name: &str, make: F)
where
    S: Store,
    F: Fn(Guards) -> Fut,
    Fut: Future<Output = Env<S>>,
{
    let env = make(Guards::default()).await;
    match name {
        "retry_refused_on_another_identity" => retry_refused_on_another_identity(env).await,
        "commitment_identity_cases" => commitment_identity_cases(env).await,
        "newer_read_showing_a_uuid_refuses_commitment" => {
            newer_read_showing_a_uuid_refuses_commitment(env).await
        }
        "newer_read_showing_a_uuid_refuses_retry" => {
            newer_read_showing_a_uuid_refuses_retry(env).await
        }
        "cancellation_after_commitment" => cancellation_after_commitment(env).await,
        "expiry_after_commitment" => expiry_after_commitment(env).await,
        "identity_revoked_after_commitment" => identity_revoked_after_commitment(env).await,
        "publication_after_commitment" => publication_after_commitment(env).await,
        "assignment_held_in_every_state" => assignment_held_in_every_state(env).await,
        "retry_evidence_may_show_the_artifact" => retry_evidence_may_show_the_artifact(env).await,
        other => panic!("no verification case {other}"),
    }
}

/// Declare, in a module `verification`, one `#[tokio::test]` per case above, each
/// calling the runner's `$make`.
#[macro_export]
macro_rules! verification_suite {
    ($make:ident) => {
        mod verification {
            $crate::verification_suite!(@each $make;
                retry_refused_on_another_identity, commitment_identity_cases,
                newer_read_showing_a_uuid_refuses_commitment,
                newer_read_showing_a_uuid_refuses_retry,
                cancellation_after_commitment, expiry_after_commitment,
                identity_revoked_after_commitment, publication_after_commitment,
                assignment_held_in_every_state, retry_evidence_may_show_the_artifact);
        }
    };
    (@each $make:ident; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if let Some(make) = $crate::$make() {
                    $crate::store_suite::verification::run(stringify!($name), make).await;
                }
            }
        )*
    };
}
