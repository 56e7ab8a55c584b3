//! The commands that are acts: made through [`Acts`] (on the store, or through the
//! service with `--server`) and printed the same way whichever road they took.

use std::fmt::Write as _;

use super::{
    BlanketCommand, Command, Config, Failure, InventoryCommand, PlanOptions, PublishArgs,
    RevokeArgs, RunArgs, drift, identity, pretty, recovery, suggesting, timeline, who,
};
use crate::acts::{Acts, ArtifactUpload, Deadlines, PlanRequest, PublishRequest, RunReport};
use crate::contract::SpanMs;
use crate::machine_config::check_machine_config;
use crate::store::{AccountingRequest, BlanketApproval, IdentityKey, MachineSpec};

/// Carries out one act and says what it did; a machine not found is told with the
/// nearest names.
pub(super) async fn on_acts(
    command: Command,
    config: &Config,
    acts: &dyn Acts,
) -> Result<String, Failure> {
    match act(command, config, acts).await {
        Err(Failure::MissingMachine { machine, text }) => {
            Err(suggesting(text, &machine, acts).await)
        }
        done => done,
    }
}

async fn act(command: Command, config: &Config, acts: &dyn Acts) -> Result<String, Failure> {
    let mut out = String::new();
    match command {
        Command::Init(_)
        | Command::Serve(_)
        | Command::ServerCertificate(_)
        | Command::Token { .. } => {
            return Err(Failure::Usage("not an act".into()));
        }
        Command::Principal(command) => {
            out = identity::principal(acts, command).await?;
        }
        Command::Inventory(InventoryCommand::Add(add)) => {
            let actor = acts.actor()?;
            let identity = match (add.smbios_uuid, add.node_id) {
                (Some(u), _) => IdentityKey::SmbiosUuid(u),
                (None, Some(n)) => IdentityKey::NodeId(n),
                (None, None) => {
                    return Err(Failure::Usage("give --smbios-uuid or --node-id".into()));
                }
            };
            let imported = add
                .import_digest
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|_| Failure::Usage("--import-digest is not 64 hex digits".into()))?;
            acts.add_machine(MachineSpec {
                id: add.name.clone(),
                identity,
                cluster_id: add.cluster_id,
                endpoint: add.endpoint,
                rollout_scope: add.rollout_scope.unwrap_or_else(|| add.name.clone()),
                talos_minor: add.talos_minor,
                import_digest: imported,
            })
            .await?;
            let _ = writeln!(
                out,
                "machine {} added to the inventory by {}",
                add.name,
                who(&actor)
            );
        }
        Command::Inventory(InventoryCommand::List { cluster_id, json }) => {
            let rows: Vec<_> = acts
                .inventory()
                .await?
                .into_iter()
                .filter(|r| {
                    cluster_id
                        .as_ref()
                        .is_none_or(|c| &r.record.cluster_id == c)
                })
                .collect();
            out = inventory_text(&rows, json);
        }
        Command::Publish(args) => {
            let key = args
                .key
                .clone()
                .unwrap_or_else(|| config.custody.default_key().to_owned());
            out = publish(acts, args, key).await?;
        }
        Command::Plan(args) => {
            let request = plan_request(args.machine, args.options, args.revert, args.adopt);
            out = plan(acts, request).await?;
        }
        Command::Adopt(args) => {
            out = plan(acts, plan_request(args.machine, args.options, false, true)).await?;
        }
        Command::Revert(args) => {
            out = plan(acts, plan_request(args.machine, args.options, true, false)).await?;
        }
        Command::Approve { plan, blanket } => {
            let actor = acts.actor()?;
            let approval = acts.approve(&plan, blanket).await?;
            let mark = approval.mark;
            if blanket {
                let _ = writeln!(
                    out,
                    "plan {plan} approved under its cluster's blanket approval at the request of {}: {mark}",
                    who(&actor)
                );
            } else {
                let _ = writeln!(out, "plan {plan} approved by {}: {mark}", who(&actor));
            }
            if let Some(record) = approval.unseen_overwrite {
                let _ = writeln!(
                    out,
                    "unseenOverwrite: this revert overwrites the drifted configuration of \
                     record r{record}, which no reviewer has seen"
                );
            }
        }
        Command::Blanket(command) => out = blanket(acts, command).await?,
        Command::Revoke(RevokeArgs { plan, identity }) => {
            let actor = acts.actor()?;
            if let Some(principal) = identity {
                acts.revoke_identity(&principal).await?;
                let _ = writeln!(out, "identity {principal} revoked by {}", who(&actor));
                // Through the service, the service keeps its own list.
                if config.server.is_none() {
                    let _ = match config.denied_list() {
                        Some(list) => writeln!(
                            out,
                            "{principal} added to the denied-subject list {}",
                            list.path().display()
                        ),
                        None => writeln!(
                            out,
                            "no denied-subject list is configured: a database restore would \
                             undo this revocation"
                        ),
                    };
                }
            } else if let Some(plan) = plan {
                acts.revoke_approval(&plan).await?;
                let _ = writeln!(out, "approval of plan {plan} revoked by {}", who(&actor));
            }
        }
        Command::Cancel { plan } => {
            let actor = acts.actor()?;
            acts.cancel(&plan).await?;
            let _ = writeln!(out, "plan {plan} cancelled by {}", who(&actor));
        }
        Command::Freeze { machine, reason } => {
            let actor = acts.actor()?;
            acts.freeze(&machine, &reason).await?;
            let _ = writeln!(out, "machine {machine} frozen by {}", who(&actor));
        }
        Command::Unfreeze { machine, reason } => {
            let actor = acts.actor()?;
            acts.unfreeze(&machine, &reason).await?;
            let _ = writeln!(out, "machine {machine} unfrozen by {}", who(&actor));
        }
        Command::Run(args) => out = run(acts, &args).await?,
        Command::Drift { json } => {
            let pass = acts.drift().await?;
            out = if json {
                format!("{}\n", pretty(&drift::json(&pass)))
            } else {
                drift::text(&pass)
            };
            if drift::unread(&pass) > 0 {
                return Err(Failure::Unfinished(out));
            }
        }
        Command::Recovery(command) => {
            out = recovery::execute(acts, config, command).await?;
        }
        Command::Account(args) => {
            let actor = acts.actor()?;
            acts.account(AccountingRequest {
                operation: args.operation.clone(),
                attempt: args.attempt,
                settle_floor: SpanMs::from_secs(args.settle_floor),
                explanation: args.explanation,
            })
            .await?;
            let _ = writeln!(
                out,
                "attempt {} of operation {} accounted for by {}",
                args.attempt,
                args.operation,
                who(&actor)
            );
        }
        Command::Timeline { machine, json } => {
            let history = acts.history(&machine).await?;
            out = if json {
                let value = timeline::json(&history.machine, &history.entries, &history.operations);
                format!("{}\n", pretty(&value))
            } else {
                timeline::text(&history.machine, &history.entries, &history.operations)
            };
        }
    }
    Ok(out)
}

/// Creates a plan (`plan`, `adopt`, `revert`: one act, [`Acts::create_plan`], as the
/// page's drift forms make it) and says what it binds.
async fn plan(acts: &dyn Acts, request: PlanRequest) -> Result<String, Failure> {
    let actor = acts.actor()?;
    let created = acts.create_plan(request).await?;
    Ok(super::plan::described(
        &created.plan,
        &actor,
        &created.release,
    ))
}

fn plan_request(machine: String, options: PlanOptions, revert: bool, adopt: bool) -> PlanRequest {
    PlanRequest {
        machine,
        id: options.id,
        revert,
        adopt,
        expires_in_secs: options.expires_in,
        max_evidence_age_secs: options.max_evidence_age,
        transport_deadline_secs: options.transport_deadline,
        verification_deadline_secs: options.verification_deadline,
        max_attempts: options.max_attempts,
    }
}

fn inventory_text(rows: &[crate::acts::InventoryRow], json: bool) -> String {
    let mut out = String::new();
    if json {
        let value: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let (m, v) = (&r.record, &r.view);
                serde_json::json!({
                    "name": m.id,
                    "endpoint": m.endpoint,
                    "identity": m.identity,
                    "clusterId": m.cluster_id,
                    "rolloutScope": m.rollout_scope,
                    "talosMinor": m.talos_minor,
                    "desiredRelease": v.desired_release,
                    "appliedRelease": v.applied_release,
                    "appliedDigest": v.applied_digest,
                })
            })
            .collect();
        let _ = writeln!(out, "{}", pretty(&value));
        return out;
    }
    if rows.is_empty() {
        out.push_str("no machines\n");
    }
    for r in rows {
        let (m, v) = (&r.record, &r.view);
        let key = match &m.identity {
            IdentityKey::SmbiosUuid(u) => format!("smbios {u}"),
            IdentityKey::NodeId(n) => format!("node-id {n}"),
        };
        let _ = writeln!(
            out,
            "{}  endpoint {}  {key}  cluster {}  desired {}  applied {}",
            m.id,
            m.endpoint,
            m.cluster_id,
            v.desired_release.as_deref().unwrap_or("-"),
            super::applied_text(v),
        );
    }
    out
}

async fn publish(acts: &dyn Acts, args: PublishArgs, key: String) -> Result<String, Failure> {
    let actor = acts.actor()?;
    let mut artifacts = Vec::new();
    for (machine, file) in &args.artifacts {
        let configuration = zeroize::Zeroizing::new(
            std::fs::read(file)
                .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", file.display())))?,
        );
        // Checked here too, before anything is asked of the store or the service, so
        // the refusal names the file given.
        check_machine_config(&configuration).map_err(|problem| {
            Failure::Refused(format!(
                "refused: publishing release {}: {} (machine {machine}) is not a Talos \
                 machine configuration: {problem}",
                args.release,
                file.display()
            ))
        })?;
        artifacts.push(ArtifactUpload {
            machine: machine.clone(),
            configuration,
        });
    }
    let published = acts
        .publish(PublishRequest {
            release: args.release,
            key,
            authors: args.authors,
            artifacts,
        })
        .await?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "release {} published by {}, sealed with key {}:",
        published.release,
        who(&actor),
        published.key
    );
    for (m, d) in published.digests {
        let _ = writeln!(out, "  {m}  digest {d}  (now its Desired)");
    }
    Ok(out)
}

async fn blanket(acts: &dyn Acts, command: BlanketCommand) -> Result<String, Failure> {
    let mut out = String::new();
    match command {
        BlanketCommand::Grant {
            cluster,
            reason,
            lasting,
        } => {
            let actor = acts.actor()?;
            let granted = acts.grant_blanket(&cluster, &reason, lasting).await?;
            let _ = writeln!(
                out,
                "blanket approval {} granted for cluster {cluster} by {}, standing until {}",
                granted.id,
                who(&actor),
                super::iso(granted.expires_at.0)
            );
        }
        BlanketCommand::Revoke { id } => {
            let actor = acts.actor()?;
            acts.revoke_blanket(&id).await?;
            let _ = writeln!(out, "blanket approval {id} revoked by {}", who(&actor));
        }
        BlanketCommand::List { json } => {
            let all = acts.blankets().await?;
            if json {
                let _ = writeln!(out, "{}", pretty(&all));
            } else if all.is_empty() {
                let _ = writeln!(out, "no blanket approvals");
            }
            for b in all.iter().filter(|_| !json) {
                let _ = writeln!(
                    out,
                    "{}  cluster {}  granted by {} at {}  {}  reason: {}",
                    b.id,
                    b.cluster_id,
                    b.approver,
                    super::iso(b.granted_at.0),
                    blanket_state(b),
                    b.reason
                );
            }
        }
    }
    Ok(out)
}

fn blanket_state(b: &BlanketApproval) -> String {
    match (&b.revoked, b.current_epoch, b.expired) {
        (Some((by, at)), ..) => format!("revoked by {by} at {}", super::iso(at.0)),
        (None, false, _) => "granted in an earlier epoch: holds no longer".to_owned(),
        (None, true, true) => format!("lapsed at {}", super::iso(b.expires_at.0)),
        (None, true, false) => format!("in force until {}", super::iso(b.expires_at.0)),
    }
}

/// `run`: the report, and exit 1 when a refusal ended a pass, 3 when an operation is
/// left unfinished.
async fn run(acts: &dyn Acts, args: &RunArgs) -> Result<String, Failure> {
    let deadlines = Deadlines {
        settle_floor_secs: args.settle_floor,
        max_transport_deadline_secs: args.max_transport_deadline,
    };
    let report = acts.run(args.plan.as_deref(), deadlines).await?;
    let (outcomes, resume) = match report {
        RunReport::Adoption {
            plan,
            operation,
            release,
            digest,
        } => {
            return Ok(format!(
                "plan {plan}: adoption recorded as operation {operation}; Applied is release \
                 {release} at the observed digest {digest}; nothing was sent\n"
            ));
        }
        RunReport::Operations { outcomes, resume } => (outcomes, resume),
    };
    let mut out = String::new();
    if outcomes.is_empty() {
        out.push_str("no operation to resume\n");
    }
    let mut unfinished = false;
    let mut refusals = Vec::new();
    for outcome in &outcomes {
        let _ = write!(
            out,
            "plan {}: operation {} is {} after {} send(s)",
            outcome.plan, outcome.operation, outcome.state, outcome.sends
        );
        if let Some(c) = &outcome.classification {
            let _ = write!(out, "; classified {c}");
        }
        out.push('\n');
        if let Some(refusal) = &outcome.refusal {
            refusals.push(refusal.clone());
        }
        if outcome.state.is_terminal() {
            continue;
        }
        unfinished = true;
        if resume && outcome.awaits_accounting {
            for read in &outcome.reads {
                let _ = writeln!(
                    out,
                    "  recovery observation r{}: digest {}, config version {}",
                    read.basis,
                    read.digest.as_deref().unwrap_or("not read"),
                    read.config_version
                        .map_or_else(|| "not read".to_owned(), |v| v.to_string()),
                );
            }
            let _ = writeln!(
                out,
                "  recovery-admin may now account for each attempt (`account {} --attempt N`), then `run --resume` carries the operation on",
                outcome.operation
            );
        }
    }
    if !refusals.is_empty() {
        return Err(Failure::Refused(format!("{out}{}", refusals.join("\n"))));
    }
    if unfinished {
        return Err(Failure::Unfinished(out));
    }
    Ok(out)
}
