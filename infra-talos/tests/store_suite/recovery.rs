//! Recovery scope states through the store (§7.2–§7.6): entry marks every scope
//! pre-restore unaccounted, the step 1 decision accounts it, a mark reads the
//! restoration observation, and only a ready scope is released (invariant 13). Run by
//! both stores through `recovery_suite!`.

use infra_talos::contract::recovery::{BlockedOn, ScopeState};
use infra_talos::store::{Guards, ScopeAccounting, Store, StoreError};

use super::*;

async fn scope<S: Store>(s: &S, machine: &str) -> ScopeState {
    s.machine(machine).await.unwrap().scope
}

fn refused_saying(err: &StoreError, says: &str) {
    assert!(
        matches!(err, StoreError::Refused { reason, .. } if reason.contains(says)),
        "expected a refusal saying {says:?}, got {err}"
    );
}

async fn restoration<S: Store>(s: &S, machine: &str, read: ObservedFacts) {
    observe(s, machine, ObservationPurpose::Restoration, None, B, read).await;
}

/// A scope is released only from ready: not while pre-restore unaccounted, not when
/// blocked on a missing or foreign restoration observation, not after Desired moved
/// since its mark; leaving waits for every scope, and returns each to normal.
pub async fn release_only_when_ready<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    assert_eq!(scope(s, "m1").await, ScopeState::Normal);
    s.enter_recovery(&root(), entry_now(s, B).await)
        .await
        .unwrap();
    for m in ["m1", "m2", "m3"] {
        assert_eq!(scope(s, m).await, ScopeState::PreRestoreUnaccounted);
    }
    let err = s.release_scope(&root(), "m1").await.unwrap_err();
    refused_saying(&err, "pre-restore unaccounted");
    // A decision with no reads after the deadline is refused and records nothing.
    let err = s
        .account_scopes(
            &root(),
            ScopeAccounting {
                machines: vec!["m1".into()],
                settle_floor: SETTLE,
                explanation: None,
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::AccountingRefused { .. }), "{err}");
    assert_eq!(scope(s, "m1").await, ScopeState::PreRestoreUnaccounted);
    account_after_restore(&env, &["m1", "m2", "m3"]).await;
    assert_eq!(
        scope(s, "m1").await,
        ScopeState::Blocked(BlockedOn::AwaitingMark)
    );
    refused_saying(&s.release_scope(&root(), "m1").await.unwrap_err(), "ready");
    // No restoration observation yet, then one showing another machine.
    assert_eq!(
        s.mark_scope(&root(), "m1", None).await.unwrap(),
        ScopeState::Blocked(BlockedOn::NoRestorationObservation)
    );
    let mut foreign = as_it_stands(s, "m1").await;
    foreign.smbios_uuid = Some("uuid-someone-else".into());
    restoration(s, "m1", foreign).await;
    assert_eq!(
        s.mark_scope(&root(), "m1", None).await.unwrap(),
        ScopeState::Blocked(BlockedOn::IdentityMismatch)
    );
    refused_saying(&s.release_scope(&root(), "m1").await.unwrap_err(), "ready");
    // The machine's own identity: ready, but a missing dependency blocks it.
    restoration(s, "m1", as_it_stands(s, "m1").await).await;
    assert_eq!(
        s.mark_scope(
            &root(),
            "m1",
            Some(infra_talos::contract::recovery::Dependency::KeyVersion)
        )
        .await
        .unwrap(),
        ScopeState::Blocked(BlockedOn::MissingDependency(
            infra_talos::contract::recovery::Dependency::KeyVersion
        ))
    );
    assert_eq!(
        s.mark_scope(&root(), "m1", None).await.unwrap(),
        ScopeState::Ready
    );
    // Desired moves after the mark: the release needs a new mark.
    publish(s, "rel-2").await;
    refused_saying(
        &s.release_scope(&root(), "m1").await.unwrap_err(),
        "mark it again",
    );
    assert_eq!(
        s.mark_scope(&root(), "m1", None).await.unwrap(),
        ScopeState::Ready
    );
    s.release_scope(&root(), "m1").await.unwrap();
    assert_eq!(scope(s, "m1").await, ScopeState::Released);
    // Leaving waits for every scope.
    refused_saying(&s.leave_recovery(&root()).await.unwrap_err(), "m2");
    for m in ["m2", "m3"] {
        restoration(s, m, as_it_stands(s, m).await).await;
        s.mark_scope(&root(), m, None).await.unwrap();
        s.release_scope(&root(), m).await.unwrap();
    }
    s.leave_recovery(&root()).await.unwrap();
    for m in ["m1", "m2", "m3"] {
        assert_eq!(scope(s, m).await, ScopeState::Normal);
    }
}

/// A restored operation with no attempt used to hold its scope for good: no release
/// and no way out of recovery. The step 1 decision now ends it cancelled (§7.3 step
/// 5), the scope is marked and released, recovery mode is left, and the machine
/// takes a new plan approved in the new epoch.
pub async fn restored_operation_without_attempt_is_cancelled<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    s.enter_recovery(&root(), entry_now(s, B).await)
        .await
        .unwrap();
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Unresolved
    );
    refused_saying(
        &s.release_scope(&root(), "m1").await.unwrap_err(),
        "holds the scope",
    );
    release_after_restore(&env, &["m2", "m3"]).await;
    refused_saying(&s.leave_recovery(&root()).await.unwrap_err(), "m1");
    // The decision for m1 (its own reads after the others' decision).
    account_after_restore(&env, &["m1"]).await;
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Cancelled
    );
    assert_eq!(
        scope(s, "m1").await,
        ScopeState::Blocked(BlockedOn::AwaitingMark)
    );
    assert!(
        s.timeline("m1")
            .await
            .unwrap()
            .iter()
            .any(|e| e.kind == "cancelled" && e.operation.as_deref() == Some(&c.operation))
    );
    restoration(s, "m1", as_it_stands(s, "m1").await).await;
    assert_eq!(
        s.mark_scope(&root(), "m1", None).await.unwrap(),
        ScopeState::Ready
    );
    s.release_scope(&root(), "m1").await.unwrap();
    s.leave_recovery(&root()).await.unwrap();
    ready(&env, "p2", "m1", A).await;
    s.commit("p2", A).await.unwrap();
}

/// A restored operation with an attempt keeps its scope unresolved after the
/// decision, which accounts the attempt; marking leaves it unresolved and it cannot
/// be released.
pub async fn restored_attempt_keeps_the_scope<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    s.enter_recovery(&root(), entry_now(s, B).await)
        .await
        .unwrap();
    account_after_restore(&env, &["m1"]).await;
    assert_eq!(scope(s, "m1").await, ScopeState::Unresolved);
    let attempts = s.attempts(&c.operation).await.unwrap();
    let AttemptAccounting::Decision(by) = attempts[0].accounting else {
        panic!("the attempt is not accounted by the decision: {attempts:?}");
    };
    let timeline = s.timeline("m1").await.unwrap();
    let decision = timeline.iter().find(|e| e.revision == by).unwrap();
    assert_eq!(
        (decision.kind.as_str(), decision.actor_role.as_str()),
        ("accounting", "recovery-admin"),
        "{decision:?}"
    );
    restoration(s, "m1", as_it_stands(s, "m1").await).await;
    assert_eq!(
        s.mark_scope(&root(), "m1", None).await.unwrap(),
        ScopeState::Unresolved
    );
    let held = s.release_scope(&root(), "m1").await.unwrap_err();
    refused_as(&held, "releasing a scope", "still holds the scope");
    assert_eq!(scope(s, "m1").await, ScopeState::Unresolved);
}

/// A machine inventoried during recovery starts pre-restore unaccounted (§7.4) and
/// keeps the installation in recovery mode until it is accounted and released.
pub async fn inventoried_during_recovery_is_unaccounted<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    s.enter_recovery(&root(), entry_now(s, B).await)
        .await
        .unwrap();
    release_after_restore(&env, &["m1", "m2", "m3"]).await;
    s.create_machine(&ann(), machine_spec("m9", "r9"))
        .await
        .unwrap();
    assert_eq!(scope(s, "m9").await, ScopeState::PreRestoreUnaccounted);
    refused_saying(&s.leave_recovery(&root()).await.unwrap_err(), "m9");
    release_after_restore(&env, &["m9"]).await;
    s.leave_recovery(&root()).await.unwrap();
}

/// Freezing removes authority and is allowed on any scope in recovery mode;
/// unfreezing is refused while the scope is pre-restore unaccounted (§7.5) and allowed
/// once it is accounted. Each entry names the epoch it was made in.
pub async fn unfreeze_waits_for_accounting<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    s.enter_recovery(&root(), entry_now(s, B).await)
        .await
        .unwrap();
    let epoch = s.current_epoch().await.unwrap();
    s.freeze(&ann(), "m1", "hold while we look").await.unwrap();
    let err = s.unfreeze(&bob(), "m1", "looked").await.unwrap_err();
    refused_saying(&err, "pre-restore unaccounted");
    assert!(s.machine("m1").await.unwrap().frozen);
    account_after_restore(&env, &["m1"]).await;
    s.unfreeze(&bob(), "m1", "looked").await.unwrap();
    assert!(!s.machine("m1").await.unwrap().frozen);
    let timeline = s.timeline("m1").await.unwrap();
    for kind in ["frozen", "unfrozen"] {
        let entry = timeline.iter().find(|e| e.kind == kind).unwrap();
        assert!(entry.detail.contains(&epoch.to_string()), "{entry:?}");
    }
}

/// A store at schema version 4 (no scope states yet) left in recovery mode, one
/// scope released under the old rules.
pub async fn in_recovery_before_scope_states<S: Store>(old: &Env<S>) {
    let s = &old.store;
    world_before_imports(s).await;
    s.raw_execute("UPDATE installation SET recovery_mode = TRUE")
        .await
        .unwrap();
    s.raw_execute("UPDATE machines SET released_epoch = (SELECT epoch FROM installation)")
        .await
        .unwrap();
}

/// The same store after migration 5: every scope is pre-restore unaccounted (the
/// old release withdrawn, so the gate agrees), recovery mode cannot be left yet, and
/// the §7.3 procedure leads out of it.
pub async fn recovery_carried_over_by_migration<S: Store>(env: &Env<S>) {
    let s = &env.store;
    for m in ["m1", "m2", "m3"] {
        assert_eq!(scope(s, m).await, ScopeState::PreRestoreUnaccounted);
    }
    let err = s
        .create_plan(&alice(), spec("p1", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap_err();
    refused_saying(&err, "not released");
    refused_saying(&s.leave_recovery(&root()).await.unwrap_err(), "m1");
    release_after_restore(env, &["m1", "m2", "m3"]).await;
    s.leave_recovery(&root()).await.unwrap();
    assert_eq!(scope(s, "m1").await, ScopeState::Normal);
    ready(env, "p1", "m1", A).await;
    s.commit("p1", A).await.unwrap();
}

/// The entry records what §7.2 asks — the stop of the pre-restore instances and each
/// restored backup with its age — and refuses an entry without a backup, with a
/// family named twice, or with a stop after the entry, recording nothing. The step 1
/// decision counts from the recorded stop: a stop two minutes before the entry lets
/// reads taken right after the entry account the scope, where counting from the
/// entry would refuse them.
pub async fn entry_records_the_restore<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let epoch = s.current_epoch().await.unwrap();
    let now = s.now().await.unwrap();
    let backup = |family: &str| infra_talos::store::RestoredBackup {
        family: family.into(),
        backup: format!("{family}-2026-12-01.dump"),
        taken_at: InstantMs(now.0 - 7_200_000),
    };
    let entry = |stopped_at: InstantMs, backups| infra_talos::store::RecoveryEntry {
        controller: B,
        stopped_at,
        backups,
    };
    let cases = [
        (entry(now, vec![]), "at least one restored backup"),
        (
            entry(now, vec![backup("database"), backup("database")]),
            "named twice",
        ),
        (
            entry(InstantMs(now.0 + 60_000), vec![backup("database")]),
            "after the entry",
        ),
    ];
    for (bad, says) in cases {
        let err = s.enter_recovery(&root(), bad).await.unwrap_err();
        refused_as(&err, "entering recovery mode", says);
        assert_eq!(s.current_epoch().await.unwrap(), epoch, "{says}");
        assert_eq!(scope(s, "m1").await, ScopeState::Normal, "{says}");
    }
    let stopped = InstantMs(now.0 - 120_000);
    s.enter_recovery(
        &root(),
        entry(stopped, vec![backup("database"), backup("keys")]),
    )
    .await
    .unwrap();
    let recorded = s.timeline("m1").await.unwrap().pop().unwrap();
    assert_eq!(recorded.kind, "recovery_entry");
    assert!(
        recorded.detail.contains(
            "restored database from database-2026-12-01.dump (age 7200s), \
             keys from keys-2026-12-01.dump (age 7200s)"
        ) && recorded
            .detail
            .contains(&format!("stopped at {}ms", stopped.0)),
        "{}",
        recorded.detail
    );
    // The erased attempt's latest deadline is the stop plus the maximum transport
    // deadline (60 s), already past: one read now, one a settle floor later.
    let read = as_it_stands(s, "m1").await;
    observe(s, "m1", ObservationPurpose::Recovery, None, B, read.clone()).await;
    env.clock.advance(SETTLE);
    observe(s, "m1", ObservationPurpose::Recovery, None, B, read).await;
    s.account_scopes(
        &root(),
        ScopeAccounting {
            machines: vec!["m1".into()],
            settle_floor: SETTLE,
            explanation: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(
        scope(s, "m1").await,
        ScopeState::Blocked(BlockedOn::AwaitingMark)
    );
}

/// Run the named recovery case on a fresh store.
pub async fn run<S, F, Fut>(name: &str, make: F)
where
    S: Store,
    F: Fn(Guards) -> Fut,
    Fut: Future<Output = Env<S>>,
{
    let env = make(Guards::default()).await;
    match name {
        "release_only_when_ready" => release_only_when_ready(env).await,
        "restored_operation_without_attempt_is_cancelled" => {
            restored_operation_without_attempt_is_cancelled(env).await;
        }
        "restored_attempt_keeps_the_scope" => restored_attempt_keeps_the_scope(env).await,
        "inventoried_during_recovery_is_unaccounted" => {
            inventoried_during_recovery_is_unaccounted(env).await;
        }
        "unfreeze_waits_for_accounting" => unfreeze_waits_for_accounting(env).await,
        "entry_records_the_restore" => entry_records_the_restore(env).await,
        other => panic!("no recovery case {other}"),
    }
}

/// Declare, in a module `recovery`, one `#[tokio::test]` per case above, each calling
/// the runner's `$make`.
#[macro_export]
macro_rules! recovery_suite {
    ($make:ident) => {
        mod recovery {
            $crate::recovery_suite!(@each $make;
                release_only_when_ready, restored_operation_without_attempt_is_cancelled,
                restored_attempt_keeps_the_scope, inventoried_during_recovery_is_unaccounted,
                unfreeze_waits_for_accounting, entry_records_the_restore);
        }
    };
    (@each $make:ident; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if let Some(make) = $crate::$make() {
                    $crate::store_suite::recovery::run(stringify!($name), make).await;
                }
            }
        )*
    };
}
