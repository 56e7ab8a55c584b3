//! `recovery`: recovery mode after the store was restored from a backup (§7), as
//! recovery-admin's acts and the controller's recovery pass.
//!
//! The order an operator follows:
//!
//! 1. stop every controller instance that ran against the store before the restore;
//! 2. `enter`, naming when they were stopped and each backup restored: a new epoch,
//!    every scope pre-restore unaccounted, every open operation taken over into it;
//! 3. `observe`, repeated as the reads fall due (it says when): the recovery reads
//!    step 1 needs, then the restoration read a mark needs. It sends nothing;
//! 4. `account` the scopes (the step 1 decision), then `observe` once more;
//! 5. `mark` each scope (its restoration read and a dependency check made now);
//! 6. `release` each ready scope, and `leave` once every scope is released.
//!
//! `status` shows where each scope stands at any point.

use std::fmt::Write as _;
use std::sync::Arc;

use clap::Subcommand;

use super::drift::NoKeys;
use super::when::{iso, parse_iso};
use super::{Config, Failure, executor, executor_failure, pretty, who};
use crate::cli::database::Db;
use crate::contract::recovery::{Dependency, ScopeState};
use crate::contract::{InstantMs, SpanMs};
use crate::controller::{ExecutorSettings, RecoveryAction, RecoveryPass};
use crate::keys::KeyProvider;
use crate::store::{RecoveryEntry, RestoredBackup, ScopeAccounting};

/// `recovery` subcommands.
#[derive(Debug, Subcommand)]
pub enum RecoveryCommand {
    /// Enter recovery mode (recovery-admin) after restoring the store: a new epoch;
    /// every scope becomes pre-restore unaccounted and every open operation is taken
    /// over into it.
    Enter {
        /// When the last controller instance that ran before the restore was stopped,
        /// in UTC (`2026-12-02T15:04:05Z`); not after now. Step 1 counts from it.
        #[arg(long)]
        stopped_at: String,
        /// A backup restored: `FAMILY=ID@TIME` (`database=store-0412.dump@2026-12-02T04:12:00Z`),
        /// once per family restored.
        #[arg(long = "backup", required = true)]
        backups: Vec<String>,
    },
    /// Where recovery mode and each machine's scope stand.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run the controller's recovery pass: the recovery reads that are due and the
    /// restoration reads marks need. Sends nothing. Exit 3 when a machine could not
    /// be read.
    Observe {
        /// The deployment's settle floor in seconds (at least 30).
        #[arg(long, default_value_t = 30)]
        settle_floor: u64,
        /// The deployment's maximum transport deadline in seconds.
        #[arg(long, default_value_t = crate::store::DEFAULT_MAX_TRANSPORT_DEADLINE.0 / 1000)]
        max_transport_deadline: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Record the step 1 accounting decision over pre-restore unaccounted scopes
    /// (recovery-admin); every one must pass, or nothing is recorded.
    Account {
        /// The machines whose scopes it covers.
        #[arg(required = true)]
        machines: Vec<String>,
        /// The deployment's settle floor in seconds (at least 30).
        #[arg(long, default_value_t = 30)]
        settle_floor: u64,
        /// How a resource version that moved during a settle is explained.
        #[arg(long)]
        explanation: Option<String>,
    },
    /// Mark a scope (recovery-admin) from its latest restoration read and a
    /// dependency check made now: the Desired release's sealed artifact, its key
    /// usable through the keyring, and the talosconfig the controller reaches the
    /// machine with.
    Mark {
        /// The machine.
        machine: String,
    },
    /// Release a ready scope in the current epoch (recovery-admin).
    Release {
        /// The machine.
        machine: String,
    },
    /// Leave recovery mode once every scope is released (recovery-admin).
    Leave,
}

/// Runs one `recovery` subcommand; returns what it prints.
pub(super) async fn execute(
    db: &Db,
    config: &Config,
    command: RecoveryCommand,
) -> Result<String, Failure> {
    let store = &db.store;
    let mut out = String::new();
    match command {
        RecoveryCommand::Enter {
            stopped_at,
            backups,
        } => {
            let actor = config.actor()?;
            let entry = RecoveryEntry {
                controller: crate::controller::fresh_controller_id()
                    .map_err(|e| Failure::Usage(e.to_string()))?,
                stopped_at: InstantMs(parse_iso(&stopped_at).map_err(Failure::Usage)?),
                backups: backups
                    .iter()
                    .map(|b| backup(b))
                    .collect::<Result<_, _>>()?,
            };
            let epoch = store.enter_recovery(&actor, entry).await?;
            let scopes = store.machines().await?.len();
            let _ = writeln!(
                out,
                "recovery mode entered by {}: epoch {epoch}; {scopes} scope(s) pre-restore \
                 unaccounted; nothing is sent to a machine until its scope is released",
                who(&actor)
            );
        }
        RecoveryCommand::Status { json } => out = status(db, json).await?,
        RecoveryCommand::Observe {
            settle_floor,
            max_transport_deadline,
            json,
        } => {
            let settings = ExecutorSettings {
                settle_floor: SpanMs::from_secs(settle_floor),
                max_transport_deadline: SpanMs::from_secs(max_transport_deadline),
            };
            let executor = executor(db, config, Arc::new(NoKeys), settings).await?;
            let pass = executor.recovery_pass().await.map_err(executor_failure)?;
            out = if json {
                format!("{}\n", pretty(&pass))
            } else {
                pass_text(&pass)
            };
            let unread = pass
                .steps
                .iter()
                .any(|s| matches!(s.action, RecoveryAction::Unreachable { .. }));
            if unread {
                return Err(Failure::Unfinished(out));
            }
        }
        RecoveryCommand::Account {
            machines,
            settle_floor,
            explanation,
        } => {
            let actor = config.actor()?;
            let request = ScopeAccounting {
                machines: machines.clone(),
                settle_floor: SpanMs::from_secs(settle_floor),
                explanation,
            };
            store.account_scopes(&actor, request).await?;
            for m in &machines {
                let scope = store.machine(m).await?.scope;
                let _ = writeln!(out, "{m}: accounted by {}; scope {scope}", who(&actor));
            }
        }
        RecoveryCommand::Mark { machine } => {
            let actor = config.actor()?;
            let missing = dependency_check(db, config, &machine).await?;
            let scope = store.mark_scope(&actor, &machine, missing).await?;
            let _ = write!(out, "{machine}: marked by {}; scope {scope}", who(&actor));
            if let Some(missing) = missing {
                let _ = write!(out, " (dependency check: {missing} missing)");
            }
            out.push('\n');
        }
        RecoveryCommand::Release { machine } => {
            let actor = config.actor()?;
            store.release_scope(&actor, &machine).await?;
            let _ = writeln!(
                out,
                "{machine}: scope released in the current epoch by {}",
                who(&actor)
            );
        }
        RecoveryCommand::Leave => {
            let actor = config.actor()?;
            store.leave_recovery(&actor).await?;
            let _ = writeln!(out, "recovery mode left by {}", who(&actor));
        }
    }
    Ok(out)
}

/// `FAMILY=ID@TIME` as a restored backup.
fn backup(text: &str) -> Result<RestoredBackup, Failure> {
    let bad = |why: &str| Failure::Usage(format!("--backup {text:?}: {why}"));
    let (family, rest) = text
        .split_once('=')
        .ok_or_else(|| bad("expected FAMILY=ID@TIME"))?;
    let (backup, taken) = rest
        .rsplit_once('@')
        .ok_or_else(|| bad("expected FAMILY=ID@TIME"))?;
    if family.trim().is_empty() || backup.trim().is_empty() {
        return Err(bad(
            "the family and the backup's identity must not be blank",
        ));
    }
    Ok(RestoredBackup {
        family: family.to_owned(),
        backup: backup.to_owned(),
        taken_at: InstantMs(parse_iso(taken).map_err(|why| bad(&why))?),
    })
}

/// Recovery mode and each scope, as text or JSON.
async fn status(db: &Db, json: bool) -> Result<String, Failure> {
    let machines = db.store.machines().await?;
    let in_recovery = machines.iter().any(|m| m.scope != ScopeState::Normal);
    let epoch = db.store.current_epoch().await?;
    if json {
        let scopes: Vec<serde_json::Value> = machines
            .iter()
            .map(|m| serde_json::json!({"machine": m.id, "scope": m.scope.to_string()}))
            .collect();
        let value = serde_json::json!({
            "recoveryMode": in_recovery,
            "epoch": epoch.to_string(),
            "scopes": scopes,
        });
        return Ok(format!("{}\n", pretty(&value)));
    }
    let mut out = String::new();
    let mode = if in_recovery {
        "in effect"
    } else {
        "not in effect"
    };
    let _ = writeln!(out, "recovery mode {mode}; epoch {epoch}");
    for m in &machines {
        let _ = writeln!(out, "  {}: {}", m.id, m.scope);
    }
    Ok(out)
}

/// §7.3 step 3 for the machine's Desired release: its sealed artifact in the store,
/// its key usable through the keyring, and the talosconfig the controller reaches
/// the machine with. The first dependency found missing, if any.
async fn dependency_check(
    db: &Db,
    config: &Config,
    machine: &str,
) -> Result<Option<Dependency>, Failure> {
    let view = db.store.machine(machine).await?;
    let Some(desired) = view.desired_release else {
        // Nothing selected to apply: no dependency of it can be missing.
        return Ok(None);
    };
    let sealed = match db.store.keyed_artifact(&desired, machine).await {
        Ok(Some(sealed)) => sealed,
        // No artifact, or one whose key cannot be named: the record is incomplete.
        Ok(None) | Err(crate::store::StoreError::Refused { .. }) => {
            return Ok(Some(Dependency::ReleaseRecord));
        }
        Err(e) => return Err(e.into()),
    };
    if config.keyring()?.check_artifact(&sealed).await.is_err() {
        return Ok(Some(Dependency::KeyVersion));
    }
    let reachable = config.talosconfig.as_ref().is_some_and(|path| {
        crate::controller::TalosconfigConnector::load(path, crate::ConnectOptions::default())
            .is_ok()
    });
    if !reachable {
        return Ok(Some(Dependency::ExecutorCredentials));
    }
    Ok(None)
}

fn pass_text(pass: &RecoveryPass) -> String {
    let mut out = String::new();
    if !pass.in_recovery {
        out.push_str("recovery mode is not in effect; nothing to observe\n");
        return out;
    }
    for step in &pass.steps {
        let what = match &step.action {
            RecoveryAction::RecoveryObserved { basis } => {
                format!("recovery observation r{} recorded", basis.0)
            }
            RecoveryAction::RestorationObserved { basis } => {
                format!("restoration observation r{} recorded", basis.0)
            }
            RecoveryAction::NotDue { due } => {
                format!("the next recovery observation is due at {}", iso(due.0))
            }
            RecoveryAction::Waits => "waits for recovery-admin".to_owned(),
            RecoveryAction::Unreachable { reason } => format!("not read: {reason}"),
        };
        let _ = writeln!(out, "  {} ({}): {what}", step.machine, step.scope);
    }
    out
}
