//! The schedule: the graph of provider calls an apply makes, and the order in which
//! ready calls start.
//!
//! Every resource with work becomes one node, or two for a planned replace (its old
//! resource's delete and its new resource's create are separate steps of the graph):
//!
//! - a build (create, update, check) waits for the builds of what it depends on;
//! - a delete waits for the deletes of what depends on it (edges from the declaration);
//! - a replace that must delete first (names are unique) deletes the old resource after
//!   the deletes of its dependants (which are replaced with it), then builds;
//! - a replace that may create first builds, then deletes the old resource once its
//!   dependants have moved to the new one;
//! - a resource moved to another region builds after its old one is deleted.
//!
//! Orphans wait for nothing: no record keeps their references.

use std::collections::HashMap;

use super::model::{Decision, Observation, ReplaceOrder, Seen};
use crate::Plan;

/// What a node does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Work {
    /// Create, update or check a declared resource.
    Build,
    /// Delete a resource that must not exist (declared absent, or an orphan).
    Delete,
    /// Delete the old resource of a replace.
    DeleteOld,
    /// Create the new resource of a replace.
    CreateNew,
}

impl Work {
    /// Whether the node brings a declared resource into being (or checks it).
    pub(super) fn builds(self) -> bool {
        matches!(self, Work::Build | Work::CreateNew)
    }
}

/// One step of the graph: a slot of the observation and what to do with it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Node {
    pub(super) slot: usize,
    pub(super) work: Work,
}

/// Which ready node starts first: deletes of declared resources, then builds, then
/// orphans; within each, the longest chain of work behind it first, then the build
/// order (or its reverse for deletes).
pub(super) type Priority = (u8, usize, usize);

/// The graph of one apply's calls.
pub(super) struct Graph {
    pub(super) nodes: Vec<Node>,
    /// The build node of a slot (its create, update or check; a replace's create).
    pub(super) build_of: HashMap<usize, usize>,
    /// The delete node of a slot (its delete; a replace's delete of the old resource).
    pub(super) kill_of: HashMap<usize, usize>,
    /// For each node, the nodes it waits for.
    pub(super) waits_on: Vec<Vec<usize>>,
    /// For each node, the nodes that wait for it.
    pub(super) dependants: Vec<Vec<usize>>,
}

impl Graph {
    /// The nodes and edges of the decisions in `observation`.
    pub(super) fn new(plan: &Plan, observation: &Observation) -> Graph {
        let mut graph = Graph {
            nodes: Vec::new(),
            build_of: HashMap::new(),
            kill_of: HashMap::new(),
            waits_on: Vec::new(),
            dependants: Vec::new(),
        };
        graph.add_nodes(observation);
        graph.waits_on = vec![Vec::new(); graph.nodes.len()];
        graph.add_declared_edges(plan, observation);
        graph.add_relocation_edges(observation);
        graph.dependants = vec![Vec::new(); graph.nodes.len()];
        for (v, ws) in graph.waits_on.iter().enumerate() {
            for &w in ws {
                graph.dependants[w].push(v);
            }
        }
        graph
    }

    fn push(&mut self, slot: usize, work: Work) -> usize {
        self.nodes.push(Node { slot, work });
        self.nodes.len() - 1
    }

    fn add_nodes(&mut self, observation: &Observation) {
        for (s, slot) in observation.slots.iter().enumerate() {
            match &slot.decision {
                Decision::Create | Decision::Existing { replace: None, .. } => {
                    let v = self.push(s, Work::Build);
                    self.build_of.insert(s, v);
                }
                Decision::Existing {
                    replace: Some(_), ..
                } => {
                    let old = self.push(s, Work::DeleteOld);
                    self.kill_of.insert(s, old);
                    let new = self.push(s, Work::CreateNew);
                    self.build_of.insert(s, new);
                }
                Decision::Delete | Decision::Prune => {
                    let v = self.push(s, Work::Delete);
                    self.kill_of.insert(s, v);
                }
                _ => {}
            }
        }
    }

    /// Whether the delete node `k` of slot `d` is one a delete of what `d` depends on
    /// waits for: a plain delete, or the delete of a replace that deletes first.
    fn is_blocking_delete(&self, observation: &Observation, k: usize, d: usize) -> bool {
        self.nodes[k].work == Work::Delete
            || observation.slots[d].replace_order() == Some(ReplaceOrder::DeleteFirst)
    }

    /// Edges read from the declaration: builds after what they depend on, deletes
    /// after what depends on them.
    fn add_declared_edges(&mut self, plan: &Plan, observation: &Observation) {
        let slot_of_index = observation.slot_of_index();
        let deps = plan.deps();
        let mut declared_dependants: Vec<Vec<usize>> = vec![Vec::new(); deps.len()];
        for (j, dj) in deps.iter().enumerate() {
            for &i in dj {
                declared_dependants[i].push(j);
            }
        }
        for v in 0..self.nodes.len() {
            let Node { slot: s, work } = self.nodes[v];
            let Some(i) = observation.slots[s].index else {
                continue; // orphans wait for nothing
            };
            let dep_slots: Vec<usize> = deps[i]
                .iter()
                .filter_map(|d| slot_of_index.get(d).copied())
                .collect();
            let dependant_slots: Vec<usize> = declared_dependants[i]
                .iter()
                .filter_map(|d| slot_of_index.get(d).copied())
                .collect();
            let builds_of = |slots: &[usize]| -> Vec<usize> {
                slots
                    .iter()
                    .filter_map(|d| self.build_of.get(d).copied())
                    .collect()
            };
            let blocking_deletes_of = |slots: &[usize]| -> Vec<usize> {
                slots
                    .iter()
                    .filter_map(|&d| {
                        self.kill_of
                            .get(&d)
                            .copied()
                            .filter(|&k| self.is_blocking_delete(observation, k, d))
                    })
                    .collect()
            };
            let order = observation.slots[s].replace_order();
            let waits: Vec<usize> = match work {
                Work::Build => builds_of(&dep_slots),
                Work::CreateNew => {
                    let mut waits = builds_of(&dep_slots);
                    if order == Some(ReplaceOrder::DeleteFirst) {
                        waits.push(self.kill_of[&s]);
                    }
                    waits
                }
                Work::Delete => blocking_deletes_of(&dependant_slots),
                // After the new one exists and its dependants moved to it.
                Work::DeleteOld if order == Some(ReplaceOrder::CreateFirst) => {
                    let mut waits = vec![self.build_of[&s]];
                    waits.extend(builds_of(&dependant_slots));
                    waits
                }
                Work::DeleteOld => blocking_deletes_of(&dependant_slots),
            };
            self.waits_on[v].extend(waits);
        }
    }

    /// A resource moved to another region: its old one (an orphan of the same
    /// provider, kind and name) is deleted first, since names may be unique.
    fn add_relocation_edges(&mut self, observation: &Observation) {
        let moved_from: HashMap<(&str, &str, &str), usize> = observation
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.index.is_none())
            .filter_map(|(s, slot)| {
                self.kill_of.get(&s).map(|&k| {
                    let r = &slot.subject;
                    ((r.provider.as_str(), r.kind.as_str(), r.name.as_str()), k)
                })
            })
            .collect();
        for (v, node) in self.nodes.iter().enumerate() {
            if node.work.builds() {
                let r = &observation.slots[node.slot].subject;
                if let Some(&k) =
                    moved_from.get(&(r.provider.as_str(), r.kind.as_str(), r.name.as_str()))
                {
                    self.waits_on[v].push(k);
                }
            }
        }
    }

    /// Builds that cannot start: one of their dependencies was skipped or failed at
    /// observation and does not exist.
    pub(super) fn blocked_builds(&self, plan: &Plan, observation: &Observation) -> Vec<usize> {
        let slot_of_index = observation.slot_of_index();
        let deps = plan.deps();
        (0..self.nodes.len())
            .filter(|&v| {
                let node = self.nodes[v];
                let Some(i) = observation.slots[node.slot].index else {
                    return false;
                };
                node.work.builds()
                    && deps[i].iter().any(|d| {
                        slot_of_index.get(d).is_some_and(|&ds| {
                            let dep = &observation.slots[ds];
                            matches!(dep.decision, Decision::Skip(..) | Decision::Fail(..))
                                && !matches!(dep.seen, Seen::Present { .. })
                        })
                    })
            })
            .collect()
    }

    /// Each node's priority among ready nodes. One call at a time keeps the plain build
    /// order, so that a teardown is exactly its reverse; with room for several, the
    /// node with the longest chain of work behind it goes first (the critical path sets
    /// the wall time).
    pub(super) fn priorities(
        &self,
        plan: &Plan,
        observation: &Observation,
        parallelism: usize,
    ) -> Vec<Priority> {
        let rank: HashMap<usize, usize> = plan
            .build_order()
            .unwrap_or_else(|_| (0..plan.len()).collect())
            .into_iter()
            .enumerate()
            .map(|(p, i)| (i, p))
            .collect();
        let height = if parallelism > 1 {
            self.heights()
        } else {
            vec![0; self.nodes.len()]
        };
        self.nodes
            .iter()
            .enumerate()
            .map(|(v, node)| {
                let slot = &observation.slots[node.slot];
                let r = slot.index.map(|i| rank.get(&i).copied().unwrap_or(i));
                let urgency = usize::MAX - height[v];
                match (r, node.work.builds()) {
                    (Some(r), true) => (1, urgency, r),
                    (Some(r), false) => (0, urgency, usize::MAX - r),
                    (None, _) => (2, urgency, node.slot),
                }
            })
            .collect()
    }

    /// For each node, the longest chain of nodes that waits on it, itself included.
    fn heights(&self) -> Vec<usize> {
        let n = self.nodes.len();
        let mut left: Vec<usize> = self.waits_on.iter().map(Vec::len).collect();
        let mut order: Vec<usize> = (0..n).filter(|&v| left[v] == 0).collect();
        let mut next = 0;
        while next < order.len() {
            let v = order[next];
            next += 1;
            for &d in &self.dependants[v] {
                left[d] -= 1;
                if left[d] == 0 {
                    order.push(d);
                }
            }
        }
        let mut height = vec![1; n];
        for &v in order.iter().rev() {
            height[v] = 1 + self.dependants[v]
                .iter()
                .map(|&d| height[d])
                .max()
                .unwrap_or(0);
        }
        height
    }
}
