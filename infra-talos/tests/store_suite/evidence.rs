//! Required-verification cases of `contract.md` §9.2 about drift, completion reads
//! and adoption, through the store's acts: a failed operation opening a drift
//! record, a revert refused after a manual return, a completion read overtaken by a
//! higher-basis read that differs on a postcondition, a completion read confirmed by
//! agreeing reads, a blocked scope cleared by a new release, and the adoption
//! record's refusals. Run by both stores through `evidence_suite!`.

use infra_talos::contract::adoption::Hold;
use infra_talos::contract::classify::FailedReason;
use infra_talos::contract::evidence::DigestMatch;
use infra_talos::contract::recovery::{BlockedOn, Dependency};
use infra_talos::store::{Guards, Store, TimelineEntry};

use super::*;

fn drift_entries(timeline: &[TimelineEntry]) -> Vec<&TimelineEntry> {
    timeline
        .iter()
        .filter(|e| e.kind.starts_with("drift_"))
        .collect()
}

async fn applied<S: Store>(s: &S, machine: &str) -> (Option<String>, Option<Digest>) {
    let m = s.machine(machine).await.unwrap();
    (m.applied_release, m.applied_digest)
}

/// Plan `plan` on `release` for `machine`, committed on evidence of Applied's
/// digest, its one attempt accepted by the node: the operation waits for its
/// completion observation.
async fn verifying<S: Store>(env: &Env<S>, plan: &str, machine: &str, release: &str) -> Committed {
    let s = &env.store;
    approved(env, plan, machine, release).await;
    let now = applied(s, machine).await.1.unwrap();
    evidence(s, plan, machine, A, facts(machine, now)).await;
    let c = s.commit(plan, A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    s.record_response(&c.operation, 1, c.owner, ResponseClass::Accepted)
        .await
        .unwrap();
    c
}

/// §4, §6.1, §6.5: the completion observation that makes an operation failed shows
/// a digest unlike Applied's, and the transaction that records failed opens a drift
/// record on it, naming that observation; Applied does not move. Control: on
/// another machine a completion observation at the pre-dispatch digest (Applied's)
/// fails the operation too, and opens nothing.
pub async fn failed_operation_opens_drift<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let before = applied(s, "m1").await;
    let c = verifying(&env, "p1", "m1", "rel-1").await;
    let elsewhere = config_digest(b"someone else's configuration\n");
    let basis = observe(
        s,
        "m1",
        ObservationPurpose::Completion,
        None,
        A,
        facts("m1", elsewhere),
    )
    .await;
    assert_eq!(
        s.classify(&c.operation, c.owner).await.unwrap(),
        Classification::Failed(FailedReason::Digest(DigestMatch::Other))
    );
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Failed
    );
    assert_eq!(applied(s, "m1").await, before, "failed moved Applied");
    let record = s
        .machine("m1")
        .await
        .unwrap()
        .open_drift
        .expect("the failed outcome opened no drift record");
    let timeline = s.timeline("m1").await.unwrap();
    let opened = timeline
        .iter()
        .find(|e| e.revision == record)
        .expect("the record's opening entry");
    assert_eq!(opened.kind, "drift_opened");
    assert!(
        opened.detail.starts_with(&format!(
            "digest mismatch: observation basis r{basis} shows digest {elsewhere}"
        )),
        "{opened:?}"
    );
    assert_eq!(opened.operation.as_deref(), Some(c.operation.as_str()));
    // The record shuts the gate for a plain plan; a revert bound to it is the way on.
    ready(&env, "p-plain", "m1", A).await;
    refused_by(s, "p-plain", "m1", A, Comparison::Gate).await;

    // Control: failed at the pre-dispatch digest, which is Applied's: no record.
    let c = verifying(&env, "p3", "m3", "rel-1").await;
    observe(
        s,
        "m3",
        ObservationPurpose::Completion,
        None,
        A,
        facts("m3", base_digest("m3")),
    )
    .await;
    assert_eq!(
        s.classify(&c.operation, c.owner).await.unwrap(),
        Classification::Failed(FailedReason::Digest(DigestMatch::PreDispatch))
    );
    assert_eq!(s.machine("m3").await.unwrap().open_drift, None);
    assert!(drift_entries(&s.timeline("m3").await.unwrap()).is_empty());
}

/// §3.2, §6.5: a drift record is open and its revert approved; the machine is put
/// back to Applied by hand before the revert commits. The revert's evidence shows
/// Applied's digest, not the drifted one it expects: its commitment is refused by
/// comparison 3, nothing is committed, and the transaction recording the refusal
/// closes the record as returned. Control: before the refusal a plain plan is
/// refused by the gate; after it the same plain plan commits.
pub async fn revert_refused_after_a_manual_return<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let edited = config_digest(b"edited by hand\n");
    observe(
        s,
        "m1",
        ObservationPurpose::Drift,
        None,
        B,
        facts("m1", edited),
    )
    .await;
    let record = s.machine("m1").await.unwrap().open_drift.expect("opened");
    let mut revert = spec("p-revert", "m1", "rel-1", env.clock.now());
    revert.revert = true;
    s.create_plan(&alice(), revert).await.unwrap();
    s.approve(&bob(), "p-revert").await.unwrap();
    ready(&env, "p-plain", "m1", A).await;
    refused_by(s, "p-plain", "m1", A, Comparison::Gate).await;
    // Back to Applied by hand; the revert's own evidence is the first to see it.
    evidence(s, "p-revert", "m1", A, facts("m1", base_digest("m1"))).await;
    refused_by(s, "p-revert", "m1", A, Comparison::Evidence).await;
    assert_eq!(s.machine("m1").await.unwrap().open_drift, None);
    let timeline = s.timeline("m1").await.unwrap();
    let entries = drift_entries(&timeline);
    let closed = entries.last().expect("drift entries");
    assert_eq!(closed.kind, "drift_closed", "{entries:?}");
    assert!(
        closed.detail.contains(&format!("r{}", record.0)) && closed.detail.contains("returned"),
        "{closed:?}"
    );
    assert_eq!(closed.plan.as_deref(), Some("p-revert"), "{closed:?}");
    assert_eq!(s.plan("p-revert").await.unwrap().operation, None);
    assert_eq!(
        applied(s, "m1").await,
        (Some("rel-0".into()), Some(base_digest("m1")))
    );
    // The gate is open again: the plain plan commits on fresh evidence.
    evidence(s, "p-plain", "m1", A, facts("m1", base_digest("m1"))).await;
    s.commit("p-plain", A).await.unwrap();
}

/// How a higher-basis read differs from the completion read before it.
type Differ = fn(&mut ObservedFacts);

/// §4, §9.2: a completion read that would decide is followed by a recorded read
/// with a higher basis that differs from it on a bound postcondition — the SMBIOS
/// UUID, the cluster ID, the digest, or, for a machine keyed by node ID, the node
/// ID or an SMBIOS UUID where none belongs. Classification is then neither
/// completed nor failed, and Applied stays; a fresh completion read, begun after,
/// completes the operation (the control that the first read alone would have).
/// The assignment is not a read value (reading §11.14) and the no-reboot apply
/// binds no health check (choice §10.33), so neither has a case.
pub async fn higher_basis_read_differing_decides_nothing<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let cases: [(&str, &str, Differ); 5] = [
        ("m1", "another SMBIOS UUID", |f| {
            f.smbios_uuid = Some("uuid-someone-else".into());
        }),
        ("m1", "another cluster ID", |f| {
            f.cluster_id = Some("cluster-2".into());
        }),
        ("m1", "another digest", |f| {
            f.digest = Some(config_digest(b"changed again\n"));
        }),
        ("m3", "another node ID", |f| {
            f.node_id = Some("node-other".into());
        }),
        ("m3", "an SMBIOS UUID on a machine keyed by node ID", |f| {
            f.smbios_uuid = Some("uuid-m3".into());
        }),
    ];
    for (n, (machine, what, differ)) in cases.into_iter().enumerate() {
        let release = format!("rel-{}", n + 2);
        publish(s, &release).await;
        let plan = format!("p-{n}");
        let c = verifying(&env, &plan, machine, &release).await;
        let before = applied(s, machine).await;
        let shown = artifact_digest(machine, &release);
        observe(
            s,
            machine,
            ObservationPurpose::Completion,
            None,
            A,
            facts(machine, shown),
        )
        .await;
        let mut higher = facts(machine, shown);
        differ(&mut higher);
        observe(s, machine, ObservationPurpose::Drift, None, B, higher).await;
        assert_eq!(
            s.classify(&c.operation, c.owner).await.unwrap(),
            Classification::Unresolved(UnresolvedReason::NoCompletionEvidence),
            "{what}"
        );
        assert_eq!(applied(s, machine).await, before, "{what}");
        assert!(
            !s.operation(&c.operation).await.unwrap().state.is_terminal(),
            "{what}"
        );
        // Control: a completion read begun after it decides.
        observe(
            s,
            machine,
            ObservationPurpose::Completion,
            None,
            A,
            facts(machine, shown),
        )
        .await;
        assert_eq!(
            s.classify(&c.operation, c.owner).await.unwrap(),
            Classification::Completed,
            "{what}"
        );
        assert_eq!(
            applied(s, machine).await,
            (Some(release.clone()), Some(shown)),
            "{what}"
        );
    }
}

/// §4, §9.2: a completion read showing a digest other than the artifact's, followed
/// by higher-basis reads of the machine that agree with it — a drift read, a
/// recovery read and another drift read — still yields failed, with the drift record
/// its failure opens. Control: the same reads agreeing with a completion read of the
/// artifact complete the operation.
pub async fn agreeing_higher_basis_reads_still_fail<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let elsewhere = config_digest(b"another configuration\n");
    for (machine, plan, shown) in [
        ("m1", "p-fail", elsewhere),
        ("m3", "p-complete", artifact_digest("m3", "rel-1")),
    ] {
        let c = verifying(&env, plan, machine, "rel-1").await;
        let before = applied(s, machine).await;
        observe(
            s,
            machine,
            ObservationPurpose::Completion,
            None,
            A,
            facts(machine, shown),
        )
        .await;
        for (purpose, by) in [
            (ObservationPurpose::Drift, B),
            (ObservationPurpose::Recovery, A),
            (ObservationPurpose::Drift, B),
        ] {
            observe(s, machine, purpose, None, by, facts(machine, shown)).await;
        }
        let classified = s.classify(&c.operation, c.owner).await.unwrap();
        if machine == "m1" {
            assert_eq!(
                classified,
                Classification::Failed(FailedReason::Digest(DigestMatch::Other))
            );
            assert_eq!(applied(s, machine).await, before);
            assert!(s.machine(machine).await.unwrap().open_drift.is_some());
        } else {
            assert_eq!(classified, Classification::Completed);
            assert_eq!(
                applied(s, machine).await,
                (Some("rel-1".into()), Some(shown))
            );
        }
    }
}

/// §7.3 steps 3, 6 and 7, §7.4 and choice §10.20: a scope blocked because something
/// applying its Desired release needs is missing (here the artifact's key version)
/// is cleared by a new release: a publication in recovery mode leaves it blocked
/// and unreleasable until a mark checks the new Desired, whose dependencies exist;
/// then it is ready, released, and a plan on the new release commits while
/// another scope, not released, takes none. The mark that cleared it names the new
/// release. Control: without the new mark the release is refused.
pub async fn blocked_scope_cleared_by_a_new_release<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    s.enter_recovery(&root(), entry_now(s, B).await)
        .await
        .unwrap();
    account_after_restore(&env, &["m1", "m2", "m3"]).await;
    let read = as_it_stands(s, "m1").await;
    observe(s, "m1", ObservationPurpose::Restoration, None, B, read).await;
    let missing = ScopeState::Blocked(BlockedOn::MissingDependency(Dependency::KeyVersion));
    assert_eq!(
        s.mark_scope(&root(), "m1", Some(Dependency::KeyVersion))
            .await
            .unwrap(),
        missing
    );
    // A new release is published (allowed in recovery mode): the scope stays
    // blocked until it is marked again.
    publish(s, "rel-2").await;
    assert_eq!(
        s.machine("m1").await.unwrap().desired_release.as_deref(),
        Some("rel-2")
    );
    assert_eq!(s.machine("m1").await.unwrap().scope, missing);
    let err = s.release_scope(&root(), "m1").await.unwrap_err();
    assert!(matches!(err, StoreError::Refused { .. }), "{err}");
    // The mark on the new Desired, whose dependencies are all there: ready.
    assert_eq!(
        s.mark_scope(&root(), "m1", None).await.unwrap(),
        ScopeState::Ready
    );
    let mark = s
        .timeline("m1")
        .await
        .unwrap()
        .into_iter()
        .rfind(|e| e.kind == "scope_marked")
        .expect("the mark's entry");
    assert!(
        mark.detail.starts_with("marked ready") && mark.detail.contains("Desired rel-2"),
        "{mark:?}"
    );
    s.release_scope(&root(), "m1").await.unwrap();
    assert_eq!(s.machine("m1").await.unwrap().scope, ScopeState::Released);
    assert_ne!(s.machine("m2").await.unwrap().scope, ScopeState::Normal);
    approved(&env, "p-new", "m1", "rel-2").await;
    evidence(s, "p-new", "m1", A, as_it_stands(s, "m1").await).await;
    s.commit("p-new", A).await.unwrap();
    // m2 is not released: no plan is made for it.
    let err = s
        .create_plan(&alice(), spec("p-m2", "m2", "rel-2", env.clock.now()))
        .await
        .unwrap_err();
    refused_as(&err, "creating a plan", "not released");
}

fn adopt_spec(id: &str, machine: &str, release: &str, now: InstantMs) -> AdoptPlanSpec {
    AdoptPlanSpec {
        id: id.into(),
        machine: machine.into(),
        release: release.into(),
        expires_at: now.plus(SpanMs::from_secs(3600)),
        max_evidence_age: SpanMs::from_secs(60),
    }
}

/// An adopt plan `id` for the open drift record of `machine`, approved by bob.
async fn adopt_approved<S: Store>(env: &Env<S>, id: &str, machine: &str) {
    let s = &env.store;
    let desired = s.machine(machine).await.unwrap().desired_release.unwrap();
    s.create_adopt_plan(&alice(), adopt_spec(id, machine, &desired, env.clock.now()))
        .await
        .unwrap();
    s.approve(&bob(), id).await.unwrap();
}

/// The node read for adopt plan `plan`.
async fn adoption_read<S: Store>(s: &S, plan: &str, machine: &str, read: ObservedFacts) -> u64 {
    observe(
        s,
        machine,
        ObservationPurpose::Evidence,
        Some(plan),
        A,
        read,
    )
    .await
}

/// The adoption record of `plan` is refused by `requirement`, saying `says`; the
/// refusal is on the timeline once, a second try is held as already refused, and
/// Applied has not moved.
async fn adoption_refused<S: Store>(s: &S, plan: &str, machine: &str, requirement: u8, says: &str) {
    let before = applied(s, machine).await;
    let err = s.record_adoption(plan, A).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::AdoptionRefused { requirement: r, reason }
            if *r == requirement && reason.contains(says)),
        "{plan}: expected requirement {requirement} saying {says:?}, got {err}"
    );
    assert_eq!(
        s.record_adoption(plan, A).await.unwrap(),
        AdoptionOutcome::Held(Hold::AlreadyRefused),
        "{plan}"
    );
    let refusals: Vec<TimelineEntry> = s
        .timeline(machine)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "adoption_refused" && e.plan.as_deref() == Some(plan))
        .collect();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(
        refusals[0]
            .detail
            .starts_with(&format!("requirement {requirement} of §6.3")),
        "{refusals:?}"
    );
    assert_eq!(applied(s, machine).await, before, "{plan}");
    assert_eq!(s.plan(plan).await.unwrap().operation, None, "{plan}");
}

/// §6.3, §9.2: the adoption record refuses, through the store, a machine changed
/// again since the plan (requirement 4, the digest), another machine identity
/// (requirement 4: SMBIOS UUID, cluster ID), a recorded higher-basis read that
/// contradicts the plan's own read (requirement 4 relies on the newest), a revoked
/// approval (requirement 2), a baseline revision moved by another adoption, a drift
/// record closed as returned, and a changed assignment (requirement 3). Each is
/// recorded once and ends the plan; the record stays open where it was. Control: an
/// adopt plan read with the drifted digest and the machine's own identity is
/// recorded, closing the record as adopted.
pub async fn adoption_refusals_through_the_store<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let edited = config_digest(b"edited by hand\n");
    observe(
        s,
        "m1",
        ObservationPurpose::Drift,
        None,
        B,
        facts("m1", edited),
    )
    .await;
    let record = s.machine("m1").await.unwrap().open_drift.expect("opened");
    for id in [
        "a-again",
        "a-uuid",
        "a-cluster",
        "a-higher",
        "a-revoked",
        "a-first",
        "a-second",
    ] {
        adopt_approved(&env, id, "m1").await;
        assert_eq!(s.plan(id).await.unwrap().bound_drift, Some(record));
    }

    // Changed again since the plan: the read shows another digest.
    adoption_read(
        s,
        "a-again",
        "m1",
        facts("m1", config_digest(b"edited twice\n")),
    )
    .await;
    adoption_refused(s, "a-again", "m1", 4, "digest read is not the baseline's").await;
    // Another machine identity.
    let mut other = facts("m1", edited);
    other.smbios_uuid = Some("uuid-someone-else".into());
    adoption_read(s, "a-uuid", "m1", other).await;
    adoption_refused(s, "a-uuid", "m1", 4, "SMBIOS UUID").await;
    let mut other = facts("m1", edited);
    other.cluster_id = Some("cluster-2".into());
    adoption_read(s, "a-cluster", "m1", other).await;
    adoption_refused(s, "a-cluster", "m1", 4, "cluster ID").await;
    // The plan's own read agrees, a higher-basis read recorded after it does not.
    adoption_read(s, "a-higher", "m1", facts("m1", edited)).await;
    let mut other = facts("m1", edited);
    other.smbios_uuid = Some("uuid-someone-else".into());
    let higher = observe(s, "m1", ObservationPurpose::Publication, None, B, other).await;
    adoption_refused(s, "a-higher", "m1", 4, &format!("observation r{higher}")).await;
    // A revoked approval.
    adoption_read(s, "a-revoked", "m1", facts("m1", edited)).await;
    s.revoke_approval(&carol(), "a-revoked").await.unwrap();
    adoption_refused(s, "a-revoked", "m1", 2, "revoked").await;
    assert_eq!(s.machine("m1").await.unwrap().open_drift, Some(record));

    // Control: the same read recorded for a-first adopts it.
    adoption_read(s, "a-first", "m1", facts("m1", edited)).await;
    let recorded = s.record_adoption("a-first", A).await.unwrap();
    assert!(
        matches!(recorded, AdoptionOutcome::Recorded { .. }),
        "{recorded:?}"
    );
    assert_eq!(applied(s, "m1").await.1, Some(edited));
    assert_eq!(s.machine("m1").await.unwrap().open_drift, None);
    // A second plan on the same record: the baseline revision moved under it.
    adoption_read(s, "a-second", "m1", facts("m1", edited)).await;
    adoption_refused(s, "a-second", "m1", 3, "baseline revision").await;

    // m2: its record closed as returned by a drift read; then an assignment change.
    observe(
        s,
        "m2",
        ObservationPurpose::Drift,
        None,
        B,
        facts("m2", edited),
    )
    .await;
    adopt_approved(&env, "a-assigned", "m2").await;
    s.change_assignment(&ann(), "m2").await.unwrap();
    adoption_read(s, "a-assigned", "m2", facts("m2", edited)).await;
    adoption_refused(s, "a-assigned", "m2", 3, "assignment revision").await;
    assert!(s.machine("m2").await.unwrap().open_drift.is_some());
    adopt_approved(&env, "a-returned", "m2").await;
    observe(
        s,
        "m2",
        ObservationPurpose::Drift,
        None,
        B,
        facts("m2", base_digest("m2")),
    )
    .await;
    assert_eq!(s.machine("m2").await.unwrap().open_drift, None);
    adoption_read(s, "a-returned", "m2", facts("m2", edited)).await;
    adoption_refused(s, "a-returned", "m2", 3, "no longer open").await;
}

/// Run the named evidence case on a fresh store.
pub async fn run<S, F, Fut>(name: &str, make: F)
where
    S: Store,
    F: Fn(Guards) -> Fut,
    Fut: Future<Output = Env<S>>,
{
    let env = make(Guards::default()).await;
    match name {
        "failed_operation_opens_drift" => failed_operation_opens_drift(env).await,
        "revert_refused_after_a_manual_return" => revert_refused_after_a_manual_return(env).await,
        "higher_basis_read_differing_decides_nothing" => {
            higher_basis_read_differing_decides_nothing(env).await;
        }
        "agreeing_higher_basis_reads_still_fail" => {
            agreeing_higher_basis_reads_still_fail(env).await;
        }
        "blocked_scope_cleared_by_a_new_release" => {
            blocked_scope_cleared_by_a_new_release(env).await;
        }
        "adoption_refusals_through_the_store" => adoption_refusals_through_the_store(env).await,
        other => panic!("no evidence case {other}"),
    }
}

/// Declare, in a module `evidence`, one `#[tokio::test]` per case above, each
/// calling the runner's `$make`.
#[macro_export]
macro_rules! evidence_suite {
    ($make:ident) => {
        mod evidence {
            $crate::evidence_suite!(@each $make;
                failed_operation_opens_drift, revert_refused_after_a_manual_return,
                higher_basis_read_differing_decides_nothing,
                agreeing_higher_basis_reads_still_fail,
                blocked_scope_cleared_by_a_new_release,
                adoption_refusals_through_the_store);
        }
    };
    (@each $make:ident; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if let Some(make) = $crate::$make() {
                    $crate::store_suite::evidence::run(stringify!($name), make).await;
                }
            }
        )*
    };
}
