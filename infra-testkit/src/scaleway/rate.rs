//! A rate limit per API, as Scaleway's gateway applies one: a token bucket per product
//! holding at most one second's worth of calls and refilled at the rate, on the
//! stand-in's clock. A call finding its product's bucket empty does nothing and is
//! answered 429 `too_many_requests` with a `Retry-After` (whole seconds until a token
//! is back, at least one).

use std::collections::BTreeMap;
use std::time::Duration;

use super::ScalewayProduct;

/// The buckets of every product, when a rate is set.
#[derive(Debug, Default)]
pub(crate) struct Rate {
    per_second: Option<u32>,
    buckets: BTreeMap<ScalewayProduct, Bucket>,
}

/// One product's bucket: the tokens it held when last looked at, and when that was.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Duration,
}

impl Rate {
    /// At most `per_second` calls a second to each product (`None`: no limit).
    pub(crate) fn new(per_second: Option<u32>) -> Self {
        Rate {
            per_second: per_second.filter(|n| *n > 0),
            buckets: BTreeMap::new(),
        }
    }

    /// Takes a token of `product`'s bucket at `now`: `None` when one was there (the
    /// call is served), else how long to wait before one is.
    pub(crate) fn take(&mut self, product: ScalewayProduct, now: Duration) -> Option<Duration> {
        let rate = f64::from(self.per_second?);
        let bucket = self.buckets.entry(product).or_insert(Bucket {
            tokens: rate,
            at: now,
        });
        let elapsed = now.saturating_sub(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(rate);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return None;
        }
        let wait = (1.0 - bucket.tokens) / rate;
        Some(Duration::from_secs(wait.ceil().max(1.0) as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_admits_its_rate_then_refuses_until_time_refills_it() {
        let mut rate = Rate::new(Some(3));
        let p = ScalewayProduct::SecretManager;
        let t0 = Duration::from_secs(10);
        for _ in 0..3 {
            assert_eq!(rate.take(p, t0), None);
        }
        assert_eq!(rate.take(p, t0), Some(Duration::from_secs(1)));
        // Another product has its own bucket.
        assert_eq!(rate.take(ScalewayProduct::Rdb, t0), None);
        // A third of a second later one token is back, and no more.
        let later = t0 + Duration::from_millis(334);
        assert_eq!(rate.take(p, later), None);
        assert!(rate.take(p, later).is_some());
    }

    #[test]
    fn without_a_rate_nothing_is_refused() {
        let mut rate = Rate::new(None);
        for _ in 0..10_000 {
            assert_eq!(rate.take(ScalewayProduct::Iam, Duration::ZERO), None);
        }
    }
}
