//! What became of an attempt and its operation: the node's response (§3.3, §4),
//! classification from the recorded evidence and the move it decides (§5, §5.1,
//! §10.10), completion moving Applied (§4.1); and recovery-admin's accounting
//! decision for an attempt whose response was lost (§5.2).

use crate::contract::accounting::{self, DecisionFacts, ExecutorStop, TransportDeadline};
use crate::contract::classify::{self, Classification, ClassifyInput, RetryConditions};
use crate::contract::drift;
use crate::contract::evidence::{
    AttemptRecord, ObservationPurpose, ResponseClass, RestoreStatus, completion_verdict,
};
use crate::contract::gate::{self, Mutation};
use crate::contract::operation::{
    self, OperationKind, OperationState, OwnerToken, TransitionFacts,
};
use crate::contract::plan::Stage;
use crate::contract::{InstantMs, Role};
use crate::store::acts::observations::{drift_rules, set_open_drift};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{
    authority_now, installation, lock_machine, observations_after, read_attempts, read_op,
    read_plan, recorded_reads, require_role, set_op_state, standing_approval,
};
use crate::store::rows::{records, token_from};
use crate::store::sql::{Tx, query};
use crate::store::transaction::{Entry, R, append};
use crate::store::{AccountingRequest, Actor, HookPoint, StoreError, StoreResult};

impl SqlStore {
    /// Classify the operation from the recorded evidence (§5) and perform the move it
    /// decides, as its current owner; completed moves Applied and advances the
    /// baseline revision (§4.1), failed runs the drift rules on the counting
    /// observation (§6.1).
    pub(in crate::store) async fn classify(
        &self,
        op_id: &str,
        token: OwnerToken,
    ) -> StoreResult<Classification> {
        const ACT: &str = "classifying";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_op(tx, op_id).await?.machine_id;
                let machine = lock_machine(tx, &machine_id).await?;
                let inst = installation(tx, true).await?;
                let op = read_op(tx, op_id).await?;
                if op.owner != token || token.epoch != inst.epoch {
                    let reason = "only the current owner classifies its operation";
                    return Err(refused(ACT, reason).into());
                }
                if op.state.is_terminal() {
                    return Err(refused(ACT, format!("the operation is {}", op.state)).into());
                }
                let plan = read_plan(tx, &op.plan_id).await?;
                let approval = standing_approval(tx, &plan.id).await?;
                let now = self.store_time(tx).await?;
                let attempts = read_attempts(tx, op_id).await?;
                let recs = records(&attempts);
                let counting = counting_observation(tx, &op, &plan, &attempts).await?;
                let recorded = Recorded {
                    machine: &machine,
                    inst: &inst,
                    op: &op,
                    plan: &plan,
                    approval: approval.as_ref(),
                    attempts: &attempts,
                    now,
                };
                let (c, facts) = decide(&recorded, &recs, counting.as_ref())?;
                let rev = append(
                    tx,
                    &machine_id,
                    now,
                    Entry::token(&token, "classification")
                        .op(op_id)
                        .detail(format!("{c}")),
                )
                .await?;
                query("UPDATE operations SET last_fact_revision = $2 WHERE id = $1")
                    .bind(op_id)
                    .bind(rev)
                    .execute(tx)
                    .await?;
                let state = settle(tx, &recorded, token, c, &facts, rev).await?;
                if state == OperationState::Completed {
                    complete(tx, &recorded, token).await?;
                }
                if state == OperationState::Failed
                    && let Some(o) = counting.as_ref()
                    && let Some(d) = o.digest.as_deref()
                {
                    let entry = Entry::token(&token, "drift").op(op_id);
                    let source = drift::DriftSource::FailedCompletion;
                    drift_rules(tx, &machine, o.basis, d, now, entry, source).await?;
                }
                Ok(c)
            })
        })
        .await
    }

    /// [`Store::record_accounting_decision`](crate::store::Store::record_accounting_decision):
    /// record a §5.2 accounting decision (recovery-admin) after checking its three conditions.
    pub(in crate::store) async fn record_accounting_decision(
        &self,
        actor: &Actor,
        request: AccountingRequest,
    ) -> StoreResult<()> {
        const ACT: &str = "recording an accounting decision";
        let request = &request;
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_op(tx, &request.operation).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                let allowed = [
                    Role::Author,
                    Role::Publisher,
                    Role::Approver,
                    Role::RecoveryAdmin,
                    Role::Automation,
                ];
                require_role(tx, actor, &allowed, ACT).await?;
                self.hook(HookPoint::AccountingLocked {
                    operation: request.operation.clone(),
                })
                .await;
                let attempts = read_attempts(tx, &request.operation).await?;
                let a = attempts
                    .iter()
                    .find(|a| a.attempt_no == i64::from(request.attempt))
                    .ok_or_else(|| {
                        not_found(
                            "attempt",
                            &format!("{}#{}", request.operation, request.attempt),
                        )
                    })?;
                if a.response.from_target() || a.accounted_by_decision {
                    return Err(refused(ACT, "the attempt is already accounted for").into());
                }
                let takeover = query(
                    "SELECT at_ms FROM timeline WHERE machine_id = $1 AND operation_id = $2 \
                     AND kind = 'takeover' AND revision > $3 ORDER BY revision LIMIT 1",
                )
                .bind(&machine_id)
                .bind(&request.operation)
                .bind(a.revision)
                .fetch_optional(tx)
                .await?;
                let stop = match takeover {
                    Some(r) => ExecutorStop::TakenOver {
                        at: InstantMs(u(r.try_get(0)?)),
                    },
                    None => ExecutorStop::NotStopped,
                };
                let reads = recorded_reads(tx, &machine_id).await?;
                let now = self.store_time(tx).await?;
                let decision = accounting::check_decision(&DecisionFacts {
                    decider: actor.role,
                    stop,
                    deadline: TransportDeadline::Known(InstantMs(u(a.transport_deadline_ms))),
                    settle_floor: request.settle_floor,
                    reads: &reads,
                    now: InstantMs(u(now)),
                    version_change_explanation: request.explanation.as_deref(),
                })
                .map_err(|e| StoreError::AccountingRefused {
                    condition: e.condition(),
                    reason: e.to_string(),
                })?;
                let detail = format!(
                    "attempt {} accounted by decision (a judgement, not proof): {decision}; \
                     settle floor {}; explanation: {}",
                    request.attempt,
                    request.settle_floor,
                    request.explanation.as_deref().unwrap_or("none")
                );
                let entry = Entry::by(actor, "accounting")
                    .op(&request.operation)
                    .detail(detail);
                let rev = append(tx, &machine_id, now, entry).await?;
                query(
                    "UPDATE attempts SET accounted_by_decision = TRUE, decision_revision = $3 \
                     WHERE operation_id = $1 AND attempt_no = $2",
                )
                .bind(&request.operation)
                .bind(i64::from(request.attempt))
                .bind(rev)
                .execute(tx)
                .await?;
                Ok(())
            })
        })
        .await
    }
}

impl SqlStore {
    /// [`Store::record_response`](crate::store::Store::record_response): record the class of an
    /// attempt's response (or its transport outcome).
    pub(in crate::store) async fn record_response(
        &self,
        op_id: &str,
        attempt: u32,
        token: OwnerToken,
        response: ResponseClass,
    ) -> StoreResult<OperationState> {
        self.record_response_text(op_id, attempt, token, response, None)
            .await
    }

    /// [`Store::record_response_text`](crate::store::Store::record_response_text): record the
    /// class of an attempt's response with the node's message as the dispatch client gave it
    /// (already redacted); otherwise as `Store::record_response`.
    pub(in crate::store) async fn record_response_text(
        &self,
        op_id: &str,
        attempt: u32,
        token: OwnerToken,
        response: ResponseClass,
        text: Option<String>,
    ) -> StoreResult<OperationState> {
        const ACT: &str = "recording a response";
        let text = bounded_text(text);
        if response == ResponseClass::Pending {
            return Err(refused(ACT, "pending is not a response"));
        }
        let text = &text;
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_op(tx, op_id).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                let op = read_op(tx, op_id).await?;
                let mut attempts = read_attempts(tx, op_id).await?;
                let idx = attempts
                    .iter()
                    .position(|a| a.attempt_no == i64::from(attempt))
                    .ok_or_else(|| not_found("attempt", &format!("{op_id}#{attempt}")))?;
                if attempts[idx].response.from_target() {
                    return Err(refused(
                        ACT,
                        "the node's answer to this attempt is already recorded",
                    )
                    .into());
                }
                // The answer is the attempt's: it is recorded under the token that made the
                // attempt, which after a takeover is no longer the owner's (the fence stops
                // new attempts, not answers to requests already sent, §3.4).
                let attempt_token = attempt_owner(tx, op_id, attempt).await?;
                if attempt_token != token {
                    return Err(refused(
                        ACT,
                        format!(
                            "the answer to attempt {attempt} is its sender's to record: {} \
                             generation {}, not {} generation {}",
                            attempt_token.controller,
                            attempt_token.generation,
                            token.controller,
                            token.generation
                        ),
                    )
                    .into());
                }
                let now = self.store_time(tx).await?;
                let rev = append(
                    tx,
                    &machine_id,
                    now,
                    Entry::token(&attempt_token, "response")
                        .op(op_id)
                        .detail(format!("attempt {attempt}: {}", response_name(response))),
                )
                .await?;
                query(
                    "UPDATE attempts SET response = $3, response_revision = $4, \
                     response_text = $5 WHERE operation_id = $1 AND attempt_no = $2",
                )
                .bind(op_id)
                .bind(i64::from(attempt))
                .bind(response_name(response))
                .bind(rev)
                .bind(text)
                .execute(tx)
                .await?;
                query("UPDATE operations SET last_fact_revision = $2 WHERE id = $1")
                    .bind(op_id)
                    .bind(rev)
                    .execute(tx)
                    .await?;
                attempts[idx].response = response;
                let latest = idx + 1 == attempts.len();
                if op.state == OperationState::Sending && latest {
                    return after_response(tx, &op, &attempts, now).await;
                }
                Ok(op.state)
            })
        })
        .await
    }
}

/// The token attempt `attempt` of `op_id` was made under.
async fn attempt_owner(tx: &mut Tx, op_id: &str, attempt: u32) -> R<OwnerToken> {
    let by = query(
        "SELECT owner_controller, owner_generation, owner_epoch FROM attempts \
         WHERE operation_id = $1 AND attempt_no = $2",
    )
    .bind(op_id)
    .bind(i64::from(attempt))
    .fetch_one(tx)
    .await?;
    let controller: Vec<u8> = by.try_get("owner_controller")?;
    let epoch: Vec<u8> = by.try_get("owner_epoch")?;
    Ok(token_from(
        &controller,
        by.try_get("owner_generation")?,
        &epoch,
    )?)
}

/// A sending operation once the response to its latest attempt is recorded: the
/// first of verifying, rejected and unresolved the §4 table allows on the recorded
/// attempts, if any. Returns the operation's state after.
async fn after_response(
    tx: &mut Tx,
    op: &OperationRow,
    attempts: &[AttemptRow],
    now: i64,
) -> R<OperationState> {
    let recs = records(attempts);
    let facts = TransitionFacts::quiet(OperationKind::ApplyConfig, &recs);
    let state = op.state;
    for to in [
        OperationState::Verifying,
        OperationState::Rejected,
        OperationState::Unresolved,
    ] {
        if operation::check_transition(Some(state), to, &facts).is_ok() {
            set_op_state(tx, &op.id, to).await?;
            let entry = Entry::controller(op.owner.controller, "state_changed")
                .op(&op.id)
                .detail(format!("{state} -> {to}"));
            append(tx, &op.machine_id, now, entry).await?;
            return Ok(to);
        }
    }
    Ok(state)
}

/// The longest node message an attempt keeps; longer ones are cut at a character
/// boundary.
const RESPONSE_TEXT_LIMIT: usize = 2048;

fn bounded_text(text: Option<String>) -> Option<String> {
    text.map(|t| {
        if t.len() <= RESPONSE_TEXT_LIMIT {
            return t;
        }
        let mut end = RESPONSE_TEXT_LIMIT;
        while !t.is_char_boundary(end) {
            end -= 1;
        }
        t[..end].to_owned()
    })
}

/// What a classification reads, under the machine row's lock.
struct Recorded<'a> {
    machine: &'a MachineRow,
    inst: &'a InstallationRow,
    op: &'a OperationRow,
    plan: &'a PlanRow,
    approval: Option<&'a ApprovalRow>,
    attempts: &'a [AttemptRow],
    now: i64,
}

/// The observation that counts: begun after the commitment, the last attempt and the
/// last accounting entry, with no later-based recorded observation disagreeing with
/// it on a postcondition the plan binds (§4). It is the latest completion or
/// recovery read; when that is a recovery read that agrees with an earlier
/// completion read, which read the digest and the identity and which no later read
/// disagrees with, the completion read counts: a read confirmed by agreeing reads
/// still decides.
async fn counting_observation(
    tx: &mut Tx,
    op: &OperationRow,
    plan: &PlanRow,
    attempts: &[AttemptRow],
) -> R<Option<ObsRow>> {
    let threshold = attempts
        .iter()
        .flat_map(|a| {
            [
                Some(a.revision),
                a.response_revision.filter(|_| a.response.from_target()),
                a.decision_revision,
            ]
        })
        .flatten()
        .chain([op.commit_revision])
        .max()
        .unwrap_or(op.commit_revision);
    let later = observations_after(tx, &op.machine_id, threshold).await?;
    let stands = |k: usize| {
        !later[k + 1..]
            .iter()
            .any(|o| disagrees_on_postcondition(plan, &later[k], o))
    };
    let latest = later.iter().rposition(|o| {
        matches!(
            o.purpose,
            ObservationPurpose::Completion | ObservationPurpose::Recovery
        )
    });
    let confirmed_completion = || {
        later
            .iter()
            .rposition(|o| o.purpose == ObservationPurpose::Completion)
            .filter(|&k| {
                let read = &later[k];
                read.digest.is_some()
                    && (read.smbios_uuid.is_some() || read.node_id.is_some())
                    && stands(k)
            })
    };
    let counting = match latest {
        Some(k) if later[k].purpose == ObservationPurpose::Recovery => {
            confirmed_completion().or(Some(k))
        }
        other => other,
    };
    Ok(counting.filter(|&k| stands(k)).map(|k| later[k].clone()))
}

/// The classification (§5) of the recorded facts, and the facts the §4 table reads
/// for the move it decides.
fn decide<'r>(
    recorded: &Recorded<'_>,
    recs: &'r [AttemptRecord],
    counting: Option<&ObsRow>,
) -> Result<(Classification, TransitionFacts<'r>), StoreError> {
    let Recorded {
        machine,
        inst,
        op,
        plan,
        approval,
        attempts,
        now,
    } = *recorded;
    let observation = counting.map(|o| contract_observation(plan, o, machine.assignment_revision));
    let authority = authority_now(plan, approval, now, inst.epoch, Stage::Attempt);
    let gate_open = gate::check_gate(Mutation::Attempt, &gate_facts(machine, plan, inst)?).is_ok();
    let withdrawal = authority.as_ref().err().and_then(|e| e.withdrawal());
    let verification_passed = attempts
        .last()
        .is_some_and(|a| now >= a.verification_deadline_ms);
    let transport_passed = attempts
        .last()
        .is_some_and(|a| now >= a.transport_deadline_ms);
    let restore = if op.restored {
        RestoreStatus::ScopeUnaccounted
    } else {
        RestoreStatus::NotRestored
    };
    let c = classify::classify(&ClassifyInput {
        attempts: recs,
        observation,
        withdrawal,
        cancel_resolution: false,
        retry: RetryConditions {
            attempts_left: op.attempts < plan.max_attempts,
            approval_passes: authority.is_ok(),
            gate_open,
        },
        verification_deadline_passed: verification_passed,
        restore,
    });
    let facts = TransitionFacts {
        withdrawal,
        transport_deadline_passed: transport_passed,
        completion: completion_verdict(observation.as_ref()),
        verification_deadline_passed: verification_passed,
        safe_to_retry: c == Classification::SafeToRetry,
        restore,
        ..TransitionFacts::quiet(OperationKind::ApplyConfig, recs)
    };
    Ok((c, facts))
}

/// Performs the move classification `c` decides, where the §4 table allows it: a
/// committed operation whose authority was withdrawn becomes unresolved first; a safe
/// retry records who classified it and when (the classification's revision `rev`).
/// Returns the operation's state after.
async fn settle(
    tx: &mut Tx,
    recorded: &Recorded<'_>,
    token: OwnerToken,
    c: Classification,
    facts: &TransitionFacts<'_>,
    rev: i64,
) -> R<OperationState> {
    let (op, machine_id, now) = (recorded.op, &recorded.op.machine_id, recorded.now);
    let op_id = op.id.as_str();
    let mut state = op.state;
    let target = match c {
        Classification::Completed => Some(OperationState::Completed),
        Classification::Failed(_) => Some(OperationState::Failed),
        Classification::Rejected => Some(OperationState::Rejected),
        Classification::Cancelled(_) => Some(OperationState::Cancelled),
        Classification::Unresolved(_) => Some(OperationState::Unresolved),
        Classification::SafeToRetry => None,
    };
    if state == OperationState::Committed
        && facts.withdrawal.is_some()
        && operation::check_transition(Some(state), OperationState::Unresolved, facts).is_ok()
    {
        set_op_state(tx, op_id, OperationState::Unresolved).await?;
        let detail = "committed -> unresolved: authority withdrawn after commitment";
        let entry = Entry::token(&token, "state_changed")
            .op(op_id)
            .detail(detail);
        append(tx, machine_id, now, entry).await?;
        state = OperationState::Unresolved;
    }
    if let Some(to) = target.filter(|to| *to != state)
        && operation::check_transition(Some(state), to, facts).is_ok()
    {
        set_op_state(tx, op_id, to).await?;
        let entry = Entry::token(&token, "state_changed")
            .op(op_id)
            .detail(format!("{state} -> {to}"));
        append(tx, machine_id, now, entry).await?;
        state = to;
    }
    if c == Classification::SafeToRetry && state == OperationState::Unresolved {
        query(
            "UPDATE operations SET retry_revision = $2, retry_controller = $3, \
             retry_generation = $4, retry_epoch = $5 WHERE id = $1",
        )
        .bind(op_id)
        .bind(rev)
        .bind(controller_bytes(token.controller))
        .bind(i(token.generation))
        .bind(token.epoch.to_bytes().to_vec())
        .execute(tx)
        .await?;
    }
    Ok(state)
}

/// A completed operation: Applied moves to its release and digest and the baseline
/// revision to the entry that says so (§4.1); a revert closes the drift record it
/// binds.
async fn complete(tx: &mut Tx, recorded: &Recorded<'_>, token: OwnerToken) -> R<()> {
    let Recorded {
        machine,
        plan,
        op,
        now,
        ..
    } = *recorded;
    let (op_id, machine_id) = (op.id.as_str(), &op.machine_id);
    let detail = format!(
        "release {} at digest {}",
        plan.release_id, plan.artifact_digest
    );
    let entry = Entry::token(&token, "applied_changed")
        .op(op_id)
        .plan(&plan.id)
        .detail(detail);
    let applied = append(tx, machine_id, now, entry).await?;
    query(
        "UPDATE machines SET applied_release = $2, applied_digest = $3, \
         applied_source = $4, baseline_revision = $5 WHERE id = $1",
    )
    .bind(machine_id)
    .bind(&plan.release_id)
    .bind(&plan.artifact_digest)
    .bind(op_id)
    .bind(applied)
    .execute(tx)
    .await?;
    if let Some(opened) = plan.bound_drift.filter(|r| Some(*r) == machine.open_drift) {
        let detail = format!("record r{opened} closed (reverted) by this operation's completion");
        let entry = Entry::token(&token, "drift_closed")
            .op(op_id)
            .detail(detail);
        append(tx, machine_id, now, entry).await?;
        set_open_drift(tx, machine_id, None).await?;
    }
    Ok(())
}
