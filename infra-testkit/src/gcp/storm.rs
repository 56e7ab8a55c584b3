//! A throttling storm: for a while, a share of every call the stand-in receives is
//! refused with 429 `RESOURCE_EXHAUSTED`, some of the refusals asking the caller to
//! wait (`Retry-After`), as Google's front ends do when a quota runs out.
//!
//! The storm keeps time on the clock it is given ([`Storm::new`]): a test on a paused
//! tokio clock passes `infra_core::sdk::SystemClock` (tokio's time), so that the storm's
//! thirty seconds pass as the clients' waits do, without waiting. Which calls are
//! refused is drawn from a seed, so that a run can be repeated; the share holds over
//! many calls. Every call during the storm is logged with its time on that clock
//! ([`GcpServer::storm_calls`](super::GcpServer::storm_calls)), so that a test can check
//! that each `Retry-After` was waited for.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash as _, Hasher as _};
use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::Clock;

use super::wire::{Reply, Req};

/// A storm to arm on the stand-in ([`GcpServer::storm`](super::GcpServer::storm)).
#[derive(Clone)]
pub struct Storm {
    clock: Arc<dyn Clock>,
    length: Duration,
    refused_per_mille: u32,
    retry_after: Option<(u32, Duration)>,
    seed: u64,
}

impl std::fmt::Debug for Storm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storm")
            .field("length", &self.length)
            .field("refused_per_mille", &self.refused_per_mille)
            .field("retry_after", &self.retry_after)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl Storm {
    /// A storm that lasts `length` on `clock` from the moment it is armed, refusing
    /// half of the calls, none with `Retry-After`.
    #[must_use]
    pub fn new(clock: Arc<dyn Clock>, length: Duration) -> Self {
        Storm {
            clock,
            length,
            refused_per_mille: 500,
            retry_after: None,
            seed: 0x5eed,
        }
    }

    /// Refuses `per_mille` thousandths of the calls (500: half).
    #[must_use]
    pub fn refusing(mut self, per_mille: u32) -> Self {
        self.refused_per_mille = per_mille.min(1000);
        self
    }

    /// Every `nth` refusal carries `Retry-After` of `wait` (whole seconds, as the header
    /// carries them).
    #[must_use]
    pub fn retry_after_every(mut self, nth: u32, wait: Duration) -> Self {
        self.retry_after = Some((nth.max(1), Duration::from_secs(wait.as_secs().max(1))));
        self
    }

    /// The seed the refusals are drawn from.
    #[must_use]
    pub fn seeded(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
}

/// One call the stand-in received from the moment a storm was armed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StormCall {
    /// When, on the storm's clock, since it was armed.
    pub at: Duration,
    /// The call: its method, path, query (without `$alt`) and a digest of its body, so
    /// that the same call made again is recognised.
    pub call: String,
    /// Whether it was refused with 429.
    pub refused: bool,
    /// The wait its refusal asked for.
    pub retry_after: Option<Duration>,
}

/// A storm armed: its start, its draws and its log.
#[derive(Debug)]
pub(crate) struct Armed {
    storm: Storm,
    started: Duration,
    draws: u64,
    refusals: u32,
    pub(crate) log: Vec<StormCall>,
}

impl Armed {
    /// `storm`, starting now on its clock.
    pub(crate) fn new(storm: Storm) -> Self {
        let started = storm.clock.now();
        Armed {
            storm,
            started,
            draws: 0,
            refusals: 0,
            log: Vec::new(),
        }
    }

    /// The refusal of `req`, when the storm refuses it. Every call from the moment the
    /// storm is armed is logged, those after its end too (none refused), so that the
    /// call that follows a refusal can always be found.
    pub(crate) fn refuse(&mut self, req: &Req<'_>) -> Option<Reply> {
        let at = self.storm.clock.now().saturating_sub(self.started);
        if at >= self.storm.length {
            self.log.push(StormCall {
                at,
                call: call_of(req),
                refused: false,
                retry_after: None,
            });
            return None;
        }
        self.draws += 1;
        let refused =
            draw(self.storm.seed, self.draws) % 1000 < u64::from(self.storm.refused_per_mille);
        let retry_after = if refused {
            self.refusals += 1;
            self.storm
                .retry_after
                .filter(|(nth, _)| self.refusals.is_multiple_of(*nth))
                .map(|(_, wait)| wait)
        } else {
            None
        };
        self.log.push(StormCall {
            at,
            call: call_of(req),
            refused,
            retry_after,
        });
        if !refused {
            return None;
        }
        let reply = Reply::error(
            429,
            "RESOURCE_EXHAUSTED",
            "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute' \
             (a throttling storm armed on the stand-in)",
        );
        Some(match retry_after {
            Some(wait) => reply.with_retry_after(wait),
            None => reply,
        })
    }
}

/// What identifies a call: method, path, query without `$alt`, and its body's digest.
fn call_of(req: &Req<'_>) -> String {
    let query: Vec<String> = req
        .query
        .iter()
        .filter(|(k, _)| k.as_str() != "$alt")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut hasher = DefaultHasher::new();
    req.body.to_string().hash(&mut hasher);
    format!(
        "{} {}?{} #{:016x}",
        req.method,
        req.path,
        query.join("&"),
        hasher.finish()
    )
}

/// The `n`th draw of `seed` (splitmix64).
fn draw(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infra_core::sdk::ManualClock;
    use serde_json::Value;
    use std::collections::BTreeMap;

    #[tokio::test]
    async fn a_storm_refuses_its_share_for_its_length_then_ends() {
        let clock = Arc::new(ManualClock::new());
        let mut armed = Armed::new(
            Storm::new(clock.clone(), Duration::from_secs(30))
                .retry_after_every(3, Duration::from_secs(2)),
        );
        let query = BTreeMap::new();
        let body = Value::Null;
        let req = Req {
            method: "GET",
            path: "/v1/projects/p/secrets/a",
            query: &query,
            body: &body,
        };
        let mut refused = 0;
        for _ in 0..1000 {
            if let Some(reply) = armed.refuse(&req) {
                assert_eq!(reply.status, 429);
                refused += 1;
            }
        }
        assert!((400..=600).contains(&refused), "{refused} of 1000");
        let asked = armed.log.iter().filter(|c| c.retry_after.is_some()).count();
        assert_eq!(asked, refused / 3);
        clock.advance(Duration::from_secs(30));
        assert!(armed.refuse(&req).is_none());
        let last = armed.log.last().expect("logged after the storm too");
        assert!(!last.refused && last.at == Duration::from_secs(30));
    }
}
