//! Checks of the backend as a whole, not of one kind.

use infra_core::sdk::ErrorKind;

use crate::conformance::{Context, Verdict};

/// A backend that can make calls answers `None` to `unreachable`.
pub async fn a_backend_that_can_call_is_reachable(ctx: &Context) -> Verdict {
    match ctx.backend.unreachable() {
        None => Verdict::Pass,
        Some(why) => Verdict::fail(format!(
            "`unreachable` answers {why:?}: a backend under test must be able to make calls"
        )),
    }
}

/// `account` answers the same, non-empty id on every call.
pub async fn account_answers_the_same_id(ctx: &Context) -> Verdict {
    let first = ctx.settle(|| ctx.backend.account()).await;
    let second = ctx.settle(|| ctx.backend.account()).await;
    match (first, second) {
        (Ok(a), Ok(b)) if a == b && !a.is_empty() => Verdict::Pass,
        (Ok(a), Ok(b)) => Verdict::fail(format!("`account` answered {a:?}, then {b:?}")),
        (Err(e), _) | (_, Err(e)) => Verdict::fail(format!("`account` failed: {e}")),
    }
}

/// Listing a kind in a region that holds nothing of this run answers a list (empty or
/// not), never `NotFound`, and nothing in it carries the run's prefix.
pub async fn listing_a_scope_without_our_resources_is_ok(
    ctx: &Context,
    kinds: &[&'static str],
) -> Verdict {
    let region = ctx.primary();
    for &kind in kinds {
        match ctx.settle(|| ctx.backend.list(kind, region)).await {
            Ok(listed) => {
                if let Some(l) = listed.iter().find(|l| l.name.starts_with(&ctx.prefix)) {
                    return Verdict::fail(format!(
                        "before the run created anything, `list` of {kind} shows `{}`",
                        l.name
                    ));
                }
            }
            Err(e) if e.kind == ErrorKind::NotFound => {
                return Verdict::fail(format!(
                    "`list` of {kind} in {region}, where the run has nothing, answered \
                     NotFound ({e}): an empty scope is an empty list"
                ));
            }
            Err(e) => return Verdict::fail(format!("`list` of {kind} in {region} failed: {e}")),
        }
    }
    Verdict::Pass
}
