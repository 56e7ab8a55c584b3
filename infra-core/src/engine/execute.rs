//! Execution: the schedule's graph run in parallel, at most `parallelism` calls in
//! flight, each node started as soon as what it waits for is done.
//!
//! A node that fails stops only what waits on it (those end `DependencyFailed`). A
//! delete refused with `DependencyViolation` (an orphan, whose references no record
//! keeps) is held back and tried again in rounds once everything else ran, until a
//! round frees nothing; it then fails with the provider's own words.
//!
//! Before a batch of ready nodes starts, two things happen, in this order: the fleet's
//! lock is confirmed (when the engine has a lease), and the records learn, in one
//! write of the batch's size, which resources' deletes are about to be sent and which
//! deletes were confirmed since the last batch. When either fails, nothing more starts:
//! what had not started ends not attempted (`refused`), with the reason.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;

use super::calls::KindTraits;
use super::model::{Observation, World, key_id, owned_sighting, row_of};
use super::schedule::{Graph, Priority, Work};
use super::{ApplyError, Engine, Options, Progress};
use crate::backend::Sighting;
use crate::records::LedgerProgress;
use crate::{
    ApplyResult, BackendError, Change, ErrorKind, LedgerRow, Marker, NotAttemptedReason, Plan, Step,
};

/// How one node ended.
#[derive(Clone, Debug)]
pub(super) enum Done {
    Built {
        change: Change,
        sighting: Option<Sighting>,
    },
    Pruned {
        already_absent: bool,
    },
    NotAttempted(NotAttemptedReason, Option<String>),
    Failed(Step, BackendError),
}

impl Done {
    fn describe(&self) -> &'static str {
        match self {
            Done::Built { change, .. } => match change {
                Change::Created => "created",
                Change::Updated => "updated",
                Change::Replaced => "replaced",
                Change::Unchanged => "unchanged",
            },
            Done::Pruned { .. } => "deleted",
            Done::NotAttempted(..) => "not attempted",
            Done::Failed(..) => "failed",
        }
    }

    fn succeeded(&self) -> bool {
        matches!(self, Done::Built { .. } | Done::Pruned { .. })
    }
}

/// Where a node stands.
#[derive(Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per node of one apply; boxing buys nothing"
)]
pub(super) enum NodeState {
    Waiting,
    Running,
    Deferred,
    Done(Done),
}

/// The state of one run of the graph.
struct Run<'g> {
    graph: &'g Graph,
    observation: &'g Observation,
    state: Vec<NodeState>,
    /// For each node, how many of what it waits for are not done yet.
    remaining: Vec<usize>,
    priority: Vec<Priority>,
    ready: BTreeSet<(Priority, usize)>,
    /// Deletes refused for ordering reasons, waiting for the next round.
    deferred: Vec<(usize, BackendError)>,
    /// Handles and observed states as the run changes them, for settling.
    world: World,
    /// Handles and observed states as observation found them.
    initial: World,
    /// The last sighting of each slot's resource, for the cache.
    finals: Vec<Option<Sighting>>,
    /// Nodes with work when the run started, and how many finished.
    with_work: usize,
    finished: usize,
    successes: usize,
    last_round: Option<usize>,
    /// Deletes confirmed since the records last heard from this run.
    dropped: Vec<LedgerRow>,
    /// The rows this run marked before sending their delete, each with whether the
    /// mark must stay (the delete may have been sent and is not confirmed).
    marks: BTreeMap<LedgerRow, bool>,
    /// Why the run stopped starting calls, once it did; and whether for a lost lock.
    halted: Option<(String, bool)>,
}

impl<'g> Run<'g> {
    fn new(
        plan: &Plan,
        observation: &'g Observation,
        graph: &'g Graph,
        parallelism: usize,
    ) -> Self {
        let n = graph.nodes.len();
        let mut state = vec![NodeState::Waiting; n];
        for v in graph.blocked_builds(plan, observation) {
            fail_downstream(v, &graph.dependants, &mut state);
        }
        // A delete of a resource adopted on its marker alone waits for a confirmation
        // by name that did not come: not attempted, and nothing that waits on it runs.
        for (v, node) in graph.nodes.iter().enumerate() {
            let subject = &observation.slots[node.slot].subject;
            if node.work == Work::Delete && observation.needs_confirmation(subject) {
                state[v] = NodeState::Done(Done::NotAttempted(
                    NotAttemptedReason::Unconfirmed,
                    Some(format!(
                        "adopted by `discover` on its marker alone, and a marker can be copied: \
                         confirm the delete with --allow-delete '{subject}'"
                    )),
                ));
                for &d in &graph.dependants[v] {
                    fail_downstream(d, &graph.dependants, &mut state);
                }
            }
        }
        let remaining: Vec<usize> = graph
            .waits_on
            .iter()
            .map(|ws| {
                ws.iter()
                    .filter(|&&w| matches!(state[w], NodeState::Waiting))
                    .count()
            })
            .collect();
        let priority = graph.priorities(plan, observation, parallelism);
        let ready = (0..n)
            .filter(|&v| matches!(state[v], NodeState::Waiting) && remaining[v] == 0)
            .map(|v| (priority[v], v))
            .collect();
        let with_work = state
            .iter()
            .filter(|s| matches!(s, NodeState::Waiting))
            .count();
        Run {
            graph,
            observation,
            state,
            remaining,
            priority,
            ready,
            deferred: Vec::new(),
            world: World::of_observation(plan, observation),
            initial: World::of_observation(plan, observation),
            finals: observation.slots.iter().map(owned_sighting).collect(),
            with_work,
            finished: 0,
            successes: 0,
            last_round: None,
            dropped: Vec::new(),
            marks: BTreeMap::new(),
            halted: None,
        }
    }

    /// Up to `room` ready nodes, each marked running.
    fn start_batch(&mut self, room: usize) -> Vec<usize> {
        let mut batch = Vec::new();
        while batch.len() < room
            && let Some(v) = self.start_next()
        {
            batch.push(v);
        }
        batch
    }

    /// What the records must learn before `batch` starts: the rows of its deletes
    /// (marked here as this run's), and the deletes confirmed since the last write.
    fn progress_before(&mut self, observation: &Observation, batch: &[usize]) -> LedgerProgress {
        let mut progress = LedgerProgress {
            deleting: Vec::new(),
            dropped: std::mem::take(&mut self.dropped),
        };
        for &v in batch {
            let node = self.graph.nodes[v];
            if matches!(node.work, Work::Delete | Work::DeleteOld) {
                let row = row_of(&observation.slots[node.slot].subject);
                self.marks.insert(row.clone(), true);
                progress.deleting.push(row);
            }
        }
        progress
    }

    /// Starts nothing more: `batch` (marked running, not started) and everything
    /// waiting or deferred end not attempted, refused for `why`.
    fn halt(&mut self, batch: &[usize], why: String, lease_lost: bool) {
        let graph = self.graph;
        for &v in batch {
            self.state[v] = NodeState::Waiting;
        }
        for (v, _) in std::mem::take(&mut self.deferred) {
            self.state[v] = NodeState::Waiting;
        }
        for v in 0..graph.nodes.len() {
            if matches!(self.state[v], NodeState::Waiting) {
                self.state[v] = NodeState::Done(Done::NotAttempted(
                    NotAttemptedReason::Refused,
                    Some(why.clone()),
                ));
            }
        }
        self.ready.clear();
        self.halted = Some((why, lease_lost));
    }

    /// How a delete node's end bears on its row's mark: a delete confirmed is dropped
    /// (an orphan's or a teardown's row) or keeps its mark (the old resource of a
    /// replace, until the new one is made); a delete that certainly did not happen
    /// loses the mark; one that may have been sent keeps it.
    fn note_delete(&mut self, observation: &Observation, v: usize, done: &Done) {
        let node = self.graph.nodes[v];
        if !matches!(node.work, Work::Delete | Work::DeleteOld) {
            return;
        }
        let row = row_of(&observation.slots[node.slot].subject);
        let keep = match done {
            Done::Pruned { .. } => {
                if node.work == Work::Delete {
                    self.dropped.push(row.clone());
                }
                true
            }
            Done::Failed(_, e) => e.may_have_been_sent,
            Done::NotAttempted(..) | Done::Built { .. } => false,
        };
        if let Some(mark) = self.marks.get_mut(&row) {
            *mark = keep;
        }
    }

    /// The next ready node to start, marked running.
    fn start_next(&mut self) -> Option<usize> {
        while let Some((_, v)) = self.ready.pop_first() {
            if matches!(self.state[v], NodeState::Waiting) {
                self.state[v] = NodeState::Running;
                return Some(v);
            }
        }
        None
    }

    /// Records how node `v` ended and releases (or stops) what waits on it.
    fn finish(&mut self, plan: &Plan, observation: &Observation, v: usize, done: Done) {
        let node = self.graph.nodes[v];
        let slot = &observation.slots[node.slot];
        self.note_delete(observation, v, &done);
        match &done {
            Done::Built {
                sighting: Some(sighting),
                ..
            } => {
                if let Some(i) = slot.index {
                    self.world.record(key_id(plan, i), sighting);
                }
                self.finals[node.slot] = Some(sighting.clone());
            }
            Done::Pruned { .. } if node.work == Work::Delete => {
                self.finals[node.slot] = None;
                if let Some(i) = slot.index {
                    self.world.forget(key_id(plan, i));
                }
            }
            // A delete refused because something still holds the resource waits for
            // the rest.
            Done::Failed(_, e)
                if matches!(node.work, Work::Delete | Work::DeleteOld)
                    && e.kind == ErrorKind::DependencyViolation =>
            {
                self.deferred.push((v, e.clone()));
                self.state[v] = NodeState::Deferred;
                return;
            }
            _ => {}
        }
        let succeeded = done.succeeded();
        self.state[v] = NodeState::Done(done);
        let graph = self.graph;
        if succeeded {
            self.successes += 1;
            for &d in &graph.dependants[v] {
                if matches!(self.state[d], NodeState::Waiting) {
                    self.remaining[d] -= 1;
                    if self.remaining[d] == 0 {
                        self.ready.insert((self.priority[d], d));
                    }
                }
            }
        } else {
            for &d in &graph.dependants[v] {
                fail_downstream(d, &graph.dependants, &mut self.state);
            }
        }
    }

    /// Nothing runs and nothing is ready: starts a new round of the deferred deletes,
    /// or, when the last round freed nothing, fails them with the provider's words.
    /// Returns whether there is more to run.
    fn next_round(&mut self) -> bool {
        if self.deferred.is_empty() {
            return false;
        }
        if self.last_round == Some(self.successes) {
            let graph = self.graph;
            for (v, e) in std::mem::take(&mut self.deferred) {
                // Refused: the delete did not happen.
                let row = row_of(&self.observation.slots[graph.nodes[v].slot].subject);
                if let Some(mark) = self.marks.get_mut(&row) {
                    *mark = false;
                }
                self.state[v] = NodeState::Done(Done::Failed(Step::Delete, e));
                for &d in &graph.dependants[v] {
                    fail_downstream(d, &graph.dependants, &mut self.state);
                }
            }
            return false;
        }
        self.last_round = Some(self.successes);
        for (v, _) in std::mem::take(&mut self.deferred) {
            self.state[v] = NodeState::Waiting;
            self.ready.insert((self.priority[v], v));
        }
        true
    }
}

/// What running the graph left: each node's end, and each slot's last sighting.
pub(super) struct Ran {
    pub(super) states: Vec<NodeState>,
    pub(super) finals: Vec<Option<Sighting>>,
    /// The rows this run marked before their delete, with whether the mark stays.
    pub(super) marks: BTreeMap<LedgerRow, bool>,
    /// Why the run stopped starting calls, if it did; and whether for a lost lock.
    pub(super) halted: Option<(String, bool)>,
}

impl Engine {
    /// Carries out the decisions of `observation`: the intents recorded first, then the
    /// graph of calls, then the verdicts and the records. A record that cannot be saved
    /// before any call refuses the run; one that cannot be saved after the calls is
    /// reported beside the result, which is still what happened.
    pub(super) async fn execute(
        &self,
        plan: &Plan,
        observation: &Observation,
        options: &Options,
    ) -> Result<(ApplyResult, Option<String>), ApplyError> {
        let fleet = plan.fleet().name();
        let mut ledger = super::records::with_intents(observation);
        if ledger != *observation.ledger {
            self.confirm_lease()
                .map_err(|why| ApplyError::LockLost { why })?;
            self.store.save_ledger(fleet, &ledger)?;
        }
        let graph = Graph::new(plan, observation);
        let ran = self.run(plan, observation, &graph, options).await;
        let result = super::verdict::collect(observation, &graph, ran.states);
        if let Some((why, true)) = ran.halted {
            // Another run may hold the lock now: nothing more is written.
            return Ok((
                result,
                Some(format!(
                    "{why}; the records were left as this run last wrote them, before the                      lock was lost (the next run finds what this one did from them)"
                )),
            ));
        }
        super::records::settle_ledger(&mut ledger, observation, &result, &ran.marks);
        let saved = self.store.save_ledger(fleet, &ledger).and_then(|()| {
            // The cache: what exists now, by the last sighting of each resource.
            self.save_cache(
                fleet,
                observation
                    .slots
                    .iter()
                    .zip(ran.finals.iter().map(Option::as_ref)),
            )
        });
        debug_assert!(result.check_disjoint().is_ok());
        Ok((result, saved.err().map(|e| e.to_string())))
    }

    /// Runs the graph: starts ready nodes up to the parallelism, records each end.
    async fn run(
        &self,
        plan: &Plan,
        observation: &Observation,
        graph: &Graph,
        options: &Options,
    ) -> Ran {
        let parallelism = options.parallelism.max(1);
        let marker = Marker::new(plan.fleet().name());
        let capabilities = self.capabilities();
        let mut run = Run::new(plan, observation, graph, parallelism);
        let mut in_flight: FuturesUnordered<BoxFuture<'_, (usize, Done)>> = FuturesUnordered::new();
        loop {
            let batch = run.start_batch(parallelism - in_flight.len());
            if !batch.is_empty()
                && let Err((why, lease_lost)) =
                    self.before_calls(plan, observation, &mut run, &batch)
            {
                run.halt(&batch, why, lease_lost);
                continue;
            }
            for v in batch {
                let node = graph.nodes[v];
                let slot = &observation.slots[node.slot];
                let traits = KindTraits::of(capabilities.get(slot.provider), slot.kind);
                let worlds = (&run.world, &run.initial);
                let job = self.job(plan, slot, node.work, traits, worlds, &marker);
                in_flight.push(Box::pin(async move { (v, job.await) }));
            }
            let Some((v, done)) = in_flight.next().await else {
                if run.halted.is_none() && run.next_round() {
                    continue;
                }
                break;
            };
            run.finished += 1;
            if let Some(hook) = &self.progress {
                hook(Progress {
                    done: run.finished,
                    total: run.with_work,
                    resource: &observation.slots[graph.nodes[v].slot].subject,
                    what: done.describe(),
                });
            }
            run.finish(plan, observation, v, done);
        }
        Ran {
            states: run.state,
            finals: run.finals,
            marks: run.marks,
            halted: run.halted,
        }
    }

    /// Confirms the fleet's lock, when the engine has a lease.
    fn confirm_lease(&self) -> Result<(), String> {
        match &self.lease {
            Some(lease) => lease
                .confirm()
                .map_err(|why| format!("the fleet's lock could not be confirmed: {why}")),
            None => Ok(()),
        }
    }

    /// What must hold before `batch` starts: the lock confirmed, then the marks of its
    /// deletes (and the deletes confirmed since the last batch) written. The error says
    /// why not, and whether the lock was lost.
    fn before_calls(
        &self,
        plan: &Plan,
        observation: &Observation,
        run: &mut Run<'_>,
        batch: &[usize],
    ) -> Result<(), (String, bool)> {
        self.confirm_lease().map_err(|why| (why, true))?;
        let progress = run.progress_before(observation, batch);
        if progress.is_empty() {
            return Ok(());
        }
        self.store
            .record_progress(plan.fleet().name(), &progress)
            .map_err(|e| {
                (
                    format!(
                        "the records could not be told of the deletes about to be sent, so                          none was sent: {e}"
                    ),
                    false,
                )
            })
    }
}

/// Marks a waiting node, and everything waiting on it, as not attempted.
fn fail_downstream(start: usize, dependants: &[Vec<usize>], state: &mut [NodeState]) {
    let mut stack = vec![start];
    while let Some(s) = stack.pop() {
        if matches!(state[s], NodeState::Waiting) {
            state[s] = NodeState::Done(Done::NotAttempted(
                NotAttemptedReason::DependencyFailed,
                None,
            ));
            stack.extend(dependants[s].iter().copied());
        }
    }
}
