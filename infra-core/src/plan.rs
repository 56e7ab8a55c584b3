//! Total plans: a [`Status`] for every key of a fleet.
//!
//! A plan is indexed by its fleet's keys, so it cannot forget a key, cannot hold one
//! twice, and cannot delete by omission: a resource is deleted only when its status is
//! [`Status::Absent`] (or, for a resource whose declaration is gone, by the ledger's
//! orphan rule, after its ownership marker is checked again).
//!
//! ```
//! use infra_core::{prelude::AwsRegion, prelude::Fleet, engine::Plan, prelude::Status, kinds::ObjectStore};
//!
//! let mut builder = Fleet::builder("shop");
//! let assets = builder.declare(AwsRegion::EuWest3, "assets", ObjectStore::new());
//! let fleet = builder.build().unwrap();
//!
//! let plan = fleet.plan();
//! assert_eq!(plan.status(assets).map(|s| s.name()), Some("present"));
//! let teardown = Plan::absent(&fleet);
//! assert_eq!(teardown.status(assets).map(|s| s.name()), Some("absent"));
//! assert!(Plan::unmanaged(&fleet).does_nothing());
//! ```
//!
//! A plan cannot be assembled from a partial list of keys: it is made from a fleet, with
//! every key, and changed one key at a time.
//!
//! ```compile_fail
//! use infra_core::{prelude::Fleet, engine::Plan};
//! fn partial(fleet: Fleet) -> Plan {
//!     Plan { fleet, targets: Vec::new() }
//! }
//! ```

use std::fmt::{self, Write as _};
use std::sync::{Arc, OnceLock};

use serde::Serialize;

use crate::fleet::DynSpec;
use crate::merge::{WriterConflict, merge_writers};
use crate::{Fleet, Key, Kind, Problem, Refines, ResourceRef, Status};

/// A target for every key of a fleet.
#[derive(Clone)]
#[must_use]
pub struct Plan {
    pub(crate) fleet: Fleet,
    pub(crate) targets: Vec<Status<DynSpec>>,
    /// The reference graph of the targets and its order, worked out once: every stage
    /// of a run asks for them, and only [`Plan::set`] changes them.
    graph: OnceLock<Arc<Graph>>,
}

/// A plan's reference graph: each resource's dependencies, and a build order or the
/// cycle that prevents one. `None` when no target reads anything the declaration does
/// not: the fleet's own graph then serves, shared rather than copied.
struct Graph {
    own: Option<OwnGraph>,
}

/// A plan's own dependencies, and its build order or the cycle that prevents one.
type OwnGraph = (Vec<Vec<usize>>, Result<Vec<usize>, Vec<usize>>);

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("fleet", &self.fleet.name())
            .field(
                "targets",
                &self.targets.iter().map(Status::name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// A plan was given a key of another fleet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the key does not belong to fleet `{fleet}`; use the keys its builder returned")]
pub struct ForeignKey {
    /// The plan's fleet.
    pub fleet: String,
}

/// Two writers' plans collide on one resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{resource}: {conflict}")]
pub struct PlanConflict {
    /// The resource both writers set.
    pub resource: ResourceRef,
    /// The field and both writers' values.
    pub conflict: Box<WriterConflict>,
}

impl Plan {
    /// The fleet's own declaration: every key as declared.
    pub fn declared(fleet: &Fleet) -> Plan {
        Plan {
            graph: OnceLock::new(),
            fleet: fleet.clone(),
            targets: fleet
                .inner
                .resources
                .iter()
                .map(|d| d.target.clone())
                .collect(),
        }
    }

    /// Every key absent: the teardown of the whole fleet. Its order still comes from
    /// the declaration's references, read backwards.
    pub fn absent(fleet: &Fleet) -> Plan {
        Plan {
            graph: OnceLock::new(),
            fleet: fleet.clone(),
            targets: vec![Status::Absent; fleet.len()],
        }
    }

    /// Every key unmanaged: a plan that any world satisfies and that does nothing.
    pub fn unmanaged(fleet: &Fleet) -> Plan {
        Plan {
            graph: OnceLock::new(),
            fleet: fleet.clone(),
            targets: vec![Status::Unmanaged; fleet.len()],
        }
    }

    /// The fleet the plan covers.
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// How many keys the plan covers (all of its fleet's).
    pub fn len(&self) -> usize {
        self.targets.len()
    }

    /// Whether the fleet has no keys.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// Whether every key is unmanaged, so that no world gives this plan any work.
    pub fn does_nothing(&self) -> bool {
        self.targets.iter().all(|t| matches!(t, Status::Unmanaged))
    }

    /// Whether the plan declares any resource present: a plan that declares none is a
    /// teardown (the brake does not hold it, and a scope follows dependants).
    pub fn declares_something(&self) -> bool {
        self.targets.iter().any(|t| matches!(t, Status::Present(_)))
    }

    /// Sets one key's target.
    pub fn set<K: Kind>(&mut self, key: Key<K>, status: Status<K>) -> Result<(), ForeignKey> {
        let index = self.fleet.index_of(key.id()).ok_or_else(|| ForeignKey {
            fleet: self.fleet.name().to_owned(),
        })?;
        self.targets[index] = status.map(|spec| DynSpec(Arc::new(spec)));
        self.graph = OnceLock::new();
        Ok(())
    }

    /// The same plan with one key's target replaced.
    pub fn with<K: Kind>(mut self, key: Key<K>, status: Status<K>) -> Result<Plan, ForeignKey> {
        self.set(key, status)?;
        Ok(self)
    }

    /// One key's target, if the key belongs to the plan's fleet.
    pub fn status<K: Kind>(&self, key: Key<K>) -> Option<Status<&K>> {
        let index = self.fleet.index_of(key.id())?;
        Some(match &self.targets[index] {
            Status::Unmanaged => Status::Unmanaged,
            Status::Absent => Status::Absent,
            Status::Present(spec) => Status::Present(spec.0.as_any().downcast_ref::<K>()?),
        })
    }

    /// Each resource's dependencies, by index: those the declaration names (so that a
    /// teardown, which carries no specs, still deletes dependants first) together with
    /// those of the plan's own present specs.
    pub fn dependencies(&self) -> Vec<Vec<usize>> {
        self.deps().to_vec()
    }

    /// [`Plan::dependencies`], borrowed.
    pub(crate) fn deps(&self) -> &[Vec<usize>] {
        match &self.graph().own {
            Some((deps, _)) => deps,
            None => &self.fleet.inner.deps,
        }
    }

    /// The build order, or the cycle that prevents one.
    fn order(&self) -> Result<&[usize], &[usize]> {
        match &self.graph().own {
            Some((_, Ok(order))) => Ok(order),
            Some((_, Err(cycle))) => Err(cycle),
            None => Ok(&self.fleet.inner.order),
        }
    }

    fn graph(&self) -> &Graph {
        self.graph.get_or_init(|| {
            let more = |(declared, target): (&Vec<usize>, &Status<DynSpec>)| match target {
                Status::Present(spec) => spec.0.deps().iter().any(|dep| {
                    self.fleet
                        .index_of(dep.key())
                        .is_some_and(|i| !declared.contains(&i))
                }),
                _ => false,
            };
            if !self.fleet.inner.deps.iter().zip(&self.targets).any(more) {
                return Arc::new(Graph { own: None });
            }
            let deps: Vec<Vec<usize>> = self
                .fleet
                .inner
                .deps
                .iter()
                .zip(&self.targets)
                .map(|(declared, target)| {
                    let mut deps = declared.clone();
                    if let Status::Present(spec) = target {
                        for dep in spec.0.deps() {
                            if let Some(i) = self.fleet.index_of(dep.key())
                                && !deps.contains(&i)
                            {
                                deps.push(i);
                            }
                        }
                    }
                    deps
                })
                .collect();
            let order = crate::graph::topological_order(&deps);
            Arc::new(Graph {
                own: Some((deps, order)),
            })
        })
    }

    /// A build order of resource indices, or the cycle the plan's references form.
    pub fn build_order(&self) -> Result<Vec<usize>, Problem> {
        self.order()
            .map(<[usize]>::to_vec)
            .map_err(|cycle| Problem::Cycle {
                path: cycle
                    .iter()
                    .map(|&i| self.fleet.inner.resources[i].reference.clone())
                    .collect(),
            })
    }

    /// Every problem the checks find in the plan's own specs (a plan may replace the
    /// declaration's specs with [`set`](Self::set)), including cycles.
    pub fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        // The fleet's names in scope once for every resource's check, not once each.
        self.fleet.with_names(|| {
            for (declared, target) in self.fleet.inner.resources.iter().zip(&self.targets) {
                if let Status::Present(spec) = target {
                    let mut found = Vec::new();
                    spec.0.check(&mut found);
                    problems.extend(found.into_iter().map(|detail| Problem::Invalid {
                        resource: declared.reference.clone(),
                        detail,
                    }));
                    if spec
                        .0
                        .deps()
                        .iter()
                        .any(|d| self.fleet.index_of(d.key()).is_none())
                    {
                        problems.push(Problem::ForeignKey {
                            resource: Some(declared.reference.clone()),
                            detail: "it refers to a resource of another fleet".into(),
                        });
                    }
                }
            }
        });
        if let Err(cycle) = self.build_order() {
            problems.push(cycle);
        }
        problems
    }

    /// Merges two writers' plans over the same fleet, key by key.
    pub fn merge(
        &self,
        writer: &str,
        other: &Plan,
        other_writer: &str,
    ) -> Result<Plan, PlanConflict> {
        Plan::merge_writers(&[(writer, self.clone()), (other_writer, other.clone())])
            .map(|p| p.expect("two writers"))
    }

    /// Merges several writers' plans over the same fleet, key by key. A collision names
    /// the resource, the field, and the two writers with what each asked for.
    ///
    /// # Panics
    /// If the plans are not all over the same fleet.
    pub fn merge_writers<W: AsRef<str>>(
        writes: &[(W, Plan)],
    ) -> Result<Option<Plan>, PlanConflict> {
        let Some((_, first)) = writes.first() else {
            return Ok(None);
        };
        assert!(
            writes
                .iter()
                .all(|(_, p)| Arc::ptr_eq(&p.fleet.inner, &first.fleet.inner)),
            "plans of different fleets cannot be merged"
        );
        let fleet = &first.fleet;
        let mut targets = Vec::with_capacity(first.len());
        for index in 0..first.len() {
            let per_key: Vec<(&str, Status<DynSpec>)> = writes
                .iter()
                .map(|(w, p)| (w.as_ref(), p.targets[index].clone()))
                .collect();
            let merged = fleet
                .with_names(|| merge_writers(&per_key))
                .map_err(|conflict| PlanConflict {
                    resource: fleet.inner.resources[index].reference.clone(),
                    conflict: Box::new(conflict),
                })?;
            targets.push(merged.expect("at least one writer"));
        }
        Ok(Some(Plan {
            graph: OnceLock::new(),
            fleet: fleet.clone(),
            targets,
        }))
    }

    /// The plan as JSON: deterministic (resources sorted by provider, kind and name),
    /// versioned (`"plan": "v1"`), and free of secret values.
    pub fn to_json(&self) -> serde_json::Value {
        self.fleet
            .with_names(|| serde_json::to_value(self).expect("a plan serialises to JSON"))
    }

    /// The plan as text for people: one line per resource, in build order.
    pub fn render(&self) -> String {
        let counts = |name: &str| self.targets.iter().filter(|t| t.name() == name).count();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "fleet `{}`: {} resources ({} present, {} absent, {} unmanaged)",
            self.fleet.name(),
            self.len(),
            counts("present"),
            counts("absent"),
            counts("unmanaged"),
        );
        let deps = self.deps();
        let order = self
            .build_order()
            .unwrap_or_else(|_| (0..self.len()).collect());
        let names: Vec<&ResourceRef> = self
            .fleet
            .inner
            .resources
            .iter()
            .map(|d| &d.reference)
            .collect();
        let width = names.iter().map(|n| n.to_string().len()).max().unwrap_or(0);
        for i in order {
            let d = &self.fleet.inner.resources[i];
            let mark = match self.targets[i] {
                Status::Present(_) => "+",
                Status::Absent => "-",
                Status::Unmanaged => " ",
            };
            let _ = write!(
                out,
                "  {mark} {:<width$}  {:<9}  {}",
                d.reference.to_string(),
                self.targets[i].name(),
                d.region,
            );
            if !deps[i].is_empty() {
                let after: Vec<String> = deps[i].iter().map(|&j| names[j].to_string()).collect();
                let _ = write!(out, "  after {}", after.join(", "));
            }
            out.push('\n');
        }
        for r in self.fleet.forgets() {
            let _ = writeln!(out, "  ~ {}  forget (records only)", r.resource);
        }
        out
    }
}

impl Refines for Plan {
    /// Key by key, over the same fleet.
    fn refines(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.fleet.inner, &other.fleet.inner)
            && self
                .targets
                .iter()
                .zip(&other.targets)
                .all(|(a, b)| a.refines(b))
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Entry<'a> {
    resource: String,
    region: &'static str,
    #[serde(flatten)]
    target: &'a Status<DynSpec>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    depends_on: Vec<String>,
}

impl Serialize for Plan {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let inner = &self.fleet.inner;
        let deps = self.deps();
        let mut indices: Vec<usize> = (0..self.len()).collect();
        indices.sort_by(|&a, &b| {
            inner.resources[a]
                .reference
                .cmp(&inner.resources[b].reference)
        });
        let entries: Vec<Entry<'_>> = self.fleet.with_names(|| {
            indices
                .iter()
                .map(|&i| {
                    let mut depends_on: Vec<String> = deps[i]
                        .iter()
                        .map(|&j| inner.resources[j].reference.to_string())
                        .collect();
                    depends_on.sort();
                    Entry {
                        resource: inner.resources[i].reference.to_string(),
                        region: inner.resources[i].region,
                        target: &self.targets[i],
                        depends_on,
                    }
                })
                .collect()
        });
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("plan", "v1")?;
        map.serialize_entry("fleet", self.fleet.name())?;
        self.fleet
            .with_names(|| map.serialize_entry("resources", &entries))?;
        let forgets: Vec<String> = inner
            .forgets
            .iter()
            .map(|r| r.resource.to_string())
            .collect();
        map.serialize_entry("forgets", &forgets)?;
        map.end()
    }
}
