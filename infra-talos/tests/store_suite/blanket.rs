//! Blanket approvals (direct mode): an approver's recorded decision that plans for
//! one cluster's machines are approved as they are made. Run by both stores through
//! `blanket_suite!`.

use infra_talos::contract::plan::{PlanState, SelfApproval};
use infra_talos::contract::{InstantMs, Role, SpanMs};
use infra_talos::store::{Actor, Guards, Store, StoreError};

use super::*;

/// The automation token of `world` (automation and publisher; alice answers for it).
fn bot() -> Actor {
    Actor::new("bot", Role::Automation)
}

fn bot_publishing() -> Actor {
    Actor::new("bot", Role::Publisher)
}

fn refusal_text(err: &StoreError) -> String {
    assert!(matches!(err, StoreError::Refused { .. }), "{err}");
    err.to_string()
}

/// Granted by an approver, a blanket approval lets automation approve a plan as it
/// is made; the approval is recorded as the approver's, naming the blanket, and the
/// plan commits. Without one, the same request is refused and the plan cannot
/// commit.
pub async fn blanket_approves_and_commits<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    s.create_plan(&alice(), spec("p0", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap();
    // The control: no blanket yet.
    let err = s.approve_under_blanket(&bot(), "p0").await.unwrap_err();
    assert!(
        refusal_text(&err).contains("no blanket approval is in force for cluster cluster-1"),
        "{err}"
    );
    assert_eq!(s.plan("p0").await.unwrap().state, PlanState::Proposed);
    evidence(s, "p0", "m1", A, facts("m1", base_digest("m1"))).await;
    refused_by(s, "p0", "m1", A, Comparison::Authority).await;
    s.cancel_plan(&alice(), "p0").await.unwrap();

    let blanket = s
        .grant_blanket_approval(&bob(), "cluster-1", "lab cluster, nobody reviews it", WEEK)
        .await
        .unwrap();
    assert!(blanket.in_force());
    assert_eq!(blanket.approver, "bob");
    for m in ["m1", "m2", "m3"] {
        let timeline = s.timeline(m).await.unwrap();
        assert!(
            timeline
                .iter()
                .any(|e| e.kind == "blanket_granted" && e.detail.contains(&blanket.id)),
            "{m}: {timeline:?}"
        );
    }
    s.create_plan(&alice(), spec("p1", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap();
    let mark = s.approve_under_blanket(&bot(), "p1").await.unwrap();
    assert_eq!(mark, SelfApproval::NotSelfApproval);
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Approved);
    let entry = s
        .timeline("m1")
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.plan.as_deref() == Some("p1") && e.kind.starts_with("approval"))
        .expect("an approval entry");
    // Shown as the asker's act under bob's standing grant, never as bob's review.
    assert_eq!(entry.kind, "approval_under_grant");
    assert_eq!(
        (entry.actor.as_str(), entry.actor_role.as_str()),
        ("bot", "automation")
    );
    assert!(
        entry.detail.contains(&format!(
            "under the standing grant of bob (blanket approval {}), not a review of this plan",
            blanket.id
        )),
        "{}",
        entry.detail
    );
    evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    s.commit("p1", A).await.unwrap();
}

/// Who may grant, ask under, and revoke a blanket approval; one in force per
/// cluster; a reason is required.
pub async fn blanket_roles<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    for (actor, why) in [
        (bot(), "may not do this"),
        (alice(), "may not do this"),
        (root(), "may not do this"),
        (Actor::new("bot", Role::Approver), "does not hold the role"),
    ] {
        let err = s
            .grant_blanket_approval(&actor, "cluster-1", "because", WEEK)
            .await
            .unwrap_err();
        assert!(refusal_text(&err).contains(why), "{actor:?}: {err}");
    }
    let err = s
        .grant_blanket_approval(&bob(), "cluster-1", "  ", WEEK)
        .await
        .unwrap_err();
    assert!(refusal_text(&err).contains("a reason is required"), "{err}");
    let first = s
        .grant_blanket_approval(&bob(), "cluster-1", "lab", WEEK)
        .await
        .unwrap();
    let err = s
        .grant_blanket_approval(&carol(), "cluster-1", "lab again", WEEK)
        .await
        .unwrap_err();
    assert!(
        refusal_text(&err).contains(&format!("{} is already in force", first.id)),
        "{err}"
    );
    // A cluster with no machine in the inventory is refused: a grant names one that
    // exists. Another cluster has its own.
    let err = s
        .grant_blanket_approval(&carol(), "cluster-2", "staging", WEEK)
        .await
        .unwrap_err();
    assert!(
        refusal_text(&err).contains("no machine of cluster cluster-2 is in the inventory"),
        "{err}"
    );
    let mut m4 = machine_spec("m4", "r4");
    m4.cluster_id = "cluster-2".into();
    s.create_machine(&ann(), m4).await.unwrap();
    let other = s
        .grant_blanket_approval(&carol(), "cluster-2", "staging", WEEK)
        .await
        .unwrap();
    assert_ne!(first.id, other.id);
    // A grant lasts more than nothing and at most 90 days.
    for lasting in [SpanMs(0), SpanMs(91 * 86_400_000)] {
        let err = s
            .grant_blanket_approval(&bob(), "cluster-1", "lab", lasting)
            .await
            .unwrap_err();
        assert!(refusal_text(&err).contains("at most 90 days"), "{err}");
    }
    s.create_plan(&alice(), spec("p1", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap();
    // An author asks in vain; a publishing token and an automation token may ask.
    let err = s.approve_under_blanket(&ann(), "p1").await.unwrap_err();
    assert!(refusal_text(&err).contains("may not do this"), "{err}");
    s.approve_under_blanket(&bot_publishing(), "p1")
        .await
        .unwrap();
    // Approving twice is the plan's own refusal.
    let twice = s.approve_under_blanket(&bot(), "p1").await.unwrap_err();
    refused_as(
        &twice,
        "approving under a blanket approval",
        "still authorizes",
    );
    // A publisher cannot revoke it; recovery-admin can.
    let by_publisher = s
        .revoke_blanket_approval(&alice(), &first.id)
        .await
        .unwrap_err();
    refused_as(
        &by_publisher,
        "revoking a blanket approval",
        "the role publisher may not do this",
    );
    s.revoke_blanket_approval(&root(), &first.id).await.unwrap();
    let err = s
        .revoke_blanket_approval(&bob(), &first.id)
        .await
        .unwrap_err();
    assert!(refusal_text(&err).contains("already revoked"), "{err}");
    let listed = s.blanket_approvals().await.unwrap();
    assert_eq!(listed.len(), 2);
    let revoked = listed.iter().find(|b| b.id == first.id).unwrap();
    assert!(!revoked.in_force());
    assert_eq!(revoked.revoked.as_ref().map(|r| r.0.as_str()), Some("root"));
    assert!(listed.iter().find(|b| b.id == other.id).unwrap().in_force());
    // After the revocation the cluster takes a new grant.
    s.grant_blanket_approval(&bob(), "cluster-1", "lab, reviewed", WEEK)
        .await
        .unwrap();
}

/// Revoking a blanket approval revokes every approval made under it: a plan not
/// committed yet is refused commitment by comparison 1, an operation committed
/// before the revocation is refused its attempt by comparison 1. An approver's own
/// approval of another plan is untouched (the control).
pub async fn blanket_revocation<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let blanket = s
        .grant_blanket_approval(&bob(), "cluster-1", "lab", WEEK)
        .await
        .unwrap();
    for (plan, machine) in [("p1", "m1"), ("p3", "m3")] {
        s.create_plan(&alice(), spec(plan, machine, "rel-1", env.clock.now()))
            .await
            .unwrap();
        s.approve_under_blanket(&bot(), plan).await.unwrap();
    }
    approved(&env, "p2", "m2", "rel-1").await;
    // p3 is committed before the revocation; its attempt comes after.
    evidence(s, "p3", "m3", A, facts("m3", base_digest("m3"))).await;
    let committed = s.commit("p3", A).await.unwrap();
    s.revoke_blanket_approval(&carol(), &blanket.id)
        .await
        .unwrap();
    let refused = s
        .attempt(&committed.operation, committed.owner)
        .await
        .unwrap_err();
    assert_eq!(
        refused.comparison(),
        Some(Comparison::Authority),
        "{refused}"
    );
    assert!(s.attempts(&committed.operation).await.unwrap().is_empty());
    assert!(
        s.timeline("m3")
            .await
            .unwrap()
            .iter()
            .any(|e| e.kind == "approval_revoked" && e.plan.as_deref() == Some("p3"))
    );
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Revoked);
    let timeline = s.timeline("m1").await.unwrap();
    assert!(
        timeline.iter().any(|e| e.kind == "approval_revoked"
            && e.plan.as_deref() == Some("p1")
            && e.detail.contains(&blanket.id)),
        "{timeline:?}"
    );
    assert!(timeline.iter().any(|e| e.kind == "blanket_revoked"));
    evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    refused_by(s, "p1", "m1", A, Comparison::Authority).await;
    assert_eq!(s.plan("p2").await.unwrap().state, PlanState::Approved);
    evidence(s, "p2", "m2", A, facts("m2", base_digest("m2"))).await;
    s.commit("p2", A).await.unwrap();
    // Nothing more is approved under it.
    s.create_plan(&alice(), spec("p4", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap();
    let err = s.approve_under_blanket(&bot(), "p4").await.unwrap_err();
    assert!(refusal_text(&err).contains("no blanket approval"), "{err}");
}

/// A blanket approval holds only in the epoch it was granted in, and ends with its
/// approver's identity.
pub async fn blanket_epoch_and_identity<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let first = s
        .grant_blanket_approval(&bob(), "cluster-1", "lab", WEEK)
        .await
        .unwrap();
    s.enter_recovery(&root(), entry_now(s, B).await)
        .await
        .unwrap();
    // Granting is refused while recovery mode is in effect.
    let in_recovery = s
        .grant_blanket_approval(&carol(), "cluster-1", "lab", WEEK)
        .await
        .unwrap_err();
    refused_as(
        &in_recovery,
        "granting a blanket approval",
        "recovery mode is in effect",
    );
    release_after_restore(&env, &["m1", "m2", "m3"]).await;
    s.leave_recovery(&root()).await.unwrap();
    let listed = s.blanket_approvals().await.unwrap();
    assert!(!listed[0].current_epoch && !listed[0].in_force());
    s.create_plan(&alice(), spec("p1", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap();
    let err = s.approve_under_blanket(&bot(), "p1").await.unwrap_err();
    assert!(
        refusal_text(&err).contains(&format!("{} was granted in another epoch", first.id)),
        "{err}"
    );
    // Granted again in this epoch, it replaces the old one on the record.
    let second = s
        .grant_blanket_approval(&bob(), "cluster-1", "lab, after the restore", WEEK)
        .await
        .unwrap();
    let listed = s.blanket_approvals().await.unwrap();
    let old = listed.iter().find(|b| b.id == first.id).unwrap();
    assert_eq!(old.revoked.as_ref().map(|r| r.0.as_str()), Some("bob"));
    s.approve_under_blanket(&bot(), "p1").await.unwrap();
    // Revoking bob's identity ends the blanket and the approval made under it.
    s.revoke_identity(&root(), "bob").await.unwrap();
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Revoked);
    let listed = s.blanket_approvals().await.unwrap();
    let ended = listed.iter().find(|b| b.id == second.id).unwrap();
    assert!(!ended.in_force());
    assert_eq!(ended.revoked.as_ref().map(|r| r.0.as_str()), Some("root"));
    assert!(ended.revoked.as_ref().unwrap().1 >= InstantMs(0));
    s.create_plan(&alice(), spec("p2", "m2", "rel-1", env.clock.now()))
        .await
        .unwrap();
    let without = s.approve_under_blanket(&bot(), "p2").await.unwrap_err();
    refused_as(
        &without,
        "approving under a blanket approval",
        "no blanket approval is in force for cluster cluster-1",
    );
}

/// A blanket approval lapses at its expiry: nothing is approved under it from then
/// on, the list shows it lapsed, and a new grant replaces it on the record. An
/// approval made under it before it lapsed stands, as any approval does.
pub async fn blanket_lapses<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let blanket = s
        .grant_blanket_approval(&bob(), "cluster-1", "lab", SpanMs::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(
        blanket.expires_at,
        blanket.granted_at.plus(SpanMs::from_secs(3600))
    );
    s.create_plan(&alice(), spec("p1", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap();
    s.approve_under_blanket(&bot(), "p1").await.unwrap();
    env.clock.advance(SpanMs::from_secs(3600));
    s.create_plan(&alice(), spec("p2", "m2", "rel-1", env.clock.now()))
        .await
        .unwrap();
    let err = s.approve_under_blanket(&bot(), "p2").await.unwrap_err();
    assert!(
        refusal_text(&err).contains(&format!("blanket approval {} lapsed", blanket.id)),
        "{err}"
    );
    assert_eq!(s.plan("p2").await.unwrap().state, PlanState::Proposed);
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Approved);
    let listed = s.blanket_approvals().await.unwrap();
    assert!(listed[0].expired && !listed[0].in_force(), "{listed:?}");
    let again = s
        .grant_blanket_approval(&carol(), "cluster-1", "lab, renewed", WEEK)
        .await
        .unwrap();
    s.approve_under_blanket(&bot(), "p2").await.unwrap();
    let listed = s.blanket_approvals().await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(
        listed[0].revoked.is_some(),
        "the lapsed grant is replaced on the record"
    );
    assert_eq!(listed[1].id, again.id);
    assert!(listed[1].in_force());
}

/// Run the named blanket-approval case on a fresh store.
pub async fn run<S, F, Fut>(name: &str, make: F)
where
    S: Store,
    F: Fn(Guards) -> Fut,
    Fut: Future<Output = Env<S>>,
{
    let env = make(Guards::default()).await;
    match name {
        "blanket_approves_and_commits" => blanket_approves_and_commits(env).await,
        "blanket_roles" => blanket_roles(env).await,
        "blanket_revocation" => blanket_revocation(env).await,
        "blanket_epoch_and_identity" => blanket_epoch_and_identity(env).await,
        "blanket_lapses" => blanket_lapses(env).await,
        other => panic!("no blanket case {other}"),
    }
}

/// Declare, in a module `blanket`, one `#[tokio::test]` per case above, each calling
/// the runner's `$make`.
#[macro_export]
macro_rules! blanket_suite {
    ($make:ident) => {
        mod blanket {
            $crate::blanket_suite!(@each $make;
                blanket_approves_and_commits, blanket_roles, blanket_revocation,
                blanket_epoch_and_identity, blanket_lapses);
        }
    };
    (@each $make:ident; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if let Some(make) = $crate::$make() {
                    $crate::store_suite::blanket::run(stringify!($name), make).await;
                }
            }
        )*
    };
}
