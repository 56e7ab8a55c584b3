//! Fault hooks: what the suite needs a stand-in's cooperation for.
//!
//! A few behaviours can only be checked when the cloud misbehaves on cue: a denied
//! scope must read as `Denied`, never as absent; a read that fails must never read as
//! absent. A provider author who can arrange that (a restricted role, a proxy that
//! fails requests, a simulator) implements [`ConformanceHooks`]; without hooks, those
//! checks are skipped, loudly.

use std::sync::Mutex;

use infra_core::sdk::ErrorKind;

use crate::sim::{CallFilter, Op, SimCloud};

/// Faults the suite can ask for. Every method answers whether it could do it: `false`
/// skips the check that asked, with the reason printed.
///
/// The suite calls [`restore`](Self::restore) after every check that used a hook, and
/// before it cleans up.
pub trait ConformanceHooks: Send + Sync {
    /// From now until [`restore`](Self::restore), every call of `provider`'s backend
    /// that names `kind` in `region` is refused for lack of permission (the backend
    /// must then answer `Denied`).
    fn deny(&self, provider: &str, kind: &'static str, region: &str) -> bool;

    /// From now until [`restore`](Self::restore), reads of the resource `handle` (of
    /// `kind`, in `region`) fail with an error that is neither `NotFound` nor `Denied`
    /// (a server error, a malformed answer). A stand-in that cannot single out one
    /// handle may fail every read of the kind in the region.
    fn fail_reads(&self, provider: &str, kind: &'static str, region: &str, handle: &str) -> bool;

    /// Lifts every fault these hooks installed.
    fn restore(&self);
}

/// How many reads [`SimHooks::fail_reads`] fails: more than any check makes while the
/// fault is on.
const FAILED_READS: u64 = 64;

/// [`ConformanceHooks`] over a [`SimCloud`]: `deny` is [`SimCloud::deny`], and
/// `fail_reads` arms [`SimCloud::fail_nth_matching`] for the next reads of the kind in
/// the region (the simulator's filters do not name handles), failing them with
/// `Other`.
///
/// `restore` lifts the denials these hooks made and clears **every** fault of the
/// world not yet fired (the simulator has no way to disarm one rule), so do not share
/// the world with faults of your own while the suite runs.
#[derive(Debug)]
pub struct SimHooks {
    cloud: SimCloud,
    denied: Mutex<Vec<(String, &'static str, String)>>,
    armed: Mutex<bool>,
}

impl SimHooks {
    /// Hooks over `cloud`, for any of its providers.
    pub fn new(cloud: SimCloud) -> Self {
        SimHooks {
            cloud,
            denied: Mutex::new(Vec::new()),
            armed: Mutex::new(false),
        }
    }
}

impl ConformanceHooks for SimHooks {
    fn deny(&self, provider: &str, kind: &'static str, region: &str) -> bool {
        self.cloud.deny(provider, Some(kind), Some(region));
        self.denied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((provider.to_owned(), kind, region.to_owned()));
        true
    }

    fn fail_reads(&self, provider: &str, kind: &'static str, region: &str, _handle: &str) -> bool {
        let filter = CallFilter::op(Op::Read)
            .provider(provider)
            .kind(kind)
            .region(region);
        for nth in 1..=FAILED_READS {
            self.cloud
                .fail_nth_matching(filter.clone(), nth, ErrorKind::Other, false);
        }
        *self
            .armed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        true
    }

    fn restore(&self) {
        let denied = std::mem::take(
            &mut *self
                .denied
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for (provider, kind, region) in denied {
            self.cloud.allow(&provider, Some(kind), Some(&region));
        }
        let mut armed = self
            .armed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if std::mem::take(&mut *armed) {
            self.cloud.clear_faults();
        }
    }
}
