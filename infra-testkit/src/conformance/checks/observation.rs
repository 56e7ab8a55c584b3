//! The observation contract: present, absent and not observed are three answers, and
//! only `NotFound` is absent. A permission error or a failed read never becomes a
//! create.

use std::sync::Arc;

use infra_core::sdk::ErrorKind;

use crate::conformance::context::{describe_changes, planned};
use crate::conformance::{ConformanceHooks, Context, KindSample, Variant, Verdict};
use infra_core::sdk::layer::Op;

/// The plan of a resource never created says `create` (absent); after the apply it
/// says `unchanged` (present); once the resource is deleted behind the engine's back
/// it says `create` again.
pub async fn observation_tells_present_from_absent(ctx: &Context, sample: &KindSample) -> Verdict {
    present_absent(ctx, sample).await.into()
}

async fn present_absent(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let (kind, region) = (sample.kind, ctx.primary());
    let name = ctx.name("obs", sample);
    let subject = ctx.subject(sample, &name, region);
    let harness = ctx.harness();
    let fleet = ctx.fleet(sample, &name, Variant::Base)?;
    let action = |report: &infra_core::engine::PlanReport| {
        planned(report, &subject).map_or("(missing)", |c| c.action)
    };

    let before = harness.plan(&fleet).await?;
    if action(&before) != "create" {
        return Err(format!(
            "before anything exists the plan says `{}` for it, not `create`",
            action(&before)
        ));
    }
    let outcome = harness.apply(&fleet).await?;
    if !outcome.result.is_success() {
        return Err(format!("the apply failed: {:?}", outcome.result.failed));
    }
    let present = harness.plan(&fleet).await?;
    if action(&present) != "unchanged" {
        return Err(format!(
            "once created, the plan says `{}`, not `unchanged`: {}",
            action(&present),
            describe_changes(&present)
        ));
    }
    let handle = ctx.handle_of(kind, region, &name).await?;
    match ctx
        .settle(|| ctx.backend.delete(kind, region, &handle))
        .await
    {
        Ok(()) => {}
        Err(e) => return Err(format!("deleting {handle} failed: {e}")),
    }
    ctx.poll("once deleted, the plan says `create` again", || async {
        let report = harness.plan(&fleet).await?;
        match action(&report) {
            "create" => Ok(Some(())),
            "unchanged" => Ok(None),
            other => Err(format!(
                "once deleted, the plan says `{other}`: {}",
                describe_changes(&report)
            )),
        }
    })
    .await
}

fn hooks_or_skip(ctx: &Context) -> Result<Arc<dyn ConformanceHooks>, Verdict> {
    ctx.hooks.clone().ok_or_else(|| {
        Verdict::skip(
            "no fault hooks were given: `Conformance::hooks` makes the cloud refuse on cue",
        )
    })
}

/// With reads of the resource failing (through the hooks) for a reason other than
/// absence, `read` does not answer `NotFound`, and the engine plans and applies it as
/// failed: never as absent, never as a create. A resource its list hands over whole
/// ([`Listed::with_reading`](infra_core::sdk::Listed::with_reading)) is not read at
/// all: the plan sees it unchanged, and the apply creates nothing — or, where the
/// hooks fail the list with the reads (the list being what reads it), as failed.
pub async fn an_unreadable_resource_is_never_absent(ctx: &Context, sample: &KindSample) -> Verdict {
    let hooks = match hooks_or_skip(ctx) {
        Ok(h) => h,
        Err(skip) => return skip,
    };
    let verdict = unreadable(ctx, sample, &*hooks).await;
    hooks.restore();
    verdict
}

async fn unreadable(ctx: &Context, sample: &KindSample, hooks: &dyn ConformanceHooks) -> Verdict {
    let (kind, region) = (sample.kind, ctx.primary());
    let name = ctx.name("unr", sample);
    let subject = ctx.subject(sample, &name, region);
    let harness = ctx.harness();
    let setup = async {
        let fleet = ctx.fleet(sample, &name, Variant::Base)?;
        let outcome = harness.apply(&fleet).await?;
        if !outcome.result.is_success() {
            return Err(format!("the apply failed: {:?}", outcome.result.failed));
        }
        let handle = ctx.handle_of(kind, region, &name).await?;
        let whole = ctx
            .settle(|| ctx.backend.list(kind, region))
            .await
            .map_err(|e| format!("`list` of {kind} failed: {e}"))?
            .iter()
            .any(|l| l.name == name && l.reading().is_some());
        Ok((fleet, handle, whole))
    };
    let (fleet, handle, whole) = match setup.await {
        Ok(x) => x,
        Err(e) => return Verdict::fail(e),
    };
    if !hooks.fail_reads(ctx.provider, kind, region, &handle) {
        return Verdict::skip("the hooks cannot make reads fail");
    }
    match ctx.backend.read(kind, region, &handle).await {
        Ok(_) => {
            return Verdict::fail(
                "`read` answered although the hooks made reads fail (do the hooks work?)",
            );
        }
        Err(e) if e.kind == ErrorKind::NotFound => {
            return Verdict::fail(format!(
                "a read that failed for another reason answered NotFound: {e}"
            ));
        }
        Err(_) => {}
    }
    let check = async {
        let plan = harness.plan(&fleet).await?;
        let action = planned(&plan, &subject).map(|c| c.action);
        let failed = match action {
            Some("failed") => true,
            Some("unchanged") if whole => false,
            other if whole => {
                return Err(format!(
                    "with its reads failing and its list handing it over whole, the plan \
                     says {other:?}, not `unchanged` (nor `failed`, had the list failed too)"
                ));
            }
            other => {
                return Err(format!(
                    "with its reads failing the plan says {other:?}, not `failed`"
                ));
            }
        };
        harness.recorder.take();
        let outcome = harness.apply(&fleet).await?;
        let created = harness
            .recorder
            .take()
            .iter()
            .any(|c| c.op == Op::Create && c.name.as_deref() == Some(name.as_str()));
        if created {
            return Err("with its reads failing, the apply created it again".into());
        }
        if failed && !outcome.result.failed.iter().any(|f| f.resource == subject) {
            return Err(format!(
                "with its reads failing, the apply did not report it failed: {:?}",
                outcome.result
            ));
        }
        Ok(())
    };
    check.await.into()
}

/// With the kind denied in the region (through the hooks), `read` and `ownership` of
/// the resource answer `Denied`, never `NotFound`; `list` answers `Denied`, never an
/// empty list; and the engine plans the resource as failed, never as a create.
pub async fn a_denied_call_is_never_not_found(ctx: &Context, sample: &KindSample) -> Verdict {
    let hooks = match hooks_or_skip(ctx) {
        Ok(h) => h,
        Err(skip) => return skip,
    };
    let verdict = denied(ctx, sample, &*hooks).await;
    hooks.restore();
    verdict
}

async fn denied(ctx: &Context, sample: &KindSample, hooks: &dyn ConformanceHooks) -> Verdict {
    let (kind, region) = (sample.kind, ctx.primary());
    let name = ctx.name("den", sample);
    let subject = ctx.subject(sample, &name, region);
    let harness = ctx.harness();
    let setup = async {
        let fleet = ctx.fleet(sample, &name, Variant::Base)?;
        let outcome = harness.apply(&fleet).await?;
        if !outcome.result.is_success() {
            return Err(format!("the apply failed: {:?}", outcome.result.failed));
        }
        let handle = ctx.handle_of(kind, region, &name).await?;
        Ok((fleet, handle))
    };
    let (fleet, handle) = match setup.await {
        Ok(x) => x,
        Err(e) => return Verdict::fail(e),
    };
    if !hooks.deny(ctx.provider, kind, region) {
        return Verdict::skip("the hooks cannot deny a kind in a region");
    }
    let denied = |what: &str, result: Result<(), infra_core::sdk::BackendError>| match result {
        Err(e) if e.kind == ErrorKind::Denied => Ok(()),
        Err(e) if e.kind == ErrorKind::NotFound => Err(format!(
            "a denied `{what}` answered NotFound ({e}): a permission error must be Denied"
        )),
        Err(e) => Err(format!("a denied `{what}` answered {e}, not Denied")),
        Ok(()) => Err(format!(
            "`{what}` answered although the hooks denied it (do the hooks work?)"
        )),
    };
    let check = async {
        denied(
            "read",
            ctx.backend.read(kind, region, &handle).await.map(drop),
        )?;
        if ctx.caps.ownership.contains(kind) {
            denied(
                "ownership",
                ctx.backend.ownership(kind, region, &handle).await.map(drop),
            )?;
        }
        match ctx.backend.list(kind, region).await {
            Ok(listed) => {
                return Err(format!(
                    "a denied `list` answered a list of {} resources: it must be Denied",
                    listed.len()
                ));
            }
            Err(e) if e.kind == ErrorKind::Denied => {}
            Err(e) => return Err(format!("a denied `list` answered {e}, not Denied")),
        }
        let plan = harness.plan(&fleet).await?;
        match planned(&plan, &subject).map(|c| c.action) {
            Some("failed") => Ok(()),
            other => Err(format!(
                "with its kind denied the plan says {other:?}, not `failed`"
            )),
        }
    };
    check.await.into()
}
