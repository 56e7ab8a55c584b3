//! The run's model: one slot per resource in play (declared, or an orphan of the
//! ledger), what observation found of it, and what the run decided to do with it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use foldhash::HashMapExt as _;

use crate::backend::Sighting;
use crate::env::ObservedValue;
use crate::fleet::DynSpec;
use crate::key::KeyId;
use crate::{
    Backend, BackendError, Divergence, Env, Ledger, LedgerRow, NotAttemptedReason, Ownership, Plan,
    Repair, SecretString, Step, Subject,
};

/// What observation found of one resource.
#[derive(Clone, Debug)]
pub(super) enum Seen {
    Present { sighting: Sighting, owner: Owner },
    Absent,
    Unobserved(Unobserved),
}

/// Whose a present resource is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Owner {
    Ours,
    /// Not ours: unmarked, or another fleet's.
    Not(Ownership),
    /// Its tags could not be read: the ledger row decides.
    Unreadable {
        in_ledger: bool,
    },
}

/// Why a resource was not observed.
#[derive(Clone, Debug)]
pub(super) enum Unobserved {
    /// It was not looked at, for a closed reason, with the sentence that explains it
    /// (for `no-credentials`, the backend's own words).
    Reason(NotAttemptedReason, String),
    /// Looking failed (boxed: rare, and a slot per resource holds the room for it).
    Error(Box<BackendError>),
}

/// What the apply will do with one resource.
#[derive(Clone, Debug)]
pub(super) enum Decision {
    Create,
    /// Exists and is ours; repair decided again at execution, once dependencies ran.
    Existing {
        repair: Repair,
        fields: Vec<Divergence>,
        pending: bool,
        /// For a planned replace: in which order its two steps run.
        replace: Option<ReplaceOrder>,
        /// For a replace forced by another: which one.
        because: Option<String>,
        /// Replaced because the caller asked for it (`--replace`).
        requested: bool,
    },
    Delete,
    Prune,
    AlreadyAbsent,
    /// Not attempted, for a closed reason, with what explains it.
    Skip(NotAttemptedReason, Option<String>),
    /// Failed (the error boxed: rare, and a slot per resource holds the room for it).
    Fail(Step, Box<BackendError>),
}

/// The order of a replace's two steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReplaceOrder {
    /// Names are unique: delete the old one (after its dependants), then create.
    DeleteFirst,
    /// Two of one name may coexist: create the new one, move the dependants, then
    /// delete the old one.
    CreateFirst,
}

/// What a resource is to the run.
#[derive(Clone)]
pub(super) enum Target {
    Present(DynSpec),
    Absent,
    Orphan,
}

/// One resource in play.
#[derive(Clone)]
pub(super) struct Slot {
    pub(super) subject: Subject,
    pub(super) provider: &'static str,
    pub(super) kind: &'static str,
    /// The declared index, for declared resources.
    pub(super) index: Option<usize>,
    /// Whether the ledger holds its row (always, for an orphan).
    pub(super) recorded: bool,
    pub(super) target: Target,
    pub(super) seen: Seen,
    /// For a composed secret that exists: whether the value the cloud holds differs
    /// from the one composed now (`None` when not compared).
    pub(super) secret_differs: Option<bool>,
    pub(super) decision: Decision,
}

/// Handles and observed states of resources, for settling (keyed by declared keys:
/// hashed with foldhash, not SipHash, as nothing outside the fleet chooses them).
#[derive(Clone, Default)]
pub(super) struct World {
    pub(super) handles: foldhash::HashMap<KeyId, String>,
    pub(super) observed: foldhash::HashMap<KeyId, Arc<ObservedValue>>,
    pub(super) secrets: foldhash::HashMap<KeyId, SecretString>,
}

impl Env for World {
    fn handle(&self, key: KeyId) -> Option<String> {
        self.handles.get(&key).cloned()
    }
    fn observed(&self, key: KeyId) -> Option<&ObservedValue> {
        self.observed.get(&key).map(|o| &**o)
    }
    fn secret(&self, key: KeyId) -> Option<SecretString> {
        self.secrets.get(&key).cloned()
    }
}

impl World {
    /// The handles and observed states of every declared resource observation found.
    pub(super) fn of_observation(plan: &Plan, observation: &Observation) -> Self {
        Self::of_slots(plan, &observation.slots)
    }

    /// The handles and observed states of every declared resource of `slots` seen
    /// present.
    pub(super) fn of_slots(plan: &Plan, slots: &[Slot]) -> Self {
        let mut world = World {
            handles: foldhash::HashMap::with_capacity(slots.len()),
            observed: foldhash::HashMap::with_capacity(slots.len()),
            secrets: foldhash::HashMap::new(),
        };
        for slot in slots {
            if let (Some(i), Seen::Present { sighting, .. }) = (slot.index, &slot.seen) {
                world.record(key_id(plan, i), sighting);
            }
        }
        world
    }

    pub(super) fn record(&mut self, key: KeyId, sighting: &Sighting) {
        self.handles.insert(key, sighting.handle.clone());
        self.observed.insert(key, sighting.observed_arc());
    }

    /// Whether both hold the same handles and the very same observed states (the
    /// states are compared by identity: a new read is a new state).
    pub(super) fn same_as(&self, other: &World) -> bool {
        self.handles == other.handles
            && self.observed.len() == other.observed.len()
            && self
                .observed
                .iter()
                .all(|(k, v)| other.observed.get(k).is_some_and(|o| Arc::ptr_eq(v, o)))
    }

    pub(super) fn forget(&mut self, key: KeyId) {
        self.handles.remove(&key);
        self.observed.remove(&key);
    }
}

impl Slot {
    /// For a planned replace, in which order its two steps run.
    pub(super) fn replace_order(&self) -> Option<ReplaceOrder> {
        match self.decision {
            Decision::Existing { replace, .. } => replace,
            _ => None,
        }
    }
}

/// Everything observed for one run, before deciding.
#[derive(Clone)]
pub(super) struct Observation {
    pub(super) slots: Vec<Slot>,
    /// The ledger as the run found it (shared with the store that read it).
    pub(super) ledger: Arc<Ledger>,
    /// Rows released with `forget`.
    pub(super) forgotten: Vec<LedgerRow>,
    /// Resources carrying this fleet's marker that neither the declaration nor the
    /// records name (looked for when the records are empty).
    pub(super) strays: Vec<Subject>,
    /// Deletes of discovered rows the user confirmed by name.
    pub(super) confirmed: BTreeSet<LedgerRow>,
    /// Resources the user asked to replace (`--replace`).
    pub(super) replacing: BTreeSet<LedgerRow>,
    /// What the providers will do before the creates decided (asked once decided).
    pub(super) prerequisites: Vec<super::PlannedPrerequisite>,
}

impl Observation {
    /// Whether deleting `subject` needs a confirmation the user has not given: its row
    /// was adopted by `discover` on the marker alone.
    pub(super) fn needs_confirmation(&self, subject: &Subject) -> bool {
        if self.ledger.discovered.is_empty() {
            return false;
        }
        let row = row_of(subject);
        self.ledger.is_discovered(&row) && !self.confirmed.contains(&row)
    }

    /// The slot of each declared resource, by its declared index.
    pub(super) fn slot_of_index(&self) -> HashMap<usize, usize> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(s, slot)| slot.index.map(|i| (i, s)))
            .collect()
    }
}

/// The slot of each declared resource, by its declared index: four bytes a resource,
/// as a plan of a large fleet holds it beside everything else.
pub(super) struct SlotsByIndex(Vec<u32>);

impl SlotsByIndex {
    /// No slot: the resource is not in play.
    const NONE: u32 = u32::MAX;

    /// The slots of `observation`'s `declared` resources.
    pub(super) fn of(observation: &Observation, declared: usize) -> Self {
        let mut slots = vec![Self::NONE; declared];
        for (s, slot) in observation.slots.iter().enumerate() {
            if let Some(i) = slot.index {
                slots[i] = u32::try_from(s).expect("fewer than 2^32 slots");
            }
        }
        SlotsByIndex(slots)
    }

    /// The slot of the resource declared at `index`, if it is in play.
    pub(super) fn get(&self, index: usize) -> Option<usize> {
        match self.0.get(index) {
            Some(&s) if s != Self::NONE => usize::try_from(s).ok(),
            _ => None,
        }
    }
}

/// The subject of a resource.
pub(super) fn subject(provider: &str, kind: &str, name: &str, region: &str) -> Subject {
    Subject {
        provider: provider.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        region: region.to_owned(),
    }
}

/// The ledger row of a subject.
pub(super) fn row_of(s: &Subject) -> LedgerRow {
    LedgerRow {
        provider: s.provider.clone(),
        kind: s.kind.clone(),
        name: s.name.clone(),
        region: s.region.clone(),
    }
}

/// The kind id as the backend spells it, or a marker that the backend lacks the kind
/// (the slot then ends `NotAttempted(UnsupportedKind)`; its subject keeps the real id).
pub(super) fn static_kind(kind: &str, backend: &dyn Backend) -> &'static str {
    backend
        .capabilities()
        .kinds
        .into_iter()
        .find(|k| *k == kind)
        .unwrap_or("(unsupported kind)")
}

/// The sighting of a resource that exists and is this fleet's.
pub(super) fn owned_sighting(slot: &Slot) -> Option<Sighting> {
    match &slot.seen {
        Seen::Present {
            sighting,
            owner: Owner::Ours | Owner::Unreadable { in_ledger: true },
        } => Some(sighting.clone()),
        _ => None,
    }
}

/// The key of the resource declared at `index`.
pub(super) fn key_id(plan: &Plan, index: usize) -> KeyId {
    KeyId {
        fleet: plan.fleet().inner.id,
        index: u32::try_from(index).expect("fewer than 2^32 resources"),
    }
}
