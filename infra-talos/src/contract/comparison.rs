//! The numbered comparisons of the commitment transaction (§3.2, comparisons 0–6)
//! and of an attempt transaction (§3.3, comparisons 1, 2, 3 and 6 again, then 7–9).
//!
//! A refusal names the comparison that failed. [`Comparison`] is that name; its
//! number ([`Comparison::number`]) is what the contract, the timeline's `comparison`
//! column and every message use, so it displays and serializes as the number.
//! [`AttemptComparison`] is the subset an attempt transaction makes and converts into
//! it.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::operation::AttemptComparison;

/// One of the comparisons 0–9 of §3.2 and §3.3.
///
/// It displays and serializes as its number (`3`, not `Evidence`), as the timeline
/// and the refusal messages have always written it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "u8", try_from = "u8")]
pub enum Comparison {
    /// 0: the plan has no operation yet (§8 invariant 12).
    PlanHasNoOperation,
    /// 1: authority: approval, expiry, cancellation, revocations, epoch.
    Authority,
    /// 2: the bindings: artifact, assignment, baseline, route, identity and, at
    /// commitment, Desired.
    Bindings,
    /// 3: the dispatch evidence.
    Evidence,
    /// 4: no other operation holds the machine scope (§8 invariant 1).
    MachineScope,
    /// 5: the rollout scope's slot is free (choice §10.5).
    RolloutSlot,
    /// 6: the scope gate: freeze, drift record, recovery mode.
    Gate,
    /// 7: current owner, generation, epoch and an admitting state.
    Ownership,
    /// 8: nothing newer on the timeline than the retry's classification.
    TimelineUnchanged,
    /// 9: attempts left under the bound maximum.
    AttemptsLeft,
}

impl Comparison {
    /// Every comparison, by number.
    pub const ALL: [Self; 10] = [
        Self::PlanHasNoOperation,
        Self::Authority,
        Self::Bindings,
        Self::Evidence,
        Self::MachineScope,
        Self::RolloutSlot,
        Self::Gate,
        Self::Ownership,
        Self::TimelineUnchanged,
        Self::AttemptsLeft,
    ];

    /// The comparisons of the commitment transaction (§3.2), 0–6.
    pub const COMMITMENT: [Self; 7] = [
        Self::PlanHasNoOperation,
        Self::Authority,
        Self::Bindings,
        Self::Evidence,
        Self::MachineScope,
        Self::RolloutSlot,
        Self::Gate,
    ];

    /// The comparison's number in §3.2 and §3.3, as the timeline records it.
    #[must_use]
    pub const fn number(self) -> u8 {
        match self {
            Self::PlanHasNoOperation => 0,
            Self::Authority => 1,
            Self::Bindings => 2,
            Self::Evidence => 3,
            Self::MachineScope => 4,
            Self::RolloutSlot => 5,
            Self::Gate => 6,
            Self::Ownership => 7,
            Self::TimelineUnchanged => 8,
            Self::AttemptsLeft => 9,
        }
    }

    /// The comparison numbered `number`, if there is one.
    #[must_use]
    pub fn from_number(number: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.number() == number)
    }

    /// The same comparison as an attempt transaction makes it; `None` for 0, 4 and
    /// 5, which only the commitment makes.
    #[must_use]
    pub fn attempt(self) -> Option<AttemptComparison> {
        AttemptComparison::ALL
            .into_iter()
            .find(|c| Self::from(*c) == self)
    }
}

impl From<AttemptComparison> for Comparison {
    fn from(c: AttemptComparison) -> Self {
        match c {
            AttemptComparison::Authority => Self::Authority,
            AttemptComparison::Bindings => Self::Bindings,
            AttemptComparison::Evidence => Self::Evidence,
            AttemptComparison::Gate => Self::Gate,
            AttemptComparison::Ownership => Self::Ownership,
            AttemptComparison::TimelineUnchanged => Self::TimelineUnchanged,
            AttemptComparison::AttemptsLeft => Self::AttemptsLeft,
        }
    }
}

impl From<Comparison> for u8 {
    fn from(c: Comparison) -> Self {
        c.number()
    }
}

impl TryFrom<u8> for Comparison {
    type Error = UnknownComparison;

    fn try_from(number: u8) -> Result<Self, Self::Error> {
        Self::from_number(number).ok_or(UnknownComparison(number))
    }
}

/// The number is not one of the comparisons 0–9.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("there is no comparison {0} (§3.2 and §3.3 number them 0 to 9)")]
pub struct UnknownComparison(pub u8);

impl fmt::Display for Comparison {
    /// The number, as the contract and every message name the comparison.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_attempt_comparisons_keep_theirs() {
        for (n, c) in Comparison::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(c.number()), n);
            assert_eq!(Comparison::from_number(c.number()), Some(c));
            assert_eq!(c.to_string(), n.to_string());
        }
        assert_eq!(Comparison::from_number(10), None);
        for a in AttemptComparison::ALL {
            let c = Comparison::from(a);
            assert_eq!(c.number(), a.number());
            assert_eq!(c.attempt(), Some(a));
        }
        for c in [
            Comparison::PlanHasNoOperation,
            Comparison::MachineScope,
            Comparison::RolloutSlot,
        ] {
            assert_eq!(c.attempt(), None);
        }
    }

    #[test]
    fn serializes_as_its_number() {
        assert_eq!(serde_json::to_string(&Comparison::Gate).unwrap(), "6");
        assert_eq!(
            serde_json::from_str::<Comparison>("7").unwrap(),
            Comparison::Ownership
        );
        assert!(serde_json::from_str::<Comparison>("12").is_err());
    }
}
