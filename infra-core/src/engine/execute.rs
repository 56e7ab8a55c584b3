//! Execution: the graph of calls, run in parallel.
//!
//! Every resource with work becomes one node, or two for a planned replace (its old
//! resource's delete and its new resource's create are separate steps of the graph):
//!
//! - a build (create, update, check) waits for the builds of what it depends on;
//! - a delete waits for the deletes of what depends on it (edges from the declaration);
//! - a replace that must delete first (names are unique) deletes the old resource after
//!   the deletes of its dependants (which are replaced with it), then builds;
//! - a replace that may create first builds, then deletes the old resource once its
//!   dependants have moved to the new one.
//!
//! Orphans wait for nothing; one refused with `DependencyViolation` is tried again in
//! rounds once everything else ran, until a round frees nothing.

use super::*;

/// What a node does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// Create, update or check a declared resource.
    Build,
    /// Delete a resource that must not exist (declared absent, or an orphan).
    Delete,
    /// Delete the old resource of a replace.
    DeleteOld,
    /// Create the new resource of a replace.
    CreateNew,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    slot: usize,
    work: Work,
}

impl Engine {
    /// Runs the decisions as a graph of nodes, at most `parallelism` calls in flight.
    pub(super) async fn execute(
        &self,
        plan: &Plan,
        observation: &mut Observation,
        options: &Options,
    ) -> Result<ApplyResult, ApplyError> {
        let fleet = plan.fleet();
        let marker = Marker::new(fleet.name());

        // Adopt what exists and is ours, and record an intent before every create.
        let mut ledger = observation.ledger.clone();
        for row in &observation.forgotten {
            ledger.rows.remove(row);
        }
        for slot in &observation.slots {
            if matches!(slot.decision, Decision::Create | Decision::Existing { .. }) {
                ledger.rows.insert(row_of(&slot.subject));
            }
        }
        if ledger != observation.ledger {
            self.store.save_ledger(fleet.name(), &ledger)?;
        }

        let mut finals: Vec<Option<Sighting>> =
            observation.slots.iter().map(owned_sighting).collect();
        let mut world = World::default();
        for slot in &observation.slots {
            if let (Some(i), Seen::Present { sighting, .. }) = (slot.index, &slot.seen) {
                world.record(key_id(plan, i), sighting);
            }
        }

        // The nodes.
        let mut nodes: Vec<Node> = Vec::new();
        let mut build_of: HashMap<usize, usize> = HashMap::new();
        let mut kill_of: HashMap<usize, usize> = HashMap::new();
        let push = |nodes: &mut Vec<Node>, slot, work| {
            nodes.push(Node { slot, work });
            nodes.len() - 1
        };
        for (s, slot) in observation.slots.iter().enumerate() {
            match &slot.decision {
                Decision::Create => {
                    build_of.insert(s, push(&mut nodes, s, Work::Build));
                }
                Decision::Existing {
                    replace: Some(_), ..
                } => {
                    kill_of.insert(s, push(&mut nodes, s, Work::DeleteOld));
                    build_of.insert(s, push(&mut nodes, s, Work::CreateNew));
                }
                Decision::Existing { .. } => {
                    build_of.insert(s, push(&mut nodes, s, Work::Build));
                }
                Decision::Delete | Decision::Prune => {
                    kill_of.insert(s, push(&mut nodes, s, Work::Delete));
                }
                _ => {}
            }
        }
        let n = nodes.len();

        // The edges.
        let slot_of_index: HashMap<usize, usize> = observation
            .slots
            .iter()
            .enumerate()
            .filter_map(|(s, slot)| slot.index.map(|i| (i, s)))
            .collect();
        let deps = plan.deps();
        let mut declared_dependants: Vec<Vec<usize>> = vec![Vec::new(); deps.len()];
        for (j, dj) in deps.iter().enumerate() {
            for &i in dj {
                declared_dependants[i].push(j);
            }
        }
        let order_of = |s: usize| observation.slots[s].replace_order();
        let mut waits_on: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (v, node) in nodes.iter().enumerate() {
            let s = node.slot;
            let Some(i) = observation.slots[s].index else {
                continue; // orphans wait for nothing
            };
            let dep_slots = deps[i].iter().filter_map(|d| slot_of_index.get(d).copied());
            let dependant_slots = declared_dependants[i]
                .iter()
                .filter_map(|d| slot_of_index.get(d).copied());
            match node.work {
                Work::Build => {
                    waits_on[v].extend(dep_slots.filter_map(|d| build_of.get(&d).copied()))
                }
                Work::CreateNew => {
                    waits_on[v].extend(dep_slots.filter_map(|d| build_of.get(&d).copied()));
                    if order_of(s) == Some(ReplaceOrder::DeleteFirst) {
                        waits_on[v].push(kill_of[&s]);
                    }
                }
                Work::Delete => waits_on[v].extend(dependant_slots.filter_map(|d| {
                    // The deletes (and delete-first replaces) of what depends on it.
                    kill_of.get(&d).copied().filter(|&k| {
                        nodes[k].work == Work::Delete
                            || order_of(d) == Some(ReplaceOrder::DeleteFirst)
                    })
                })),
                Work::DeleteOld => match order_of(s) {
                    Some(ReplaceOrder::CreateFirst) => {
                        // After the new one exists and its dependants moved to it.
                        waits_on[v].push(build_of[&s]);
                        waits_on[v]
                            .extend(dependant_slots.filter_map(|d| build_of.get(&d).copied()));
                    }
                    _ => waits_on[v].extend(dependant_slots.filter_map(|d| {
                        kill_of.get(&d).copied().filter(|&k| {
                            nodes[k].work == Work::Delete
                                || order_of(d) == Some(ReplaceOrder::DeleteFirst)
                        })
                    })),
                },
            }
        }
        // A resource moved to another region: its old one goes first.
        let moved_from: HashMap<(&str, &str, &str), usize> = observation
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.index.is_none())
            .filter_map(|(s, slot)| {
                kill_of.get(&s).map(|&k| {
                    let r = &slot.subject;
                    ((r.provider.as_str(), r.kind.as_str(), r.name.as_str()), k)
                })
            })
            .collect();
        for (v, node) in nodes.iter().enumerate() {
            if matches!(node.work, Work::Build | Work::CreateNew) {
                let r = &observation.slots[node.slot].subject;
                if let Some(&k) =
                    moved_from.get(&(r.provider.as_str(), r.kind.as_str(), r.name.as_str()))
                {
                    waits_on[v].push(k);
                }
            }
        }
        let mut dependants: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (v, ws) in waits_on.iter().enumerate() {
            for &w in ws {
                dependants[w].push(v);
            }
        }

        // Nodes that cannot start: a build whose dependency was skipped or failed and
        // does not exist.
        let mut state: Vec<NodeState> = vec![NodeState::Waiting; n];
        for (v, node) in nodes.iter().enumerate() {
            if !matches!(node.work, Work::Build | Work::CreateNew)
                || !matches!(state[v], NodeState::Waiting)
            {
                continue;
            }
            let Some(i) = observation.slots[node.slot].index else {
                continue;
            };
            let blocked = deps[i].iter().any(|d| {
                slot_of_index.get(d).is_some_and(|&ds| {
                    let dep = &observation.slots[ds];
                    matches!(dep.decision, Decision::Skip(_) | Decision::Fail(..))
                        && !matches!(dep.seen, Seen::Present { .. })
                })
            });
            if blocked {
                fail_downstream(v, &dependants, &mut state);
            }
        }

        let mut remaining: Vec<usize> = waits_on
            .iter()
            .map(|ws| {
                ws.iter()
                    .filter(|&&w| matches!(state[w], NodeState::Waiting))
                    .count()
            })
            .collect();
        // The ready set is ordered, so that one call at a time runs exactly the build
        // order, and deletes exactly its reverse.
        let order = plan
            .build_order()
            .unwrap_or_else(|_| (0..plan.len()).collect());
        let rank: HashMap<usize, usize> = order.iter().enumerate().map(|(p, &i)| (i, p)).collect();
        // With room for several calls, the node with the longest chain of work behind it
        // goes first (the critical path sets the wall time); one call at a time keeps the
        // plain build order, so that a teardown is exactly its reverse.
        let height = if options.parallelism > 1 {
            heights(&waits_on, &dependants)
        } else {
            vec![0; n]
        };
        let priority = |v: usize| -> (u8, usize, usize) {
            let node = nodes[v];
            let slot = &observation.slots[node.slot];
            let r = slot.index.map(|i| rank.get(&i).copied().unwrap_or(i));
            let urgency = usize::MAX - height[v];
            match (r, node.work) {
                (Some(r), Work::Build | Work::CreateNew) => (1, urgency, r),
                (Some(r), Work::Delete | Work::DeleteOld) => (0, urgency, usize::MAX - r),
                (None, _) => (2, urgency, node.slot),
            }
        };
        let mut ready: BTreeSet<((u8, usize, usize), usize)> = (0..n)
            .filter(|&v| matches!(state[v], NodeState::Waiting) && remaining[v] == 0)
            .map(|v| (priority(v), v))
            .collect();
        let mut deferred: Vec<(usize, BackendError)> = Vec::new();
        let parallelism = options.parallelism.max(1);
        let capabilities = self.capabilities();
        let mut in_flight: FuturesUnordered<BoxFuture<'_, (usize, Done)>> = FuturesUnordered::new();
        let with_work = state
            .iter()
            .filter(|s| matches!(s, NodeState::Waiting))
            .count();
        let mut finished = 0;
        let mut successes = 0usize;
        let mut last_round: Option<usize> = None;

        loop {
            while in_flight.len() < parallelism
                && let Some((_, v)) = ready.pop_first()
            {
                if !matches!(state[v], NodeState::Waiting) {
                    continue;
                }
                state[v] = NodeState::Running;
                let slot = &observation.slots[nodes[v].slot];
                let caps = capabilities.get(slot.provider);
                let traits = KindTraits {
                    readable: caps.is_some_and(|c| c.ownership.contains(slot.kind)),
                    create_first: caps.is_some_and(|c| c.duplicate_names.contains(slot.kind)),
                };
                let job = self.job(plan, slot, nodes[v].work, traits, &world, &marker);
                in_flight.push(Box::pin(async move { (v, job.await) }));
            }
            let Some((v, done)) = in_flight.next().await else {
                // Nothing running, nothing ready: retry the deletes refused for ordering
                // reasons, in rounds, until a round frees nothing.
                if deferred.is_empty() {
                    break;
                }
                if last_round == Some(successes) {
                    for (v, e) in deferred.drain(..) {
                        state[v] = NodeState::Done(Done::Failed(Step::Delete, e));
                        for &d in &dependants[v] {
                            fail_downstream(d, &dependants, &mut state);
                        }
                    }
                    break;
                }
                last_round = Some(successes);
                for (v, _) in deferred.drain(..) {
                    state[v] = NodeState::Waiting;
                    ready.insert((priority(v), v));
                }
                continue;
            };
            // A governed backend recorded the change for approval and changed nothing:
            // not attempted, and not a failure.
            let done = match done {
                Done::Failed(Step::Create | Step::Update | Step::Replace, e)
                    if e.kind == ErrorKind::AwaitingApproval =>
                {
                    Done::NotAttempted(NotAttemptedReason::AwaitingApproval, Some(e.message))
                }
                done => done,
            };
            let node = nodes[v];
            let slot = &observation.slots[node.slot];
            finished += 1;
            if let Some(hook) = &self.progress {
                hook(Progress {
                    done: finished,
                    total: with_work,
                    resource: &slot.subject,
                    what: done.describe(),
                });
            }
            match &done {
                Done::Built {
                    sighting: Some(sighting),
                    ..
                } => {
                    if let Some(i) = slot.index {
                        world.record(key_id(plan, i), sighting);
                    }
                    finals[node.slot] = Some(sighting.clone());
                }
                Done::Pruned { .. } if node.work == Work::Delete => {
                    finals[node.slot] = None;
                    ledger.rows.remove(&row_of(&slot.subject));
                    if let Some(i) = slot.index {
                        world.forget(key_id(plan, i));
                    }
                }
                // A delete refused because something still holds the resource (an
                // orphan, whose references no record keeps) waits for the rest.
                Done::Failed(_, e)
                    if matches!(node.work, Work::Delete | Work::DeleteOld)
                        && e.kind == ErrorKind::DependencyViolation =>
                {
                    deferred.push((v, e.clone()));
                    state[v] = NodeState::Deferred;
                    continue;
                }
                _ => {}
            }
            let succeeded = matches!(done, Done::Built { .. } | Done::Pruned { .. });
            state[v] = NodeState::Done(done);
            if succeeded {
                successes += 1;
                for &d in &dependants[v] {
                    if matches!(state[d], NodeState::Waiting) {
                        remaining[d] -= 1;
                        if remaining[d] == 0 {
                            ready.insert((priority(d), d));
                        }
                    }
                }
            } else {
                for &d in &dependants[v] {
                    fail_downstream(d, &dependants, &mut state);
                }
            }
        }

        // One verdict per resource.
        let mut result = ApplyResult::default();
        let take = |v: Option<&usize>, state: &mut [NodeState]| {
            v.map(|&v| std::mem::replace(&mut state[v], NodeState::Waiting))
        };
        for (s, slot) in observation.slots.iter().enumerate() {
            let resource = slot.subject.clone();
            let done = match &slot.decision {
                Decision::Skip(reason) => Done::NotAttempted(*reason, None),
                Decision::Fail(step, e) => Done::Failed(*step, e.clone()),
                Decision::AlreadyAbsent => Done::Pruned {
                    already_absent: true,
                },
                Decision::Existing {
                    replace: Some(_), ..
                } => {
                    let old = take(kill_of.get(&s), &mut state);
                    let new = take(build_of.get(&s), &mut state);
                    match (old, new) {
                        (
                            Some(NodeState::Done(Done::Failed(_, e))),
                            Some(NodeState::Done(Done::Built { .. })),
                        ) => {
                            // The new one exists; the old one could not be deleted.
                            Done::Failed(Step::Replace, e)
                        }
                        (Some(NodeState::Done(Done::Failed(_, e))), _) => {
                            Done::Failed(Step::Replace, e)
                        }
                        (_, Some(NodeState::Done(Done::Built { sighting, .. }))) => Done::Built {
                            change: Change::Replaced,
                            sighting,
                        },
                        (_, Some(NodeState::Done(Done::Failed(_, e)))) => {
                            Done::Failed(Step::Replace, e)
                        }
                        (_, Some(NodeState::Done(other))) => other,
                        (old, new) => unreachable!("a replace ends done, not {old:?} / {new:?}"),
                    }
                }
                _ => match take(build_of.get(&s).or(kill_of.get(&s)), &mut state) {
                    Some(NodeState::Done(done)) => done,
                    other => unreachable!("every node ends done, not {other:?}"),
                },
            };
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
        // A resource already gone needs no call, only its record dropped.
        for slot in &observation.slots {
            if matches!(slot.decision, Decision::AlreadyAbsent) {
                ledger.rows.remove(&row_of(&slot.subject));
            }
        }
        // A create that failed for sure leaves nothing behind: drop its intent.
        for f in &result.failed {
            if f.step == Step::Create && !f.error.may_have_been_sent {
                ledger.rows.remove(&row_of(&f.resource));
            }
        }
        for row in &observation.forgotten {
            ledger.rows.remove(row);
        }
        self.store.save_ledger(fleet.name(), &ledger)?;

        // The cache: what exists now, by the last sighting of each resource.
        self.save_cache(
            fleet.name(),
            observation
                .slots
                .iter()
                .zip(finals.iter().map(Option::as_ref)),
        )?;

        result.sort();
        debug_assert!(result.check_disjoint().is_ok());
        Ok(result)
    }

    /// The work of one node, as a future that makes the provider calls.
    fn job<'a>(
        &'a self,
        plan: &'a Plan,
        slot: &'a Slot,
        work: Work,
        traits: KindTraits,
        world: &World,
        marker: &'a Marker,
    ) -> BoxFuture<'a, Done> {
        let backend = Arc::clone(
            self.backends
                .get(slot.provider)
                .expect("observed slots have a backend"),
        );
        let region = slot.subject.region.clone();
        let kind = slot.kind;
        let name = slot.subject.name.clone();
        // Only what this node reads from the world travels with it.
        let mut env = World::default();
        let mut secrets_needed: Vec<(KeyId, &'static str, String, String)> = Vec::new();
        if let Target::Present(spec) = &slot.target {
            for dep in spec.0.deps() {
                let key = dep.key();
                if let Some(h) = world.handles.get(&key) {
                    env.handles.insert(key, h.clone());
                }
                if let Some(o) = world.observed.get(&key) {
                    env.observed.insert(key, Arc::clone(o));
                }
                if let Dep::Secret(key) = dep
                    && let (Some(h), Some(i)) =
                        (world.handles.get(&key), plan.fleet().index_of(key))
                {
                    let r = &plan.fleet().inner.resources[i];
                    secrets_needed.push((
                        key,
                        r.reference.provider,
                        r.region.to_owned(),
                        h.clone(),
                    ));
                }
            }
        }
        let existing = match &slot.seen {
            Seen::Present { sighting, .. } => Some(sighting.clone()),
            _ => None,
        };
        let fields = slot
            .index
            .map(|i| plan.fleet().inner.resources[i].kind.fields)
            .unwrap_or(&[]);
        let decision = slot.decision.clone();
        let target = slot.target.clone();
        Box::pin(async move {
            let (clock, retry) = (&*self.clock, self.retry);
            let readable = traits.readable;
            match (work, decision, target) {
                (Work::Delete | Work::DeleteOld, ..) => {
                    let handle = existing.expect("a delete is of something seen").handle;
                    self.delete_owned(&*backend, kind, &region, &handle, readable, marker)
                        .await
                }
                (Work::CreateNew, _, Target::Present(spec))
                | (Work::Build, Decision::Create, Target::Present(spec)) => {
                    let step = if work == Work::CreateNew {
                        Step::Replace
                    } else {
                        Step::Create
                    };
                    let settled = match self.settle_with_secrets(&spec, env, &secrets_needed).await
                    {
                        Ok(s) => s,
                        Err(e) => return Done::Failed(step, e),
                    };
                    let settled_spec =
                        SettledSpec::erased(kind, &*settled, spec.0.settled_json_fn());
                    // The resource this one replaces, if any: a create that may have
                    // landed is looked for among the others of its name.
                    let replaced = existing.as_ref().map(|s| s.handle.as_str());
                    match self
                        .create_or_find(
                            &*backend,
                            (kind, &region, &name),
                            settled_spec,
                            marker,
                            replaced,
                        )
                        .await
                    {
                        Ok(sighting) => Done::Built {
                            change: if work == Work::CreateNew {
                                Change::Replaced
                            } else {
                                Change::Created
                            },
                            sighting: Some(sighting.without_marker()),
                        },
                        Err(e) => Done::Failed(step, e),
                    }
                }
                (Work::Build, Decision::Existing { .. }, Target::Present(spec)) => {
                    let sighting = existing.expect("an existing resource was seen");
                    // Decide again, now that what it depends on has run.
                    let target = spec.0.lenient_json(&env);
                    let repair = repair_of(&divergence(fields, &target, sighting.reported()));
                    if repair == Repair::Nothing {
                        return Done::Built {
                            change: Change::Unchanged,
                            sighting: Some(sighting),
                        };
                    }
                    let step = if repair == Repair::Update {
                        Step::Update
                    } else {
                        Step::Replace
                    };
                    let settled = match self.settle_with_secrets(&spec, env, &secrets_needed).await
                    {
                        Ok(s) => s,
                        Err(e) => return Done::Failed(step, e),
                    };
                    let settled_spec =
                        SettledSpec::erased(kind, &*settled, spec.0.settled_json_fn());
                    if repair == Repair::Update {
                        return match with_retries(clock, retry, true, || {
                            backend.update(kind, &region, &sighting.handle, settled_spec)
                        })
                        .await
                        {
                            Ok(s) => Done::Built {
                                change: Change::Updated,
                                sighting: Some(s.without_marker()),
                            },
                            Err(e) => Done::Failed(Step::Update, e),
                        };
                    }
                    // A replace found only now (a dependency changed under a field that
                    // cannot change in place): both steps here, in the allowed order.
                    let create_first = traits.create_first;
                    if !create_first
                        && let Done::Failed(_, e) = self
                            .delete_owned(
                                &*backend,
                                kind,
                                &region,
                                &sighting.handle,
                                readable,
                                marker,
                            )
                            .await
                    {
                        return Done::Failed(Step::Replace, e);
                    }
                    let created = match self
                        .create_or_find(
                            &*backend,
                            (kind, &region, &name),
                            settled_spec,
                            marker,
                            Some(&sighting.handle),
                        )
                        .await
                    {
                        Ok(s) => s.without_marker(),
                        Err(e) => return Done::Failed(Step::Replace, e),
                    };
                    if create_first
                        && let Done::Failed(_, e) = self
                            .delete_owned(
                                &*backend,
                                kind,
                                &region,
                                &sighting.handle,
                                readable,
                                marker,
                            )
                            .await
                    {
                        return Done::Failed(Step::Replace, e);
                    }
                    Done::Built {
                        change: Change::Replaced,
                        sighting: Some(created),
                    }
                }
                (work, decision, _) => unreachable!("no job for {work:?} of {decision:?}"),
            }
        })
    }

    /// Reads the secret values a spec composes (the only inbound plaintext path), then
    /// settles it. The values live in this call's environment only.
    async fn settle_with_secrets(
        &self,
        spec: &DynSpec,
        mut env: World,
        secrets: &[(KeyId, &'static str, String, String)],
    ) -> Result<Box<dyn Any + Send + Sync>, BackendError> {
        for (key, provider, region, handle) in secrets {
            let backend = self.backends.get(provider).ok_or_else(|| {
                BackendError::invalid(format!("no {provider} backend to read a secret from"))
            })?;
            let value = with_retries(&*self.clock, self.retry, true, || {
                backend.secret_value(region, handle)
            })
            .await?;
            env.secrets.insert(*key, value);
        }
        spec.0.settle_dyn(&env).map_err(|not_yet: NotYet| {
            BackendError::invalid(format!(
                "cannot be settled: {not_yet}, which this apply did not create; apply it first or declare it"
            ))
        })
    }

    /// Deletes a resource after reading its marker again.
    /// Creates a resource. When the create fails in a way that may have reached the
    /// provider (a lost response, a timeout), looks for it before calling it failed: a
    /// resource of that name, carrying this fleet's marker, other than `replaced` (the
    /// one a create-first replace is about to delete), is the one this call made. Without
    /// the look, a landed create would be left behind unrecorded — for a kind whose names
    /// may repeat, as a twin of the resource it was meant to replace.
    async fn create_or_find(
        &self,
        backend: &dyn Backend,
        (kind, region, name): (&'static str, &str, &str),
        spec: SettledSpec<'_>,
        marker: &Marker,
        replaced: Option<&str>,
    ) -> Result<Sighting, BackendError> {
        let error = match backend.create(kind, region, name, spec, marker).await {
            Ok(sighting) => return Ok(sighting),
            Err(e) if !e.may_have_been_sent => return Err(e),
            Err(e) => e,
        };
        let (clock, retry) = (&*self.clock, self.retry);
        let Ok(listed) = with_retries(clock, retry, true, || backend.list(kind, region)).await
        else {
            return Err(error);
        };
        for candidate in listed
            .iter()
            .filter(|l| l.name == name && Some(l.handle.as_str()) != replaced)
        {
            let ours = with_retries(clock, retry, true, || {
                backend.ownership(kind, region, &candidate.handle)
            })
            .await
            .is_ok_and(|tags| matches!(marker.verdict(&tags), Ownership::Ours));
            if !ours {
                continue;
            }
            if let Ok(sighting) = with_retries(clock, retry, true, || {
                backend.read(kind, region, &candidate.handle)
            })
            .await
            {
                return Ok(sighting);
            }
        }
        Err(error)
    }

    async fn delete_owned(
        &self,
        backend: &dyn Backend,
        kind: &'static str,
        region: &str,
        handle: &str,
        readable: bool,
        marker: &Marker,
    ) -> Done {
        let (clock, retry) = (&*self.clock, self.retry);
        if readable {
            match with_retries(clock, retry, true, || {
                backend.ownership(kind, region, handle)
            })
            .await
            {
                Ok(tags) => match marker.verdict(&tags) {
                    Ownership::Ours => {}
                    other => {
                        return Done::Failed(
                            Step::Claim,
                            BackendError::new(
                                ErrorKind::Conflict,
                                format!(
                                    "no longer carries this fleet's marker ({other:?}); not deleted"
                                ),
                            ),
                        );
                    }
                },
                Err(e) if e.kind == ErrorKind::NotFound => {
                    return Done::Pruned {
                        already_absent: true,
                    };
                }
                Err(e) => return Done::Failed(Step::Delete, e),
            }
        }
        match with_retries(clock, retry, true, || backend.delete(kind, region, handle)).await {
            Ok(()) => Done::Pruned {
                already_absent: false,
            },
            Err(e) if e.kind == ErrorKind::NotFound => Done::Pruned {
                already_absent: true,
            },
            Err(e) => Done::Failed(Step::Delete, e),
        }
    }
}

#[derive(Clone, Debug)]
enum Done {
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
            Done::Built {
                change: Change::Created,
                ..
            } => "created",
            Done::Built {
                change: Change::Updated,
                ..
            } => "updated",
            Done::Built {
                change: Change::Replaced,
                ..
            } => "replaced",
            Done::Built {
                change: Change::Unchanged,
                ..
            } => "unchanged",
            Done::Pruned { .. } => "deleted",
            Done::NotAttempted(..) => "not attempted",
            Done::Failed(..) => "failed",
        }
    }
}

#[derive(Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per node of one apply; boxing buys nothing"
)]
enum NodeState {
    Waiting,
    Running,
    Deferred,
    Done(Done),
}

/// What a backend's capabilities say of one node's kind, read once per run rather
/// than asked of the backend for every call.
#[derive(Clone, Copy, Debug)]
struct KindTraits {
    /// Its tags can be read, so ownership can be checked before a delete.
    readable: bool,
    /// Names need not be unique: a replace may create before it deletes.
    create_first: bool,
}

/// For each node, the longest chain of nodes that waits on it, itself included.
fn heights(waits_on: &[Vec<usize>], dependants: &[Vec<usize>]) -> Vec<usize> {
    let n = waits_on.len();
    let mut left: Vec<usize> = waits_on.iter().map(Vec::len).collect();
    let mut order: Vec<usize> = (0..n).filter(|&v| left[v] == 0).collect();
    let mut next = 0;
    while next < order.len() {
        let v = order[next];
        next += 1;
        for &d in &dependants[v] {
            left[d] -= 1;
            if left[d] == 0 {
                order.push(d);
            }
        }
    }
    let mut height = vec![1; n];
    for &v in order.iter().rev() {
        height[v] = 1 + dependants[v].iter().map(|&d| height[d]).max().unwrap_or(0);
    }
    height
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
