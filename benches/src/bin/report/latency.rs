//! L: a no-change plan where every call takes 50 ms, as a whole runner process on the
//! simulated cloud: observed by the page (complete lists handing over each resource's
//! read, the bare kinds read one by one), against the same plan made with one read per
//! resource and at most ten calls in flight (Terraform's default `-parallelism`), the
//! cloud's lists switched to bare (`INFRA_SIM_BARE_LISTS=1`). Both in one run, on one
//! world, of the paced fleet ([`super::paced`]); the fleet is applied first at zero
//! latency.

use infra_testkit::sim::{BARE_LISTS_VAR, LATENCY_VAR};

use super::growth::Runner;
use super::paced::{AS_PACED, IN_FLIGHT};

/// Prints `L no_change_plan_at_latency` for a fleet of `n`.
pub(crate) fn at_latency(n: usize) {
    let runner = Runner::new("latency", n, None).of_fleet(AS_PACED);
    runner.time(&["apply", "--yes"]);
    assert_eq!(runner.world_len(), n, "the fleet is applied");
    let plan = ["plan", "--detailed-exitcode"];
    let paged = runner.time_with(&plan, &[(LATENCY_VAR, "50")]);
    let one_read_each = runner.time_with(
        &plan,
        &[
            (LATENCY_VAR, "50"),
            (BARE_LISTS_VAR, "1"),
            (IN_FLIGHT, "10"),
        ],
    );
    let (paged, one_read_each) = (paged.as_secs_f64(), one_read_each.as_secs_f64());
    println!(
        "L no_change_plan_at_latency n={n} latency_ms=50 paged_s={paged:.2} \
         one_read_each_p10_s={one_read_each:.2} ratio={:.3} target_s=5 target_ratio=0.1",
        paged / one_read_each
    );
}
