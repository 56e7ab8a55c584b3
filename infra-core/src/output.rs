//! Outputs: named values a fleet publishes from what was observed of its resources (a
//! database's endpoint, a bucket's ARN), for people and for the next program in a
//! pipeline.
//!
//! An output is declared with [`FleetBuilder::output`](crate::prelude::FleetBuilder::output)
//! from an [`Expr`] over observed values, or with
//! [`FleetBuilder::secret_output`](crate::prelude::FleetBuilder::secret_output) from one of the
//! fleet's secrets. [`read_outputs`] evaluates them from the last observation the
//! records keep, reaching no cloud. A secret output is never evaluated that way: the
//! records never hold a secret value, so its value is read from its cloud, one value,
//! only when asked for by name ([`Reading::Secret`]).

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use crate::env::{Dep, Env, NotYet, ObservedValue};
use crate::key::KeyId;
use crate::{Expr, Fleet, RecordError, SecretString, Value};

/// What an output is made of.
#[derive(Clone)]
pub(crate) enum Source {
    /// A value computed from observed states.
    Plain(Arc<dyn ErasedOutput>),
    /// The value of one of the fleet's secrets, by its declared index.
    Secret(usize),
}

/// A declared output.
#[derive(Clone)]
pub(crate) struct Declared {
    pub(crate) name: String,
    pub(crate) source: Source,
}

/// An output's expression, with its type erased.
pub(crate) trait ErasedOutput: Send + Sync {
    fn deps(&self) -> &[Dep];
    fn eval_json(&self, env: &dyn Env) -> Result<serde_json::Value, NotYet>;
}

impl<T: Value> ErasedOutput for Expr<T> {
    fn deps(&self) -> &[Dep] {
        Expr::deps(self)
    }
    fn eval_json(&self, env: &dyn Env) -> Result<serde_json::Value, NotYet> {
        self.eval(env)
            .map(|v| serde_json::to_value(v).unwrap_or(serde_json::Value::Null))
    }
}

/// What reading one output gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Its value.
    Value(serde_json::Value),
    /// A secret output not asked for by name: its value is not shown.
    Sensitive,
    /// A secret output asked for by name: its value, read from its cloud.
    Secret(SecretString),
    /// Not known: what it reads has not been observed (or the cloud did not answer).
    Unknown(String),
}

/// One output and what reading it gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// Its name.
    pub name: String,
    /// What reading it gave.
    pub reading: Reading,
}

/// The outputs as JSON, `{"outputs": "v1", "fleet": …, "values": {NAME: …}}`: each
/// value `{"value": …}`, `{"sensitive": true}` (with `"value"` only when asked for by
/// name) or `{"unknown": WHY}`.
pub fn outputs_json(fleet: &str, outputs: &[Output]) -> serde_json::Value {
    #[derive(Serialize)]
    struct One<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<&'a serde_json::Value>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        sensitive: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        unknown: Option<&'a str>,
    }
    let mut values = serde_json::Map::new();
    for o in outputs {
        let shown;
        let one = match &o.reading {
            Reading::Value(v) => One {
                value: Some(v),
                sensitive: false,
                unknown: None,
            },
            Reading::Sensitive => One {
                value: None,
                sensitive: true,
                unknown: None,
            },
            Reading::Secret(s) => {
                shown = serde_json::Value::String(s.expose().to_owned());
                One {
                    value: Some(&shown),
                    sensitive: true,
                    unknown: None,
                }
            }
            Reading::Unknown(why) => One {
                value: None,
                sensitive: false,
                unknown: Some(why),
            },
        };
        values.insert(
            o.name.clone(),
            serde_json::to_value(one).expect("an output serialises"),
        );
    }
    serde_json::json!({ "outputs": "v1", "fleet": fleet, "values": values })
}

/// Handles and observed states from the records' cache.
#[derive(Default)]
struct Cached {
    handles: HashMap<KeyId, String>,
    observed: HashMap<KeyId, Box<ObservedValue>>,
}

impl Env for Cached {
    fn handle(&self, key: KeyId) -> Option<String> {
        self.handles.get(&key).cloned()
    }
    fn observed(&self, key: KeyId) -> Option<&ObservedValue> {
        self.observed.get(&key).map(|o| &**o)
    }
    fn secret(&self, _: KeyId) -> Option<SecretString> {
        None
    }
}

/// Where a secret output's value is read from: provider, region and handle.
pub type SecretSite = (&'static str, &'static str, String);

/// Reads every output of `fleet` from the observations `store` keeps, reaching no
/// cloud. A secret output reads as [`Reading::Sensitive`]; for the one named
/// `show_secret`, the site of its value is returned beside, for the caller to read it
/// from its cloud (the only way to its value: no record holds one).
pub fn read_outputs(
    fleet: &Fleet,
    store: &dyn crate::RecordStore,
    show_secret: Option<&str>,
) -> Result<(Vec<Output>, Option<SecretSite>), RecordError> {
    // Every record is checked first: values read beside a malformed record are not
    // to be trusted either.
    store.verify(fleet.name())?;
    let env = cached_env(fleet, store)?;
    let key = |index: usize| KeyId {
        fleet: fleet.inner.id,
        index: u32::try_from(index).expect("fewer than 2^32 resources"),
    };
    let not_observed = |index: usize| {
        let r = &fleet.inner.resources[index];
        format!(
            "{}/{}/{} ({}) has not been observed: run `refresh` or `apply`, or give --refresh",
            r.reference.provider, r.reference.kind, r.reference.name, r.region
        )
    };
    let mut site = None;
    let mut outputs = Vec::new();
    for d in &fleet.inner.outputs {
        let reading = match &d.source {
            Source::Plain(expr) => match expr.eval_json(&env) {
                Ok(v) => Reading::Value(v),
                Err(_) => {
                    let missing = expr
                        .deps()
                        .iter()
                        .map(Dep::key)
                        .find(|k| env.observed(*k).is_none() && env.handle(*k).is_none())
                        .map(|k| k.index());
                    Reading::Unknown(match missing {
                        Some(i) => not_observed(i),
                        None => "what it reads has not been observed".to_owned(),
                    })
                }
            },
            Source::Secret(index) => match env.handle(key(*index)) {
                None => Reading::Unknown(not_observed(*index)),
                Some(handle) => {
                    if show_secret == Some(d.name.as_str()) {
                        let r = &fleet.inner.resources[*index];
                        site = Some((r.reference.provider, r.region, handle));
                    }
                    Reading::Sensitive
                }
            },
        };
        outputs.push(Output {
            name: d.name.clone(),
            reading,
        });
    }
    Ok((outputs, site))
}

/// The handles and observed states of every declared resource the cache holds.
fn cached_env(fleet: &Fleet, store: &dyn crate::RecordStore) -> Result<Cached, RecordError> {
    let mut env = Cached::default();
    let mut caches: HashMap<(&str, &str), Vec<crate::CacheEntry>> = HashMap::new();
    for (index, r) in fleet.inner.resources.iter().enumerate() {
        let pair = (r.reference.provider, r.reference.kind);
        let cached = match caches.entry(pair) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(store.load_cache(fleet.name(), pair.0, pair.1)?)
            }
        };
        let Some(entry) = cached
            .iter()
            .find(|e| e.name == r.reference.name && e.region == r.region)
        else {
            continue;
        };
        let key = KeyId {
            fleet: fleet.inner.id,
            index: u32::try_from(index).expect("fewer than 2^32 resources"),
        };
        env.handles.insert(key, entry.handle.clone());
        if let Ok(observed) = (r.kind.decode_observed)(entry.observed.clone()) {
            env.observed.insert(key, observed);
        }
    }
    Ok(env)
}
