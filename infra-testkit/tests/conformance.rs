//! The conformance suite: the simulated cloud passes all of it, on every provider; a
//! backend that breaks one rule is caught by the check that pins the rule; a backend
//! with nothing to check skips everything, loudly, and fails CI.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::*;
use infra_core::sdk::Written;
use infra_core::sdk::layer::{Answer, Call, Layer, Layered, Next};
use infra_core::{
    prelude::{Kind, Spec},
    sdk::{
        Backend, BackendError, Capabilities, ErrorKind, FieldInfo, LEGACY_MARKER_VALUE, Listed,
        MARKER_KEY, Mutability, RawTags, Sighting,
    },
};
use infra_testkit::conformance::{
    Conformance, EVERY_CHECK, Report, SECRET_CHECK, SimHooks, Verdict, kind_check_names, samples,
};
use infra_testkit::sim::{SimCloud, clouds};
use serde_json::Value;

/// Two regions of each provider the simulator serves.
fn regions(provider: &str) -> (&'static str, &'static str) {
    match provider {
        "aws" => ("eu-west-3", "us-east-1"),
        "gcp" => ("europe-west1", "us-central1"),
        _ => ("fr-par", "nl-ams"),
    }
}

/// The suite against `backend`, a backend of (or around) `cloud`, with two regions and
/// the simulator's hooks.
async fn run_against(cloud: &SimCloud, backend: Arc<dyn Backend>) -> Report {
    let (first, second) = regions(backend.provider());
    Conformance::new(backend, samples::builtin())
        .regions(first, Some(second))
        .clock(cloud.clock())
        .hooks(Arc::new(SimHooks::new(cloud.clone())))
        .run()
        .await
}

fn fields(kind: &str) -> &'static [FieldInfo] {
    match kind {
        "iam" => Iam::FIELDS,
        "objectStore" => ObjectStore::FIELDS,
        "compute" => Compute::FIELDS,
        "queues" => Queues::FIELDS,
        "secrets" => Secrets::FIELDS,
        "imageRegistry" => ImageRegistry::FIELDS,
        "postgres" => Postgres::FIELDS,
        "s3Bucket" => S3Bucket::FIELDS,
        "securityGroup" => SecurityGroup::FIELDS,
        "awsInstance" => AwsInstance::FIELDS,
        "functionNamespace" => FunctionNamespace::FIELDS,
        "function" => Function::FIELDS,
        "containerNamespace" => ContainerNamespace::FIELDS,
        "container" => Container::FIELDS,
        other => panic!("no built-in kind {other}"),
    }
}

/// Whether the kind has a field that forces a replace and that the provider reports (a
/// change no read can see cannot be planned, as a replace or otherwise).
fn forces_a_visible_replace(provider: &str, kind: &str) -> bool {
    fields(kind).iter().any(|f| {
        f.mutability == Mutability::ForcesReplace
            && clouds::behaviour(provider, kind, f.name).is_some_and(|row| row.read.ever())
    })
}

/// Whether a skip is one the simulator could not have run: a replace of a kind with no
/// field that forces one and that the provider reports, a name conflict on a kind whose
/// names may repeat, or a marker check on a kind whose tags cannot be read (Scaleway
/// Queues take none).
fn unavoidable(provider: &str, caps: &Capabilities, check: &str, kind: &str) -> bool {
    match check {
        "a_forces_replace_change_is_a_replace" => !forces_a_visible_replace(provider, kind),
        "a_taken_name_is_conflict" => caps.duplicate_names.contains(kind),
        "create_writes_the_marker" | "mark_keeps_ours_and_refuses_anothers" => {
            !caps.ownership.contains(kind)
        }
        _ => false,
    }
}

async fn the_simulated_cloud_passes_for(provider: &'static str, seed: u64) {
    let cloud = SimCloud::new(seed);
    let backend = cloud.backend(provider);
    let caps = backend.capabilities();
    let report = run_against(&cloud, backend).await;
    print!("{report}");
    assert!(report.is_success(), "{report}");

    for check in [
        "a_backend_that_can_call_is_reachable",
        "account_answers_the_same_id",
        "listing_a_scope_without_our_resources_is_ok",
        "cleanup_leaves_nothing_behind",
    ] {
        let outcome = report
            .outcome(check, None)
            .unwrap_or_else(|| panic!("{check} ran"));
        assert_eq!(outcome.verdict, Verdict::Pass, "{outcome}");
    }
    // Every check ran on every kind the provider declares, bar what cannot be run.
    for &kind in &caps.kinds {
        for check in kind_check_names() {
            if check == SECRET_CHECK && kind != "secrets" {
                continue;
            }
            let outcome = report
                .outcome(check, Some(kind))
                .unwrap_or_else(|| panic!("{check} [{kind}] is missing from the report\n{report}"));
            match &outcome.verdict {
                Verdict::Pass => {}
                Verdict::Skip(_) if unavoidable(provider, &caps, check, kind) => {}
                other => panic!("{check} [{kind}] ended {other:?}\n{report}"),
            }
        }
    }
    assert!(report.outcome(EVERY_CHECK, None).is_none());
    assert!(
        report.outcomes.iter().all(|o| o.check != EVERY_CHECK),
        "no kind went without a sample\n{report}"
    );
    assert!(
        cloud.is_empty(),
        "the clean-up left {:#?}",
        cloud.resources()
    );
}

#[tokio::test]
async fn the_simulated_aws_passes_the_whole_suite() {
    the_simulated_cloud_passes_for("aws", 11).await;
}

#[tokio::test]
async fn the_simulated_gcp_passes_the_whole_suite() {
    the_simulated_cloud_passes_for("gcp", 12).await;
}

#[tokio::test]
async fn the_simulated_scaleway_passes_the_whole_suite() {
    the_simulated_cloud_passes_for("scaleway", 13).await;
}

#[tokio::test]
async fn without_hooks_or_a_second_region_those_checks_skip_loudly_and_the_rest_pass() {
    let cloud = SimCloud::new(14);
    let report = Conformance::new(cloud.backend("gcp"), samples::builtin())
        .regions("europe-west1", None)
        .clock(cloud.clock())
        .run()
        .await;
    assert!(report.is_success(), "{report}");
    let skipped: BTreeSet<&str> = report.skipped().map(|o| o.check).collect();
    assert_eq!(
        skipped,
        BTreeSet::from([
            "a_forces_replace_change_is_a_replace",
            "a_denied_call_is_never_not_found",
            "an_unreadable_resource_is_never_absent",
            "list_answers_only_its_region",
        ]),
        "{report}"
    );
    let text = report.render();
    assert!(text.contains("CHECKS SKIPPED"), "{text}");
    assert!(text.contains("no fault hooks were given"), "{text}");
    assert!(text.contains("no second region was given"), "{text}");
    assert!(cloud.is_empty());
}

// ---- deliberately broken backends ----

/// The one rule a broken backend breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flaw {
    /// `ownership` claims every resource for whatever fleet asks (the legacy marker
    /// value matches them all): foreign resources look like ours.
    ClaimsEverything,
    /// `read` reports `""` for a description, as a backend does when the cloud's
    /// answer leaves the field out and the code fills in a default.
    SentinelForUnsaid,
    /// `read` turns a permission error into "not found".
    DeniedReadsAsNotFound,
    /// `create` does not write the ownership marker.
    DropsTheMarker,
    /// `mark` writes its marker over another fleet's.
    TakesAnothersResource,
    /// `read` carries raw tags without the marker `ownership` reads.
    ReadCarriesOtherTags,
    /// `list` hands each resource over with a reading whose raw tags lack the marker
    /// `read` answers.
    ListReadingDiffers,
    /// The backend says every kind's list is complete, and hands no reading over.
    ClaimsCompleteLists,
}

/// The layer that gives a simulator backend one flaw.
struct Broken {
    cloud: SimCloud,
    flaw: Flaw,
}

impl Broken {
    fn around(cloud: &SimCloud, provider: &'static str, flaw: Flaw) -> Arc<dyn Backend> {
        let layer = Broken {
            cloud: cloud.clone(),
            flaw,
        };
        Layered::wrap(cloud.backend(provider), layer)
    }
}

fn with_reported<K: Kind>(
    s: &Sighting,
    reported: serde_json::Map<String, Value>,
) -> Result<Sighting, BackendError> {
    Sighting::from_json::<K>(s.handle.clone(), s.observed_json().clone(), reported)
}

/// The same sighting with a description of `""`, for the kinds that have one.
fn blank_description(kind: &str, s: Sighting) -> Result<Sighting, BackendError> {
    let mut reported = s.reported().clone();
    reported.insert("description".into(), Value::String(String::new()));
    match kind {
        "iam" => with_reported::<Iam>(&s, reported),
        "secrets" => with_reported::<Secrets>(&s, reported),
        "securityGroup" => with_reported::<SecurityGroup>(&s, reported),
        "functionNamespace" => with_reported::<FunctionNamespace>(&s, reported),
        "containerNamespace" => with_reported::<ContainerNamespace>(&s, reported),
        _ => Ok(s),
    }
}

#[async_trait]
impl Layer for Broken {
    fn capabilities(&self, mut inner: Capabilities) -> Capabilities {
        if self.flaw == Flaw::ClaimsCompleteLists {
            inner.complete_lists = inner.kinds.iter().copied().collect();
        }
        inner
    }

    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let inner = next.backend();
        match (self.flaw, call) {
            (Flaw::SentinelForUnsaid, Call::Read { kind, .. }) => match next.run(call).await? {
                Answer::Read(s) => Ok(Answer::Read(blank_description(kind, s)?)),
                other => Ok(other),
            },
            (Flaw::DeniedReadsAsNotFound, Call::Read { .. }) => match next.run(call).await {
                Err(e) if e.kind == ErrorKind::Denied => Err(BackendError::not_found(e.message)),
                other => other,
            },
            (Flaw::DropsTheMarker, Call::Create { kind, region, .. }) => {
                let answer = next.run(call).await?;
                if let Answer::Written(Written::Done(s)) = &answer {
                    let mut tags = inner.ownership(kind, region, &s.handle).await?;
                    tags.remove(MARKER_KEY);
                    self.cloud.set_raw_tags(&s.handle, tags);
                }
                Ok(answer)
            }
            (Flaw::ClaimsEverything, Call::Ownership { .. }) => match next.run(call).await? {
                Answer::Ownership(mut tags) => {
                    tags.insert(MARKER_KEY.into(), LEGACY_MARKER_VALUE.into());
                    Ok(Answer::Ownership(tags))
                }
                other => Ok(other),
            },
            (Flaw::ReadCarriesOtherTags, Call::Read { .. }) => match next.run(call).await? {
                Answer::Read(sighting) => match sighting.raw_tags().cloned() {
                    Some(mut tags) => {
                        tags.remove(MARKER_KEY);
                        Ok(Answer::Read(sighting.with_raw_tags(tags)))
                    }
                    None => Ok(Answer::Read(sighting)),
                },
                other => Ok(other),
            },
            // The same lie told by a read that carries the tags.
            (Flaw::ClaimsEverything, Call::Read { .. }) => match next.run(call).await? {
                Answer::Read(sighting) => match sighting.raw_tags().cloned() {
                    Some(mut tags) => {
                        tags.insert(MARKER_KEY.into(), LEGACY_MARKER_VALUE.into());
                        Ok(Answer::Read(sighting.with_raw_tags(tags)))
                    }
                    None => Ok(Answer::Read(sighting)),
                },
                other => Ok(other),
            },
            (Flaw::ListReadingDiffers, Call::List { kind, region }) => {
                let mut handed = Vec::new();
                for listed in inner.list(kind, region).await? {
                    let read = inner.read(kind, region, &listed.handle).await?;
                    let mut tags = read.raw_tags().cloned().unwrap_or_default();
                    tags.remove(MARKER_KEY);
                    handed.push(listed.with_reading(read.with_raw_tags(tags)));
                }
                Ok(Answer::List(handed))
            }
            (
                Flaw::TakesAnothersResource,
                Call::Mark {
                    kind,
                    region,
                    handle,
                    marker,
                },
            ) => {
                let mut tags = inner.ownership(kind, region, handle).await?;
                tags.insert(marker.key().into(), marker.value().into());
                self.cloud.set_raw_tags(handle, tags);
                Ok(Answer::Marked)
            }
            // A complete list hands over reads and tags: the same flaw, told there.
            (flaw, Call::List { kind, .. }) => match next.run(call).await? {
                Answer::List(listed) => Ok(Answer::List(
                    listed
                        .into_iter()
                        .map(|l| flawed_item(flaw, kind, l))
                        .collect::<Result<_, _>>()?,
                )),
                other => Ok(other),
            },
            _ => next.run(call).await,
        }
    }
}

/// One item of a complete list, with the flaw the read and `ownership` have.
fn flawed_item(flaw: Flaw, kind: &str, mut item: Listed) -> Result<Listed, BackendError> {
    let claim = |tags: &mut RawTags| {
        tags.insert(MARKER_KEY.into(), LEGACY_MARKER_VALUE.into());
    };
    if let Some(reading) = item.take_reading() {
        let reading = match (flaw, reading.raw_tags().cloned()) {
            (Flaw::SentinelForUnsaid, _) => blank_description(kind, reading)?,
            (Flaw::ReadCarriesOtherTags, Some(mut tags)) => {
                tags.remove(MARKER_KEY);
                reading.with_raw_tags(tags)
            }
            (Flaw::ClaimsEverything, Some(mut tags)) => {
                claim(&mut tags);
                reading.with_raw_tags(tags)
            }
            _ => reading,
        };
        item = item.with_reading(reading);
    }
    if let (Flaw::ClaimsEverything, Some(mut tags)) = (flaw, item.raw_tags().cloned()) {
        claim(&mut tags);
        item = item.with_raw_tags(tags);
    }
    Ok(item)
}

/// Runs the suite on a broken AWS backend and asserts that `check` fails on `kind`.
async fn caught(flaw: Flaw, check: &str, kind: &str, seed: u64) -> Report {
    let cloud = SimCloud::new(seed);
    let report = run_against(&cloud, Broken::around(&cloud, "aws", flaw)).await;
    print!("{report}");
    let outcome = report
        .outcome(check, Some(kind))
        .unwrap_or_else(|| panic!("{check} [{kind}] ran\n{report}"));
    assert!(
        outcome.verdict.is_fail(),
        "{flaw:?} should fail {check} [{kind}], got {outcome}\n{report}"
    );
    assert!(report.render().contains(&format!("FAIL {check} [{kind}]")));
    let problem = report
        .verdict(false)
        .expect("a failing report does not pass");
    assert!(problem.contains(check), "{problem}");
    report
}

#[tokio::test]
async fn a_backend_that_claims_foreign_resources_fails_the_owned_only_prune_check() {
    let report = caught(
        Flaw::ClaimsEverything,
        "prune_deletes_only_owned_orphans",
        "objectStore",
        21,
    )
    .await;
    // Every kind whose tags are read is caught, not only one.
    for kind in ["iam", "queues", "securityGroup", "awsInstance"] {
        let outcome = report
            .outcome("prune_deletes_only_owned_orphans", Some(kind))
            .expect("ran");
        assert!(outcome.verdict.is_fail(), "{outcome}");
    }
}

#[tokio::test]
async fn a_read_whose_tags_differ_from_ownership_fails_the_marker_check() {
    let report = caught(
        Flaw::ReadCarriesOtherTags,
        "read_reports_the_marker_and_the_engine_strips_it",
        "iam",
        23,
    )
    .await;
    let outcome = report
        .outcome(
            "read_reports_the_marker_and_the_engine_strips_it",
            Some("iam"),
        )
        .expect("ran");
    assert!(
        outcome.to_string().contains("`ownership` reads"),
        "{outcome}"
    );
}

#[tokio::test]
async fn a_backend_that_reads_back_a_sentinel_fails_the_round_trip_check() {
    let report = caught(
        Flaw::SentinelForUnsaid,
        "reported_fields_round_trip_without_sentinels",
        "iam",
        22,
    )
    .await;
    let outcome = report
        .outcome("reported_fields_round_trip_without_sentinels", Some("iam"))
        .expect("ran");
    assert!(
        matches!(&outcome.verdict, Verdict::Fail(why) if why.contains("description")),
        "the failure names the field: {outcome}"
    );
    for kind in ["secrets", "securityGroup"] {
        assert!(
            report
                .outcome("reported_fields_round_trip_without_sentinels", Some(kind))
                .expect("ran")
                .verdict
                .is_fail()
        );
    }
    assert!(report.check_failed("apply_is_idempotent"));
    // A kind without the field is unaffected.
    assert!(
        report
            .outcome(
                "reported_fields_round_trip_without_sentinels",
                Some("objectStore")
            )
            .expect("ran")
            .verdict
            .is_pass()
    );
}

#[tokio::test]
async fn a_backend_that_reads_denied_as_not_found_fails_the_observation_contract() {
    let report = caught(
        Flaw::DeniedReadsAsNotFound,
        "a_denied_call_is_never_not_found",
        "queues",
        23,
    )
    .await;
    let outcome = report
        .outcome("a_denied_call_is_never_not_found", Some("queues"))
        .expect("ran");
    assert!(
        matches!(&outcome.verdict, Verdict::Fail(why) if why.contains("NotFound")),
        "{outcome}"
    );
}

#[tokio::test]
async fn a_backend_that_drops_the_marker_on_create_fails_the_marker_check() {
    caught(
        Flaw::DropsTheMarker,
        "create_writes_the_marker",
        "s3Bucket",
        24,
    )
    .await;
}

#[tokio::test]
async fn a_backend_that_takes_another_fleets_resource_fails_the_mark_check() {
    let report = caught(
        Flaw::TakesAnothersResource,
        "mark_keeps_ours_and_refuses_anothers",
        "objectStore",
        25,
    )
    .await;
    let outcome = report
        .outcome("mark_keeps_ours_and_refuses_anothers", Some("objectStore"))
        .expect("ran");
    assert!(
        matches!(&outcome.verdict, Verdict::Fail(why) if why.contains("took this fleet's resource")),
        "{outcome}"
    );
}

// ---- nothing to check ----

/// A layer that declares no capabilities at all.
struct NoCapabilities;

impl Layer for NoCapabilities {
    fn capabilities(&self, _: Capabilities) -> Capabilities {
        Capabilities::default()
    }
}

#[tokio::test]
async fn with_no_capabilities_everything_skips_loudly_and_ci_fails() {
    let cloud = SimCloud::new(31);
    let report = run_against(&cloud, Layered::wrap(cloud.backend("aws"), NoCapabilities)).await;
    assert!(report.nothing_ran(), "{report}");
    assert!(report.is_success());
    assert_eq!(report.passed().count(), 0);
    assert!(report.skipped().count() > 0);
    let text = report.render();
    assert!(text.contains("SKIPPED"), "{text}");
    assert!(text.contains("declares no kinds"), "{text}");
    assert!(
        cloud.calls().is_empty(),
        "nothing was called: {:?}",
        cloud.calls()
    );

    // Off CI, a run that only skipped passes; on CI it fails.
    assert_eq!(report.verdict(false), None);
    report.assert_passed_with(false);
    let problem = report
        .verdict(true)
        .expect("CI refuses a run that proved nothing");
    assert!(problem.contains("skipped"), "{problem}");
    let on_ci = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        report.assert_passed_with(true)
    }));
    assert!(on_ci.is_err(), "assert_passed_with(true) must panic");
}

#[tokio::test]
async fn a_kind_without_a_sample_is_skipped_loudly() {
    let cloud = SimCloud::new(32);
    let only_buckets: Vec<_> = samples::builtin_for("scaleway")
        .into_iter()
        .filter(|s| s.kind == "objectStore")
        .collect();
    let report = Conformance::new(cloud.backend("scaleway"), only_buckets)
        .regions("fr-par", Some("nl-ams"))
        .clock(cloud.clock())
        .hooks(Arc::new(SimHooks::new(cloud.clone())))
        .run()
        .await;
    assert!(report.is_success(), "{report}");
    let outcome = report
        .outcome(EVERY_CHECK, Some("container"))
        .expect("skipped");
    assert!(
        matches!(&outcome.verdict, Verdict::Skip(why) if why.contains("no sample")),
        "{outcome}"
    );
    assert!(report.passed().any(|o| o.kind == Some("objectStore")));
    assert!(cloud.is_empty());
}

#[test]
fn every_built_in_kind_has_a_sample_on_every_provider_that_realises_it() {
    let cloud = SimCloud::new(1);
    let all = samples::builtin();
    for provider in ["aws", "gcp", "scaleway"] {
        for kind in cloud.backend(provider).capabilities().kinds {
            assert_eq!(
                all.iter()
                    .filter(|s| s.provider == provider && s.kind == kind)
                    .count(),
                1,
                "{provider} {kind}"
            );
        }
    }
    assert_eq!(all.len(), 7 * 3 + 3 + 4);
    // A sample says Replace exactly when its kind has a field that forces one and that
    // its provider reports.
    for s in &all {
        let forces = forces_a_visible_replace(s.provider, s.kind);
        assert_eq!(s.replace, forces, "{} {}", s.provider, s.kind);
        assert!(s.mutable, "{} {}", s.provider, s.kind);
    }
}

#[test]
fn fresh_prefixes_are_valid_names_and_differ() {
    let clock = infra_core::engine::ManualClock::new();
    let a = infra_testkit::conformance::fresh_prefix(&clock);
    let b = infra_testkit::conformance::fresh_prefix(&clock);
    assert_ne!(a, b);
    for p in [&a, &b] {
        assert!(infra_testkit::conformance::valid_prefix(p), "{p}");
        assert!(
            infra_core::sdk::default_name_rule(&format!("{p}own-containernamespace-dep2")).is_ok()
        );
        assert!(bucket_name(&format!("{p}own-objectstore")).is_ok());
    }
}

// ---- the applier checks judge a log, and catch what they pin ----

mod applier_judgements {
    use super::*;
    use infra_core::engine::{
        Applied, ApplyResult, Change, NotAttempted, NotAttemptedReason, PlanReport, PlannedChange,
        Subject,
    };
    use infra_testkit::conformance::checks::applier::{
        ApplyStep, ScenarioLog, apply_result_buckets_are_disjoint, apply_result_drops_nothing,
        apply_result_reasons_and_actions_are_legal,
    };

    fn subject(name: &str) -> Subject {
        Subject {
            provider: "aws".into(),
            kind: "queues".into(),
            name: name.into(),
            region: "eu-west-3".into(),
        }
    }

    fn log(action: &'static str, result: ApplyResult) -> ScenarioLog {
        let planned = PlannedChange {
            resource: subject("q"),
            action,
            fields: vec![],
            reason: None,
            step: None,
            detail: None,
            needs_confirmation: false,
        };
        ScenarioLog {
            steps: vec![ApplyStep {
                label: "create",
                plan: PlanReport {
                    fleet: "f".into(),
                    changes: vec![planned],
                    records: vec![],
                    strays: vec![],
                    unmatched_exclusions: vec![],
                    prerequisites: vec![],
                },
                result,
                handed_in: BTreeSet::from([subject("q")]),
                calls: vec![],
            }],
        }
    }

    fn applied(change: Change) -> ApplyResult {
        let mut result = ApplyResult::default();
        result.applied.push(Applied {
            resource: subject("q"),
            change,
        });
        result
    }

    #[test]
    fn a_result_that_converged_as_planned_passes_all_three() {
        let cloud = SimCloud::new(41);
        let ctx = Conformance::new(cloud.backend("aws"), vec![])
            .regions("eu-west-3", None)
            .context();
        let log = log("create", applied(Change::Created));
        assert_eq!(apply_result_buckets_are_disjoint(&log), Verdict::Pass);
        assert_eq!(apply_result_drops_nothing(&log), Verdict::Pass);
        assert_eq!(
            apply_result_reasons_and_actions_are_legal(&ctx, &log),
            Verdict::Pass
        );
    }

    #[test]
    fn a_dropped_a_doubled_and_an_illegal_result_are_each_caught() {
        let cloud = SimCloud::new(42);
        let ctx = Conformance::new(cloud.backend("aws"), vec![])
            .regions("eu-west-3", None)
            .context();
        assert!(apply_result_drops_nothing(&log("create", ApplyResult::default())).is_fail());

        let mut doubled = applied(Change::Created);
        doubled.applied.push(doubled.applied[0].clone());
        assert!(apply_result_buckets_are_disjoint(&log("create", doubled)).is_fail());

        let wrong_change = log("create", applied(Change::Updated));
        assert!(apply_result_reasons_and_actions_are_legal(&ctx, &wrong_change).is_fail());

        let mut unsupported = ApplyResult::default();
        unsupported.not_attempted.push(NotAttempted {
            resource: subject("q"),
            reason: NotAttemptedReason::UnsupportedKind,
            detail: None,
        });
        let verdict =
            apply_result_reasons_and_actions_are_legal(&ctx, &log("not-attempted", unsupported));
        assert!(
            matches!(&verdict, Verdict::Fail(why) if why.contains("declares kind queues")),
            "{verdict:?}"
        );
    }
}

#[tokio::test]
async fn a_backend_whose_list_readings_differ_from_its_reads_fails_the_list_readings_check() {
    caught(
        Flaw::ListReadingDiffers,
        "list_readings_equal_reads",
        "objectStore",
        31,
    )
    .await;
}

#[tokio::test]
async fn a_backend_that_claims_complete_lists_without_readings_fails_the_list_readings_check() {
    caught(
        Flaw::ClaimsCompleteLists,
        "list_readings_equal_reads",
        "objectStore",
        32,
    )
    .await;
}
