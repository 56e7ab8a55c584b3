//! The clean-up at the end of a run, which is a check too: everything the run created
//! can be deleted through the backend, dependants first.

use std::collections::BTreeSet;

use infra_core::sdk::ErrorKind;

use crate::conformance::{Context, Verdict};

/// Rounds of deletes before the clean-up gives up on resources still refused for
/// ordering reasons.
const ROUNDS: usize = 20;

/// Deletes every resource whose name carries the run's prefix, in every (kind, region)
/// a fleet of the run declared something in, repeating rounds while a round frees
/// something (a `DependencyViolation` waits for its dependant to go), then checks that
/// `list` no longer shows any of them.
pub async fn cleanup_leaves_nothing_behind(ctx: &Context) -> Verdict {
    let scopes: Vec<(&'static str, &'static str)> = ctx
        .touched
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .copied()
        .collect();
    let mut problems: Vec<String> = Vec::new();
    for round in 0..ROUNDS {
        let mut freed = 0;
        let mut waiting = 0;
        for &(kind, region) in &scopes {
            let listed = match ctx.settle(|| ctx.backend.list(kind, region)).await {
                Ok(listed) => listed,
                Err(e) => {
                    problems.push(format!("`list` of {kind} in {region} failed: {e}"));
                    continue;
                }
            };
            for l in listed.iter().filter(|l| l.name.starts_with(&ctx.prefix)) {
                match ctx
                    .settle(|| ctx.backend.delete(kind, region, &l.handle))
                    .await
                {
                    Ok(()) => freed += 1,
                    Err(e) if e.kind == ErrorKind::NotFound => freed += 1,
                    Err(e) if e.kind == ErrorKind::DependencyViolation => waiting += 1,
                    Err(e) => problems.push(format!(
                        "deleting {kind} `{}` ({}) failed: {e}",
                        l.name, l.handle
                    )),
                }
            }
        }
        if waiting == 0 || freed == 0 {
            if waiting > 0 {
                problems.push(format!(
                    "after {} rounds, {waiting} resources are still refused with \
                     DependencyViolation and nothing else frees them",
                    round + 1
                ));
            }
            break;
        }
    }
    let left = ctx
        .poll("`list` no longer shows the run's resources", || async {
            let mut left = BTreeSet::new();
            for &(kind, region) in &scopes {
                if let Ok(listed) = ctx.backend.list(kind, region).await {
                    left.extend(
                        listed
                            .into_iter()
                            .filter(|l| l.name.starts_with(&ctx.prefix))
                            .map(|l| format!("{kind} `{}` in {region}", l.name)),
                    );
                }
            }
            Ok(left.is_empty().then_some(()))
        })
        .await;
    if let Err(e) = left {
        problems.push(e);
    }
    if problems.is_empty() {
        Verdict::Pass
    } else {
        problems.dedup();
        Verdict::fail(problems.join("; "))
    }
}
