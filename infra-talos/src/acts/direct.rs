//! Acts made on the store itself, as one proven principal.

use std::path::PathBuf;
use std::sync::Arc;

use infra_core::engine::SystemClock;

use super::wire::{
    Approval, CreatedPlan, Deadlines, Entered, EntryRequest, InventoryRow, MachineHistory, Marked,
    PlanRequest, PublishRequest, Published, RecoveryStatus, RunOutcome, RunReport, ScopeLine,
    WatchedRead,
};
use super::{ActError, ActResult, Acts, in_recovery, refusal_text};
use crate::backend::{Inventory, WallTime};
use crate::contract::adoption::Hold;
use crate::contract::operation::OperationKind;
use crate::contract::plan::PlanState;
use crate::contract::recovery::Dependency;
use crate::contract::{Role, SpanMs};
use crate::controller::{DriftPass, Executor, ExecutorError, RecoveryPass};
use crate::identity::{Fingerprint, issued_certificate};
use crate::keys::{
    KeyBinding, KeyError, KeyOperation, KeyProvider, LocalKeyring, Plaintext, SealedArtifact,
    UseCheck,
};
use crate::store::{
    AccountingRequest, Actor, AdoptPlanSpec, BlanketApproval, CertificateOrigin, CertificateSpec,
    ContributionKind, IdentityEvent, MachineSpec, MachineView, PlanSpec, PlanView, PrincipalSpec,
    PrincipalView, RecoveryEntry, ScopeAccounting, SealedReleaseSpec, Store, StoreError,
};

/// The keys acts seal and open with.
#[derive(Clone)]
pub enum Keys {
    /// None configured: an act that needs one is refused, saying why.
    Missing(String),
    /// A local keyring; `publish` makes a key it does not hold yet.
    Keyring(Arc<LocalKeyring>),
    /// Another provider: Transit, or the service's own. `publish` seals only under
    /// a key it already holds.
    Provider(Arc<dyn KeyProvider>),
}

impl Keys {
    fn provider(&self) -> ActResult<Arc<dyn KeyProvider>> {
        match self {
            Keys::Missing(why) => Err(ActError::Usage(why.clone())),
            Keys::Keyring(k) => Ok(Arc::clone(k) as Arc<dyn KeyProvider>),
            Keys::Provider(p) => Ok(Arc::clone(p)),
        }
    }
}

/// How acts that observe or send reach the machines.
#[derive(Clone)]
pub enum Controller {
    /// An executor made for each act, reaching every inventoried machine at its own
    /// endpoint through this talosconfig (`None`: none configured).
    Talosconfig(Option<PathBuf>),
    /// The service's own running executor, with its own settings.
    Running(Arc<Executor>),
    /// None: a service started without a controller; says why.
    Absent(String),
}

/// What acts are made on.
#[derive(Clone)]
pub struct Grounds {
    /// The contract's store.
    pub store: Arc<dyn Store>,
    /// Its inventory lookups.
    pub inventory: Arc<dyn Inventory>,
    /// The keys.
    pub keys: Keys,
    /// How machines are reached.
    pub controller: Controller,
    /// The denied-subject list every revocation is appended to (`None`: none
    /// configured, and a revocation is kept in the database only).
    pub denied: Option<crate::identity::DeniedList>,
}

impl Grounds {
    /// A controller instance on the store, reaching every inventoried machine at its
    /// own endpoint through the configured talosconfig.
    ///
    /// # Errors
    ///
    /// No talosconfig configured or usable, an endpoint that does not parse, or no
    /// randomness for the controller's identity.
    pub async fn executor(
        &self,
        keys: Arc<dyn KeyProvider>,
        settings: crate::controller::ExecutorSettings,
    ) -> ActResult<Executor> {
        use crate::controller::{MachineRoute, TalosconfigConnector};
        let talosconfig = match &self.controller {
            Controller::Talosconfig(Some(path)) => path,
            Controller::Running(_) | Controller::Absent(_) | Controller::Talosconfig(None) => {
                return Err(ActError::Usage(
                    "no talosconfig: set `talosconfig` in the configuration, or \
                     INFRA_TALOS_TALOSCONFIG"
                        .into(),
                ));
            }
        };
        let connector = TalosconfigConnector::load(talosconfig, crate::ConnectOptions::default())
            .map_err(|e| ActError::Usage(e.to_string()))?;
        for record in self.inventory.machines().await? {
            let endpoint = crate::NodeAddress::parse(&record.endpoint)
                .map_err(|e| ActError::Usage(format!("machine {}: {e}", record.id)))?;
            connector.add_machine(record.id.clone(), MachineRoute { endpoint });
        }
        let id = crate::controller::fresh_controller_id().map_err(executor_failure)?;
        Executor::new(
            id,
            Arc::clone(&self.store),
            Arc::new(connector),
            keys,
            Arc::new(SystemClock::new()),
            settings,
        )
        .map_err(executor_failure)
    }

    /// Acts made by `actor` (or, `Err`, by no one proven, with why).
    #[must_use]
    pub fn acting(&self, actor: Result<Actor, String>) -> Direct {
        Direct {
            grounds: self.clone(),
            actor,
        }
    }
}

/// Acts made on the store by one proven principal.
pub struct Direct {
    grounds: Grounds,
    actor: Result<Actor, String>,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct")
            .field("actor", &self.actor)
            .finish_non_exhaustive()
    }
}

fn executor_failure(e: ExecutorError) -> ActError {
    match e {
        ExecutorError::Store(s) => ActError::from(s),
        ExecutorError::Settings(text) => ActError::Usage(text),
        other => ActError::Refused(format!("refused: {other}")),
    }
}

impl Direct {
    fn store(&self) -> &dyn Store {
        self.grounds.store.as_ref()
    }

    /// An executor to act with: the service's own, or one made now with `keys`.
    async fn executor(
        &self,
        keys: impl FnOnce() -> ActResult<Arc<dyn KeyProvider>>,
        deadlines: Deadlines,
    ) -> ActResult<Arc<Executor>> {
        match &self.grounds.controller {
            Controller::Running(executor) => Ok(Arc::clone(executor)),
            Controller::Absent(why) => Err(ActError::Unavailable(why.clone())),
            Controller::Talosconfig(_) => self
                .grounds
                .executor(keys()?, deadlines.settings())
                .await
                .map(Arc::new),
        }
    }

    async fn seal_all(&self, request: &PublishRequest) -> ActResult<Vec<(String, SealedArtifact)>> {
        // Nothing is sealed, and no key made, for a release with a configuration no
        // node would take.
        for upload in &request.artifacts {
            crate::machine_config::check_machine_config(&upload.configuration).map_err(
                |problem| {
                    ActError::Refused(format!(
                        "refused: publishing release {}: the configuration for machine {} is \
                         not a Talos machine configuration: {problem}",
                        request.release, upload.machine
                    ))
                },
            )?;
        }
        if let Keys::Keyring(keyring) = &self.grounds.keys
            && keyring.key_info(&request.key).is_err()
        {
            keyring
                .create_key(&request.key)
                .map_err(|e| ActError::Usage(e.to_string()))?;
        }
        let keys = self.grounds.keys.provider()?;
        let mut sealed = Vec::new();
        for upload in &request.artifacts {
            let artifact = keys
                .seal(&request.key, &upload.configuration)
                .await
                .map_err(|e| ActError::Usage(e.to_string()))?;
            sealed.push((upload.machine.clone(), artifact));
        }
        Ok(sealed)
    }

    /// What `run` checks of the plan itself before anything else (a talosconfig, a
    /// connection): that it exists, is in a state a run applies to (the store's
    /// preflight, or an adopt plan's approval) and names an inventoried machine; so
    /// a mistyped or finished plan is told as such.
    async fn runnable(&self, plan: &str) -> ActResult<()> {
        let plan = self.store().plan(plan).await?;
        if self
            .grounds
            .inventory
            .machine_record(&plan.machine)
            .await?
            .is_none()
        {
            return Err(ActError::Refused(format!(
                "refused: machine {} is not inventoried",
                plan.machine
            )));
        }
        if plan.kind != OperationKind::Adopt {
            return Ok(self.store().preflight(&plan.id).await?);
        }
        let held = match plan.state {
            PlanState::Approved => return Ok(()),
            PlanState::Committed => Hold::AlreadyAdopted,
            _ => Hold::NotApproved,
        };
        Err(executor_failure(ExecutorError::AdoptionHeld(held)))
    }

    /// Runs one approved plan ([`Direct::runnable`] first), as far as the contract
    /// allows.
    async fn run_plan(&self, executor: &Executor, plan: &str) -> ActResult<RunReport> {
        let plan = self.store().plan(plan).await?;
        let outcome = executor
            .run_plan(&plan.id)
            .await
            .map_err(executor_failure)?;
        if plan.kind == OperationKind::Adopt {
            let view = self.store().machine(&plan.machine).await?;
            return Ok(RunReport::Adoption {
                plan: plan.id,
                operation: outcome.operation,
                release: view.applied_release.unwrap_or_default(),
                digest: view.applied_digest.map(|d| d.to_hex()).unwrap_or_default(),
            });
        }
        Ok(RunReport::Operations {
            outcomes: vec![outcome_of(&outcome, Vec::new())],
            resume: false,
        })
    }

    /// Takes over every unfinished operation; for each that waits on its accounting,
    /// the two recovery reads §5.2 asks for.
    async fn resume(&self, executor: &Executor) -> ActResult<RunReport> {
        let mut outcomes = Vec::new();
        for outcome in executor.start().await.map_err(executor_failure)? {
            let reads = if !outcome.state.is_terminal() && outcome.awaits_accounting() {
                executor
                    .watch_unaccounted(&outcome.operation, 2)
                    .await
                    .map_err(executor_failure)?
                    .iter()
                    .map(|r| WatchedRead {
                        basis: r.basis.0,
                        digest: r.digest.clone(),
                        config_version: r.config_version,
                    })
                    .collect()
            } else {
                Vec::new()
            };
            outcomes.push(outcome_of(&outcome, reads));
        }
        Ok(RunReport::Operations {
            outcomes,
            resume: true,
        })
    }

    /// §7.3 step 3 for the machine's Desired release: its sealed artifact, its key
    /// usable, and the credentials the controller reaches machines with.
    async fn dependency_check(&self, machine: &str) -> ActResult<Option<Dependency>> {
        let view = self.store().machine(machine).await?;
        let Some(desired) = view.desired_release else {
            return Ok(None);
        };
        let sealed = match self.store().keyed_artifact(&desired, machine).await {
            Ok(Some(sealed)) => sealed,
            Ok(None) | Err(StoreError::Refused { .. }) => {
                return Ok(Some(Dependency::ReleaseRecord));
            }
            Err(e) => return Err(e.into()),
        };
        if self
            .grounds
            .keys
            .provider()?
            .check_artifact(&sealed)
            .await
            .is_err()
        {
            return Ok(Some(Dependency::KeyVersion));
        }
        let reachable = match &self.grounds.controller {
            Controller::Running(_) => true,
            Controller::Absent(_) => false,
            Controller::Talosconfig(path) => path.as_ref().is_some_and(|path| {
                crate::controller::TalosconfigConnector::load(
                    path,
                    crate::ConnectOptions::default(),
                )
                .is_ok()
            }),
        };
        Ok((!reachable).then_some(Dependency::ExecutorCredentials))
    }
}

fn outcome_of(outcome: &crate::controller::Outcome, reads: Vec<WatchedRead>) -> RunOutcome {
    RunOutcome {
        plan: outcome.plan.clone(),
        operation: outcome.operation.clone(),
        state: outcome.state,
        sends: outcome.sends,
        classification: outcome.classification.as_ref().map(ToString::to_string),
        refusal: outcome.refusal.as_ref().map(refusal_text),
        awaits_accounting: outcome.awaits_accounting(),
        reads,
    }
}

#[async_trait::async_trait]
impl Acts for Direct {
    fn actor(&self) -> ActResult<Actor> {
        self.actor.clone().map_err(ActError::Usage)
    }

    async fn machines(&self) -> ActResult<Vec<MachineView>> {
        Ok(self.store().machines().await?)
    }

    async fn add_machine(&self, spec: MachineSpec) -> ActResult<()> {
        Ok(self.store().create_machine(&self.actor()?, spec).await?)
    }

    async fn inventory(&self) -> ActResult<Vec<InventoryRow>> {
        let mut rows = Vec::new();
        for record in self.grounds.inventory.machines().await? {
            let view = self.store().machine(&record.id).await?;
            rows.push(InventoryRow { record, view });
        }
        Ok(rows)
    }

    async fn publish(&self, request: PublishRequest) -> ActResult<Published> {
        let actor = self.actor()?;
        let artifacts = self.seal_all(&request).await?;
        let mut contributions: Vec<(String, ContributionKind)> = request
            .authors
            .iter()
            .map(|a| (a.clone(), ContributionKind::Authored))
            .collect();
        contributions.push((actor.id.clone(), ContributionKind::Published));
        let digests = artifacts
            .iter()
            .map(|(m, a)| (m.clone(), a.digest.to_hex()))
            .collect();
        let spec = SealedReleaseSpec {
            id: request.release.clone(),
            artifacts,
            contributions,
        };
        self.store().publish_sealed_release(&actor, spec).await?;
        Ok(Published {
            release: request.release,
            key: request.key,
            digests,
        })
    }

    async fn plans(&self) -> ActResult<Vec<PlanView>> {
        Ok(self.store().plans().await?)
    }

    async fn create_plan(&self, request: PlanRequest) -> ActResult<CreatedPlan> {
        let actor = self.actor()?;
        let view = self.store().machine(&request.machine).await?;
        let release = view.desired_release.clone().ok_or_else(|| {
            ActError::Refused(format!(
                "refused: creating a plan: machine {} has no Desired release; publish one first",
                request.machine
            ))
        })?;
        let suffix = match (request.revert, request.adopt) {
            (true, _) => "-revert",
            (false, true) => "-adopt",
            (false, false) => "",
        };
        let id = request.id.clone().unwrap_or_else(|| {
            format!(
                "{}-{release}-b{}{suffix}",
                request.machine, view.baseline_revision.0
            )
        });
        let now = WallTime::system(Arc::new(SystemClock::new())).now();
        let expires_at = now.plus(SpanMs::from_secs(request.expires_in_secs));
        let max_evidence_age = SpanMs::from_secs(request.max_evidence_age_secs);
        let plan = if request.adopt {
            let spec = AdoptPlanSpec {
                id,
                machine: request.machine.clone(),
                release: release.clone(),
                expires_at,
                max_evidence_age,
            };
            self.store().create_adopt_plan(&actor, spec).await?
        } else {
            let spec = PlanSpec {
                id,
                machine: request.machine.clone(),
                release: release.clone(),
                expires_at,
                max_evidence_age,
                transport_deadline: SpanMs::from_secs(request.transport_deadline_secs),
                verification_deadline: SpanMs::from_secs(request.verification_deadline_secs),
                max_attempts: request.max_attempts,
                revert: request.revert,
            };
            self.store().create_plan(&actor, spec).await?
        };
        Ok(CreatedPlan { plan, release })
    }

    async fn approve(&self, plan: &str, blanket: bool) -> ActResult<Approval> {
        let actor = self.actor()?;
        let mark = if blanket {
            self.store().approve_under_blanket(&actor, plan).await?
        } else {
            self.store().approve(&actor, plan).await?
        };
        let view = self.store().plan(plan).await?;
        let unseen_overwrite = view
            .bound_drift
            .filter(|_| view.unseen_overwrite())
            .map(|r| r.0);
        Ok(Approval {
            mark: mark.to_string(),
            unseen_overwrite,
        })
    }

    async fn revoke_approval(&self, plan: &str) -> ActResult<()> {
        Ok(self.store().revoke_approval(&self.actor()?, plan).await?)
    }

    async fn cancel(&self, plan: &str) -> ActResult<()> {
        Ok(self.store().cancel_plan(&self.actor()?, plan).await?)
    }

    async fn run(&self, plan: Option<&str>, deadlines: Deadlines) -> ActResult<RunReport> {
        if let Some(plan) = plan {
            self.runnable(plan).await?;
        }
        let executor = self
            .executor(|| self.grounds.keys.provider(), deadlines)
            .await?;
        match plan {
            Some(plan) => self.run_plan(&executor, plan).await,
            None => self.resume(&executor).await,
        }
    }

    async fn blankets(&self) -> ActResult<Vec<BlanketApproval>> {
        Ok(self.store().blanket_approvals().await?)
    }

    async fn grant_blanket(
        &self,
        cluster: &str,
        reason: &str,
        lasting: SpanMs,
    ) -> ActResult<BlanketApproval> {
        let actor = self.actor()?;
        Ok(self
            .store()
            .grant_blanket_approval(&actor, cluster, reason, lasting)
            .await?)
    }

    async fn revoke_blanket(&self, id: &str) -> ActResult<()> {
        Ok(self
            .store()
            .revoke_blanket_approval(&self.actor()?, id)
            .await?)
    }

    async fn freeze(&self, machine: &str, reason: &str) -> ActResult<()> {
        Ok(self.store().freeze(&self.actor()?, machine, reason).await?)
    }

    async fn unfreeze(&self, machine: &str, reason: &str) -> ActResult<()> {
        Ok(self
            .store()
            .unfreeze(&self.actor()?, machine, reason)
            .await?)
    }

    async fn history(&self, machine: &str) -> ActResult<MachineHistory> {
        Ok(MachineHistory {
            machine: self.store().machine(machine).await?,
            entries: self.store().timeline(machine).await?,
            operations: self.store().operations_of(machine).await?,
        })
    }

    async fn drift(&self) -> ActResult<DriftPass> {
        // The drift pass sends nothing: it needs no key, and its settings only
        // satisfy the executor.
        let deadlines = Deadlines {
            settle_floor_secs: 30,
            max_transport_deadline_secs: crate::store::DEFAULT_MAX_TRANSPORT_DEADLINE.0 / 1000,
        };
        let executor = self
            .executor(|| Ok(Arc::new(NoKeys) as Arc<dyn KeyProvider>), deadlines)
            .await?;
        executor.drift_pass().await.map_err(executor_failure)
    }

    async fn account(&self, request: AccountingRequest) -> ActResult<()> {
        Ok(self
            .store()
            .record_accounting_decision(&self.actor()?, request)
            .await?)
    }

    async fn enter_recovery(&self, request: EntryRequest) -> ActResult<Entered> {
        let actor = self.actor()?;
        let entry = RecoveryEntry {
            controller: crate::controller::fresh_controller_id().map_err(executor_failure)?,
            stopped_at: request.stopped_at,
            backups: request.backups,
        };
        let epoch = self.store().enter_recovery(&actor, entry).await?;
        Ok(Entered {
            epoch: epoch.to_string(),
            scopes: self.store().machines().await?.len(),
        })
    }

    async fn recovery_status(&self) -> ActResult<RecoveryStatus> {
        let machines = self.store().machines().await?;
        let epoch = self.store().current_epoch().await?;
        Ok(RecoveryStatus {
            recovery_mode: in_recovery(&machines),
            epoch: epoch.to_string(),
            scopes: machines
                .into_iter()
                .map(|m| ScopeLine {
                    machine: m.id,
                    scope: m.scope,
                })
                .collect(),
        })
    }

    async fn observe_recovery(&self, deadlines: Deadlines) -> ActResult<RecoveryPass> {
        let executor = self
            .executor(|| Ok(Arc::new(NoKeys) as Arc<dyn KeyProvider>), deadlines)
            .await?;
        executor.recovery_pass().await.map_err(executor_failure)
    }

    async fn account_scopes(&self, request: ScopeAccounting) -> ActResult<Vec<ScopeLine>> {
        let machines = request.machines.clone();
        self.store().account_scopes(&self.actor()?, request).await?;
        let mut lines = Vec::new();
        for machine in machines {
            let scope = self.store().machine(&machine).await?.scope;
            lines.push(ScopeLine { machine, scope });
        }
        Ok(lines)
    }

    async fn mark_scope(&self, machine: &str) -> ActResult<Marked> {
        let actor = self.actor()?;
        let missing = self.dependency_check(machine).await?;
        let scope = self.store().mark_scope(&actor, machine, missing).await?;
        Ok(Marked { scope, missing })
    }

    async fn release_scope(&self, machine: &str) -> ActResult<()> {
        Ok(self.store().release_scope(&self.actor()?, machine).await?)
    }

    async fn leave_recovery(&self) -> ActResult<()> {
        Ok(self.store().leave_recovery(&self.actor()?).await?)
    }

    async fn principals(&self) -> ActResult<Vec<PrincipalView>> {
        Ok(self.store().principals().await?)
    }

    async fn register_principal(&self, spec: PrincipalSpec) -> ActResult<()> {
        if !crate::identity::valid_identifier(&spec.id) {
            return Err(ActError::Usage(format!(
                "{:?} is not a principal identifier (1 to 128 of A-Z a-z 0-9 . _ @ -)",
                spec.id
            )));
        }
        Ok(self
            .store()
            .register_principal(&self.actor()?, spec)
            .await?)
    }

    async fn change_roles(&self, principal: &str, roles: Vec<Role>) -> ActResult<()> {
        Ok(self
            .store()
            .change_roles(&self.actor()?, principal, roles)
            .await?)
    }

    async fn revoke_identity(&self, principal: &str) -> ActResult<()> {
        let actor = self.actor()?;
        // The list is checked and locked before the store revokes, so a list that
        // cannot be written refuses the act instead of losing its line.
        let appending = match &self.grounds.denied {
            Some(list) => Some(list.prepare().map_err(|e| {
                ActError::Unavailable(format!("refused: revoking an identity: {e}"))
            })?),
            None => None,
        };
        let fingerprints: Vec<Fingerprint> = self
            .store()
            .certificates()
            .await?
            .iter()
            .filter(|b| b.principal == principal)
            .filter_map(|b| Fingerprint::parse(&b.fingerprint))
            .collect();
        self.store().revoke_identity(&actor, principal).await?;
        if let Some(appending) = appending {
            let note = format!("revoked by {} ({})", actor.id, actor.role);
            appending
                .append(principal, &fingerprints, &note)
                .map_err(|e| {
                    ActError::Unavailable(format!(
                        "{principal} is revoked in the store, but {e}: append the line \
                         `deny {principal}` to the list by hand"
                    ))
                })?;
        }
        Ok(())
    }

    async fn bind_certificate(
        &self,
        principal: &str,
        certificate_pem: &str,
        origin: CertificateOrigin,
    ) -> ActResult<String> {
        const ACT: &str = "refused: binding a certificate";
        let actor = self.actor()?;
        let identity = self.store().installation_identity().await?.ok_or_else(|| {
            ActError::Refused(format!(
                "{ACT}: the installation has no identity root yet: bootstrap it first \
                 (`infra-talos init`)"
            ))
        })?;
        let issued = issued_certificate(&identity.ca_certificate, certificate_pem)
            .map_err(|e| ActError::Refused(format!("{ACT}: {e}")))?;
        if issued.principal != principal {
            return Err(ActError::Refused(format!(
                "{ACT}: the certificate names {}, not {principal}",
                issued.principal
            )));
        }
        let spec = CertificateSpec {
            principal: principal.to_owned(),
            fingerprint: issued.fingerprint.hex(),
            origin,
        };
        self.store().bind_certificate(&actor, spec).await?;
        Ok(issued.fingerprint.to_string())
    }

    async fn identity_journal(&self) -> ActResult<Vec<IdentityEvent>> {
        Ok(self.store().identity_journal().await?)
    }
}

/// The key provider of a pass that only reads (drift, recovery): it seals, opens and
/// checks nothing, so neither needs a keyring; any key operation is refused.
pub struct NoKeys;

impl NoKeys {
    fn refuse(key_name: &str, operation: KeyOperation) -> KeyError {
        KeyError::Unsupported {
            provider: "none".to_owned(),
            key_name: key_name.to_owned(),
            operation,
            reason: "a pass that only reads uses no key".to_owned(),
        }
    }
}

#[async_trait::async_trait]
impl KeyProvider for NoKeys {
    fn provider(&self) -> &str {
        "none"
    }

    async fn seal(&self, key_name: &str, _: &[u8]) -> Result<SealedArtifact, KeyError> {
        Err(Self::refuse(key_name, KeyOperation::Encrypt))
    }

    async fn open(&self, sealed: &SealedArtifact) -> Result<Plaintext, KeyError> {
        Err(Self::refuse(
            &sealed.binding.key_name,
            KeyOperation::Decrypt,
        ))
    }

    async fn check(&self, binding: &KeyBinding) -> Result<UseCheck, KeyError> {
        Err(Self::refuse(&binding.key_name, KeyOperation::Read))
    }
}
