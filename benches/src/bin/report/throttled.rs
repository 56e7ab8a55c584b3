//! An apply on a simulated cloud that throttles by rate, for the Q line: the paced
//! fleet ([`super::paced`]) applied by a whole runner process on a cloud admitting so
//! many calls a second per API (`INFRA_SIM_RATE`), and the world checked afterwards.

use std::collections::BTreeMap;

use infra_core::sdk::MARKER_KEY;
use infra_testkit::sim::{LATENCY_VAR, RATE_VAR, SimCloud};

use super::growth::Runner;
use super::paced::{AS_PACED, FLEET};

/// Every call's latency in the throttled apply, in milliseconds, as on the L line: with
/// calls that cost nothing, one call at a time would meet any rate as well as many.
pub(crate) const LATENCY_MS: &str = "50";

/// What one throttled apply did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ThrottledRun {
    /// The apply's wall time, in seconds (the runner process, start to exit).
    pub(crate) wall_s: f64,
    /// Declared resources the world does not hold afterwards.
    pub(crate) failures: usize,
    /// Resources beyond the first of the same name (provider, kind, region and name).
    pub(crate) duplicates: usize,
    /// Declared resources the world holds, each carrying the fleet's marker.
    pub(crate) created: usize,
}

/// Applies the paced fleet of `n` resources, from nothing, with `--parallelism
/// parallelism`, on a simulated cloud admitting `rate_per_api` calls a second per API
/// (a token bucket per provider, kind and region; a throttled call carries the wait it
/// needs, and the cloud's client retries it under the one retry policy, waiting for
/// real), every call taking [`LATENCY_MS`], then counts what the world holds. The runner's exit code is not judged: the
/// world is.
///
/// `adaptive` is not passed on: the runner has no switch for its concurrency's
/// adaptation yet, so both values run the runner as it is.
#[allow(dead_code, reason = "called by the Q line")]
pub(crate) fn throttled_apply(
    n: usize,
    rate_per_api: u32,
    parallelism: usize,
    adaptive: bool,
) -> ThrottledRun {
    let _ = adaptive;
    let runner = Runner::new("throttled", n, None).of_fleet(AS_PACED);
    let parallelism = parallelism.to_string();
    let rate = rate_per_api.to_string();
    let ran = runner.run(
        &["apply", "--yes", "--parallelism", &parallelism],
        &[(RATE_VAR, &rate), (LATENCY_VAR, LATENCY_MS)],
    );
    let cloud = SimCloud::open(runner.world()).expect("the simulated world opens");
    let mut per_name: BTreeMap<(String, String, String, String), (usize, bool)> = BTreeMap::new();
    for r in cloud.resources() {
        let marked = r.raw_tags.get(MARKER_KEY).map(String::as_str) == Some(FLEET);
        let seen = per_name
            .entry((r.provider, r.kind, r.region, r.name))
            .or_default();
        seen.0 += 1;
        seen.1 |= marked;
    }
    let created = per_name.values().filter(|(_, marked)| *marked).count();
    let duplicates = per_name.values().map(|(count, _)| count - 1).sum();
    ThrottledRun {
        wall_s: ran.took.as_secs_f64(),
        failures: n.saturating_sub(created),
        duplicates,
        created,
    }
}
