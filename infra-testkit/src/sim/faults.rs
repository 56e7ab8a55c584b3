//! Faults the simulated cloud can be told to inject, and the log of the calls it served.
//!
//! Every fault is deterministic: it fires on a counted call, or from a generator seeded
//! by the world's seed. Counting starts when the fault is installed, and counts every
//! call that reaches the world (a call refused because the world has crashed is not
//! counted).

use std::fmt;
use std::time::Duration;

use infra_core::sdk::ErrorKind;

use super::rng::Rng;

/// An operation of the `Backend` trait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// `account`.
    Account,
    /// `list`.
    List,
    /// `read`.
    Read,
    /// `create`.
    Create,
    /// `update`.
    Update,
    /// `delete`.
    Delete,
    /// `ownership`.
    Ownership,
    /// `secret_value`.
    SecretValue,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 8] = [
        Op::Account,
        Op::List,
        Op::Read,
        Op::Create,
        Op::Update,
        Op::Delete,
        Op::Ownership,
        Op::SecretValue,
    ];

    /// Whether the operation changes the world (`create`, `update`, `delete`).
    pub fn is_write(self) -> bool {
        matches!(self, Op::Create | Op::Update | Op::Delete)
    }

    /// The method's name in the `Backend` trait.
    pub fn name(self) -> &'static str {
        match self {
            Op::Account => "account",
            Op::List => "list",
            Op::Read => "read",
            Op::Create => "create",
            Op::Update => "update",
            Op::Delete => "delete",
            Op::Ownership => "ownership",
            Op::SecretValue => "secret_value",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which calls a fault counts: every field left `None` matches anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallFilter {
    /// Only calls to this provider's backend.
    pub provider: Option<String>,
    /// Only this operation.
    pub op: Option<Op>,
    /// Only calls naming this kind.
    pub kind: Option<String>,
    /// Only calls naming this region.
    pub region: Option<String>,
}

impl CallFilter {
    /// Every call.
    pub fn any() -> Self {
        Self::default()
    }

    /// Every call of one operation.
    pub fn op(op: Op) -> Self {
        CallFilter {
            op: Some(op),
            ..Self::default()
        }
    }

    /// The same filter, narrowed to one provider.
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// The same filter, narrowed to one kind.
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }

    /// The same filter, narrowed to one region.
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Whether a call matches.
    pub fn matches(&self, call: &CallRecord) -> bool {
        self.provider.as_deref().is_none_or(|p| p == call.provider)
            && self.op.is_none_or(|op| op == call.op)
            && self.kind.as_deref().is_none_or(|k| Some(k) == call.kind)
            && self
                .region
                .as_deref()
                .is_none_or(|r| Some(r) == call.region.as_deref())
    }
}

/// What happens to a call a fault hits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The call fails with this kind of error and is **not** applied. With
    /// `may_have_been_sent`, it looks like a timeout that happened to do nothing.
    Fail {
        /// The error's kind.
        kind: ErrorKind,
        /// What the error says about whether the request may have been sent.
        may_have_been_sent: bool,
    },
    /// The call is applied, then its response is lost: the caller sees `Unavailable`
    /// with `may_have_been_sent`.
    LoseResponse,
    /// The call is throttled (`Throttled`) and not applied.
    Throttle,
}

/// One fault, fired on the `nth` call (1-based) that matches `filter`, counting from
/// when the rule is installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRule {
    /// Which matching call it hits (1 is the next one).
    pub nth: u64,
    /// Which calls are counted.
    pub filter: CallFilter,
    /// What happens to the call.
    pub fault: Fault,
}

/// A schedule of faults to install at once, for property tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultPlan {
    /// Counted faults.
    pub rules: Vec<FaultRule>,
    /// Crash after this many calls.
    pub crash_after: Option<u64>,
    /// Throttle each call with this probability (drawn from the world's seed).
    pub throttle_rate: Option<f64>,
}

impl FaultPlan {
    /// No faults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same plan with one more rule.
    pub fn with(mut self, rule: FaultRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// A random schedule over the next `calls` calls: each is hit with probability
    /// `rate` by one of a throttle, an `Unavailable` that was not sent, a timeout that
    /// may have been sent (not applied), or a lost response (applied). The same seed
    /// gives the same plan.
    pub fn random(seed: u64, calls: u64, rate: f64) -> Self {
        let mut rng = Rng::derived(seed, &["fault-plan"]);
        let rules = (1..=calls)
            .filter_map(|nth| {
                if rng.unit() >= rate {
                    return None;
                }
                let fault = match rng.below(4) {
                    0 => Fault::Throttle,
                    1 => Fault::Fail {
                        kind: ErrorKind::Unavailable,
                        may_have_been_sent: false,
                    },
                    2 => Fault::Fail {
                        kind: ErrorKind::Unavailable,
                        may_have_been_sent: true,
                    },
                    _ => Fault::LoseResponse,
                };
                Some(FaultRule {
                    nth,
                    filter: CallFilter::any(),
                    fault,
                })
            })
            .collect();
        FaultPlan {
            rules,
            crash_after: None,
            throttle_rate: None,
        }
    }
}

/// How a call ended, as its caller saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It succeeded.
    Ok,
    /// It failed with this kind of error.
    Failed(ErrorKind),
}

impl Outcome {
    /// Whether it succeeded.
    pub fn is_ok(self) -> bool {
        self == Outcome::Ok
    }

    /// The error's kind, if it failed.
    pub fn error(self) -> Option<ErrorKind> {
        match self {
            Outcome::Ok => None,
            Outcome::Failed(kind) => Some(kind),
        }
    }
}

/// One call the simulated cloud received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRecord {
    /// Its position among every call the world received (1-based).
    pub seq: u64,
    /// The backend called (`aws`).
    pub provider: &'static str,
    /// The operation.
    pub op: Op,
    /// The kind named, if the operation names one (`secret_value` names `secrets`).
    pub kind: Option<&'static str>,
    /// The region named, if any.
    pub region: Option<String>,
    /// The resource's name: the name given to `create`, or the name of the resource a
    /// handle designated.
    pub name: Option<String>,
    /// The handle given, or the handle `create` assigned.
    pub handle: Option<String>,
    /// What the caller saw.
    pub outcome: Outcome,
    /// Whether the world carried the operation out: a write changed it, a read was
    /// answered. A lost response is applied and yet failed; an injected failure, a
    /// denial, a crash or a refusal (`NotFound`, `Conflict`, …) is not applied.
    pub applied: bool,
}

impl CallRecord {
    /// Whether the call is a `create`, `update` or `delete`.
    pub fn is_write(&self) -> bool {
        self.op.is_write()
    }
}

impl fmt::Display for CallRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {} {}", self.seq, self.provider, self.op)?;
        if let Some(kind) = self.kind {
            write!(f, " {kind}")?;
        }
        if let Some(region) = &self.region {
            write!(f, " in {region}")?;
        }
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        if let Some(handle) = &self.handle {
            write!(f, " ({handle})")?;
        }
        match self.outcome {
            Outcome::Ok => f.write_str(": ok")?,
            Outcome::Failed(kind) => write!(f, ": {kind}")?,
        }
        if !self.applied {
            f.write_str(", not applied")?;
        }
        Ok(())
    }
}

/// A rule counting down to the call it hits.
#[derive(Clone, Debug)]
struct Armed {
    left: u64,
    filter: CallFilter,
    fault: Fault,
}

/// The fault state of a world: not saved with it.
#[derive(Debug)]
pub(crate) struct Faults {
    armed: Vec<Armed>,
    throttle_next: u64,
    throttle_rate: f64,
    rng: Rng,
    crash_in: Option<u64>,
    crashed: bool,
}

/// What the fault stage decided for one call.
pub(crate) enum Verdict {
    /// Refused: the world has crashed.
    Crashed,
    /// Hit by a fault.
    Hit(Fault),
    /// Refused by the rate limit: its API's bucket holds a call again after this wait.
    OverRate(Duration),
    /// Go ahead.
    Pass,
}

impl Faults {
    pub(crate) fn new(seed: u64) -> Self {
        Faults {
            armed: Vec::new(),
            throttle_next: 0,
            throttle_rate: 0.0,
            rng: Rng::derived(seed, &["faults"]),
            crash_in: None,
            crashed: false,
        }
    }

    pub(crate) fn arm(&mut self, rule: FaultRule) {
        if rule.nth == 0 {
            return;
        }
        self.armed.push(Armed {
            left: rule.nth,
            filter: rule.filter,
            fault: rule.fault,
        });
    }

    pub(crate) fn install(&mut self, plan: &FaultPlan) {
        plan.rules.iter().cloned().for_each(|r| self.arm(r));
        if let Some(n) = plan.crash_after {
            self.crash_after(n);
        }
        if let Some(rate) = plan.throttle_rate {
            self.throttle_rate = rate;
        }
    }

    pub(crate) fn clear(&mut self) {
        self.armed.clear();
        self.throttle_next = 0;
        self.throttle_rate = 0.0;
        self.crash_in = None;
    }

    pub(crate) fn throttle_next(&mut self, calls: u64) {
        self.throttle_next = calls;
    }

    pub(crate) fn set_throttle_rate(&mut self, rate: f64) {
        self.throttle_rate = rate.clamp(0.0, 1.0);
    }

    pub(crate) fn crash_after(&mut self, calls: u64) {
        if calls == 0 {
            self.crashed = true;
            self.crash_in = None;
        } else {
            self.crash_in = Some(calls);
        }
    }

    pub(crate) fn crash_now(&mut self) {
        self.crashed = true;
        self.crash_in = None;
    }

    pub(crate) fn revive(&mut self) {
        self.crashed = false;
        self.crash_in = None;
    }

    pub(crate) fn is_crashed(&self) -> bool {
        self.crashed
    }

    /// Decides the fate of one call, counting it against every armed rule. A call the
    /// crash point lets through is then offered to `admit` (the rate limit): one it
    /// refuses, with the wait it asks for, is throttled before any rule counts it.
    pub(crate) fn judge(
        &mut self,
        call: &CallRecord,
        admit: impl FnOnce() -> Result<(), Duration>,
    ) -> Verdict {
        if self.crashed {
            return Verdict::Crashed;
        }
        if let Some(left) = self.crash_in {
            if left == 0 {
                self.crashed = true;
                self.crash_in = None;
                return Verdict::Crashed;
            }
            self.crash_in = Some(left - 1);
        }
        if let Err(wait) = admit() {
            return Verdict::OverRate(wait);
        }
        let mut hit = None;
        self.armed.retain_mut(|rule| {
            if !rule.filter.matches(call) {
                return true;
            }
            rule.left -= 1;
            if rule.left > 0 {
                return true;
            }
            if hit.is_none() {
                hit = Some(rule.fault.clone());
            }
            false
        });
        if let Some(fault) = hit {
            return Verdict::Hit(fault);
        }
        if self.throttle_next > 0 {
            self.throttle_next -= 1;
            return Verdict::Hit(Fault::Throttle);
        }
        if self.throttle_rate > 0.0 && self.rng.unit() < self.throttle_rate {
            return Verdict::Hit(Fault::Throttle);
        }
        Verdict::Pass
    }
}
