//! The same work written for this engine and for Terraform, so that the two can be
//! timed as whole processes on it (`benches/side-by-side/run.py`).
//!
//! The work is one random graph ([`crate::graph`], a fixed seed, at most fifty levels;
//! each node past the first level refers to one to three earlier ones). Each node
//! carries a value, and refers to its earlier nodes through an attribute the cloud
//! assigns, so that no node can be made before the ones it names:
//!
//! - for Terraform, a `terraform_data` resource whose `input` is the node's value
//!   followed by the `id` of each node it refers to;
//! - for this engine, an IAM role of the simulated cloud whose description is the
//!   node's value followed by the observed id (the ARN) of each node it refers to.
//!
//! Both are the cheapest resource each side has: Terraform's is its own built-in
//! provider's, kept in its state file; ours is a call to the simulated cloud, kept in
//! its world file. Version 2 of the work changes the value of one node in ten
//! (every tenth, from the first), which each side makes as an update in place.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use infra_core::kinds::{Iam, IamObserved};
use infra_core::prelude::{AwsRegion, Expr, Fleet, Key, Partial};

/// The seed of every side-by-side graph.
pub const SEED: u64 = 0x5EED_0020;

/// The most levels a side-by-side graph has (its longest chain).
pub const DEPTH: usize = 50;

/// The name of the fleet that does the work.
pub const FLEET: &str = "side-by-side";

/// The graph of `n` nodes both sides build: node `i`'s list holds the earlier nodes
/// it refers to.
pub fn edges(n: usize) -> Vec<Vec<usize>> {
    crate::graph(n, DEPTH, SEED)
}

/// Node `i`'s value in `version` of the work: version 2 changes every tenth.
pub fn value(i: usize, version: u32) -> String {
    let v = if i.is_multiple_of(10) { version } else { 1 };
    format!("v{v}-{i}")
}

/// The nodes version 2 changes, out of `n`.
pub fn changed(n: usize) -> usize {
    n.div_ceil(10)
}

/// The work as a Terraform configuration: one `terraform_data` resource per node.
pub fn terraform(n: usize, version: u32) -> String {
    let mut out = String::with_capacity(n * 96);
    for (i, after) in edges(n).iter().enumerate() {
        let refs: String = after
            .iter()
            .map(|j| format!(" ${{terraform_data.n{j}.id}}"))
            .collect();
        let _ = writeln!(
            out,
            "resource \"terraform_data\" \"n{i}\" {{\n  input = \"{}{refs}\"\n}}\n",
            value(i, version)
        );
    }
    out
}

/// The work as a fleet for the simulated cloud: one IAM role per node, in `eu-west-3`.
pub fn fleet(n: usize, version: u32) -> Fleet {
    let mut f = Fleet::builder(FLEET);
    let mut keys: Vec<Key<Iam>> = Vec::with_capacity(n);
    for (i, after) in edges(n).iter().enumerate() {
        let mut description = Expr::lit(value(i, version));
        for &j in after {
            let id = Expr::observed(keys[j]).map(|o: &IamObserved| o.id.clone());
            description = description.map2(id, |text, id| format!("{text} {id}"));
        }
        keys.push(f.declare(
            AwsRegion::EuWest3,
            format!("n{i}"),
            Iam {
                policies: Expr::lit(BTreeSet::new()),
                assumed_by: Expr::lit(BTreeSet::new()),
                description: Partial::Known(description),
                tags: Partial::Unknown,
            },
        ));
    }
    f.build().expect("side-by-side graphs are sound")
}

#[cfg(test)]
mod tests {
    use super::*;
    use infra_core::engine::{Engine, MemoryStore, Options};
    use infra_testkit::sim::SimCloud;
    use std::sync::Arc;

    #[test]
    fn both_sides_hold_the_same_nodes_and_references() {
        let n = 300;
        let refs: usize = edges(n).iter().map(Vec::len).sum();
        let tf = terraform(n, 1);
        assert_eq!(tf.matches("resource \"terraform_data\"").count(), n);
        assert_eq!(tf.matches("${terraform_data.").count(), refs);
        assert!(refs > n, "most nodes refer to others: {refs} references");
        let fleet = fleet(n, 1);
        assert_eq!(fleet.len(), n);
        let v2 = terraform(n, 2);
        let differ = tf.lines().zip(v2.lines()).filter(|(a, b)| a != b).count();
        assert_eq!(differ, changed(n));
    }

    #[test]
    fn version_two_is_a_tenth_updated_in_place_on_the_simulated_cloud() {
        let rt = crate::runtime();
        let cloud = SimCloud::new(7);
        let engine =
            Engine::new(cloud.backends(), Arc::new(MemoryStore::new())).with_clock(cloud.clock());
        let n = 200;
        let applied = rt
            .block_on(engine.apply(&fleet(n, 1).plan(), &Options::default()))
            .expect("apply");
        assert!(applied.result.is_success());
        assert_eq!(cloud.len(), n);
        let report = rt
            .block_on(engine.plan(&fleet(n, 2).plan(), &Options::default()))
            .expect("plan");
        let counts = report.counts();
        assert_eq!(counts.len(), 2, "{counts:?}");
        let updates = counts.get("update").copied().unwrap_or(0);
        assert_eq!(updates, changed(n));
    }
}
