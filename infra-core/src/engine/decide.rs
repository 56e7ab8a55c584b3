//! Decisions and the plan report.

use std::collections::VecDeque;

use super::Engine;
use super::model::{
    Decision, Observation, Owner, ReplaceOrder, Seen, Slot, SlotsByIndex, Target, Unobserved,
    World, key_id, row_of,
};
use crate::diverge::divergence_of;
use crate::{
    BackendError, Divergence, ErrorKind, Mutability, NotAttemptedReason, Ownership, Plan, Repair,
    Step, repair_of,
};

impl Engine {
    /// Decides every slot, in a world of what was observed (no secrets).
    pub(super) fn decide(&self, plan: &Plan, observation: &mut Observation) {
        let world = World::of_observation(plan, observation);
        let order = plan
            .build_order()
            .unwrap_or_else(|_| (0..plan.len()).collect());
        let slot_of = SlotsByIndex::of(observation, plan.len());
        let deps = plan.deps();
        // Resources whose handle or state will change in this run, by declared index.
        let mut moving = vec![false; plan.len()];
        let mut visit: Vec<usize> = order.iter().filter_map(|&i| slot_of.get(i)).collect();
        visit
            .extend((0..observation.slots.len()).filter(|s| observation.slots[*s].index.is_none()));
        for s in visit {
            let slot = &observation.slots[s];
            let decision = match (&slot.target, &slot.seen) {
                (_, Seen::Unobserved(Unobserved::Reason(r, why))) => {
                    Decision::Skip(*r, Some(why.clone()))
                }
                (_, Seen::Unobserved(Unobserved::Error(e))) => {
                    Decision::Fail(Step::Observe, e.clone())
                }
                (Target::Present(_), Seen::Absent) => Decision::Create,
                (Target::Present(spec), Seen::Present { sighting, owner }) => {
                    match claim(owner, slot) {
                        Err(e) => refused_claim(plan, slot, owner, e),
                        Ok(()) => {
                            let target = spec.0.lenient_json(&world);
                            let kind_fields = plan.fleet().inner.resources
                                [slot.index.expect("declared")]
                            .kind
                            .fields;
                            let mut fields =
                                divergence_of(kind_fields, &target, |f| sighting.compared(f));
                            if slot.secret_differs == Some(true) {
                                fields.push(Divergence::hidden("valueFrom", Mutability::Mutable));
                            }
                            let pending = slot
                                .index
                                .is_some_and(|i| deps[i].iter().any(|&d| moving[d]));
                            let requested = !observation.replacing.is_empty()
                                && observation.replacing.contains(&row_of(&slot.subject));
                            Decision::Existing {
                                repair: if requested {
                                    Repair::Replace
                                } else {
                                    repair_of(&fields)
                                },
                                fields,
                                pending,
                                replace: None,
                                because: None,
                                requested,
                            }
                        }
                    }
                }
                (Target::Absent, Seen::Absent) | (Target::Orphan, Seen::Absent) => {
                    Decision::AlreadyAbsent
                }
                (Target::Absent, Seen::Present { owner, .. }) => match claim(owner, slot) {
                    Err(e) => refused_claim(plan, slot, owner, e),
                    Ok(()) => Decision::Delete,
                },
                (Target::Orphan, Seen::Present { owner, .. }) => match owner {
                    Owner::Unreadable { .. } => Decision::Skip(
                        NotAttemptedReason::NotPrunable,
                        Some(
                            "its tags cannot be read to prove it is this fleet's, so it is not \
                             deleted on a guess; delete it by hand, or `forget` it"
                                .to_owned(),
                        ),
                    ),
                    _ => match claim(owner, slot) {
                        Err(e) => Decision::Fail(Step::Claim, Box::new(e)),
                        Ok(()) => Decision::Prune,
                    },
                },
            };
            if let Some(i) = slot.index
                && matches!(
                    decision,
                    Decision::Create
                        | Decision::Existing {
                            repair: Repair::Replace | Repair::Update,
                            ..
                        }
                )
            {
                moving[i] = true;
            }
            observation.slots[s].decision = decision;
        }
        self.cascade(plan, observation, &world, &slot_of, deps);
    }

    /// Orders every planned replace, and replaces with it what cannot outlive it: a
    /// dependant of a resource that must be deleted first (it holds the old one), and a
    /// dependant that reads the replaced resource's handle in a field that cannot
    /// change in place.
    fn cascade(
        &self,
        plan: &Plan,
        observation: &mut Observation,
        world: &World,
        slot_of: &SlotsByIndex,
        deps: &[Vec<usize>],
    ) {
        let mut dependants: Vec<Vec<usize>> = vec![Vec::new(); deps.len()];
        for (j, dj) in deps.iter().enumerate() {
            for &i in dj {
                dependants[i].push(j);
            }
        }
        let capabilities = self.capabilities();
        let create_first = |slot: &Slot| {
            capabilities
                .get(slot.provider)
                .is_some_and(|c| c.duplicate_names.contains(slot.kind))
        };
        let mut queue: VecDeque<usize> = (0..observation.slots.len())
            .filter(|&s| {
                matches!(
                    observation.slots[s].decision,
                    Decision::Existing {
                        repair: Repair::Replace,
                        ..
                    }
                )
            })
            .collect();
        while let Some(x) = queue.pop_front() {
            // A replace forced by a delete-first one is delete-first itself: it must be
            // gone before what it holds can go.
            let order = match observation.slots[x].replace_order() {
                Some(forced) => forced,
                None if create_first(&observation.slots[x]) => ReplaceOrder::CreateFirst,
                None => ReplaceOrder::DeleteFirst,
            };
            if let Decision::Existing { replace, .. } = &mut observation.slots[x].decision {
                *replace = Some(order);
            }
            let Some(xi) = observation.slots[x].index else {
                continue;
            };
            let x_name = observation.slots[x].subject.to_string();
            for &j in &dependants[xi] {
                let Some(ds) = slot_of.get(j) else { continue };
                let slot = &observation.slots[ds];
                let already = slot.replace_order();
                let cascades = match &slot.decision {
                    Decision::Existing {
                        repair: Repair::Replace,
                        ..
                    } => {
                        // Already replaced: only its order may have to change.
                        order == ReplaceOrder::DeleteFirst
                            && already != Some(ReplaceOrder::DeleteFirst)
                    }
                    Decision::Existing { .. } => {
                        order == ReplaceOrder::DeleteFirst
                            || reads_in_place_only(plan, slot, xi, world)
                    }
                    _ => false,
                };
                if !cascades {
                    continue;
                }
                if let Decision::Existing {
                    repair,
                    because,
                    replace,
                    ..
                } = &mut observation.slots[ds].decision
                {
                    *repair = Repair::Replace;
                    if because.is_none() {
                        *because = Some(x_name.clone());
                    }
                    *replace =
                        (order == ReplaceOrder::DeleteFirst).then_some(ReplaceOrder::DeleteFirst);
                    queue.push_back(ds);
                }
            }
        }
    }
}

/// Whether a present resource may be touched.
fn claim(owner: &Owner, slot: &Slot) -> Result<(), BackendError> {
    match owner {
        Owner::Ours | Owner::Unreadable { in_ledger: true } => Ok(()),
        Owner::Unreadable { in_ledger: false } => Err(BackendError::new(
            ErrorKind::Conflict,
            format!(
                "{} exists, its tags cannot be read to prove it is this fleet's, and the ledger \
                 does not list it: left alone. Delete it, or take it in with `import ADDRESS CLOUD_ID`",
                slot.subject
            ),
        )),
        Owner::Not(Ownership::OtherFleet { fleet }) => Err(BackendError::new(
            ErrorKind::Conflict,
            format!(
                "{} is declared and exists, but carries the marker of fleet `{fleet}`: left alone. \
                 Rename it here, or release it from the other fleet",
                slot.subject
            ),
        )),
        Owner::Not(_) => Err(BackendError::new(
            ErrorKind::Conflict,
            format!(
                "{} is declared and exists, but does not carry the `managed-by-infra` marker, so \
                 it is not this fleet's: it will not be created, changed or deleted. Delete it and \
                 let the fleet create it, or rename the declaration",
                slot.subject
            ),
        )),
    }
}

/// The decision for a declared resource that exists but may not be claimed: excluded,
/// when it carries no marker and the declaration's exclusion list names it; a failure
/// of the claim otherwise.
fn refused_claim(plan: &Plan, slot: &Slot, owner: &Owner, e: BackendError) -> Decision {
    let s = &slot.subject;
    match plan
        .fleet()
        .exclusion(&s.provider, &s.kind, &s.name, &s.region)
    {
        Some(exclusion) if *owner == Owner::Not(Ownership::Unmarked) => Decision::Skip(
            NotAttemptedReason::Excluded,
            Some(format!(
                "exists without this fleet's marker and is excluded by the declaration: {}",
                exclusion.reason
            )),
        ),
        _ => Decision::Fail(Step::Claim, Box::new(e)),
    }
}

/// Whether `slot` reads the handle of declared resource `x` in a field that forces a
/// replace: its target, settled with `x`'s handle changed, differs in such a field.
fn reads_in_place_only(plan: &Plan, slot: &Slot, x: usize, world: &World) -> bool {
    let (Target::Present(spec), Some(i)) = (&slot.target, slot.index) else {
        return false;
    };
    let key = key_id(plan, x);
    let mut moved = world.clone();
    moved.handles.insert(key, "\u{1}a new handle".to_owned());
    let before = spec.0.lenient_json(world);
    let after = spec.0.lenient_json(&moved);
    plan.fleet().inner.resources[i].kind.fields.iter().any(|f| {
        f.mutability == Mutability::ForcesReplace && before.get(f.name) != after.get(f.name)
    })
}
