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
/// Without `adaptive`, the runner is given `--fixed-parallelism`: `parallelism` calls
/// in flight per API whatever the cloud answers, as before the windows yielded.
pub(crate) fn throttled_apply(
    n: usize,
    rate_per_api: u32,
    parallelism: usize,
    adaptive: bool,
) -> ThrottledRun {
    let runner = Runner::new("throttled", n, None).of_fleet(AS_PACED);
    let parallelism = parallelism.to_string();
    let rate = rate_per_api.to_string();
    let mut args = vec!["apply", "--yes", "--parallelism", &parallelism];
    if !adaptive {
        args.push("--fixed-parallelism");
    }
    let ran = runner.run(&args, &[(RATE_VAR, &rate), (LATENCY_VAR, LATENCY_MS)]);
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

/// The calls a second each API admits on the Q line.
const RATE: u32 = 50;

/// The fixed parallelisms the Q line sweeps for the best one.
const SWEEP: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// The adaptive run's ceiling: the sweep's largest, so that the windows, not the
/// ceiling, find the pace.
const CEILING: usize = 64;

/// Prints `Q throttled_apply` for a fleet of `n`: the apply with the windows yielding
/// to throttling under a ceiling of [`CEILING`], against the best fixed parallelism of
/// the sweep and against a fixed 16 (the runner's default before the windows), all in
/// this run.
pub(crate) fn q(n: usize) {
    let adaptive = throttled_apply(n, RATE, CEILING, true);
    let fixed: Vec<(usize, ThrottledRun)> = SWEEP
        .iter()
        .map(|&p| (p, throttled_apply(n, RATE, p, false)))
        .collect();
    let clean = |r: &ThrottledRun| r.failures == 0 && r.duplicates == 0;
    let sweep: Vec<String> = fixed
        .iter()
        .map(|(p, r)| format!("{p}:{:.1}", r.wall_s))
        .collect();
    eprintln!("  Q sweep (parallelism:seconds, fixed) {}", sweep.join(" "));
    let Some((best_p, best)) = fixed
        .iter()
        .filter(|(_, r)| clean(r))
        .min_by(|a, b| a.1.wall_s.total_cmp(&b.1.wall_s))
    else {
        println!("Q throttled_apply n={n} rate_per_api={RATE} no fixed parallelism converged");
        return;
    };
    let fixed_16 = fixed
        .iter()
        .find(|(p, _)| *p == 16)
        .map_or(f64::NAN, |(_, r)| r.wall_s);
    println!(
        "Q throttled_apply n={n} rate_per_api={RATE} latency_ms={LATENCY_MS} ceiling={CEILING} adaptive_s={:.2} \
         failures={} duplicates={} best_fixed_s={:.2} best_fixed_parallelism={best_p} \
         fixed_16_s={fixed_16:.2} ratio={:.2} target=1.5",
        adaptive.wall_s,
        adaptive.failures,
        adaptive.duplicates,
        best.wall_s,
        adaptive.wall_s / best.wall_s,
    );
}
