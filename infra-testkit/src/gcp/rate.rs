//! Throttling by rate, as Google's quotas throttle: a token bucket per API, refused
//! calls answered 429 `RESOURCE_EXHAUSTED` with a `Retry-After` header. Off unless
//! armed ([`GcpServer::limit_rate`](super::GcpServer::limit_rate)).

use std::collections::BTreeMap;
use std::time::Duration;

use super::GcpService;

/// A rate every API of the stand-in admits, each on a bucket of its own: `per_second`
/// calls a second on average, up to `burst` at once after a quiet spell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Calls a second each API admits on average (at least 1).
    pub per_second: u32,
    /// Calls each API admits at once after a quiet spell (at least 1).
    pub burst: u32,
}

impl RateLimit {
    /// `per_second` calls a second per API, in bursts of as many.
    #[must_use]
    pub fn per_second(per_second: u32) -> Self {
        RateLimit {
            per_second: per_second.max(1),
            burst: per_second.max(1),
        }
    }

    /// The same rate, in bursts of at most `burst` calls.
    #[must_use]
    pub fn with_burst(self, burst: u32) -> Self {
        RateLimit {
            burst: burst.max(1),
            ..self
        }
    }
}

/// One API's bucket: the tokens it held at `at` (the stand-in's clock).
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Duration,
}

/// The buckets of every API, when a rate is armed.
#[derive(Debug, Default)]
pub(crate) struct Rates {
    limit: Option<RateLimit>,
    buckets: BTreeMap<GcpService, Bucket>,
}

impl Rates {
    /// Arms `limit` (every bucket full), or lifts it.
    pub(crate) fn set(&mut self, limit: Option<RateLimit>) {
        self.limit = limit;
        self.buckets.clear();
    }

    /// Takes a token of `service`'s bucket at `now`; when there is none, the wait
    /// until there is one.
    pub(crate) fn take(&mut self, service: GcpService, now: Duration) -> Result<(), Duration> {
        let Some(limit) = self.limit else {
            return Ok(());
        };
        let rate = f64::from(limit.per_second.max(1));
        let burst = f64::from(limit.burst.max(1));
        let bucket = self.buckets.entry(service).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let elapsed = now.saturating_sub(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
        }
    }
}

/// The `Retry-After` a wait is asked as: whole seconds (the header's unit), never less
/// than one.
pub(crate) fn retry_after(wait: Duration) -> Duration {
    Duration::from_secs(wait.as_secs_f64().ceil().max(1.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: GcpService = GcpService::Storage;

    #[test]
    fn off_admits_everything() {
        let mut rates = Rates::default();
        for _ in 0..10_000 {
            assert_eq!(rates.take(S, Duration::ZERO), Ok(()));
        }
    }

    #[test]
    fn a_bucket_admits_its_burst_then_its_rate_per_api() {
        let mut rates = Rates::default();
        rates.set(Some(RateLimit::per_second(2).with_burst(3)));
        let t0 = Duration::from_secs(100);
        for _ in 0..3 {
            assert_eq!(rates.take(S, t0), Ok(()));
        }
        let wait = rates.take(S, t0).expect_err("the burst is spent");
        assert_eq!(wait, Duration::from_millis(500));
        assert_eq!(retry_after(wait), Duration::from_secs(1));
        // Another API has a bucket of its own.
        assert_eq!(rates.take(GcpService::PubSub, t0), Ok(()));
        // Half a second later, one token more; not two.
        let later = t0 + Duration::from_millis(500);
        assert_eq!(rates.take(S, later), Ok(()));
        assert!(rates.take(S, later).is_err());
        // A long quiet spell fills the bucket to its burst, no further.
        let quiet = later + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(rates.take(S, quiet), Ok(()));
        }
        assert!(rates.take(S, quiet).is_err());
        rates.set(None);
        assert_eq!(rates.take(S, quiet), Ok(()));
    }

    #[test]
    fn the_wait_asked_is_whole_seconds_and_at_least_one() {
        assert_eq!(retry_after(Duration::ZERO), Duration::from_secs(1));
        assert_eq!(
            retry_after(Duration::from_millis(1500)),
            Duration::from_secs(2)
        );
    }
}
