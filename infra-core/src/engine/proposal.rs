//! Proposals: a plan made from one observation, carried out exactly as it was shown.
//!
//! [`Engine::propose`] observes and decides; [`Engine::carry_out`] runs those very
//! decisions, with no second look. Between the two, a person may take their time at a
//! prompt, or a pipeline may keep the plan in a file ([`PlanFile`]) and apply it in a
//! later job. [`Engine::recheck`] looks again and refuses, naming what changed, when the
//! declaration, the records or any resource in play is no longer what the plan was made
//! from: a plan is never silently made again.
//!
//! The comparison runs over a [`Fingerprint`]: SHA-256 digests of the declaration (the
//! plan's deterministic JSON, with the accounts the fleet names), of the records, and of
//! each resource in play — what was seen of it and what its target settles to. Neither
//! the fingerprint nor a plan file holds a secret value: observed and reported states
//! never hold one, and a plan settles without secret values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::model::{Observation, Seen, Slot, Target, Unobserved, World};
use super::{ApplyError, Engine, Options, Outcome, PlanReport};
use crate::{Ledger, Plan, Subject};

/// A plan made from one observation, ready to be carried out exactly as shown.
#[derive(Clone)]
pub struct Proposal {
    plan: Plan,
    options: Options,
    observation: Observation,
    report: PlanReport,
}

impl std::fmt::Debug for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proposal")
            .field("fleet", &self.report.fleet)
            .field("resources", &self.report.changes.len())
            .finish()
    }
}

impl Proposal {
    /// What the proposal would do.
    pub fn report(&self) -> &PlanReport {
        &self.report
    }

    /// The options it was made with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The plan (the declaration, or its teardown) it was made from.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Confirms every delete that needed a confirmation by name (a person answered
    /// yes to a question that listed them): the proposal then carries them out.
    pub fn confirm_deletes(&mut self) {
        let rows: Vec<_> = self
            .report
            .unconfirmed_deletes()
            .map(super::model::row_of)
            .collect();
        self.observation.confirmed.extend(rows);
        for c in &mut self.report.changes {
            c.needs_confirmation = false;
        }
    }

    /// Every resource the proposal covers: each declared resource in play and each
    /// orphan of the records, as the apply result will account for them.
    pub fn subjects(&self) -> impl Iterator<Item = &Subject> {
        self.observation.slots.iter().map(|s| &s.subject)
    }

    /// The digests a later look is compared against.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.plan, &self.observation)
    }

    /// The proposal as a plan file: the report shown, the options, and the fingerprint.
    pub fn to_file(&self) -> PlanFile {
        PlanFile {
            plan_file: PLAN_FILE_VERSION.to_owned(),
            fleet: self.report.fleet.clone(),
            teardown: !self.plan.declares_something(),
            options: FileOptions {
                targets: self.options.targets.clone(),
                excludes: self.options.excludes.clone(),
                allow_delete: self.options.allow_delete.clone(),
                replace: self.options.replace.clone(),
                force: self.options.force,
            },
            fingerprint: self.fingerprint(),
            report: self.report.to_json(),
        }
    }
}

/// The version of the plan file format this build writes and reads.
pub const PLAN_FILE_VERSION: &str = "v1";

/// A plan kept in a file (`plan --out FILE`), to be applied as it is (`apply FILE`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanFile {
    /// The format's version (`v1`).
    pub plan_file: String,
    /// The fleet it was made for.
    pub fleet: String,
    /// Whether it tears the fleet down (`plan --destroy`).
    pub teardown: bool,
    /// The options it was made with.
    pub options: FileOptions,
    /// What it was made from.
    pub fingerprint: Fingerprint,
    /// The report that was shown: what applying the file will do.
    pub report: serde_json::Value,
}

/// The options a plan file keeps: those that change what the plan does.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileOptions {
    /// `--target`.
    pub targets: Vec<String>,
    /// `--exclude`.
    pub excludes: Vec<String>,
    /// `--allow-delete`.
    pub allow_delete: Vec<String>,
    /// `--replace` (absent from files written before it existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replace: Vec<String>,
    /// `--force`.
    pub force: bool,
}

impl PlanFile {
    /// The options to apply the file with, at the given parallelism.
    pub fn options(&self, parallelism: usize) -> Options {
        Options {
            force: self.options.force,
            parallelism,
            adaptive: true,
            targets: self.options.targets.clone(),
            excludes: self.options.excludes.clone(),
            allow_delete: self.options.allow_delete.clone(),
            replace: self.options.replace.clone(),
        }
    }
}

/// What a proposal was made from, as digests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fingerprint {
    /// The declaration: the plan's JSON and the accounts the fleet names.
    pub declaration: String,
    /// The records: every ledger row and its mark.
    pub records: String,
    /// Each resource in play, by its address: what was seen, and what its target
    /// settles to.
    pub resources: BTreeMap<String, ResourceDigest>,
}

/// The digests of one resource in play.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceDigest {
    /// What observation found of it.
    pub seen: String,
    /// Its target, settled as far as the observation allows.
    pub target: String,
}

fn digest(value: &serde_json::Value) -> String {
    let mut out = String::with_capacity(64);
    for byte in Sha256::digest(value.to_string().as_bytes()) {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

impl Fingerprint {
    fn of(plan: &Plan, observation: &Observation) -> Fingerprint {
        let accounts: BTreeMap<&str, Vec<&String>> = plan
            .fleet()
            .accounts()
            .iter()
            .map(|(p, a)| (*p, a.iter().collect()))
            .collect();
        let world = World::of_observation(plan, observation);
        Fingerprint {
            declaration: digest(&serde_json::json!({
                "plan": plan.to_json(),
                "accounts": accounts,
            })),
            records: digest(&records_json(&observation.ledger)),
            resources: observation
                .slots
                .iter()
                .map(|slot| {
                    (
                        slot.subject.to_string(),
                        ResourceDigest {
                            seen: digest(&seen_json(slot)),
                            target: digest(&target_json(slot, &world)),
                        },
                    )
                })
                .collect(),
        }
    }

    /// What changed from `then` to `self`, one sentence each (resources past the
    /// tenth counted, not named); empty when nothing did.
    pub fn changes_since(&self, then: &Fingerprint) -> Vec<String> {
        const NAMED: usize = 10;
        let mut changes = self.all_changes_since(then);
        if changes.len() > NAMED + 2 {
            let more = changes.len() - NAMED;
            changes.truncate(NAMED);
            changes.push(format!("{more} more changes"));
        }
        changes
    }

    fn all_changes_since(&self, then: &Fingerprint) -> Vec<String> {
        let mut changes = Vec::new();
        if self.declaration != then.declaration {
            changes.push(
                "the declaration changed (the fleet's resources, targets or accounts)".to_owned(),
            );
        }
        if self.records != then.records {
            changes.push(
                "the records changed (another run applied, discovered or forgot something)"
                    .to_owned(),
            );
        }
        for (address, before) in &then.resources {
            match self.resources.get(address) {
                None => changes.push(format!("{address} is no longer in play")),
                Some(now) if now.seen != before.seen => {
                    changes.push(format!("{address} changed in the cloud"))
                }
                Some(now) if now.target != before.target => {
                    changes.push(format!("the target of {address} changed"))
                }
                Some(_) => {}
            }
        }
        for address in self.resources.keys() {
            if !then.resources.contains_key(address) {
                changes.push(format!("{address} is now in play"));
            }
        }
        changes
    }
}

fn records_json(ledger: &Ledger) -> serde_json::Value {
    serde_json::json!({
        "rows": ledger.rows.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
        "discovered": ledger.discovered.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
    })
}

/// What observation found of a slot, without the words of an error (which may differ
/// from one call to the next for the same failure).
fn seen_json(slot: &Slot) -> serde_json::Value {
    match &slot.seen {
        Seen::Present { sighting, owner } => serde_json::json!({
            "handle": sighting.handle,
            "reported": sighting.reported(),
            "recalled": sighting.recalled(),
            "observed": sighting.observed_json(),
            "owner": format!("{owner:?}"),
            "secretDiffers": slot.secret_differs,
        }),
        Seen::Absent => serde_json::json!("absent"),
        Seen::Unobserved(Unobserved::Reason(reason, _)) => {
            serde_json::json!({ "notObserved": reason.to_string() })
        }
        Seen::Unobserved(Unobserved::Error(e)) => {
            serde_json::json!({ "error": e.kind, "code": e.code })
        }
    }
}

fn target_json(slot: &Slot, world: &World) -> serde_json::Value {
    match &slot.target {
        Target::Present(spec) => serde_json::Value::Object(spec.0.lenient_json(world)),
        Target::Absent => serde_json::json!("absent"),
        Target::Orphan => serde_json::json!("orphan"),
    }
}

impl Engine {
    /// Observes what `plan` covers and decides what an apply would do, making no
    /// backend write and changing no record: a proposal to show, then carry out.
    pub async fn propose(&self, plan: &Plan, options: &Options) -> Result<Proposal, ApplyError> {
        let observation = self.prepare(plan, options).await?;
        let report = self.report(plan, &observation);
        Ok(Proposal {
            plan: plan.clone(),
            options: options.clone(),
            observation,
            report,
        })
    }

    /// Looks again at everything `proposal` was made from, and refuses with
    /// [`ApplyError::Stale`], naming what changed, unless all of it is as it was.
    pub async fn recheck(&self, proposal: &Proposal) -> Result<(), ApplyError> {
        let now = self.propose(&proposal.plan, &proposal.options).await?;
        self.recheck_against(&now, &proposal.fingerprint())
    }

    /// Refuses `now` unless it was made from what `then` describes.
    pub fn recheck_against(&self, now: &Proposal, then: &Fingerprint) -> Result<(), ApplyError> {
        let changes = now.fingerprint().changes_since(then);
        if changes.is_empty() {
            Ok(())
        } else {
            Err(ApplyError::Stale { changes })
        }
    }

    /// Refuses `proposal` when it would delete or replace a resource declared with
    /// `prevent_destroy` (see [`ApplyError::PreventDestroy`]); `--force` does not lift it.
    pub fn check_protected(&self, proposal: &Proposal) -> Result<(), ApplyError> {
        self.protect(&proposal.plan, &proposal.observation)
    }

    /// The brake's verdict on `proposal`: whether carrying it out would be refused for
    /// removing most of what the fleet manages (see [`ApplyError::Brake`]).
    pub fn check_brake(&self, proposal: &Proposal) -> Result<(), ApplyError> {
        self.brake(&proposal.plan, &proposal.observation, &proposal.options)
    }

    /// Carries out exactly the decisions of `proposal`: `prevent_destroy` and the brake
    /// first, then the calls, then the records.
    pub async fn carry_out(&self, proposal: &Proposal) -> Result<Outcome, ApplyError> {
        self.protect(&proposal.plan, &proposal.observation)?;
        self.brake(&proposal.plan, &proposal.observation, &proposal.options)?;
        let (result, unsaved) = self
            .execute(&proposal.plan, &proposal.observation, &proposal.options)
            .await?;
        Ok(Outcome {
            plan: proposal.report.clone(),
            result,
            unsaved,
        })
    }
}
