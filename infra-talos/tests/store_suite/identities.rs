//! Authenticated identities at the store: the installation's bootstrap is made once
//! and names the first administrator; every act on principals after it needs an
//! unrevoked recovery-admin, is kept in the identity journal, and never changes the
//! actor's own roles; an attempt's answer is recorded by the attempt's owner only.
//! Run by both stores through `identity_suite!`.

use infra_talos::contract::Role;
use infra_talos::contract::evidence::ResponseClass;
use infra_talos::contract::operation::OwnerToken;
use infra_talos::store::{
    Actor, ApprovalPolicy, BootstrapSpec, CertificateOrigin, CertificateSpec, Guards,
    IdentityEventKind, PrincipalKind, PrincipalSpec, Store, StoreError,
};

use super::*;

fn person(id: &str, roles: &[Role]) -> PrincipalSpec {
    PrincipalSpec {
        id: id.into(),
        kind: PrincipalKind::Human,
        roles: roles.to_vec(),
    }
}

/// Before the bootstrap no principal can be registered; the bootstrap is made once,
/// keeps its authority and administrator, and is the journal's first entry; a
/// second is refused and changes nothing.
pub async fn identity_bootstrap_once<S: Store>(env: Env<S>) {
    let s = &env.store;
    assert_eq!(s.installation_identity().await.unwrap(), None);
    let before = s
        .register_principal(&root(), person("eve", &[Role::Approver]))
        .await
        .unwrap_err();
    refused_as(&before, "registering a principal", "bootstrap it first");
    // The administrator must be a person holding recovery-admin.
    let mut wrong = bootstrap_spec();
    wrong.administrator.roles = vec![Role::Approver];
    refused_as(
        &s.bootstrap(wrong).await.unwrap_err(),
        "bootstrapping the installation",
        "a person holding recovery-admin",
    );
    let mut not_pem = bootstrap_spec();
    not_pem.ca_certificate = "root-ca".into();
    refused_as(
        &s.bootstrap(not_pem).await.unwrap_err(),
        "bootstrapping the installation",
        "not a PEM certificate",
    );
    env.clock.advance(SpanMs(1000));
    s.bootstrap(bootstrap_spec()).await.unwrap();
    let identity = s.installation_identity().await.unwrap().unwrap();
    assert_eq!(identity.ca_certificate, TEST_CA);
    assert_eq!(identity.administrator, "root");
    assert_eq!(identity.bootstrapped_at, T0.plus(SpanMs(1000)));
    assert_eq!(identity.approval_policy, ApprovalPolicy::SelfApprovalMarked);
    let mut again = bootstrap_spec();
    again.administrator.id = "mallory".into();
    refused_as(
        &s.bootstrap(again).await.unwrap_err(),
        "bootstrapping the installation",
        "already bootstrapped",
    );
    assert_eq!(
        s.installation_identity()
            .await
            .unwrap()
            .unwrap()
            .administrator,
        "root"
    );
    let journal = s.identity_journal().await.unwrap();
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert_eq!(journal[0].seq, 1);
    assert_eq!(journal[0].kind, IdentityEventKind::Bootstrap);
    assert_eq!(
        (journal[0].actor.as_str(), journal[0].principal.as_str()),
        ("root", "root")
    );
    assert_eq!(
        journal[0].detail,
        "roles: recovery-admin; approvals need a second person: no (a self-approval is \
         recorded with its mark)"
    );
}

/// With the installation's approvals needing a second person, every approval the
/// self-approval rule would mark, or could not decide for, is refused, saying why,
/// and nothing is recorded; another approver's approval is made as before. The
/// setting is the bootstrap's, read back with the installation's identity.
pub async fn second_person_approvals<S: Store>(env: Env<S>) {
    let s = &env.store;
    world_under(s, ApprovalPolicy::SecondPerson).await;
    let identity = s.installation_identity().await.unwrap().unwrap();
    assert_eq!(identity.approval_policy, ApprovalPolicy::SecondPerson);
    let now = env.clock.now();
    let dave = |role| Actor::new("dave", role);
    s.create_plan(&dave(Role::Publisher), spec("p2", "m2", "rel-1", now))
        .await
        .unwrap();
    // A token nobody is on record as responsible for made p4: undetermined.
    s.create_plan(
        &Actor::new("orphan", Role::Publisher),
        spec("p4", "m1", "rel-1", now),
    )
    .await
    .unwrap();
    for (approver, plan, why) in [
        (
            dave(Role::Approver),
            "p2",
            "self-approval: the approver created the plan",
        ),
        (carol(), "p4", "self-approval undetermined"),
    ] {
        let machine = s.plan(plan).await.unwrap().machine;
        let before = s.timeline(&machine).await.unwrap().len();
        let err = s.approve(&approver, plan).await.unwrap_err();
        refused_as(&err, "approving", "approvals need a second person");
        refused_as(&err, "approving", why);
        assert_eq!(s.plan(plan).await.unwrap().state, PlanState::Proposed);
        assert_eq!(s.timeline(&machine).await.unwrap().len(), before);
    }
    assert_eq!(
        s.approve(&bob(), "p2").await.unwrap(),
        SelfApproval::NotSelfApproval
    );
    assert_eq!(s.plan("p2").await.unwrap().state, PlanState::Approved);
}

/// Registering, changing and revoking principals need an unrevoked recovery-admin;
/// no one changes their own roles; the role rules of registration hold for a change;
/// each act is journalled with who did it.
pub async fn principal_acts_need_an_administrator<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let eve = || person("eve", &[Role::Approver, Role::RecoveryAdmin]);
    for actor in [
        alice(),
        bob(),
        ann(),
        Actor::new("bob", Role::RecoveryAdmin),
    ] {
        let err = s.register_principal(&actor, eve()).await.unwrap_err();
        assert!(
            matches!(err, StoreError::Refused { .. }),
            "{actor:?}: {err}"
        );
        let err = s
            .change_roles(&actor, "alice", vec![Role::Approver])
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Refused { .. }),
            "{actor:?}: {err}"
        );
    }
    assert!(matches!(
        s.register_principal(&root(), person("bob", &[Role::Author]))
            .await
            .unwrap_err(),
        StoreError::Exists { .. }
    ));
    s.register_principal(&root(), eve()).await.unwrap();
    let eve_admin = Actor::new("eve", Role::RecoveryAdmin);
    // Nobody grants themselves a role.
    refused_as(
        &s.change_roles(&root(), "root", vec![Role::RecoveryAdmin, Role::Approver])
            .await
            .unwrap_err(),
        "changing a principal's roles",
        "its own roles",
    );
    // A token never holds approver, however it is asked for.
    refused_as(
        &s.change_roles(&root(), "bot", vec![Role::Approver])
            .await
            .unwrap_err(),
        "changing a principal's roles",
        "a token never holds approver",
    );
    assert!(matches!(
        s.change_roles(&root(), "nobody", vec![Role::Author])
            .await
            .unwrap_err(),
        StoreError::NotFound { .. }
    ));
    // Another administrator changes carol's roles: she no longer approves.
    s.change_roles(&eve_admin, "carol", vec![Role::Author])
        .await
        .unwrap();
    s.create_plan(&alice(), spec("p1", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap();
    refused_as(
        &s.approve(&carol(), "p1").await.unwrap_err(),
        "approving",
        "carol does not hold the role approver",
    );
    // A revoked administrator can do nothing more.
    s.revoke_identity(&root(), "eve").await.unwrap();
    refused_as(
        &s.register_principal(&eve_admin, person("frank", &[Role::Author]))
            .await
            .unwrap_err(),
        "registering a principal",
        "revoked",
    );
    refused_as(
        &s.change_roles(&root(), "eve", vec![Role::Author])
            .await
            .unwrap_err(),
        "changing a principal's roles",
        "revoked",
    );
    let journal = s.identity_journal().await.unwrap();
    let tail: Vec<_> = journal
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(|e| {
            (
                e.kind,
                e.actor.as_str(),
                e.actor_role.as_str(),
                e.principal.as_str(),
                e.detail.as_str(),
            )
        })
        .collect();
    assert_eq!(
        tail,
        [
            (
                IdentityEventKind::Registered,
                "root",
                "recovery-admin",
                "eve",
                "roles: approver, recovery-admin"
            ),
            (
                IdentityEventKind::RolesChanged,
                "eve",
                "recovery-admin",
                "carol",
                "roles: author"
            ),
            (
                IdentityEventKind::Revoked,
                "root",
                "recovery-admin",
                "eve",
                ""
            ),
        ]
    );
    let seqs: Vec<u64> = journal.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=journal.len() as u64).collect::<Vec<_>>());
}

/// An attempt's answer is recorded under the token its attempt was made with: any
/// other token (another controller, another generation, another epoch) is refused
/// and records nothing.
pub async fn response_only_from_the_attempts_owner<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    let entries = s.timeline("m1").await.unwrap().len();
    let others = [
        OwnerToken {
            controller: B,
            ..c.owner
        },
        OwnerToken {
            generation: 2,
            ..c.owner
        },
    ];
    for token in others {
        let err = s
            .record_response(&c.operation, 1, token, ResponseClass::Accepted)
            .await
            .unwrap_err();
        refused_as(&err, "recording a response", "its sender's to record");
    }
    assert_eq!(s.timeline("m1").await.unwrap().len(), entries);
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Sending
    );
    s.record_response(&c.operation, 1, c.owner, ResponseClass::Accepted)
        .await
        .unwrap();
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Verifying
    );
}

/// A fingerprint made of one repeated hex digit.
fn fingerprint(digit: char) -> String {
    std::iter::repeat_n(digit, 64).collect()
}

fn certificate(principal: &str, digit: char) -> CertificateSpec {
    CertificateSpec {
        principal: principal.into(),
        fingerprint: fingerprint(digit),
        origin: CertificateOrigin::Issued,
    }
}

/// Every certificate is bound to its principal in a journaled act: the bootstrap
/// binds the administrator's own; after it only an unrevoked recovery-admin binds, a
/// registered and unrevoked principal's certificate, a fingerprint once; revoking
/// an identity ends its bindings and no new one is made for it.
pub async fn certificates_are_bound_in_journaled_acts<S: Store>(env: Env<S>) {
    let s = &env.store;
    let mut malformed = bootstrap_spec();
    malformed.administrator_certificate = Some("sha256:beef".into());
    refused_as(
        &s.bootstrap(malformed).await.unwrap_err(),
        "bootstrapping the installation",
        "64 lowercase hex digits",
    );
    assert_eq!(s.installation_identity().await.unwrap(), None);
    let spec = BootstrapSpec {
        administrator_certificate: Some(fingerprint('a')),
        ..bootstrap_spec()
    };
    s.bootstrap(spec).await.unwrap();
    s.register_principal(&root(), person("bob", &[Role::Approver]))
        .await
        .unwrap();
    let bound = s.certificates().await.unwrap();
    assert_eq!(bound.len(), 1, "{bound:?}");
    assert_eq!(
        (bound[0].principal.as_str(), bound[0].bound_by.as_str()),
        ("root", "root")
    );
    assert_eq!(bound[0].fingerprint, fingerprint('a'));
    assert_eq!(bound[0].ended_at, None);

    // Who may bind, what, and to whom.
    let err = s
        .bind_certificate(&bob(), certificate("bob", 'b'))
        .await
        .unwrap_err();
    refused_as(
        &err,
        "binding a certificate",
        "the role approver may not do this",
    );
    let err = s
        .bind_certificate(
            &Actor::new("bob", Role::RecoveryAdmin),
            certificate("bob", 'b'),
        )
        .await
        .unwrap_err();
    refused_as(
        &err,
        "binding a certificate",
        "bob does not hold the role recovery-admin",
    );
    let err = s
        .bind_certificate(&root(), certificate("nobody", 'b'))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    let mut upper = certificate("bob", 'b');
    upper.fingerprint = fingerprint('B');
    refused_as(
        &s.bind_certificate(&root(), upper).await.unwrap_err(),
        "binding a certificate",
        "64 lowercase hex digits",
    );
    assert_eq!(s.certificates().await.unwrap().len(), 1);
    s.bind_certificate(&root(), certificate("bob", 'b'))
        .await
        .unwrap();
    let err = s
        .bind_certificate(&root(), certificate("bob", 'b'))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Exists { .. }), "{err:?}");

    let journal = s.identity_journal().await.unwrap();
    let kinds: Vec<_> = journal.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            IdentityEventKind::Bootstrap,
            IdentityEventKind::CertificateBound,
            IdentityEventKind::Registered,
            IdentityEventKind::CertificateBound,
        ]
    );
    assert_eq!(
        journal[1].detail,
        format!("certificate sha256:{} (issued)", fingerprint('a'))
    );
    assert_eq!(
        (journal[3].principal.as_str(), journal[3].actor.as_str()),
        ("bob", "root")
    );
    assert!(journal[3].detail.contains(&fingerprint('b')), "{journal:?}");

    // Revoking bob ends its binding, not root's; none is made for it again.
    env.clock.advance(SpanMs(1000));
    s.revoke_identity(&root(), "bob").await.unwrap();
    let bound = s.certificates().await.unwrap();
    let of = |who: &str| bound.iter().find(|b| b.principal == who).unwrap().clone();
    assert_eq!(of("bob").ended_at, Some(env.clock.now()));
    assert_eq!(of("root").ended_at, None);
    refused_as(
        &s.bind_certificate(&root(), certificate("bob", 'c'))
            .await
            .unwrap_err(),
        "binding a certificate",
        "bob is revoked",
    );
    assert_eq!(s.certificates().await.unwrap().len(), 2);
}

/// What a store at schema version 9 holds before it is migrated: the bootstrap and a
/// registration, no binding (version 9 has none).
pub async fn identities_before_bindings<S: Store>(s: &S) {
    s.bootstrap(bootstrap_spec()).await.unwrap();
    s.register_principal(&root(), person("bob", &[Role::Approver]))
        .await
        .unwrap();
}

/// After the migration to version 10: the journal is kept entry for entry, no
/// certificate is bound (each must be bound before it is accepted), and a binding
/// is journaled under the new kind.
pub async fn bindings_after_migration<S: Store>(s: &S) {
    assert_eq!(s.certificates().await.unwrap(), Vec::new());
    let before = s.identity_journal().await.unwrap();
    let kinds: Vec<_> = before.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [IdentityEventKind::Bootstrap, IdentityEventKind::Registered]
    );
    s.bind_certificate(&root(), certificate("bob", 'b'))
        .await
        .unwrap();
    let after = s.identity_journal().await.unwrap();
    assert_eq!(after[..2], before[..]);
    assert_eq!(after[2].kind, IdentityEventKind::CertificateBound);
    assert_eq!(after[2].seq, 3);
    assert_eq!(s.certificates().await.unwrap().len(), 1);
}

/// Run the named identity case on a fresh store.
pub async fn run<S, F, Fut>(name: &str, make: F)
where
    S: Store,
    F: Fn(Guards) -> Fut,
    Fut: Future<Output = Env<S>>,
{
    let env = make(Guards::default()).await;
    match name {
        "identity_bootstrap_once" => identity_bootstrap_once(env).await,
        "certificates_are_bound_in_journaled_acts" => {
            certificates_are_bound_in_journaled_acts(env).await;
        }
        "principal_acts_need_an_administrator" => principal_acts_need_an_administrator(env).await,
        "second_person_approvals" => second_person_approvals(env).await,
        "response_only_from_the_attempts_owner" => {
            response_only_from_the_attempts_owner(env).await;
        }
        other => panic!("no identity case {other}"),
    }
}

/// Declare, in a module `identities`, one `#[tokio::test]` per case above, each
/// calling the runner's `$make`.
#[macro_export]
macro_rules! identity_suite {
    ($make:ident) => {
        mod identities {
            $crate::identity_suite!(@each $make;
                identity_bootstrap_once, principal_acts_need_an_administrator,
                response_only_from_the_attempts_owner, second_person_approvals,
                certificates_are_bound_in_journaled_acts);
        }
    };
    (@each $make:ident; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if let Some(make) = $crate::$make() {
                    $crate::store_suite::identities::run(stringify!($name), make).await;
                }
            }
        )*
    };
}
