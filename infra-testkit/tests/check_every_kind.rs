//! The fleet properties hold for a fleet that uses every kind of every simulated cloud,
//! including the kinds that cannot carry the ownership marker (Scaleway Queues) or
//! whose marker proves nothing (a Scaleway registry namespace's): with no fault
//! injected, nothing fails, and under faults the properties still hold.

use infra_core::engine::Subject;
use infra_core::kinds::Queues;
use infra_core::prelude::{Expr, Fleet, Partial, ScalewayRegion};
use infra_core::sdk::{MARKER_KEY, RawTags};
use infra_testkit::FleetCheck;
use infra_testkit::check::{Proofs, copies};
use infra_testkit::conformance::{KindSample, Variant, samples};
use infra_testkit::sim::SimCloud;

/// A region of the sample's provider.
fn region_of(sample: &KindSample) -> &'static str {
    ["eu-west-3", "europe-west1", "fr-par"]
        .into_iter()
        .find(|code| sample.region_parses(code))
        .expect("a region of every built-in provider")
}

/// One resource of every (provider, kind) the simulated clouds realise, each with the
/// prerequisites its sample declares.
fn every_kind() -> Fleet {
    let mut fleet = Fleet::builder("every-kind");
    for sample in samples::builtin() {
        let name = format!(
            "ek-{}-{}",
            sample.provider,
            sample.kind.to_ascii_lowercase()
        );
        (sample.declare)(&mut fleet, region_of(&sample), &name, Variant::Base);
    }
    fleet.build().expect("the samples make a sound fleet")
}

#[test]
fn the_fleet_declares_every_kind_of_every_cloud() {
    let fleet = every_kind();
    let declared: std::collections::BTreeSet<(&str, &str)> = fleet
        .resources()
        .map(|r| (r.reference().provider, r.reference().kind))
        .collect();
    for sample in samples::builtin() {
        assert!(
            declared.contains(&(sample.provider, sample.kind)),
            "{} {} is not declared",
            sample.provider,
            sample.kind
        );
    }
    assert!(declared.contains(&("scaleway", "queues")));
}

#[test]
fn every_kind_of_every_cloud_passes_with_no_fault() {
    FleetCheck::new()
        .cases(2)
        .max_fault_rate(0.0)
        .assert(&every_kind());
}

#[test]
fn every_kind_of_every_cloud_passes_under_faults() {
    FleetCheck::new().cases(32).assert(&every_kind());
}

/// A fleet whose only kind cannot carry a marker: found by name, and the checks that
/// need an owned orphan (prune, brake) have no scope to run in, rather than failing.
#[test]
fn a_fleet_of_one_scaleway_queue_passes() {
    let mut fleet = Fleet::builder("queue-only");
    fleet.declare(
        ScalewayRegion::FrPar,
        "lone-queue",
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Known(None),
            max_receive_count: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    FleetCheck::new()
        .cases(16)
        .assert(&fleet.build().expect("a sound fleet"));
}

fn subject(provider: &str, kind: &str, name: &str, region: &str) -> Subject {
    Subject {
        provider: provider.into(),
        kind: kind.into(),
        name: name.into(),
        region: region.into(),
    }
}

/// The proof of each kind is what the simulated backends declare: the marker where
/// ownership can be read, the name where it cannot.
#[test]
fn kinds_that_cannot_carry_a_marker_are_found_by_name() {
    let cloud = SimCloud::new(7);
    let proofs = Proofs::of(&cloud);
    let queue = subject("scaleway", "queues", "by-name", "fr-par");
    let registry = subject("scaleway", "imageRegistry", "by-name", "fr-par");
    let aws_queue = subject("aws", "queues", "by-marker", "eu-west-3");
    assert!(!proofs.by_marker(&queue));
    assert!(!proofs.by_marker(&registry));
    assert!(proofs.by_marker(&aws_queue));
    for sample in samples::builtin() {
        let s = subject(sample.provider, sample.kind, "x", region_of(&sample));
        let unprovable =
            sample.provider == "scaleway" && matches!(sample.kind, "queues" | "imageRegistry");
        assert_eq!(proofs.by_marker(&s), !unprovable, "{s}");
    }

    // By name: missing, then there once; the same name in another region is another
    // resource.
    assert_eq!(copies(&cloud, "shop", &queue, false), 0);
    cloud
        .insert_foreign("scaleway", "queues", "fr-par", "by-name", RawTags::new())
        .unwrap();
    assert_eq!(copies(&cloud, "shop", &queue, false), 1);
    cloud
        .insert_foreign("scaleway", "queues", "nl-ams", "by-name", RawTags::new())
        .unwrap();
    assert_eq!(copies(&cloud, "shop", &queue, false), 1);

    // By marker: a resource of the same name without the fleet's marker is not the
    // fleet's; one with it is.
    cloud
        .insert_foreign("aws", "queues", "eu-west-3", "by-marker", RawTags::new())
        .unwrap();
    assert_eq!(copies(&cloud, "shop", &aws_queue, true), 0);
    let other = RawTags::from([(MARKER_KEY.to_owned(), "shop".to_owned())]);
    cloud
        .insert_foreign("aws", "queues", "us-east-1", "by-marker", other)
        .unwrap();
    assert_eq!(
        copies(&cloud, "shop", &aws_queue, true),
        0,
        "another region"
    );
    let marked_there = subject("aws", "queues", "by-marker", "us-east-1");
    assert_eq!(copies(&cloud, "shop", &marked_there, true), 1);
    assert_eq!(copies(&cloud, "other-fleet", &marked_there, true), 0);
}
