//! What a list hands over beside the name and the handle: a resource's complete read
//! ([`Listed::with_reading`](infra_core::sdk::Listed::with_reading)) and its raw tags
//! ([`Listed::with_raw_tags`](infra_core::sdk::Listed::with_raw_tags)) stand in for a
//! `read` and an `ownership` call, so they must be exactly what those calls answer.

use infra_core::sdk::{ErrorKind, Listed, Sighting};
use serde_json::Value;

use crate::conformance::{Context, KindSample, Variant, Verdict};

/// A list's readings are reads: for a kind in `capabilities().complete_lists` every
/// listed resource carries a reading, and each reading a list hands over (whether the
/// kind claims complete lists or not) equals a `read` of the same handle — the observed
/// state, the reported configuration and the raw tags. Raw tags a list hands over
/// equal what `ownership` answers. A list that hands over neither (a kind whose every
/// resource is read) passes: there is nothing that could differ.
pub async fn list_readings_equal_reads(ctx: &Context, sample: &KindSample) -> Verdict {
    readings(ctx, sample).await.into()
}

async fn readings(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let (kind, region) = (sample.kind, ctx.primary());
    let claims = ctx.caps.complete_lists.contains(kind);
    let name = ctx.name("lrd", sample);
    let harness = ctx.harness();
    let fleet = ctx.fleet(sample, &name, Variant::Base)?;
    let outcome = harness.apply(&fleet).await?;
    if !outcome.result.is_success() {
        return Err(format!(
            "applying the Base variant failed: {:?}",
            outcome.result.failed
        ));
    }
    // A resource still settling may change between the list and the read: a
    // difference must hold over a few attempts, a little apart, to count.
    let mut last = Ok(());
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            ctx.clock.sleep(APART).await;
        }
        last = compared(ctx, kind, region, &name, claims).await;
        if last.is_ok() {
            break;
        }
    }
    last
}

/// How many times a list and a read are compared before a difference counts.
const ATTEMPTS: u32 = 3;

/// How long apart, on the run's clock.
const APART: std::time::Duration = std::time::Duration::from_secs(2);

/// One comparison of what the list hands over for `name` with `read` and `ownership`.
async fn compared(
    ctx: &Context,
    kind: &'static str,
    region: &str,
    name: &str,
    claims: bool,
) -> Result<(), String> {
    let listed = listed_as(ctx, kind, region, name).await?;
    if claims && listed.reading().is_none() {
        return Err(format!(
            "the kind is in `capabilities().complete_lists`, but its list handed `{name}` \
             over without a reading"
        ));
    }
    if let Some(given) = listed.reading() {
        let read = ctx
            .settle(|| ctx.backend.read(kind, region, &listed.handle))
            .await
            .map_err(|e| format!("`read` of {} failed: {e}", listed.handle))?;
        same_sighting(given, &read)?;
    }
    if let Some(tags) = listed.raw_tags() {
        let owned = ctx
            .settle(|| ctx.backend.ownership(kind, region, &listed.handle))
            .await;
        match owned {
            Ok(theirs) if &theirs == tags => {}
            Ok(theirs) => {
                return Err(format!(
                    "the list handed over raw tags {tags:?}, `ownership` answers {theirs:?}"
                ));
            }
            Err(e) if e.kind == ErrorKind::Invalid => {}
            Err(e) => return Err(format!("`ownership` of {} failed: {e}", listed.handle)),
        }
    }
    Ok(())
}

/// The listed resource `name`, once the list shows it.
async fn listed_as(
    ctx: &Context,
    kind: &'static str,
    region: &str,
    name: &str,
) -> Result<Listed, String> {
    ctx.poll(&format!("`list` shows {kind} `{name}`"), || async {
        let listed = ctx
            .settle(|| ctx.backend.list(kind, region))
            .await
            .map_err(|e| format!("`list` of {kind} in {region} failed: {e}"))?;
        Ok(listed.into_iter().find(|l| l.name == name))
    })
    .await
}

/// `Ok` when the list's reading `given` is the `read` answer `read`, field for field.
fn same_sighting(given: &Sighting, read: &Sighting) -> Result<(), String> {
    let differs = |what: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
        Err(format!(
            "the list's reading differs from `read` in {what}: listed {a:?}, read {b:?}"
        ))
    };
    if given.handle != read.handle {
        return differs("the handle", &given.handle, &read.handle);
    }
    if given.observed_json() != read.observed_json() {
        return differs(
            "the observed state",
            given.observed_json(),
            read.observed_json(),
        );
    }
    if given.reported() != read.reported() {
        let a = Value::Object(given.reported().clone());
        let b = Value::Object(read.reported().clone());
        return differs("the reported configuration", &a, &b);
    }
    if given.raw_tags() != read.raw_tags() {
        return differs("the raw tags", &given.raw_tags(), &read.raw_tags());
    }
    Ok(())
}
