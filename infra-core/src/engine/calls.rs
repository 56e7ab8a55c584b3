//! The provider calls of one node of the schedule: a create (looked for again when its
//! answer was lost), an update decided again once what it depends on has run, a
//! replace found only then, and a delete that reads the ownership marker again first.

use std::any::Any;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::Engine;
use super::execute::Done;
use super::model::{Decision, Seen, Slot, Target, World};
use super::schedule::Work;
use crate::backend::{Capabilities, SettledSpec, Sighting};
use crate::diverge::divergence_of;
use crate::fleet::DynSpec;
use crate::key::KeyId;
use crate::sdk::{Deferral, Written};
use crate::{
    Backend, BackendError, Change, Dep, Divergence, ErrorKind, FieldInfo, Marker, Mutability,
    NotYet, Ownership, Plan, Repair, Step, repair_of,
};

/// What a backend's capabilities say of one node's kind, read once per run rather
/// than asked of the backend for every call.
#[derive(Clone, Copy, Debug)]
pub(super) struct KindTraits {
    /// Its tags can be read, so ownership can be checked before a delete.
    pub(super) readable: bool,
    /// Names need not be unique: a replace may create before it deletes.
    pub(super) create_first: bool,
}

impl KindTraits {
    pub(super) fn of(capabilities: Option<&Capabilities>, kind: &str) -> Self {
        KindTraits {
            readable: capabilities.is_some_and(|c| c.ownership.contains(kind)),
            create_first: capabilities.is_some_and(|c| c.duplicate_names.contains(kind)),
        }
    }
}

/// A secret value a spec reads: whose, and where to read it.
pub(super) type SecretSite = (KeyId, &'static str, String, String);

/// Everything one node's calls need, owned, so that its future borrows nothing that
/// the run changes.
struct Call<'a> {
    backend: Arc<dyn Backend>,
    kind: &'static str,
    region: String,
    name: String,
    traits: KindTraits,
    marker: &'a Marker,
    /// The handles and observed states the spec reads, and nothing else.
    env: World,
    /// The same, as observation found them, before this run changed anything.
    initial: World,
    /// The secret values the spec reads.
    secrets: Vec<SecretSite>,
    /// The resource as observation found it, if it exists.
    existing: Option<Sighting>,
    fields: &'static [FieldInfo],
    /// Declared with `prevent_destroy`: a replace found only while applying fails.
    protected: bool,
}

impl Call<'_> {
    /// A sighting of what a create or an update wrote, remembering the fields of
    /// `spec` the cloud does not report (a sensitive one never).
    fn remembering(&self, sighting: Sighting, spec: SettledSpec<'_>) -> Sighting {
        let serde_json::Value::Object(sent) = spec.to_json() else {
            return sighting;
        };
        let written: serde_json::Map<String, serde_json::Value> = sent
            .into_iter()
            .filter(|(name, _)| {
                self.fields
                    .iter()
                    .any(|f| f.name == name.as_str() && !f.sensitive)
            })
            .collect();
        sighting.recalling(&written)
    }
}

impl Engine {
    /// The work of one node, as a future that makes the provider calls.
    pub(super) fn job<'a>(
        &'a self,
        plan: &'a Plan,
        slot: &'a Slot,
        work: Work,
        traits: KindTraits,
        (world, initial): (&World, &World),
        marker: &'a Marker,
    ) -> BoxFuture<'a, Done> {
        let backend = Arc::clone(
            self.backends
                .get(slot.provider)
                .expect("observed slots have a backend"),
        );
        let (env, secrets, initial) = match &slot.target {
            Target::Present(spec) => {
                let (env, secrets) = reads_of(plan, spec, world);
                (env, secrets, reads_of(plan, spec, initial).0)
            }
            _ => (World::default(), Vec::new(), World::default()),
        };
        let call = Call {
            backend,
            kind: slot.kind,
            region: slot.subject.region.clone(),
            name: slot.subject.name.clone(),
            traits,
            marker,
            env,
            initial,
            secrets,
            existing: match &slot.seen {
                Seen::Present { sighting, .. } => Some(sighting.clone()),
                _ => None,
            },
            fields: slot
                .index
                .map(|i| plan.fleet().inner.resources[i].kind.fields)
                .unwrap_or(&[]),
            protected: plan.fleet().is_protected(
                &slot.subject.provider,
                &slot.subject.kind,
                &slot.subject.name,
            ),
        };
        let decision = slot.decision.clone();
        let target = slot.target.clone();
        Box::pin(async move {
            match (work, decision, target) {
                (Work::Delete | Work::DeleteOld, ..) => {
                    let handle = call
                        .existing
                        .as_ref()
                        .expect("a delete is of something seen")
                        .handle
                        .clone();
                    self.delete_owned(&call, &handle).await
                }
                (Work::CreateNew, _, Target::Present(spec)) => {
                    self.create(call, &spec, Step::Replace).await
                }
                (Work::Build, Decision::Create, Target::Present(spec)) => {
                    self.create(call, &spec, Step::Create).await
                }
                (Work::Build, Decision::Existing { .. }, Target::Present(spec)) => {
                    self.converge(call, &spec).await
                }
                (work, decision, _) => unreachable!("no job for {work:?} of {decision:?}"),
            }
        })
    }

    /// Creates the resource (the new one of a replace, for `Step::Replace`).
    async fn create(&self, call: Call<'_>, spec: &DynSpec, step: Step) -> Done {
        let settled = match self
            .settle_with_secrets(spec, &call.env, &call.secrets)
            .await
        {
            Ok(s) => s,
            Err(e) => return Done::Failed(step, e),
        };
        let settled_spec = SettledSpec::erased(call.kind, &*settled, spec.0.settled_json_fn());
        // The resource this one replaces, if any: a create that may have landed is
        // looked for among the others of its name.
        let replaced = call.existing.as_ref().map(|s| s.handle.as_str());
        match self.create_or_find(&call, settled_spec, replaced).await {
            Ok(Written::Deferred(d)) => deferred(d),
            Ok(Written::Done(sighting)) => Done::Built {
                change: if step == Step::Replace {
                    Change::Replaced
                } else {
                    Change::Created
                },
                sighting: Some(call.remembering(sighting.without_marker(), settled_spec)),
            },
            Err(e) => Done::Failed(step, e),
        }
    }

    /// Brings an existing resource to its target: decided again, now that what it
    /// depends on has run (a composed secret's value compared with the cloud's again).
    async fn converge(&self, call: Call<'_>, spec: &DynSpec) -> Done {
        let sighting = call
            .existing
            .clone()
            .expect("an existing resource was seen");
        let target = spec.0.lenient_json(&call.env);
        let mut fields = divergence_of(call.fields, &target, |f| sighting.compared(f));
        // Settled again as it was before the run only when something it reads moved.
        if !call.env.same_as(&call.initial) {
            fields.extend(unreported_moves(
                call.fields,
                &spec.0.lenient_json(&call.initial),
                &target,
                |f| sighting.compared(f),
            ));
        }
        let composes = spec.0.composes_secret();
        if fields.is_empty() && !composes {
            return Done::Built {
                change: Change::Unchanged,
                sighting: Some(sighting),
            };
        }
        let settled = match self
            .settle_with_secrets(spec, &call.env, &call.secrets)
            .await
        {
            Ok(s) => s,
            Err(e) => return Done::Failed(step_of(repair_of(&fields)), e),
        };
        if composes {
            match self
                .stored_secret_differs(&call, spec, &*settled, &sighting.handle)
                .await
            {
                Ok(true) => fields.push(Divergence::hidden("valueFrom", Mutability::Mutable)),
                Ok(false) => {}
                Err(e) => return Done::Failed(Step::Update, e),
            }
        }
        let repair = repair_of(&fields);
        if repair == Repair::Nothing {
            return Done::Built {
                change: Change::Unchanged,
                sighting: Some(sighting),
            };
        }
        let settled_spec = SettledSpec::erased(call.kind, &*settled, spec.0.settled_json_fn());
        if repair == Repair::Update {
            return match call
                .backend
                .update(call.kind, &call.region, &sighting.handle, settled_spec)
                .await
            {
                Ok(Written::Deferred(d)) => deferred(d),
                Ok(Written::Done(s)) => Done::Built {
                    change: Change::Updated,
                    sighting: Some(call.remembering(s.without_marker(), settled_spec)),
                },
                Err(e) => Done::Failed(Step::Update, e),
            };
        }
        if call.protected {
            return Done::Failed(
                Step::Replace,
                BackendError::new(
                    ErrorKind::Conflict,
                    format!(
                        "{} must be replaced now that what it depends on changed, but it is \
                         declared with `prevent_destroy`: left as it was",
                        call.name
                    ),
                ),
            );
        }
        self.replace_late(&call, settled_spec, &sighting.handle)
            .await
    }

    /// Whether the value a composed secret holds in the cloud differs from the value
    /// composed now. Both live in this call only.
    async fn stored_secret_differs(
        &self,
        call: &Call<'_>,
        spec: &DynSpec,
        settled: &(dyn Any + Send + Sync),
        handle: &str,
    ) -> Result<bool, BackendError> {
        let Some(composed) = spec.0.composed_secret(settled) else {
            return Ok(false);
        };
        let stored = call.backend.secret_value(&call.region, handle).await?;
        Ok(stored.expose() != composed.expose())
    }

    /// A replace found only while applying (a dependency changed under a field that
    /// cannot change in place): both steps in this node, in the order the kind allows.
    async fn replace_late(&self, call: &Call<'_>, spec: SettledSpec<'_>, old: &str) -> Done {
        let create_first = call.traits.create_first;
        if !create_first && let Done::Failed(_, e) = self.delete_owned(call, old).await {
            return Done::Failed(Step::Replace, e);
        }
        let created = match self.create_or_find(call, spec, Some(old)).await {
            Ok(Written::Deferred(d)) => return deferred(d),
            Ok(Written::Done(s)) => call.remembering(s.without_marker(), spec),
            Err(e) => return Done::Failed(Step::Replace, e),
        };
        if create_first && let Done::Failed(_, e) = self.delete_owned(call, old).await {
            return Done::Failed(Step::Replace, e);
        }
        Done::Built {
            change: Change::Replaced,
            sighting: Some(created),
        }
    }

    /// Reads the secret values a spec composes (the only inbound plaintext path), then
    /// settles it. The values live in this call's environment only.
    pub(super) async fn settle_with_secrets(
        &self,
        spec: &DynSpec,
        env: &World,
        secrets: &[SecretSite],
    ) -> Result<Box<dyn Any + Send + Sync>, BackendError> {
        let mut env = env.clone();
        for (key, provider, region, handle) in secrets {
            let backend = self.backends.get(provider).ok_or_else(|| {
                BackendError::invalid(format!("no {provider} backend to read a secret from"))
            })?;
            let value = backend.secret_value(region, handle).await?;
            env.secrets.insert(*key, value);
        }
        spec.0.settle_dyn(&env).map_err(|not_yet: NotYet| {
            BackendError::invalid(format!(
                "cannot be settled: {not_yet}, which this apply did not create; apply it first or declare it"
            ))
        })
    }

    /// Creates a resource. When the create fails in a way that may have reached the
    /// provider (a lost response, a timeout), looks for it before calling it failed: a
    /// resource of that name, carrying this fleet's marker, other than `replaced` (the
    /// one a create-first replace is about to delete), is the one this call made. Without
    /// the look, a landed create would be left behind unrecorded — for a kind whose names
    /// may repeat, as a twin of the resource it was meant to replace.
    async fn create_or_find(
        &self,
        call: &Call<'_>,
        spec: SettledSpec<'_>,
        replaced: Option<&str>,
    ) -> Result<Written, BackendError> {
        let (backend, kind, region, name) = (&*call.backend, call.kind, &*call.region, &*call.name);
        let error = match backend.create(kind, region, name, spec, call.marker).await {
            Ok(written) => return Ok(written),
            Err(e) if !e.may_have_been_sent => return Err(e),
            Err(e) => e,
        };
        let Ok(listed) = backend.list(kind, region).await else {
            return Err(error);
        };
        for candidate in listed
            .iter()
            .filter(|l| l.name == name && Some(l.handle.as_str()) != replaced)
        {
            let ours = backend
                .ownership(kind, region, &candidate.handle)
                .await
                .is_ok_and(|tags| matches!(call.marker.verdict(&tags), Ownership::Ours));
            if !ours {
                continue;
            }
            if let Ok(sighting) = backend.read(kind, region, &candidate.handle).await {
                return Ok(Written::Done(sighting));
            }
        }
        Err(error)
    }

    /// Deletes a resource after reading its marker again (for a kind whose tags can be
    /// read): a resource that no longer carries this fleet's marker is left alone.
    async fn delete_owned(&self, call: &Call<'_>, handle: &str) -> Done {
        let (backend, kind, region) = (&*call.backend, call.kind, &*call.region);
        if call.traits.readable {
            match backend.ownership(kind, region, handle).await {
                Ok(tags) => match call.marker.verdict(&tags) {
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
        match backend.delete(kind, region, handle).await {
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

/// The fields the cloud does not report whose target moved during this run (a
/// dependency was replaced, and the field holds its handle): the comparison cannot see
/// them, so they are written because their input changed. Without this a resource would
/// keep pointing at a dependency this run deletes.
fn unreported_moves<'r>(
    fields: &[FieldInfo],
    before: &serde_json::Map<String, serde_json::Value>,
    after: &serde_json::Map<String, serde_json::Value>,
    reported: impl Fn(&str) -> Option<&'r serde_json::Value>,
) -> Vec<Divergence> {
    fields
        .iter()
        .filter(|f| reported(f.name).is_none())
        .filter_map(|f| {
            let now = after.get(f.name)?;
            let then = before
                .get(f.name)
                .cloned()
                .unwrap_or(serde_json::Value::Null);
            (then != *now).then(|| Divergence {
                field: f.name,
                mutability: f.repair_of_change(&then, now),
                before: then.clone(),
                after: now.clone(),
                sensitive: f.sensitive,
            })
        })
        .collect()
}

/// The step a repair is carried out by.
fn step_of(repair: Repair) -> Step {
    match repair {
        Repair::Replace => Step::Replace,
        _ => Step::Update,
    }
}

/// What a spec reads from the world: the handles and observed states of its
/// dependencies, and where to read the secret values it composes.
pub(super) fn reads_of(plan: &Plan, spec: &DynSpec, world: &World) -> (World, Vec<SecretSite>) {
    let mut env = World::default();
    let mut secrets = Vec::new();
    for dep in spec.0.deps() {
        let key = dep.key();
        if let Some(h) = world.handles.get(&key) {
            env.handles.insert(key, h.clone());
        }
        if let Some(o) = world.observed.get(&key) {
            env.observed.insert(key, Arc::clone(o));
        }
        if let Dep::Secret(key) = dep
            && let (Some(h), Some(i)) = (world.handles.get(&key), plan.fleet().index_of(key))
        {
            let r = &plan.fleet().inner.resources[i];
            secrets.push((key, r.reference.provider, r.region.to_owned(), h.clone()));
        }
    }
    (env, secrets)
}

/// A write the backend deferred: not attempted, with the deferral's reason and detail,
/// and not a failure.
fn deferred(d: Deferral) -> Done {
    Done::NotAttempted(d.reason.not_attempted(), Some(d.detail))
}
