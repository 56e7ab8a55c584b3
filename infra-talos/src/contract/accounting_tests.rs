//! §5.2 accounting decisions, over a grid of recorded facts.

use super::accounting::{
    AccountingRefusal, DecisionFacts, ExecutorStop, LastRecoveryRead, MIN_SETTLE_FLOOR,
    RecordedRead, TransportDeadline, check_decision, check_joint_decision, next_recovery_read,
};
use super::evidence::ObservationPurpose as P;
use super::{InstantMs as T, Role, SpanMs};

const fn read(purpose: P, started: u64, recorded: u64, version: Option<u64>) -> RecordedRead {
    RecordedRead {
        purpose,
        started_at: T(started),
        recorded_at: T(recorded),
        config_version: version,
    }
}

/// Reads that land on each side of every boundary the grid's times produce.
const POOL: [RecordedRead; 7] = [
    read(P::Drift, 95_000, 96_000, Some(5)),
    read(P::Evidence, 115_000, 116_000, Some(5)),
    read(P::Recovery, 125_000, 126_000, Some(5)),
    read(P::Recovery, 160_000, 161_000, Some(6)),
    read(P::Recovery, 158_000, 300_000, Some(5)),
    read(P::Recovery, 121_000, 122_000, None),
    read(P::Recovery, 200_000, 201_000, Some(5)),
];

/// What the §5.2 conditions say, restated: `Err(0)` for a role or setting refusal,
/// `Err(n)` for condition n, or the chosen start and end reads.
fn oracle(f: &DecisionFacts<'_>) -> Result<(RecordedRead, RecordedRead), u8> {
    if f.decider != Role::RecoveryAdmin || f.settle_floor.0 < 30_000 {
        return Err(0);
    }
    let stop = match f.stop {
        ExecutorStop::NotStopped => return Err(1),
        ExecutorStop::TakenOver { at } | ExecutorStop::StoppedForRestore { at } => at.0,
    };
    let deadline = match f.deadline {
        TransportDeadline::Known(at) => at.0,
        TransportDeadline::ErasedByRestore {
            max_transport_deadline,
        } => stop + max_transport_deadline.0,
    };
    let recorded: Vec<RecordedRead> = f
        .reads
        .iter()
        .filter(|r| {
            r.started_at <= r.recorded_at && r.recorded_at <= f.now && r.config_version.is_some()
        })
        .copied()
        .collect();
    let mut after_deadline: Vec<RecordedRead> = recorded
        .iter()
        .filter(|r| r.started_at.0 > deadline)
        .copied()
        .collect();
    after_deadline.sort_by_key(|r| (r.started_at, r.recorded_at));
    let Some(start) = after_deadline.first().copied() else {
        return Err(2);
    };
    let floor_ends = deadline.max(stop).max(start.recorded_at.0) + f.settle_floor.0;
    if f.now.0 < floor_ends {
        return Err(2);
    }
    let mut ends: Vec<RecordedRead> = recorded
        .iter()
        .filter(|r| r.purpose == P::Recovery && r.started_at.0 >= floor_ends)
        .copied()
        .collect();
    ends.sort_by_key(|r| (r.started_at, r.recorded_at));
    let Some(end) = ends.last().copied() else {
        return Err(3);
    };
    let explained = f
        .version_change_explanation
        .is_some_and(|e| !e.trim().is_empty());
    if start.config_version != end.config_version && !explained {
        return Err(3);
    }
    Ok((start, end))
}

/// 2 roles × 2 floors × 3 stops × 3 deadlines × 128 read sets × 3 times × 3
/// explanations = 41 472 cases.
#[test]
fn section_5_2_grid() {
    let stops = [
        ExecutorStop::NotStopped,
        ExecutorStop::TakenOver { at: T(100_000) },
        ExecutorStop::StoppedForRestore { at: T(100_000) },
    ];
    let deadlines = [
        TransportDeadline::Known(T(90_000)),
        TransportDeadline::Known(T(110_000)),
        TransportDeadline::ErasedByRestore {
            max_transport_deadline: SpanMs(20_000),
        },
    ];
    let mut cases = 0;
    let mut passed = 0;
    for decider in [Role::RecoveryAdmin, Role::Approver] {
        for settle_floor in [SpanMs(29_999), MIN_SETTLE_FLOOR] {
            for stop in stops {
                for deadline in deadlines {
                    for mask in 0u32..128 {
                        let reads: Vec<RecordedRead> = POOL
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| mask & (1 << i) != 0)
                            .map(|(_, r)| *r)
                            .collect();
                        for now in [T(140_000), T(175_000), T(250_000)] {
                            for version_change_explanation in
                                [None, Some("the landing of this attempt"), Some("  ")]
                            {
                                cases += 1;
                                let facts = DecisionFacts {
                                    decider,
                                    stop,
                                    deadline,
                                    settle_floor,
                                    reads: &reads,
                                    now,
                                    version_change_explanation,
                                };
                                let got = check_decision(&facts);
                                match (oracle(&facts), got) {
                                    (Ok((start, end)), Ok(d)) => {
                                        passed += 1;
                                        assert_eq!((d.start, d.end), (start, end), "{facts:?}");
                                        assert_eq!(
                                            d.version_changed,
                                            start.config_version != end.config_version
                                        );
                                        assert!(d.end.started_at >= d.floor_ends);
                                    }
                                    (Err(n), Err(r)) => {
                                        assert_eq!(r.condition().unwrap_or(0), n, "{facts:?}: {r}");
                                    }
                                    (want, got) => {
                                        panic!("{facts:?}: expected {want:?}, got {got:?}")
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cases, 41_472);
    assert!(passed > 0);
}

fn taken_over(reads: &[RecordedRead], now: u64) -> DecisionFacts<'_> {
    DecisionFacts {
        decider: Role::RecoveryAdmin,
        stop: ExecutorStop::TakenOver { at: T(100_000) },
        deadline: TransportDeadline::Known(T(90_000)),
        settle_floor: MIN_SETTLE_FLOOR,
        reads,
        now: T(now),
        version_change_explanation: None,
    }
}

/// An executor's exit is no stop: accounting on exit alone is refused (§5.2).
#[test]
fn exit_alone_is_refused() {
    let reads = [POOL[0], POOL[3]];
    let facts = DecisionFacts {
        stop: ExecutorStop::NotStopped,
        ..taken_over(&reads, 200_000)
    };
    assert_eq!(
        check_decision(&facts),
        Err(AccountingRefusal::ExecutorNotStopped)
    );
}

/// A read begun but not recorded is no evidence (§5.2 condition 3).
#[test]
fn unrecorded_read_is_no_evidence() {
    let reads = [POOL[0], read(P::Recovery, 140_000, 400_000, Some(5))];
    assert_eq!(
        check_decision(&taken_over(&reads, 200_000)),
        Err(AccountingRefusal::NoRecoveryReadAfterFloor {
            floor_ends: T(130_000)
        })
    );
    let recorded = [POOL[0], read(P::Recovery, 140_000, 141_000, Some(5))];
    assert!(check_decision(&taken_over(&recorded, 200_000)).is_ok());
}

/// §7.3 step 1: one decision over several scopes refuses all when one fails.
#[test]
fn joint_decision_is_all_or_nothing() {
    let good = [POOL[0], read(P::Recovery, 140_000, 141_000, Some(5))];
    let bad = [POOL[0]];
    let ok = check_joint_decision(&[taken_over(&good, 200_000), taken_over(&good, 200_000)]);
    assert_eq!(ok.map(|d| d.len()), Ok(2));
    let err = check_joint_decision(&[taken_over(&good, 200_000), taken_over(&bad, 200_000)]);
    assert_eq!(err.map_err(|e| e.index), Err(1));
}

/// §5.2 pacing of the owner's recovery observations.
#[test]
fn recovery_read_pacing() {
    let floor = MIN_SETTLE_FLOOR;
    assert_eq!(
        next_recovery_read(T(1_000), floor, LastRecoveryRead::None),
        T(1_000)
    );
    assert_eq!(
        next_recovery_read(T(1_000), floor, LastRecoveryRead::Recorded { at: T(5_000) }),
        T(35_000)
    );
    assert_eq!(
        next_recovery_read(
            T(1_000),
            floor,
            LastRecoveryRead::InProgress { began: T(4_000) }
        ),
        T(34_000)
    );
    assert_eq!(
        next_recovery_read(
            T(90_000),
            floor,
            LastRecoveryRead::Recorded { at: T(5_000) }
        ),
        T(90_000)
    );
}
