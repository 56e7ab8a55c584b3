//! The SDK for provider authors: everything a crate that brings a cloud to the engine
//! needs, and nothing a fleet author does.
//!
//! A provider implements [`KindBackend<K>`] once for each kind `K` it realises — list,
//! read, create, update, delete, ownership and mark, with the kind's own settled spec,
//! observed state and reported configuration — and hands the implementations to a
//! [`Router`], which is the engine's [`Backend`]: the routing by kind id is written
//! once, here. A create or update answers [`Written`]: done, or [`Written::Deferred`]
//! with a [`Deferral`] (a change recorded for approval is not an error). Errors map the
//! provider's own onto [`ErrorKind`], `NotFound` only from a curated list of codes.
//!
//! [`retry`] is the one retry and throttling policy every provider applies, through its
//! client library's own retry hooks where it has them ([`RetryPolicy::decide`]), or with
//! [`Retrier`] (and [`layer::Retry`]) where it has none; the engine never retries on top.
//!
//! [`adaptive`] holds each (provider, region, API) to as many calls in flight as its
//! cloud answers without throttling, under the run's `--parallelism`; the engine puts
//! it around every backend.
//!
//! [`layer`] wraps any backend in something that sees every call: recording, scripted
//! faults, latency, retries, tracing, or a layer of your own.
//!
//! `docs/provider-layout.md` in the repository is the layout every provider crate
//! follows; the conformance suite of `infra-testkit` checks a backend against the
//! **Behavior** sections of [`Backend`].

pub mod adaptive;
mod generate;
mod kind_backend;
pub mod layer;
pub mod poll;
pub mod retry;
mod router;
mod written;

pub use generate::{GENERATED_ALPHABET, generate_secret, scrub_secret};
pub use kind_backend::{
    CreateArgs, DeleteArgs, KindBackend, ListArgs, MarkArgs, OwnershipArgs, PrerequisiteArgs,
    ReadArgs, Reading, UpdateArgs,
};
pub use poll::Polling;
pub use retry::{Failure, Idempotence, Jitter, Retrier, RetryPolicy};
pub use router::{Account, Router, SecretArgs, SecretValues};
pub use written::{Deferral, DeferralReason, Written};

pub use crate::backend::{
    Backend, Capabilities, LEGACY_MARKER_VALUE, Listed, MARKER_KEY, Marker, Ownership,
    Prerequisite, RawTags, SettledSpec, Sighting, Unreachable, strip_marker,
};
pub use crate::clock::{Clock, ManualClock, SystemClock};
pub use crate::env::{Dep, Env, NotYet, Nothing, ObservedValue};
pub use crate::error::{BackendError, ErrorKind};
pub use crate::expr::Value;
pub use crate::field::{Field, FieldInfo, Mutability};
pub use crate::key::Handle;
pub use crate::kind::{Kind, Spec, default_name_rule};
pub use crate::merge::{Conflict, Merge};
pub use crate::partial::Partial;
pub use crate::provider::{Provider, Region, Supports};
pub use crate::refine::Refines;
pub use crate::secret::{REDACTED, SecretString};
pub use crate::settle::Settle;
pub use infra_derive::Spec;
