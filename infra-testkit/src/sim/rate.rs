//! Throttling by rate: a token bucket per API, as the clouds meter their APIs.
//!
//! An API is a (provider, kind, region): AWS meters each service's actions per account
//! and region, GCP each service's methods per project (and, for regional services, per
//! region), Scaleway each product's API per organisation and zone. The simulator keeps
//! one bucket per (provider, kind, region), and one per provider for `account`. A bucket
//! holds at most one second's worth of calls (the burst), refills continuously at the
//! rate, and a call that finds it empty is refused — throttled, not applied — with the
//! wait until the bucket holds a call again as its `Retry-After`.

use std::collections::HashMap;
use std::time::Duration;

/// The key of one API's bucket: provider, kind (none for `account`), region (none for
/// `account`).
pub(crate) type ApiKey = (&'static str, Option<&'static str>, Option<String>);

/// One API's tokens, as of `at` (on the cloud's clock).
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Duration,
}

/// The buckets of a world: none until a rate is set.
#[derive(Debug, Default)]
pub(crate) struct RateLimits {
    per_second: Option<u32>,
    buckets: HashMap<ApiKey, Bucket>,
}

impl RateLimits {
    /// Admits at most `per_second` calls a second per API from now on (`None`: no
    /// limit). Every bucket starts full.
    pub(crate) fn set(&mut self, per_second: Option<u32>) {
        self.per_second = per_second.filter(|r| *r > 0);
        self.buckets.clear();
    }

    /// The rate in force.
    pub(crate) fn per_second(&self) -> Option<u32> {
        self.per_second
    }

    /// Takes one call out of `api`'s bucket at `now`: `Ok` if it held one, else the
    /// wait until it will.
    pub(crate) fn admit(&mut self, api: ApiKey, now: Duration) -> Result<(), Duration> {
        let Some(rate) = self.per_second else {
            return Ok(());
        };
        let rate = f64::from(rate);
        let bucket = self.buckets.entry(api).or_insert(Bucket {
            tokens: rate,
            at: now,
        });
        let elapsed = now.saturating_sub(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(rate);
        bucket.at = bucket.at.max(now);
        // Durations are whole nanoseconds: a call on time is not refused for rounding.
        if bucket.tokens >= 1.0 - 1e-6 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            // At least a millisecond, so that a client honouring it never spins.
            let wait = ((1.0 - bucket.tokens) / rate).max(0.001);
            Err(Duration::from_secs_f64(wait))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> ApiKey {
        ("aws", Some("queues"), Some("eu-west-3".into()))
    }

    #[test]
    fn a_full_bucket_admits_one_second_of_calls_then_asks_to_wait() {
        let mut limits = RateLimits::default();
        limits.set(Some(4));
        for _ in 0..4 {
            assert_eq!(limits.admit(api(), Duration::ZERO), Ok(()));
        }
        let wait = limits.admit(api(), Duration::ZERO).unwrap_err();
        assert_eq!(wait, Duration::from_millis(250));
        // Once the wait is over, one call is admitted, and not two.
        assert_eq!(limits.admit(api(), wait), Ok(()));
        assert!(limits.admit(api(), wait).is_err());
    }

    #[test]
    fn apis_have_buckets_of_their_own() {
        let mut limits = RateLimits::default();
        limits.set(Some(1));
        assert_eq!(limits.admit(api(), Duration::ZERO), Ok(()));
        assert!(limits.admit(api(), Duration::ZERO).is_err());
        let other = ("aws", Some("queues"), Some("us-east-1".into()));
        assert_eq!(limits.admit(other, Duration::ZERO), Ok(()));
        assert_eq!(
            limits.admit(("aws", None, None), Duration::ZERO),
            Ok(()),
            "account calls are an API of their own"
        );
    }

    #[test]
    fn no_rate_admits_everything() {
        let mut limits = RateLimits::default();
        for _ in 0..10_000 {
            assert_eq!(limits.admit(api(), Duration::ZERO), Ok(()));
        }
    }

    proptest::proptest! {
        /// However calls arrive, an API admits no more than its burst and what refills
        /// in the time they span; and calls spaced one interval apart are all admitted.
        #[test]
        fn a_bucket_admits_no_more_than_the_rate_allows(
            rate in 1u32..50,
            gaps in proptest::collection::vec(0u64..400, 1..300),
        ) {
            let mut limits = RateLimits::default();
            limits.set(Some(rate));
            let mut now = Duration::ZERO;
            let mut admitted = 0u64;
            for gap in &gaps {
                now += Duration::from_millis(*gap);
                if limits.admit(api(), now).is_ok() {
                    admitted += 1;
                }
            }
            let allowed = f64::from(rate) * (1.0 + now.as_secs_f64());
            proptest::prop_assert!(admitted as f64 <= allowed + 1e-3, "{admitted} > {allowed}");

            let mut limits = RateLimits::default();
            limits.set(Some(rate));
            let interval = Duration::from_secs_f64(1.0 / f64::from(rate));
            for i in 0..gaps.len() {
                let at = interval * u32::try_from(i).expect("few calls");
                proptest::prop_assert!(limits.admit(api(), at).is_ok(), "call {i} at {at:?}");
            }
        }
    }
}
