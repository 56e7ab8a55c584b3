//! The DNS backend against the shared conformance suite of `infra-testkit`: the same
//! checks every provider passes, on a kind `infra-core` knows nothing about.

use std::collections::BTreeSet;
use std::sync::Arc;

use custom_provider::{Access, Dns, DnsBackend, DnsRecord, DnsService, RecordType, ZONE};
use infra_testkit::conformance::{Conformance, ConformanceHooks, KindSample, Variant};

/// How the suite asks the service to refuse or to fail, for the checks that need it.
struct Hooks(DnsService);

impl ConformanceHooks for Hooks {
    fn deny(&self, provider: &str, _kind: &'static str, region: &str) -> bool {
        if provider != "dns" {
            return false;
        }
        self.0.set_access_in(region, Access::Denied);
        true
    }

    fn fail_reads(
        &self,
        provider: &str,
        _kind: &'static str,
        _region: &str,
        _handle: &str,
    ) -> bool {
        if provider != "dns" {
            return false;
        }
        // The service cannot single out one record: every read fails for a while.
        self.0.fail_reads(64);
        true
    }

    fn restore(&self) {
        self.0.allow_all();
        self.0.fail_reads(0);
    }
}

/// How to declare a record for the suite: an address, a longer TTL for the in-place
/// change, and another record type for the change that forces a replace.
fn sample() -> KindSample {
    KindSample::new::<Dns, DnsRecord>(|fleet, region, name, variant| {
        let record = match variant {
            Variant::Replace => DnsRecord::new(RecordType::Txt, ZONE, "v=conformance"),
            _ => DnsRecord::new(RecordType::A, ZONE, "192.0.2.10"),
        };
        let ttl = if variant == Variant::Mutable {
            600
        } else {
            300
        };
        fleet.declare(region, name, record.with_ttl(ttl));
    })
    .mutable(true)
    .replace(true)
}

#[tokio::test]
async fn the_dns_backend_passes_the_conformance_suite() {
    let service = DnsService::new();
    let backend = DnsBackend::new(service.clone()).into_backend();
    let report = Conformance::new(backend, vec![sample()])
        .regions("eu", Some("us"))
        .clock(service.clock())
        .hooks(Arc::new(Hooks(service.clone())))
        .run()
        .await;
    report.assert_passed_with(true);
    // Everything ran: with hooks, two regions and both variants, nothing is skipped
    // but the check for secrets, which this provider does not have.
    let skipped: BTreeSet<&str> = report.skipped().map(|o| o.check).collect();
    assert!(
        skipped.iter().all(|c| c.contains("secret")),
        "skipped: {skipped:?}"
    );
    assert!(report.passed().count() >= 15, "{report}");
}

/// The example fleet, custom kind and built-in kinds together, through every fleet
/// property under faults: what a team using this provider would run in its CI.
#[test]
fn the_example_fleet_passes_the_fleet_properties() {
    infra_testkit::FleetCheck::new()
        .cases(48)
        .backend(|_seed| DnsBackend::new(DnsService::new()).into_backend())
        .assert(&custom_provider::example_fleet().expect("the example fleet is sound"));
}
