//! Verdicts: how each resource handed to an apply ended, in exactly one bucket of the
//! [`ApplyResult`].

use super::execute::{Done, NodeState};
use super::model::{Decision, Observation, Target};
use super::schedule::Graph;
use crate::apply_result::{Applied, Failed, NotAttempted, Pruned};
use crate::{ApplyResult, Change, Step};

/// One verdict per slot, from its decision and how its nodes ended.
pub(super) fn collect(
    observation: &Observation,
    graph: &Graph,
    mut states: Vec<NodeState>,
) -> ApplyResult {
    let mut take =
        |v: Option<&usize>| v.map(|&v| std::mem::replace(&mut states[v], NodeState::Waiting));
    let mut result = ApplyResult::default();
    for (s, slot) in observation.slots.iter().enumerate() {
        let done = match &slot.decision {
            Decision::Skip(reason, detail) => Done::NotAttempted(*reason, detail.clone()),
            Decision::Fail(step, e) => Done::Failed(*step, (**e).clone()),
            Decision::AlreadyAbsent => Done::Pruned {
                already_absent: true,
            },
            Decision::Existing {
                replace: Some(_), ..
            } => replace_verdict(take(graph.kill_of.get(&s)), take(graph.build_of.get(&s))),
            _ => match take(graph.build_of.get(&s).or(graph.kill_of.get(&s))) {
                Some(NodeState::Done(done)) => done,
                other => unreachable!("every node ends done, not {other:?}"),
            },
        };
        let resource = slot.subject.clone();
        match done {
            Done::Built { change, .. } => result.applied.push(Applied { resource, change }),
            Done::Pruned { already_absent } => match slot.target {
                Target::Present(_) => result.applied.push(Applied {
                    resource,
                    change: Change::Unchanged,
                }),
                _ => result.pruned.push(Pruned {
                    resource,
                    already_absent,
                }),
            },
            Done::NotAttempted(reason, detail) => result.not_attempted.push(NotAttempted {
                resource,
                reason,
                detail,
            }),
            Done::Failed(step, error) => result.failed.push(Failed {
                resource,
                step,
                error,
            }),
        }
    }
    result.sort();
    result
}

/// The verdict of a replace from its two nodes: the old resource's delete and the new
/// one's create.
fn replace_verdict(old: Option<NodeState>, new: Option<NodeState>) -> Done {
    match (old, new) {
        // The new one exists; the old one could not be deleted.
        (Some(NodeState::Done(Done::Failed(_, e))), _) => Done::Failed(Step::Replace, e),
        (_, Some(NodeState::Done(Done::Built { sighting, .. }))) => Done::Built {
            change: Change::Replaced,
            sighting,
        },
        (_, Some(NodeState::Done(Done::Failed(_, e)))) => Done::Failed(Step::Replace, e),
        (_, Some(NodeState::Done(other))) => other,
        (old, new) => unreachable!("a replace ends done, not {old:?} / {new:?}"),
    }
}
