//! A throttling storm: for a while on a clock, a share of the calls a server receives
//! is refused with 429, some of the refusals asking the caller, by `Retry-After`, to
//! wait; every call is logged with its time, so that a test can check that no retry
//! came before the time its refusal asked for.
//!
//! One [`Storm`] serves every server that can throttle: the GCP and Scaleway stand-ins
//! (`GcpServer::storm`, `ScalewayServer::storm`, with the features `gcp` and
//! `scaleway`) and the recording relay in front of moto (`Relay::storm`, feature
//! `relay`). Each server identifies a call its own way, the same on every attempt of
//! it: the relay by the AWS SDK's invocation id, the stand-ins by method, path, query
//! and body ([`call_of`]).
//!
//! The storm keeps time on the clock it is given. On a `ManualClock` shared with the
//! client under test, every wait of every call moves the one clock on, so that the
//! storm lasts as many refusals as it takes their waits to add up to its length; on a
//! paused tokio clock (`SystemClock` reads tokio's time) its length passes as the
//! clients' waits do. Nothing waits for real.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use infra_core::sdk::{Clock, ManualClock};
//! use infra_testkit::storm::{Storm, StormFigures, StormState, call_of};
//!
//! let clock = Arc::new(ManualClock::new());
//! let storm = Storm::new(clock.clone(), Duration::from_secs(30))
//!     .evenly()
//!     .retry_after_every(1, Duration::from_secs(3));
//! // What a server does with it:
//! let mut weather = StormState::default();
//! weather.arm(storm.clone());
//! let call = call_of("POST", "/v1/things", "", r#"{"name":"a"}"#);
//! assert!(weather.receive("POST", "/v1/things", &call).is_none());
//! let refused = weather.receive("POST", "/v1/things", &call).expect("every other call");
//! assert_eq!(refused.retry_after, Some(Duration::from_secs(3)));
//! clock.advance(Duration::from_secs(30));
//! assert!(weather.receive("POST", "/v1/things", &call).is_none());
//!
//! let figures = StormFigures::of(&storm, &weather.calls());
//! assert_eq!((figures.calls, figures.refusals, figures.judged), (3, 1, 1));
//! figures.assert_outlasted();
//! ```

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::hash::{Hash as _, Hasher as _};
use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::Clock;

/// How far the share of calls a storm refused may stray from the share it was to
/// refuse before [`StormFigures::assert_outlasted`] calls it no storm.
const SHARE_TOLERANCE: f64 = 0.15;

/// A storm to arm on a server: how long it lasts on which clock, what share of the
/// calls it refuses, how they are picked, and which refusals ask for a wait.
#[derive(Clone)]
pub struct Storm {
    clock: Arc<dyn Clock>,
    length: Duration,
    refused_per_mille: u32,
    spread: Spread,
    retry_after: Option<Asked>,
}

/// How the refused calls are picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spread {
    /// Drawn from a seed: the share holds over many calls, and a run can be repeated.
    Drawn { seed: u64 },
    /// Spread evenly (at one half, every other call), so that no run meets a longer
    /// streak of refusals than another.
    Even,
}

/// Which refusals ask for a wait, and how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Asked {
    every: u32,
    shortest: u64,
    longest: u64,
}

impl fmt::Debug for Storm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Storm")
            .field("length", &self.length)
            .field("refused_per_mille", &self.refused_per_mille)
            .field("spread", &self.spread)
            .field("retry_after", &self.retry_after)
            .finish_non_exhaustive()
    }
}

impl Storm {
    /// A storm that lasts `length` on `clock` from the moment it is armed, refusing
    /// half of the calls, drawn from a fixed seed, none asking for a wait.
    #[must_use]
    pub fn new(clock: Arc<dyn Clock>, length: Duration) -> Self {
        Storm {
            clock,
            length,
            refused_per_mille: 500,
            spread: Spread::Drawn { seed: 0x5eed },
            retry_after: None,
        }
    }

    /// Refuses `per_mille` thousandths of the calls (500: half).
    #[must_use]
    pub fn refusing(mut self, per_mille: u32) -> Self {
        self.refused_per_mille = per_mille.min(1000);
        self
    }

    /// Draws the refused calls (and the waits drawn from a range) from `seed`.
    #[must_use]
    pub fn seeded(mut self, seed: u64) -> Self {
        self.spread = Spread::Drawn { seed };
        self
    }

    /// Spreads the refused calls evenly instead of drawing them: at one half, every
    /// other call, from the second.
    #[must_use]
    pub fn evenly(mut self) -> Self {
        self.spread = Spread::Even;
        self
    }

    /// Every `nth` refusal carries `Retry-After` of `wait` (whole seconds, as the
    /// header carries them; at least one).
    #[must_use]
    pub fn retry_after_every(self, nth: u32, wait: Duration) -> Self {
        self.retry_after_between(nth, wait, wait)
    }

    /// Every `nth` refusal carries a `Retry-After` drawn from `shortest` to `longest`
    /// (whole seconds; at least one).
    #[must_use]
    pub fn retry_after_between(mut self, nth: u32, shortest: Duration, longest: Duration) -> Self {
        let shortest = shortest.as_secs().max(1);
        self.retry_after = Some(Asked {
            every: nth.max(1),
            shortest,
            longest: longest.as_secs().max(shortest),
        });
        self
    }

    /// How long it lasts from the moment it is armed.
    #[must_use]
    pub fn length(&self) -> Duration {
        self.length
    }

    /// The share of the calls it is to refuse, from 0 to 1.
    fn share(&self) -> f64 {
        f64::from(self.refused_per_mille) / 1000.0
    }

    /// Whether the `n`th call of the storm (from 1) is refused.
    fn refuses(&self, n: u64) -> bool {
        let per_mille = u64::from(self.refused_per_mille);
        match self.spread {
            Spread::Drawn { seed } => draw(seed, n) % 1000 < per_mille,
            Spread::Even => n * per_mille / 1000 > (n - 1) * per_mille / 1000,
        }
    }

    /// The wait the `n`th refusal (from 1) asks for, if any.
    fn asks(&self, n: u64) -> Option<Duration> {
        let asked = self.retry_after?;
        if !n.is_multiple_of(u64::from(asked.every)) {
            return None;
        }
        let seed = match self.spread {
            Spread::Drawn { seed } => seed,
            Spread::Even => 0,
        };
        let span = asked.longest - asked.shortest + 1;
        let wait = asked.shortest + draw(seed.rotate_left(32), n) % span;
        Some(Duration::from_secs(wait))
    }
}

/// A refusal the storm made: the wait it asks for, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refused {
    /// The `Retry-After` to send.
    pub retry_after: Option<Duration>,
}

/// A server's storm: the last one armed, if any, its draws and its log. A server keeps
/// one, arms it on cue ([`StormState::arm`]), asks it about every call it receives
/// ([`StormState::receive`]) and answers the refused ones with 429.
#[derive(Debug, Default)]
pub struct StormState {
    armed: Option<Armed>,
}

/// A storm armed.
#[derive(Debug)]
struct Armed {
    storm: Storm,
    started: Duration,
    calls: u64,
    refusals: u64,
    lifted: bool,
    log: Vec<StormCall>,
}

impl StormState {
    /// Arms `storm`, from now on its clock, in place of the one before (whose log is
    /// forgotten).
    pub fn arm(&mut self, storm: Storm) {
        let started = storm.clock.now();
        self.armed = Some(Armed {
            storm,
            started,
            calls: 0,
            refusals: 0,
            lifted: false,
            log: Vec::new(),
        });
    }

    /// Whether a storm is armed and not lifted: whether calls are logged.
    #[must_use]
    pub fn is_armed(&self) -> bool {
        self.armed.as_ref().is_some_and(|a| !a.lifted)
    }

    /// Logs a call and says whether the storm refuses it. `method` is the HTTP method,
    /// `what` names the request for people, `call` identifies the call, the same on
    /// each of its attempts. Every call from the moment the storm is armed is logged,
    /// those after its end too (none refused), so that the call that follows a refusal
    /// can always be found; none when no storm is armed, or once it is lifted.
    pub fn receive(&mut self, method: &str, what: &str, call: &str) -> Option<Refused> {
        let armed = self.armed.as_mut().filter(|a| !a.lifted)?;
        let at = armed.storm.clock.now().saturating_sub(armed.started);
        let refused = if at < armed.storm.length {
            armed.calls += 1;
            armed.storm.refuses(armed.calls)
        } else {
            false
        };
        let retry_after = if refused {
            armed.refusals += 1;
            armed.storm.asks(armed.refusals)
        } else {
            None
        };
        armed.log.push(StormCall {
            at,
            method: method.to_owned(),
            what: what.to_owned(),
            call: call.to_owned(),
            refused,
            retry_after,
        });
        refused.then_some(Refused { retry_after })
    }

    /// Ends the storm: no call is refused or logged from now on; the log is kept.
    pub fn lift(&mut self) {
        if let Some(armed) = self.armed.as_mut() {
            armed.lifted = true;
        }
    }

    /// The calls received since the last storm was armed, oldest first; none when no
    /// storm was.
    #[must_use]
    pub fn calls(&self) -> Vec<StormCall> {
        self.armed
            .as_ref()
            .map(|a| a.log.clone())
            .unwrap_or_default()
    }
}

/// One call a server received from the moment a storm was armed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StormCall {
    /// When, on the storm's clock, since it was armed.
    pub at: Duration,
    /// The HTTP method.
    pub method: String,
    /// The request, for people: a stand-in's method, path and query, or the AWS action
    /// the relay read (`CreateQueue`, `PUT bucket`).
    pub what: String,
    /// What tells this call from every other, the same on each of its attempts.
    pub call: String,
    /// Whether the storm refused it with 429.
    pub refused: bool,
    /// The wait its refusal asked for.
    pub retry_after: Option<Duration>,
}

/// What identifies a call to a REST API on each of its attempts: its method, path and
/// query (as the server read them), and a digest of its body.
#[must_use]
pub fn call_of(method: &str, path: &str, query: &str, body: &str) -> String {
    let mut hasher = DefaultHasher::new();
    body.hash(&mut hasher);
    format!("{method} {path}?{query} #{:016x}", hasher.finish())
}

/// The `n`th draw of `seed` (splitmix64).
fn draw(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Every retry in `calls` that came before the time its refusal asked for: the attempt
/// after a refusal with `Retry-After: n` (the next call of the log with the same
/// [`StormCall::call`]) must come at least `n` seconds after it, on the storm's clock.
#[must_use]
pub fn retry_after_violations(calls: &[StormCall]) -> Vec<String> {
    let mut by_call: BTreeMap<&str, Vec<&StormCall>> = BTreeMap::new();
    for c in calls {
        by_call.entry(c.call.as_str()).or_default().push(c);
    }
    let mut out = Vec::new();
    for attempts in by_call.values() {
        for pair in attempts.windows(2) {
            let (refused, next) = (pair[0], pair[1]);
            let Some(asked) = refused.retry_after else {
                continue;
            };
            let waited = next.at.saturating_sub(refused.at);
            if waited < asked {
                out.push(format!(
                    "{} ({}): tried again {waited:?} after a refusal at {:?} asking {asked:?}",
                    refused.what, refused.call, refused.at
                ));
            }
        }
    }
    out
}

/// What a storm did, from its log.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct StormFigures {
    /// How long the storm lasted.
    pub length: Duration,
    /// The share of the calls it was to refuse, from 0 to 1.
    pub share: f64,
    /// Whether some of its refusals were to ask for a wait.
    pub asks_waits: bool,
    /// Calls logged, during the storm and after it.
    pub calls: usize,
    /// Of those, the calls made while it lasted.
    pub during: usize,
    /// Calls refused with 429.
    pub refusals: usize,
    /// Of those, the ones with a `Retry-After`.
    pub with_retry_after: usize,
    /// Calls that were another attempt of a call logged before.
    pub retries: usize,
    /// Refusals with a `Retry-After` whose call came again, judged.
    pub judged: usize,
    /// Refusals with a `Retry-After` of calls left out of the judgement (calls that
    /// several callers make alike, so that the next one need not be a retry).
    pub left_out: usize,
    /// Refusals with a `Retry-After`, judged, whose call never came again.
    pub unanswered: usize,
    /// The shortest time, among those judged, between a refusal with a `Retry-After`
    /// and the next attempt of its call.
    pub shortest_wait: Option<Duration>,
    /// When the last call came, on the storm's clock since it was armed.
    pub last_at: Duration,
    /// The retries that came before the time their refusal asked for
    /// ([`retry_after_violations`]).
    pub early: Vec<String>,
}

impl StormFigures {
    /// The figures of `storm` from its log, every call judged.
    #[must_use]
    pub fn of(storm: &Storm, calls: &[StormCall]) -> Self {
        Self::judging(storm, calls, |_| true)
    }

    /// The figures of `storm` from its log, judging the waits of the calls for which
    /// `judged` holds only.
    #[must_use]
    pub fn judging(
        storm: &Storm,
        calls: &[StormCall],
        judged: impl Fn(&StormCall) -> bool,
    ) -> Self {
        let mut figures = StormFigures {
            length: storm.length,
            share: storm.share(),
            asks_waits: storm.retry_after.is_some(),
            calls: calls.len(),
            during: 0,
            refusals: 0,
            with_retry_after: 0,
            retries: 0,
            judged: 0,
            left_out: 0,
            unanswered: 0,
            shortest_wait: None,
            last_at: Duration::ZERO,
            early: Vec::new(),
        };
        let mut seen = BTreeSet::new();
        for (i, c) in calls.iter().enumerate() {
            figures.during += usize::from(c.at < storm.length);
            figures.refusals += usize::from(c.refused);
            figures.retries += usize::from(!seen.insert(c.call.as_str()));
            figures.last_at = figures.last_at.max(c.at);
            if c.retry_after.is_none() {
                continue;
            }
            figures.with_retry_after += 1;
            if !judged(c) {
                figures.left_out += 1;
                continue;
            }
            match calls[i + 1..].iter().find(|next| next.call == c.call) {
                Some(next) => {
                    figures.judged += 1;
                    let waited = next.at.saturating_sub(c.at);
                    figures.shortest_wait =
                        Some(figures.shortest_wait.map_or(waited, |w| w.min(waited)));
                }
                None => figures.unanswered += 1,
            }
        }
        let kept: Vec<StormCall> = calls.iter().filter(|c| judged(c)).cloned().collect();
        figures.early = retry_after_violations(&kept);
        figures
    }

    /// The share of the calls made while the storm lasted that it refused.
    #[must_use]
    pub fn refused_share(&self) -> f64 {
        if self.during == 0 {
            return 0.0;
        }
        self.refusals as f64 / self.during as f64
    }

    /// Panics, naming every shortfall and printing the figures, unless the storm was a
    /// storm and was weathered: it refused calls, within 15 points of the share it was
    /// to refuse; the refusals it was to make with a `Retry-After` were made, and some
    /// were judged; every refused call judged came again, and none before the time its
    /// refusal asked for. The work may have ended while the storm still blew.
    #[track_caller]
    pub fn assert_weathered(&self) {
        self.assert_none(self.shortfalls());
    }

    /// As [`StormFigures::assert_weathered`], and a call came after the storm's end: the
    /// callers kept at their work for longer than the storm lasted.
    #[track_caller]
    pub fn assert_outlasted(&self) {
        let mut shortfalls = self.shortfalls();
        if self.last_at < self.length {
            shortfalls.push(format!(
                "it was not outlasted: the last call came {:.1} s into a storm of {:.0} s",
                self.last_at.as_secs_f64(),
                self.length.as_secs_f64()
            ));
        }
        self.assert_none(shortfalls);
    }

    /// What keeps the storm from having been a storm that was weathered.
    fn shortfalls(&self) -> Vec<String> {
        let mut shortfalls = Vec::new();
        if self.refusals == 0 {
            shortfalls.push("it refused no call".to_owned());
        } else if (self.refused_share() - self.share).abs() > SHARE_TOLERANCE {
            shortfalls.push(format!(
                "it refused {:.0}% of the calls made while it lasted, where it was to refuse {:.0}%",
                100.0 * self.refused_share(),
                100.0 * self.share
            ));
        }
        if self.asks_waits && self.with_retry_after == 0 {
            shortfalls.push("no refusal asked for a wait".to_owned());
        } else if self.asks_waits && self.judged == 0 {
            shortfalls.push("no refusal that asked for a wait was judged".to_owned());
        }
        if self.unanswered > 0 {
            shortfalls.push(format!(
                "{} refused calls that were asked to wait never came again",
                self.unanswered
            ));
        }
        for early in &self.early {
            shortfalls.push(format!("too soon: {early}"));
        }
        shortfalls
    }

    #[track_caller]
    fn assert_none(&self, shortfalls: Vec<String>) {
        assert!(
            shortfalls.is_empty(),
            "the storm ({self}):\n  {}",
            shortfalls.join("\n  ")
        );
    }
}

impl fmt::Display for StormFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} calls, {} during the {:.0} s storm, {} refused with 429 ({:.0}%, {:.0}% asked), \
             {} with a Retry-After; {} retries; {} waits judged",
            self.calls,
            self.during,
            self.length.as_secs_f64(),
            self.refusals,
            100.0 * self.refused_share(),
            100.0 * self.share,
            self.with_retry_after,
            self.retries,
            self.judged,
        )?;
        if let Some(shortest) = self.shortest_wait {
            write!(f, " (the shortest {:.1} s)", shortest.as_secs_f64())?;
        }
        if self.left_out > 0 {
            write!(f, ", {} left out", self.left_out)?;
        }
        if self.unanswered > 0 {
            write!(f, ", {} never tried again", self.unanswered)?;
        }
        if !self.early.is_empty() {
            write!(f, ", {} too soon", self.early.len())?;
        }
        write!(
            f,
            "; the last call at {:.1} simulated seconds",
            self.last_at.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infra_core::sdk::ManualClock;

    fn call(at: u64, call: &str, retry_after: Option<u64>) -> StormCall {
        StormCall {
            at: Duration::from_secs(at),
            method: "POST".into(),
            what: "CreateQueue".into(),
            call: call.into(),
            refused: retry_after.is_some(),
            retry_after: retry_after.filter(|s| *s > 0).map(Duration::from_secs),
        }
    }

    fn storm(length: u64) -> Storm {
        Storm::new(Arc::new(ManualClock::new()), Duration::from_secs(length))
            .retry_after_every(1, Duration::from_secs(1))
    }

    #[test]
    fn a_retry_before_the_wait_asked_is_a_violation_and_one_after_it_is_not() {
        let early = [call(10, "a", Some(3)), call(12, "a", None)];
        let v = retry_after_violations(&early);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("CreateQueue"), "{v:?}");
        let late = [call(10, "a", Some(3)), call(13, "a", None)];
        assert!(retry_after_violations(&late).is_empty());
        // Without a Retry-After, any wait will do; calls are told apart.
        let other = [
            call(10, "a", Some(0)),
            call(10, "b", None),
            call(10, "a", None),
        ];
        assert!(retry_after_violations(&other).is_empty());
        let figures = StormFigures::of(&storm(5), &other);
        assert_eq!(
            (figures.calls, figures.refusals, figures.retries),
            (3, 1, 1)
        );
    }

    /// What `assert_outlasted` says of `figures`.
    fn shortfalls(figures: &StormFigures) -> String {
        let failed = std::panic::catch_unwind(|| figures.assert_outlasted());
        *failed
            .expect_err("shortfalls")
            .downcast::<String>()
            .expect("a message")
    }

    #[test]
    fn the_figures_judge_waits_and_the_assertion_names_each_shortfall() {
        let log = [
            call(0, "a", Some(2)),
            call(0, "shared", Some(2)),
            call(0, "shared", None),
            call(1, "b", Some(2)),
            call(2, "a", None),
            call(6, "b", None),
        ];
        let all = StormFigures::of(&storm(5), &log);
        assert_eq!((all.judged, all.unanswered, all.early.len()), (3, 0, 1));
        let judged = StormFigures::judging(&storm(5), &log, |c| c.call != "shared");
        assert_eq!((judged.judged, judged.left_out), (2, 1));
        assert_eq!(judged.shortest_wait, Some(Duration::from_secs(2)));
        assert!(judged.early.is_empty());
        judged.assert_outlasted();
        // A storm that outlasts the calls was weathered, not outlasted.
        let long = StormFigures::judging(&storm(60), &log, |c| c.call != "shared");
        long.assert_weathered();
        let text = shortfalls(&long);
        assert!(
            text.contains("not outlasted") && !text.contains("too soon"),
            "{text}"
        );
        // The same log, every call judged, of a storm that outlasts the calls.
        let text = shortfalls(&StormFigures::of(&storm(60), &log));
        assert!(text.contains("not outlasted"), "{text}");
        assert!(text.contains("too soon"), "{text}");
        // Every call refused, and one asked to wait never made again.
        let harsh = [
            call(0, "a", Some(2)),
            call(2, "a", Some(2)),
            call(4, "b", Some(2)),
        ];
        let text = shortfalls(&StormFigures::of(&storm(5), &harsh));
        assert!(text.contains("where it was to refuse 50%"), "{text}");
        assert!(
            text.contains("2 refused calls that were asked to wait"),
            "{text}"
        );
    }

    #[test]
    fn a_drawn_storm_refuses_its_share_for_its_length_then_ends() {
        let clock = Arc::new(ManualClock::new());
        let mut armed = StormState::default();
        assert!(
            armed.receive("GET", "/v1/a", "GET /v1/a").is_none(),
            "none armed"
        );
        armed.arm(
            Storm::new(clock.clone(), Duration::from_secs(30))
                .retry_after_every(3, Duration::from_secs(2)),
        );
        let mut refused = 0;
        for _ in 0..1000 {
            if let Some(r) = armed.receive("GET", "/v1/a", "GET /v1/a") {
                assert!(r.retry_after.is_none() || r.retry_after == Some(Duration::from_secs(2)));
                refused += 1;
            }
        }
        assert!((400..=600).contains(&refused), "{refused} of 1000");
        assert!(armed.calls().iter().all(|c| c.what == "/v1/a"));
        let asked = armed
            .calls()
            .iter()
            .filter(|c| c.retry_after.is_some())
            .count();
        assert_eq!(asked, refused / 3);
        clock.advance(Duration::from_secs(30));
        assert!(armed.receive("GET", "/v1/a", "GET /v1/a").is_none());
        let calls = armed.calls();
        let last = calls.last().expect("logged after the storm too");
        assert!(!last.refused && last.at == Duration::from_secs(30));
        armed.lift();
        assert!(armed.receive("GET", "/v1/a", "GET /v1/a").is_none());
        assert_eq!(armed.calls().len(), 1001, "nothing logged once lifted");
    }

    #[test]
    fn an_even_storm_refuses_every_other_call_and_draws_waits_from_their_range() {
        let clock = Arc::new(ManualClock::new());
        let mut armed = StormState::default();
        armed.arm(
            Storm::new(clock, Duration::from_secs(30))
                .evenly()
                .retry_after_between(1, Duration::from_secs(1), Duration::from_secs(3)),
        );
        let refused: Vec<bool> = (0..6)
            .map(|_| armed.receive("GET", "/", "GET /").is_some())
            .collect();
        assert_eq!(refused, [false, true, false, true, false, true]);
        let waits: BTreeSet<u64> = (0..200)
            .filter_map(|_| armed.receive("GET", "/", "GET /"))
            .filter_map(|r| r.retry_after)
            .map(|w| w.as_secs())
            .collect();
        assert_eq!(waits, BTreeSet::from([1, 2, 3]));
    }

    #[test]
    fn a_call_is_its_method_path_query_and_body() {
        let a = call_of("POST", "/v1/x", "id=a", r#"{"name":"a"}"#);
        assert_eq!(a, call_of("POST", "/v1/x", "id=a", r#"{"name":"a"}"#));
        assert_ne!(a, call_of("POST", "/v1/x", "id=a", r#"{"name":"b"}"#));
        assert_ne!(a, call_of("PUT", "/v1/x", "id=a", r#"{"name":"a"}"#));
        assert!(a.starts_with("POST /v1/x?id=a #"), "{a}");
    }
}
