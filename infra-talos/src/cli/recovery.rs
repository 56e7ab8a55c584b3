//! `recovery`: recovery mode after the store was restored from a backup (§7), as
//! recovery-admin's acts and the controller's recovery pass.
//!
//! The order an operator follows:
//!
//! 1. stop every controller instance that ran against the store before the restore;
//! 2. `enter`, naming when they were stopped and each backup restored: a new epoch,
//!    every scope pre-restore unaccounted, every open operation taken over into it
//!    (on the database, or through a service started with `--recovery-start`);
//! 3. `observe`, repeated as the reads fall due (it says when): the recovery reads
//!    step 1 needs, then the restoration read a mark needs. It sends nothing;
//! 4. `account` the scopes (the step 1 decision), then `observe` once more;
//! 5. `mark` each scope (its restoration read and a dependency check made now);
//! 6. `release` each ready scope, and `leave` once every scope is released.
//!
//! `status` shows where each scope stands at any point.

use std::fmt::Write as _;

use clap::Subcommand;

use super::when::iso;
use super::{Config, Failure, pretty, who};
use crate::acts::{Acts, Deadlines, EntryRequest, RecoveryStatus};
use crate::contract::SpanMs;
use crate::controller::{RecoveryAction, RecoveryPass};
use crate::store::ScopeAccounting;

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
    /// usable through the key custody (Transit or the keyring), and the talosconfig
    /// the controller reaches the machine with.
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

/// Runs one `recovery` subcommand, on the store or through the service; returns what
/// it prints.
pub(super) async fn execute(
    acts: &dyn Acts,
    _config: &Config,
    command: RecoveryCommand,
) -> Result<String, Failure> {
    let mut out = String::new();
    match command {
        RecoveryCommand::Enter {
            stopped_at,
            backups,
        } => {
            let request = EntryRequest::parse(&stopped_at, &backups).map_err(Failure::Usage)?;
            let actor = acts.actor()?;
            let entered = acts.enter_recovery(request).await?;
            let _ = writeln!(
                out,
                "recovery mode entered by {}: epoch {}; {} scope(s) pre-restore \
                 unaccounted; nothing is sent to a machine until its scope is released",
                who(&actor),
                entered.epoch,
                entered.scopes
            );
        }
        RecoveryCommand::Status { json } => out = status(&acts.recovery_status().await?, json),
        RecoveryCommand::Observe {
            settle_floor,
            max_transport_deadline,
            json,
        } => {
            let deadlines = Deadlines {
                settle_floor_secs: settle_floor,
                max_transport_deadline_secs: max_transport_deadline,
            };
            let pass = acts.observe_recovery(deadlines).await?;
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
            let actor = acts.actor()?;
            let request = ScopeAccounting {
                machines,
                settle_floor: SpanMs::from_secs(settle_floor),
                explanation,
            };
            for line in acts.account_scopes(request).await? {
                let _ = writeln!(
                    out,
                    "{}: accounted by {}; scope {}",
                    line.machine,
                    who(&actor),
                    line.scope
                );
            }
        }
        RecoveryCommand::Mark { machine } => {
            let actor = acts.actor()?;
            let marked = acts.mark_scope(&machine).await?;
            let _ = write!(
                out,
                "{machine}: marked by {}; scope {}",
                who(&actor),
                marked.scope
            );
            if let Some(missing) = marked.missing {
                let _ = write!(out, " (dependency check: {missing} missing)");
            }
            out.push('\n');
        }
        RecoveryCommand::Release { machine } => {
            let actor = acts.actor()?;
            acts.release_scope(&machine).await?;
            let _ = writeln!(
                out,
                "{machine}: scope released in the current epoch by {}",
                who(&actor)
            );
        }
        RecoveryCommand::Leave => {
            let actor = acts.actor()?;
            acts.leave_recovery().await?;
            let _ = writeln!(out, "recovery mode left by {}", who(&actor));
        }
    }
    Ok(out)
}

/// Recovery mode and each scope, as text or JSON.
fn status(status: &RecoveryStatus, json: bool) -> String {
    if json {
        let scopes: Vec<serde_json::Value> = status
            .scopes
            .iter()
            .map(|s| serde_json::json!({"machine": s.machine, "scope": s.scope.to_string()}))
            .collect();
        let value = serde_json::json!({
            "recoveryMode": status.recovery_mode,
            "epoch": status.epoch,
            "scopes": scopes,
        });
        return format!("{}\n", pretty(&value));
    }
    let mut out = String::new();
    let mode = if status.recovery_mode {
        "in effect"
    } else {
        "not in effect"
    };
    let _ = writeln!(out, "recovery mode {mode}; epoch {}", status.epoch);
    for s in &status.scopes {
        let _ = writeln!(out, "  {}: {}", s.machine, s.scope);
    }
    out
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
