//! Tests of the approval page's HTML: snapshots of every page on hand-built views,
//! escaping, no script, the approve form only where an approver may approve, and no
//! secret of the review corpus in a rendered plan page.

use super::{
    Who, drift_page, escape, login_page, message_page, plan_page, plans_page, recovery_page,
    segment, timeline_page, utc,
};
use crate::contract::comparison::Comparison;
use crate::contract::evidence::ObservationPurpose;
use crate::contract::operation::{ControllerId, OperationKind};
use crate::contract::plan::PlanState;
use crate::contract::recovery::ScopeState;
use crate::contract::{InstantMs, Revision, Role, SpanMs};
use crate::digest::Digest;
use crate::serve::review::{self, ReviewDiff};
use crate::store::{
    IdentityKey, MachineView, ObservationView, ObservedFacts, PlanView, TimelineEntry,
};

/// 2026-03-01 09:30:00 UTC.
const T0: u64 = 1_772_357_400_000;

fn snapshot(name: &str, html: &str) {
    insta::with_settings!({ snapshot_path => "../snapshots", prepend_module_to_snapshot => true }, {
        insta::assert_snapshot!(name, html);
    });
}

fn approver() -> Who {
    Who {
        principal: "ada@example.org".into(),
        roles: vec![Role::Approver],
        csrf: "csrf-0f3a".into(),
    }
}

fn publisher() -> Who {
    Who {
        principal: "pub-bot".into(),
        roles: vec![Role::Publisher, Role::Author],
        csrf: "csrf-77c1".into(),
    }
}

fn machine(id: &str) -> MachineView {
    MachineView {
        id: id.into(),
        desired_release: Some("rel-42".into()),
        applied_release: Some("rel-41".into()),
        applied_digest: Some(Digest::from_bytes([0x11; 32])),
        baseline_revision: Revision(7),
        assignment_revision: 3,
        frozen: false,
        open_drift: None,
        revision: Revision(12),
        endpoint: "10.0.0.10:50000".into(),
        identity: IdentityKey::SmbiosUuid("4c4c4544-0042-3510-8051-b4c04f4d3232".into()),
        cluster_id: "cluster-lab".into(),
        scope: ScopeState::Normal,
    }
}

fn plan(id: &str, machine: &str, state: PlanState) -> PlanView {
    PlanView {
        id: id.into(),
        machine: machine.into(),
        state,
        operation: (state == PlanState::Committed).then(|| format!("op-{id}")),
        artifact_digest: Digest::from_bytes([0x2e; 32]),
        baseline_revision: Revision(7),
        transport_deadline: SpanMs::from_secs(30),
        verification_deadline: SpanMs(5_400_000),
        bound_drift: None,
        kind: OperationKind::ApplyConfig,
    }
}

fn entry(revision: u64, kind: &str, plan: Option<&str>, detail: &str) -> TimelineEntry {
    TimelineEntry {
        revision: Revision(revision),
        kind: kind.into(),
        at: InstantMs(T0 + revision * 61_000),
        actor: "ada@example.org".into(),
        actor_role: "approver".into(),
        plan: plan.map(Into::into),
        operation: None,
        comparison: None,
        detail: detail.into(),
        requested_by: None,
    }
}

fn history() -> Vec<TimelineEntry> {
    let mut refused = entry(
        11,
        "commitment refused",
        Some("cp-1-rel-42-b7"),
        "scope gate",
    );
    refused.comparison = Some(Comparison::Gate);
    refused.actor = "controller 00000000000000000000000000000001".into();
    refused.actor_role = "controller".into();
    vec![
        entry(9, "plan created", Some("cp-1-rel-42-b7"), "release rel-42"),
        refused,
    ]
}

fn observations() -> Vec<ObservationView> {
    let read = |digest: Digest| ObservedFacts {
        smbios_uuid: None,
        node_id: None,
        cluster_id: Some("cluster-lab".into()),
        talos_version: Some("v1.10.5".into()),
        digest: Some(digest),
        config_version: Some(4),
        access_version: None,
    };
    vec![
        ObservationView {
            machine: "cp-1".into(),
            basis: Revision(8),
            purpose: ObservationPurpose::Drift,
            plan: None,
            controller: Some(ControllerId(1)),
            started_at: InstantMs(T0),
            recorded_at: Some(InstantMs(T0 + 900)),
            recorded_revision: Some(Revision(9)),
            read: Some(read(Digest::from_bytes([0x11; 32]))),
        },
        ObservationView {
            machine: "cp-1".into(),
            basis: Revision(10),
            purpose: ObservationPurpose::Evidence,
            plan: Some("cp-1-rel-42-b7".into()),
            controller: Some(ControllerId(1)),
            started_at: InstantMs(T0 + 120_000),
            recorded_at: None,
            recorded_revision: None,
            read: None,
        },
    ]
}

fn small_diff() -> ReviewDiff {
    review::review_diff(
        Some(b"machine:\n  install:\n    disk: /dev/sda\n  token: aaaaaa.bbbbbbbbbbbbbbbb\n"),
        b"machine:\n  install:\n    disk: /dev/nvme0n1\n  token: cccccc.dddddddddddddddd\n",
    )
}

/// The plan page as `who` sees it: the diff only for a reader who may see it, as the
/// page's route decides.
fn proposed_page(who: &Who) -> String {
    let diff = small_diff();
    plan_page(
        who,
        &plan("cp-1-rel-42-b7", "cp-1", PlanState::Proposed),
        &machine("cp-1"),
        who.reads_configuration().then_some(&diff),
        &observations(),
        &history(),
    )
}

/// Every page, rendered on the sample views.
fn every_page() -> Vec<String> {
    let machines = [machine("cp-1"), {
        let mut m = machine("w-<2>");
        m.open_drift = Some(Revision(10));
        m.frozen = true;
        m
    }];
    let plans = [
        plan("cp-1-rel-42-b7", "cp-1", PlanState::Proposed),
        plan("w-2-rel-42-b7", "w-<2>", PlanState::Approved),
        plan("cp-1-rel-40-b3", "cp-1", PlanState::Committed),
    ];
    vec![
        login_page(Some("the token has expired"), "csrf-login"),
        plans_page(&approver(), &plans, &machines),
        proposed_page(&approver()),
        proposed_page(&publisher()),
        timeline_page(&approver(), &machines[0], &history()),
        drift_page(&publisher(), &machines),
        message_page(
            Some(&approver()),
            "Refused",
            "comparison 1 refused",
            "409 Conflict",
        ),
        recovery_sample(&approver()),
    ]
}

fn recovery_admin() -> Who {
    Who {
        principal: "root".into(),
        roles: vec![Role::RecoveryAdmin],
        csrf: "csrf-9e21".into(),
    }
}

/// The page in recovery mode: one scope pre-restore unaccounted, one frozen and
/// blocked, an approved, a proposed and a revoked plan.
fn recovery_sample(who: &Who) -> String {
    let machines = [
        MachineView {
            scope: ScopeState::PreRestoreUnaccounted,
            ..machine("cp-1")
        },
        MachineView {
            scope: ScopeState::Unresolved,
            frozen: true,
            ..machine("w-<2>")
        },
    ];
    let plans = [
        plan("cp-1-rel-42-b7", "cp-1", PlanState::Approved),
        plan("w-2-rel-42-b7", "w-<2>", PlanState::Proposed),
        plan("cp-1-rel-40-b3", "cp-1", PlanState::Revoked),
    ];
    recovery_page(who, "00112233445566778899aabbccddeeff", &machines, &plans)
}

#[test]
fn recovery_page_snapshot() {
    snapshot("recovery", &recovery_sample(&approver()));
}

/// In recovery mode the page offers revoking, cancelling and freezing, each only to
/// the roles that may, and nothing else: no approval, no unfreezing, no plan.
#[test]
fn the_recovery_page_offers_only_the_acts_recovery_never_stops() {
    let html = recovery_sample(&approver());
    for offered in [
        "action=\"/plans/cp-1-rel-42-b7/revoke\"",
        "action=\"/plans/cp-1-rel-42-b7/cancel\"",
        "action=\"/plans/w-2-rel-42-b7/cancel\"",
        "action=\"/machines/cp-1/freeze\"",
    ] {
        assert!(html.contains(offered), "{offered} missing from {html}");
    }
    for absent in [
        "/approve\"",
        "/unfreeze\"",
        "/adopt\"",
        "/revert\"",
        "w-2-rel-42-b7/revoke",
        "cp-1-rel-40-b3",
        "/machines/w-%3C2%3E/freeze",
        "/recovery/enter",
    ] {
        assert!(!html.contains(absent), "{absent} offered in {html}");
    }
    let html = recovery_sample(&Who {
        roles: vec![Role::Automation],
        ..approver()
    });
    assert!(!html.contains("/revoke\""), "{html}");
    assert!(!html.contains("/freeze\""), "{html}");
}

/// recovery-admin's front page carries the entry form; no one else's does.
#[test]
fn only_recovery_admin_is_offered_the_entry() {
    let plans = [plan("cp-1-rel-42-b7", "cp-1", PlanState::Proposed)];
    let machines = [machine("cp-1")];
    let html = plans_page(&recovery_admin(), &plans, &machines);
    assert!(html.contains("action=\"/recovery/enter\""), "{html}");
    assert!(html.contains("name=\"stopped_at\""), "{html}");
    assert!(html.contains("name=\"backups\""), "{html}");
    assert!(html.contains("value=\"csrf-9e21\""), "{html}");
    for who in [approver(), publisher()] {
        let html = plans_page(&who, &plans, &machines);
        assert!(!html.contains("/recovery/enter"), "{html}");
    }
}

#[test]
fn escape_replaces_every_markup_character() {
    assert_eq!(
        escape("<script>alert('x') & \"y\"</script>"),
        "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
    );
    assert_eq!(escape("plain text, ünïcode"), "plain text, ünïcode");
    assert_eq!(escape(""), "");
}

#[test]
fn path_segments_are_percent_encoded() {
    assert_eq!(segment("cp-1_a.b~c"), "cp-1_a.b~c");
    assert_eq!(segment("a/b?c#d e\"<"), "a%2Fb%3Fc%23d%20e%22%3C");
    assert_eq!(segment("é"), "%C3%A9");
}

#[test]
fn utc_times() {
    assert_eq!(utc(InstantMs(0)), "1970-01-01 00:00:00 UTC");
    assert_eq!(utc(InstantMs(T0)), "2026-03-01 09:30:00 UTC");
    assert_eq!(utc(InstantMs(951_782_400_999)), "2000-02-29 00:00:00 UTC");
}

#[cfg(feature = "cli")]
proptest::proptest! {
    /// The page's times agree with the command set's.
    #[test]
    fn utc_agrees_with_the_command_sets_times(ms in 0u64..253_402_300_799_999) {
        let iso = crate::cli::iso(ms);
        let expected = format!("{} {} UTC", &iso[..10], &iso[11..19]);
        proptest::prop_assert_eq!(utc(InstantMs(ms)), expected);
    }
}

#[test]
fn login_page_snapshot() {
    snapshot(
        "login",
        &login_page(Some("the token has expired"), "csrf-login"),
    );
}

#[test]
fn plans_page_snapshot() {
    snapshot("plans", &every_page()[1]);
}

#[test]
fn plan_page_for_an_approver_snapshot() {
    snapshot("plan_approver", &proposed_page(&approver()));
}

#[test]
fn plan_page_for_a_publisher_snapshot() {
    snapshot("plan_publisher", &proposed_page(&publisher()));
}

#[test]
fn timeline_page_snapshot() {
    snapshot("timeline", &every_page()[4]);
}

#[test]
fn drift_page_snapshot() {
    snapshot("drift", &every_page()[5]);
    snapshot("drift_none", &drift_page(&approver(), &[machine("cp-1")]));
}

#[test]
fn message_page_snapshot() {
    snapshot("message", &every_page()[6]);
    snapshot(
        "message_signed_out",
        &message_page(None, "Not signed in", "sign in first", "401 Unauthorized"),
    );
}

#[test]
fn no_page_has_a_script() {
    for html in every_page() {
        assert!(!html.to_ascii_lowercase().contains("<script"), "{html}");
        assert!(html.starts_with("<!DOCTYPE html>\n"));
        assert!(html.ends_with("</html>\n"));
    }
}

#[test]
fn outside_text_is_escaped() {
    let evil = "<script>alert(1)</script>";
    let who = Who {
        principal: evil.into(),
        roles: vec![Role::Approver],
        csrf: "\"><script>".into(),
    };
    let mut m = machine(evil);
    m.open_drift = Some(Revision(3));
    let p = plan(evil, evil, PlanState::Proposed);
    let mut h = history();
    h[0].detail = evil.into();
    h[1].requested_by = Some(evil.into());
    let diff = review::review_diff(
        None,
        format!("machine:\n  hostname: \"{evil}\"\n").as_bytes(),
    );
    let pages = [
        plans_page(&who, std::slice::from_ref(&p), std::slice::from_ref(&m)),
        plan_page(&who, &p, &m, Some(&diff), &observations(), &h),
        timeline_page(&who, &m, &h),
        drift_page(&who, std::slice::from_ref(&m)),
        message_page(Some(&who), evil, evil, evil),
        login_page(Some(evil), evil),
    ];
    for html in pages {
        assert!(!html.to_ascii_lowercase().contains("<script"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
    }
    // An identifier in a URL is percent-encoded, then escaped.
    let html = plan_page(&who, &p, &m, Some(&diff), &[], &h);
    assert!(html.contains("action=\"/plans/%3Cscript%3Ealert%281%29%3C%2Fscript%3E/approve\""));
}

#[test]
fn the_approve_form_is_only_for_an_approver_on_a_proposed_plan() {
    let html = proposed_page(&publisher());
    assert!(!html.contains("/approve\""), "{html}");
    assert!(html.contains("approving needs the approver role"));
    // The publisher may still cancel (as the creator) but not revoke.
    assert!(html.contains("/cancel\""));
    assert!(!html.contains("/revoke\""));

    let html = proposed_page(&approver());
    assert!(html.contains("action=\"/plans/cp-1-rel-42-b7/approve\""));
    assert!(html.contains("<input type=\"hidden\" name=\"as\" value=\"approver\">"));
    assert_eq!(html.matches("name=\"csrf\" value=\"csrf-0f3a\"").count(), 3);

    let approved = plan_page(
        &approver(),
        &plan("p", "cp-1", PlanState::Approved),
        &machine("cp-1"),
        Some(&small_diff()),
        &[],
        &[],
    );
    assert!(!approved.contains("/approve\""));
    assert!(approved.contains("/revoke\""));
    assert!(approved.contains("only a proposed plan is approved"));
}

#[test]
fn every_form_posts_with_the_csrf_value() {
    for html in every_page() {
        let forms = html.matches("<form ").count();
        assert_eq!(forms, html.matches("method=\"post\"").count(), "{html}");
        assert_eq!(forms, html.matches("name=\"csrf\"").count(), "{html}");
    }
}

#[test]
fn no_secret_of_the_review_corpus_reaches_the_plan_page() {
    let diff = review::tests::corpus_diff();
    assert!(diff.withheld > 10);
    let html = plan_page(
        &approver(),
        &plan("cp-1-rel-42-b7", "cp-1", PlanState::Proposed),
        &machine("cp-1"),
        Some(&diff),
        &observations(),
        &history(),
    );
    assert_eq!(review::tests::leaked_secret(&html), None);
    assert!(html.contains("<code>/dev/nvme0n1</code>"));
    assert!(html.contains("<code>cp-01</code>"));
    assert!(html.contains(&format!("{} values are withheld", diff.withheld)));
    let html = plan_page(
        &approver(),
        &plan("p", "cp-1", PlanState::Proposed),
        &machine("cp-1"),
        Some(&review::review_diff(
            None,
            review::tests::CORPUS_DESIRED.as_bytes(),
        )),
        &[],
        &[],
    );
    assert_eq!(review::tests::leaked_secret(&html), None);
}

#[test]
fn a_revert_warns_that_it_overwrites_an_unseen_configuration() {
    let mut p = plan("revert-1", "cp-1", PlanState::Proposed);
    p.bound_drift = Some(Revision(10));
    let mut m = machine("cp-1");
    m.open_drift = Some(Revision(10));
    m.baseline_revision = Revision(9);
    let html = plan_page(&approver(), &p, &m, Some(&ReviewDiff::default()), &[], &[]);
    assert!(html.contains("no reviewer has seen"));
    assert!(html.contains("commitment will refuse it"));
    assert!(!html.contains("does not bind"));
}

#[test]
fn the_configuration_is_shown_only_to_a_reader_who_may_approve() {
    assert!(approver().reads_configuration());
    for roles in [
        vec![Role::Publisher],
        vec![Role::Author],
        vec![Role::RecoveryAdmin],
        vec![Role::Automation],
        vec![Role::Author, Role::Publisher, Role::RecoveryAdmin],
        vec![],
    ] {
        let who = Who {
            roles,
            ..publisher()
        };
        assert!(!who.reads_configuration(), "{:?}", who.roles);
    }
    let p = plan("cp-1-rel-42-b7", "cp-1", PlanState::Proposed);
    let html = plan_page(&publisher(), &p, &machine("cp-1"), None, &[], &[]);
    assert!(!html.contains("/dev/nvme0n1"), "{html}");
    assert!(!html.contains("changed line"), "{html}");
    assert!(
        html.contains("shown only to a principal who may approve this plan"),
        "{html}"
    );
    assert!(html.contains(&p.artifact_digest.to_hex()), "{html}");
    let html = proposed_page(&approver());
    assert!(html.contains("<code>/dev/nvme0n1</code>"), "{html}");
    assert!(!html.contains("shown only to a principal"), "{html}");
}
