//! `Field`: what every field of a spec provides, so specs derive their behaviour.
//!
//! A spec is a struct of fields; `#[derive(Spec)]` builds the struct's refinement,
//! merge, dependency list, settling and serialisation out of its fields' own. The field
//! types are: [`Expr<T>`] (a required value), [`Partial<F>`] (optional, "not said" by
//! default), [`Option<F>`] ("said: none" is a value), [`Key<K>`] (a reference),
//! `Vec<F>`, `BTreeMap<String, F>`, and any other `Spec` struct.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::settle::Settle;
use crate::{Dep, Env, Expr, Handle, Key, Kind, Merge, NotYet, Partial, Refines, Value};

/// A field of a spec: refinable, mergeable, serialisable, and settled ([`Settle`]) into
/// a value a backend can use.
pub trait Field: Refines + Merge + Settle + Clone + Serialize + Send + Sync + 'static {
    /// Appends every dependency the field reads: references and expression reads.
    fn deps(&self, out: &mut Vec<Dep>);

    /// Whether the field was not said (and is left out of the serialised spec).
    fn is_unsaid(&self) -> bool {
        false
    }

    /// Whether a settled value was not said.
    fn settled_is_unsaid(_settled: &Self::Settled) -> bool {
        false
    }
}

impl<T: Value> Settle for Expr<T> {
    type Settled = T;

    fn settle(&self, env: &dyn Env) -> Result<T, NotYet> {
        self.eval(env)
    }
}

impl<T: Value> Field for Expr<T> {
    fn deps(&self, out: &mut Vec<Dep>) {
        out.extend_from_slice(Expr::deps(self));
    }
}

impl<F: Field> Settle for Partial<F> {
    type Settled = Partial<F::Settled>;

    fn settle(&self, env: &dyn Env) -> Result<Self::Settled, NotYet> {
        match self {
            Partial::Unknown => Ok(Partial::Unknown),
            Partial::Known(f) => f.settle(env).map(Partial::Known),
        }
    }
}

impl<F: Field> Field for Partial<F> {
    fn deps(&self, out: &mut Vec<Dep>) {
        if let Partial::Known(f) = self {
            f.deps(out);
        }
    }

    fn is_unsaid(&self) -> bool {
        self.is_unknown()
    }

    fn settled_is_unsaid(settled: &Self::Settled) -> bool {
        settled.is_unknown()
    }
}

impl<F: Field> Settle for Option<F> {
    type Settled = Option<F::Settled>;

    fn settle(&self, env: &dyn Env) -> Result<Self::Settled, NotYet> {
        self.as_ref().map(|f| f.settle(env)).transpose()
    }
}

impl<F: Field> Field for Option<F> {
    fn deps(&self, out: &mut Vec<Dep>) {
        if let Some(f) = self {
            f.deps(out);
        }
    }
}

impl<K: Kind> Settle for Key<K> {
    type Settled = Handle<K>;

    fn settle(&self, env: &dyn Env) -> Result<Handle<K>, NotYet> {
        env.handle(self.id())
            .map(Handle::new)
            .ok_or_else(|| NotYet::one(Dep::Handle(self.id())))
    }
}

impl<K: Kind> Field for Key<K> {
    fn deps(&self, out: &mut Vec<Dep>) {
        out.push(Dep::Handle(self.id()));
    }
}

impl<F: Field> Settle for Vec<F> {
    type Settled = Vec<F::Settled>;

    fn settle(&self, env: &dyn Env) -> Result<Self::Settled, NotYet> {
        let mut not_yet = NotYet::default();
        let settled: Vec<Option<F::Settled>> =
            self.iter().map(|f| not_yet.take(f.settle(env))).collect();
        if not_yet.is_empty() {
            Ok(settled.into_iter().flatten().collect())
        } else {
            Err(not_yet)
        }
    }
}

impl<F: Field> Field for Vec<F> {
    fn deps(&self, out: &mut Vec<Dep>) {
        for f in self {
            f.deps(out);
        }
    }
}

impl<F: Field> Settle for BTreeMap<String, F> {
    type Settled = BTreeMap<String, F::Settled>;

    fn settle(&self, env: &dyn Env) -> Result<Self::Settled, NotYet> {
        let mut not_yet = NotYet::default();
        let settled: Vec<(String, Option<F::Settled>)> = self
            .iter()
            .map(|(k, f)| (k.clone(), not_yet.take(f.settle(env))))
            .collect();
        if not_yet.is_empty() {
            Ok(settled
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v)))
                .collect())
        } else {
            Err(not_yet)
        }
    }
}

impl<F: Field> Field for BTreeMap<String, F> {
    fn deps(&self, out: &mut Vec<Dep>) {
        for f in self.values() {
            f.deps(out);
        }
    }
}

/// How a difference in one field is repaired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Mutability {
    /// The cloud can change the field in place: an update.
    Mutable,
    /// The field cannot change once created: a replace.
    ForcesReplace,
}

/// One row of a kind's divergence table.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldInfo {
    /// The field's name as serialised (camelCase).
    pub name: &'static str,
    /// How a difference is repaired.
    pub mutability: Mutability,
    /// An unsaid (or empty) target is "I did not choose", not "there must be none", and
    /// is not compared: the cloud may fill the field in (a subnet, a VPC).
    pub compare_if_set: bool,
    /// A target equal to this string is an instruction carried out on create (`latest`
    /// image), not a value: it matches whatever the cloud reports.
    pub instruction: Option<&'static str>,
    /// A list whose order carries no meaning (policies, rules, `key=value` tags): the
    /// cloud may answer it in any order, so it is compared as a set.
    pub set: bool,
    /// Its values are, or derive from, a secret: a plan shows `(sensitive)` in their
    /// place.
    pub sensitive: bool,
    /// For a field that otherwise changes in place: the changes that cannot be made in
    /// place, as a test of the reported value and the target (a database moving
    /// between a provisioned and a serverless shape).
    #[serde(skip)]
    pub replace_when: Option<fn(&serde_json::Value, &serde_json::Value) -> bool>,
}

impl FieldInfo {
    /// How a change of this field from `before` (reported) to `after` (the target) is
    /// repaired.
    pub fn repair_of_change(
        &self,
        before: &serde_json::Value,
        after: &serde_json::Value,
    ) -> Mutability {
        match self.replace_when {
            Some(forces) if forces(before, after) => Mutability::ForcesReplace,
            _ => self.mutability,
        }
    }
}

impl PartialEq for FieldInfo {
    /// Rows are equal when they say the same of the same field; a `replace_when` test is
    /// compared by being present or not (functions have no meaningful equality).
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.mutability == other.mutability
            && self.compare_if_set == other.compare_if_set
            && self.instruction == other.instruction
            && self.set == other.set
            && self.sensitive == other.sensitive
            && self.replace_when.is_some() == other.replace_when.is_some()
    }
}

impl Eq for FieldInfo {}
