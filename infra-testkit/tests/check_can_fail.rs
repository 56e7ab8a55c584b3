//! The fleet checks can fail: records that lose a row on the way to the engine make it
//! drop an orphan from its result, and the accounting check says so. Kept so that a
//! check that stopped checking would be noticed.

use std::collections::BTreeSet;
use std::sync::Arc;

use infra_core::kinds::ObjectStore;
use infra_core::{
    engine::{Applied, ApplyResult, CacheEntry, Change, Ledger, RecordError, RecordStore, Subject},
    prelude::{AwsRegion, Fleet},
};
use infra_testkit::FleetCheck;
use infra_testkit::check::total_and_disjoint;

/// Records that lose every orphan row the checks plant (`zz-orphan-…`) when the engine
/// reads them: the engine never hears of the orphan.
struct LosesOrphans {
    inner: Arc<dyn RecordStore>,
}

impl RecordStore for LosesOrphans {
    fn load_ledger(&self, fleet: &str) -> Result<Ledger, RecordError> {
        let mut ledger = self.inner.load_ledger(fleet)?;
        ledger.rows.retain(|r| !r.name.starts_with("zz-orphan"));
        Ok(ledger)
    }
    fn save_ledger(&self, fleet: &str, ledger: &Ledger) -> Result<(), RecordError> {
        self.inner.save_ledger(fleet, ledger)
    }
    fn load_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
    ) -> Result<Vec<CacheEntry>, RecordError> {
        self.inner.load_cache(fleet, provider, kind)
    }
    fn save_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
        entries: &[CacheEntry],
    ) -> Result<(), RecordError> {
        self.inner.save_cache(fleet, provider, kind, entries)
    }
    fn cached_pairs(&self, fleet: &str) -> Result<Vec<(String, String)>, RecordError> {
        self.inner.cached_pairs(fleet)
    }
    fn try_lock(
        &self,
        fleet: &str,
        holder: &infra_core::engine::LockHolder,
    ) -> Result<infra_core::engine::LockGuard, infra_core::engine::LockError> {
        self.inner.try_lock(fleet, holder)
    }
    fn force_unlock(
        &self,
        fleet: &str,
        id: &str,
    ) -> Result<infra_core::engine::LockHolder, infra_core::engine::LockError> {
        self.inner.force_unlock(fleet, id)
    }
}

fn fleet() -> Fleet {
    let mut f = Fleet::builder("check");
    f.declare(AwsRegion::EuWest3, "check-assets", ObjectStore::new());
    f.build().unwrap()
}

#[test]
fn a_dropped_orphan_fails_the_accounting_check() {
    let failure = FleetCheck::new()
        .cases(2)
        .max_fault_rate(0.0)
        .records(|inner| Arc::new(LosesOrphans { inner }))
        .run(&fleet())
        .unwrap_err();
    assert_eq!(
        failure.property,
        "the result accounts for every declared resource and every ledger row"
    );
    assert!(
        failure.detail.contains("zz-orphan-res") && failure.detail.contains("missing"),
        "{failure}"
    );
}

#[test]
fn the_same_fleet_passes_on_records_that_lose_nothing() {
    FleetCheck::new()
        .cases(2)
        .max_fault_rate(0.0)
        .records(|inner| inner)
        .run(&fleet())
        .unwrap();
}

#[test]
fn a_result_must_hold_exactly_what_was_handed_in() {
    let subject = |name: &str| Subject {
        provider: "aws".into(),
        kind: "objectStore".into(),
        name: name.into(),
        region: "eu-west-3".into(),
    };
    let mut result = ApplyResult::default();
    result.applied.push(Applied {
        resource: subject("a-bucket"),
        change: Change::Created,
    });
    let handed =
        |names: &[&str]| -> BTreeSet<Subject> { names.iter().map(|n| subject(n)).collect() };
    assert!(total_and_disjoint(&result, &handed(&["a-bucket"])).is_ok());
    let missing = total_and_disjoint(&result, &handed(&["a-bucket", "b-bucket"])).unwrap_err();
    assert!(
        missing.contains("b-bucket") && missing.contains("missing"),
        "{missing}"
    );
    let extra = total_and_disjoint(&result, &handed(&[])).unwrap_err();
    assert!(extra.contains("was not handed in"), "{extra}");
}
