//! One resource's life through the backend: create writes the marker, read reports it
//! and every field round-trips, list answers one region, delete of an absent resource
//! is `NotFound`, an update changes in place and a forces-replace change replaces.

use infra_core::{
    engine::{Change, Outcome, Subject},
    sdk::{ErrorKind, FieldInfo, MARKER_KEY},
};
use serde_json::Value;

use crate::conformance::context::{Harness, describe_changes};
use crate::conformance::recording::{Probe, ProbeResult};
use crate::conformance::{Context, KindSample, Variant, Verdict};
use infra_core::sdk::layer::Op;

/// Applies the sample's `variant` as the resource `name`, demanding success.
async fn apply_ok(
    ctx: &Context,
    harness: &Harness,
    sample: &KindSample,
    name: &str,
    variant: Variant,
) -> Result<Outcome, String> {
    let fleet = ctx.fleet(sample, name, variant)?;
    let outcome = harness.apply(&fleet).await?;
    if !outcome.result.is_success() {
        return Err(format!(
            "applying the {variant:?} variant failed: {:?} {:?}",
            outcome.result.failed, outcome.result.not_attempted
        ));
    }
    Ok(outcome)
}

/// The handle a successful `create` of `name` returned, from the recorded calls.
fn created_handle(harness: &Harness, name: &str) -> Result<String, String> {
    harness
        .recorder
        .calls()
        .into_iter()
        .rev()
        .find(|c| c.op == Op::Create && c.error.is_none() && c.name.as_deref() == Some(name))
        .and_then(|c| c.handle)
        .ok_or_else(|| format!("the apply made no successful `create` of `{name}`"))
}

fn change_of(outcome: &Outcome, subject: &Subject) -> Option<Change> {
    outcome
        .result
        .applied
        .iter()
        .find(|a| &a.resource == subject)
        .map(|a| a.change)
}

/// The divergence table of the sample's kind, from a fleet declaring it.
fn fields_of(
    ctx: &Context,
    sample: &KindSample,
    name: &str,
) -> Result<&'static [FieldInfo], String> {
    let fleet = ctx.fleet(sample, name, Variant::Base)?;
    fleet
        .resources()
        .find(|r| r.reference().name == name)
        .map(|r| r.kind().fields)
        .ok_or_else(|| format!("the sample declares no resource named `{name}`"))
}

/// `create` writes this fleet's ownership marker in the creating call itself:
/// `ownership` of the new resource shows `managed-by-infra = <fleet>` with no other
/// write in between.
pub async fn create_writes_the_marker(ctx: &Context, sample: &KindSample) -> Verdict {
    if !ctx.caps.ownership.contains(sample.kind) {
        return Verdict::skip(
            "the backend cannot read tags of this kind (not in `capabilities().ownership`)",
        );
    }
    marker(ctx, sample).await.into()
}

async fn marker(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let (kind, region) = (sample.kind, ctx.primary());
    let name = ctx.name("mkr", sample);
    let harness = ctx.harness();
    apply_ok(ctx, &harness, sample, &name, Variant::Base).await?;
    let handle = created_handle(&harness, &name)?;
    let later_writes = harness
        .recorder
        .calls()
        .iter()
        .any(|c| c.op == Op::Update && c.handle.as_deref() == Some(handle.as_str()));
    if later_writes {
        return Err("the resource was updated right after its create".into());
    }
    let tags = ctx
        .poll("`ownership` finds the new resource", || async {
            match ctx.backend.ownership(kind, region, &handle).await {
                Ok(tags) => Ok(Some(tags)),
                Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
                Err(e) => Err(format!("`ownership` of {handle} failed: {e}")),
            }
        })
        .await?;
    match tags.get(MARKER_KEY) {
        Some(v) if v == &ctx.fleet => Ok(()),
        Some(v) => Err(format!(
            "the new resource carries `{MARKER_KEY}={v}`, not this fleet's `{}`",
            ctx.fleet
        )),
        None => Err(format!(
            "the new resource carries no `{MARKER_KEY}` marker (tags: {tags:?}): create must \
             write it"
        )),
    }
}

/// `read` reports the tags as stored, marker included (for a kind with a `tags`
/// field), and the engine strips it: a second apply finds nothing to change.
pub async fn read_reports_the_marker_and_the_engine_strips_it(
    ctx: &Context,
    sample: &KindSample,
) -> Verdict {
    read_marker(ctx, sample).await.into()
}

async fn read_marker(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let (kind, region) = (sample.kind, ctx.primary());
    let name = ctx.name("rdm", sample);
    let harness = ctx.harness();
    apply_ok(ctx, &harness, sample, &name, Variant::Base).await?;
    let handle = created_handle(&harness, &name)?;
    let sighting = read_eventually(ctx, kind, region, &handle).await?;
    // A kind whose tags cannot be read (Scaleway Queues take none) carries no marker.
    let tags_readable = ctx.caps.ownership.contains(kind);
    // A read that carries the raw tags stands in for `ownership`: it must carry the same.
    if let Some(carried) = sighting.raw_tags()
        && tags_readable
    {
        let owned = ctx
            .backend
            .ownership(kind, region, &handle)
            .await
            .map_err(|e| format!("`ownership` of {handle} failed: {e}"))?;
        if carried != &owned {
            return Err(format!(
                "`read` carries raw tags {carried:?}, but `ownership` reads {owned:?}: \
                 the engine decides ownership from the read's"
            ));
        }
    }
    if tags_readable
        && fields_of(ctx, sample, &name)?
            .iter()
            .any(|f| f.name == "tags")
    {
        let expected = format!("{MARKER_KEY}={}", ctx.fleet);
        let carries = match sighting.reported().get("tags") {
            Some(Value::Object(tags)) => {
                tags.get(MARKER_KEY).and_then(Value::as_str) == Some(ctx.fleet.as_str())
            }
            Some(Value::Array(tags)) => tags.iter().any(|t| t.as_str() == Some(&expected)),
            Some(other) => {
                return Err(format!(
                    "`read` reports tags as {other}, neither a map nor a list"
                ));
            }
            None => {
                return Err(
                    "`read` reports no tags, so it cannot report the marker among them".into(),
                );
            }
        };
        if !carries {
            return Err(format!(
                "`read` reports tags {} without the marker `{expected}`: read must strip nothing",
                sighting.reported()["tags"]
            ));
        }
    }
    harness.recorder.take();
    let fleet = ctx.fleet(sample, &name, Variant::Base)?;
    let again = harness.apply(&fleet).await?;
    if again.result.changed_anything() || again.plan.has_changes() {
        return Err(format!(
            "a second apply still changes something: {}",
            describe_changes(&again.plan)
        ));
    }
    Ok(())
}

async fn read_eventually(
    ctx: &Context,
    kind: &'static str,
    region: &str,
    handle: &str,
) -> Result<infra_core::sdk::Sighting, String> {
    ctx.poll("`read` finds the new resource", || async {
        match ctx.backend.read(kind, region, handle).await {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("`read` of {handle} failed: {e}")),
        }
    })
    .await
}

/// `list` answers the region it is asked about: a resource of the second region is
/// not in the first region's list, nor the other way round.
pub async fn list_answers_only_its_region(ctx: &Context, sample: &KindSample) -> Verdict {
    let Some(second) = ctx.second_region.clone() else {
        return Verdict::skip("no second region was given (`Conformance::regions`)");
    };
    if !sample.region_parses(&second) {
        return Verdict::skip(format!(
            "the second region `{second}` is not a {} region",
            sample.provider
        ));
    }
    regions(ctx, sample, &second).await.into()
}

async fn regions(ctx: &Context, sample: &KindSample, second: &str) -> Result<(), String> {
    let (kind, first) = (sample.kind, ctx.primary());
    let a = ctx.name("rga", sample);
    let b = ctx.name("rgb", sample);
    let fleet = ctx.fleet_named(
        &ctx.fleet,
        &[
            (sample, first, &a, Variant::Base),
            (sample, second, &b, Variant::Base),
        ],
    )?;
    let harness = ctx.harness();
    let outcome = harness.apply(&fleet).await?;
    if !outcome.result.is_success() {
        return Err(format!("the apply failed: {:?}", outcome.result.failed));
    }
    let ha = ctx.handle_of(kind, first, &a).await?;
    let hb = ctx.handle_of(kind, second, &b).await?;
    for (region, name, handle) in [(first, &b, &hb), (second, &a, &ha)] {
        let listed = ctx
            .backend
            .list(kind, region)
            .await
            .map_err(|e| format!("`list` in {region} failed: {e}"))?;
        if listed
            .iter()
            .any(|l| &l.name == name || &l.handle == handle)
        {
            return Err(format!(
                "`list` of {region} shows `{name}` ({handle}), which is in another region"
            ));
        }
    }
    Ok(())
}

/// After a create, `read` of the handle it returned eventually answers (waiting on the
/// clock, bounded), with that handle; `list` eventually shows the name with the same
/// handle.
pub async fn read_after_create_eventually_sees_it(ctx: &Context, sample: &KindSample) -> Verdict {
    read_after_create(ctx, sample).await.into()
}

async fn read_after_create(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let (kind, region) = (sample.kind, ctx.primary());
    let name = ctx.name("rac", sample);
    let harness = ctx.harness();
    apply_ok(ctx, &harness, sample, &name, Variant::Base).await?;
    let handle = created_handle(&harness, &name)?;
    let sighting = read_eventually(ctx, kind, region, &handle).await?;
    if sighting.handle != handle {
        return Err(format!(
            "`read` of {handle} answers for handle {}",
            sighting.handle
        ));
    }
    let listed = ctx.handle_of(kind, region, &name).await?;
    if listed != handle {
        return Err(format!(
            "`list` gives `{name}` the handle {listed}, `create` gave {handle}"
        ));
    }
    Ok(())
}

/// Deleting a resource that is gone answers `NotFound` (after the first delete
/// succeeded), and so do `read` and `ownership` of it.
pub async fn delete_of_an_absent_resource_is_not_found(
    ctx: &Context,
    sample: &KindSample,
) -> Verdict {
    delete_absent(ctx, sample).await.into()
}

async fn delete_absent(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let (kind, region) = (sample.kind, ctx.primary());
    let name = ctx.name("del", sample);
    let harness = ctx.harness();
    apply_ok(ctx, &harness, sample, &name, Variant::Base).await?;
    let handle = ctx.handle_of(kind, region, &name).await?;
    ctx.settle(|| ctx.backend.delete(kind, region, &handle))
        .await
        .map_err(|e| format!("deleting {handle} failed: {e}"))?;
    ctx.poll("deleting it again answers NotFound", || async {
        match ctx.backend.delete(kind, region, &handle).await {
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Some(())),
            // Still going away, or an answer that should become NotFound.
            Ok(()) => Ok(None),
            Err(e) if e.kind.is_transient() || e.kind == ErrorKind::Conflict => Ok(None),
            Err(e) => Err(format!(
                "deleting a deleted resource answered {e}, not NotFound"
            )),
        }
    })
    .await?;
    ctx.poll(
        "`read` of the deleted resource answers NotFound",
        || async {
            match ctx.backend.read(kind, region, &handle).await {
                Err(e) if e.kind == ErrorKind::NotFound => Ok(Some(())),
                Ok(_) => Ok(None),
                Err(e) if e.kind.is_transient() => Ok(None),
                Err(e) => Err(format!(
                    "`read` of a deleted resource answered {e}, not NotFound"
                )),
            }
        },
    )
    .await?;
    if ctx.caps.ownership.contains(kind) {
        match ctx.backend.ownership(kind, region, &handle).await {
            Err(e) if e.kind == ErrorKind::NotFound => {}
            Err(e) => {
                return Err(format!(
                    "`ownership` of a deleted resource answered {e}, not NotFound"
                ));
            }
            Ok(tags) => {
                return Err(format!(
                    "`ownership` of a deleted resource answered tags {tags:?}, not NotFound"
                ));
            }
        }
    }
    Ok(())
}

/// Applying the `Mutable` variant after the base is an update in place: the engine
/// reports `Updated` (never `Replaced`), the backend receives an update and no create
/// or delete of it, the handle stays, the same update sent twice leaves the same
/// state, and a plan after it has no changes.
pub async fn update_changes_only_mutable_fields(ctx: &Context, sample: &KindSample) -> Verdict {
    if !sample.mutable {
        return Verdict::skip("the sample has no Mutable variant");
    }
    update(ctx, sample).await.into()
}

async fn update(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let (kind, region) = (sample.kind, ctx.primary());
    let name = ctx.name("upd", sample);
    let subject = ctx.subject(sample, &name, region);
    let harness = ctx.harness();
    apply_ok(ctx, &harness, sample, &name, Variant::Base).await?;
    let before = ctx.handle_of(kind, region, &name).await?;
    harness.recorder.take();
    harness.recorder.take_probed();
    harness
        .recorder
        .set_probe(Some(Probe::UpdateTwice { kind }));
    let outcome = apply_ok(ctx, &harness, sample, &name, Variant::Mutable).await;
    harness.recorder.set_probe(None);
    let outcome = outcome?;
    match change_of(&outcome, &subject) {
        Some(Change::Updated) => {}
        Some(Change::Replaced) => {
            return Err(format!(
                "the Mutable variant changes only mutable fields, yet it was replaced (fields: \
                 {})",
                describe_changes(&outcome.plan)
            ));
        }
        other => {
            return Err(format!(
                "the Mutable variant ended {other:?}, not Updated: the backend does not report \
                 the changed field, or did not change it"
            ));
        }
    }
    let calls = harness.recorder.take();
    if let Some(c) = calls.iter().find(|c| {
        matches!(c.op, Op::Create | Op::Delete)
            && (c.name.as_deref() == Some(name.as_str())
                || c.handle.as_deref() == Some(before.as_str()))
    }) {
        return Err(format!("an update in place made a {:?} call", c.op));
    }
    for probed in harness.recorder.take_probed() {
        if let ProbeResult::TwoUpdates { first, second } = probed {
            match second {
                Ok(second) if second == first => {}
                Ok(second) => {
                    return Err(format!(
                        "the same update sent twice left different states: {} then {}",
                        Value::Object(first),
                        Value::Object(second)
                    ));
                }
                Err(e) => return Err(format!("the same update sent twice failed: {e}")),
            }
        }
    }
    let plan = harness
        .plan(&ctx.fleet(sample, &name, Variant::Mutable)?)
        .await?;
    if plan.has_changes() {
        return Err(format!(
            "after the update a plan still wants: {}",
            describe_changes(&plan)
        ));
    }
    let after = ctx.handle_of(kind, region, &name).await?;
    if after != before {
        return Err(format!(
            "the update in place changed the handle from {before} to {after}"
        ));
    }
    Ok(())
}

/// Applying the `Replace` variant after the base is a replace: the engine reports
/// `Replaced`, a plan after it has no changes, and the new resource carries the marker.
pub async fn a_forces_replace_change_is_a_replace(ctx: &Context, sample: &KindSample) -> Verdict {
    if !sample.replace {
        return Verdict::skip("the sample has no Replace variant");
    }
    replace(ctx, sample).await.into()
}

async fn replace(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let (kind, region) = (sample.kind, ctx.primary());
    let name = ctx.name("rpl", sample);
    let subject = ctx.subject(sample, &name, region);
    let harness = ctx.harness();
    apply_ok(ctx, &harness, sample, &name, Variant::Base).await?;
    let outcome = apply_ok(ctx, &harness, sample, &name, Variant::Replace).await?;
    match change_of(&outcome, &subject) {
        Some(Change::Replaced) => {}
        other => {
            return Err(format!(
                "the Replace variant changes a field that forces a replace, yet it ended \
                 {other:?} (planned: {})",
                describe_changes(&outcome.plan)
            ));
        }
    }
    let plan = harness
        .plan(&ctx.fleet(sample, &name, Variant::Replace)?)
        .await?;
    if plan.has_changes() {
        return Err(format!(
            "after the replace a plan still wants: {}",
            describe_changes(&plan)
        ));
    }
    if ctx.caps.ownership.contains(kind) {
        let handle = ctx.handle_of(kind, region, &name).await?;
        let tags = ctx
            .backend
            .ownership(kind, region, &handle)
            .await
            .map_err(|e| format!("`ownership` of the replacement failed: {e}"))?;
        if tags.get(MARKER_KEY) != Some(&ctx.fleet) {
            return Err(format!(
                "the replacement does not carry this fleet's marker: {tags:?}"
            ));
        }
    }
    Ok(())
}

/// Every field the kind compares round-trips: after applying the base (and the
/// `Mutable` variant, when there is one), a plan has no changes. A backend that reads
/// back a sentinel (`""`, `0`) where the cloud said nothing fails here.
pub async fn reported_fields_round_trip_without_sentinels(
    ctx: &Context,
    sample: &KindSample,
) -> Verdict {
    round_trip(ctx, sample).await.into()
}

async fn round_trip(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let name = ctx.name("rtp", sample);
    let harness = ctx.harness();
    let mut variants = vec![Variant::Base];
    if sample.mutable {
        variants.push(Variant::Mutable);
    }
    for variant in variants {
        apply_ok(ctx, &harness, sample, &name, variant).await?;
        let plan = harness.plan(&ctx.fleet(sample, &name, variant)?).await?;
        if plan.has_changes() {
            return Err(format!(
                "after applying the {variant:?} variant, a plan still wants: {} — a field read \
                 back differs from what was applied (a sentinel such as \"\" or 0 where the \
                 cloud said nothing must be left unknown)",
                describe_changes(&plan)
            ));
        }
    }
    Ok(())
}

/// Creating a resource under a name already taken answers `Conflict` (for a kind whose
/// names must be unique).
pub async fn a_taken_name_is_conflict(ctx: &Context, sample: &KindSample) -> Verdict {
    if ctx.caps.duplicate_names.contains(sample.kind) {
        return Verdict::skip("the backend allows two resources of one name for this kind");
    }
    conflict(ctx, sample).await.into()
}

async fn conflict(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let name = ctx.name("cfl", sample);
    let harness = ctx.harness();
    harness.recorder.set_probe(Some(Probe::CreateTwice {
        kind: sample.kind,
        name: name.clone(),
    }));
    let outcome = apply_ok(ctx, &harness, sample, &name, Variant::Base).await;
    harness.recorder.set_probe(None);
    outcome?;
    match harness.recorder.take_probed().into_iter().next() {
        Some(ProbeResult::SecondCreate(Err(e))) if e.kind == ErrorKind::Conflict => Ok(()),
        Some(ProbeResult::SecondCreate(Err(e))) => Err(format!(
            "creating `{name}` a second time answered {e}, not Conflict"
        )),
        Some(ProbeResult::SecondCreate(Ok(handle))) => Err(format!(
            "creating `{name}` a second time succeeded (handle {handle}): the name was taken"
        )),
        _ => Err(format!("the apply made no successful create of `{name}`")),
    }
}

/// `list` shows resources whatever their owner: one created by another fleet is
/// listed.
pub async fn list_shows_resources_whatever_their_owner(
    ctx: &Context,
    sample: &KindSample,
) -> Verdict {
    let name = ctx.name("frl", sample);
    let run = async {
        ctx.create_foreign(sample, &name).await?;
        ctx.handle_of(sample.kind, ctx.primary(), &name).await?;
        Ok(())
    };
    run.await.into()
}

/// For the `secrets` kind: `secret_value` reads the value of the secret, and neither
/// `read`'s reported configuration nor its observed state holds it.
pub async fn a_secret_value_is_read_but_never_reported(
    ctx: &Context,
    sample: &KindSample,
) -> Verdict {
    secret(ctx, sample).await.into()
}

async fn secret(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let (kind, region) = (sample.kind, ctx.primary());
    let name = ctx.name("sec", sample);
    let harness = ctx.harness();
    apply_ok(ctx, &harness, sample, &name, Variant::Base).await?;
    let handle = ctx.handle_of(kind, region, &name).await?;
    let value = ctx
        .settle(|| ctx.backend.secret_value(region, &handle))
        .await
        .map_err(|e| format!("`secret_value` failed: {e}"))?;
    if value.expose().is_empty() {
        return Err("`secret_value` answered an empty value".into());
    }
    let sighting = read_eventually(ctx, kind, region, &handle).await?;
    let shown = format!(
        "{} {}",
        Value::Object(sighting.reported().clone()),
        sighting.observed_json()
    );
    if shown.contains(value.expose()) {
        return Err("`read` reports the secret's value".into());
    }
    Ok(())
}

/// `mark` leaves a resource that carries this fleet's marker as it is, and refuses one
/// that carries another fleet's marker (`Conflict`), leaving its tags unchanged.
pub async fn mark_keeps_ours_and_refuses_anothers(ctx: &Context, sample: &KindSample) -> Verdict {
    if !ctx.caps.ownership.contains(sample.kind) {
        return Verdict::skip(
            "the backend cannot read tags of this kind (not in `capabilities().ownership`)",
        );
    }
    match mark(ctx, sample).await {
        Ok(Marked::Yes) => Verdict::Pass,
        Ok(Marked::Unsupported(why)) => Verdict::skip(format!(
            "`mark` answers Invalid for this kind ({why}), changing nothing: its resources \
             cannot be taken over"
        )),
        Err(why) => Verdict::Fail(why),
    }
}

/// What `mark` did to a resource of this fleet.
enum Marked {
    /// Kept it as it was, and refused another fleet's marker.
    Yes,
    /// Answered `Invalid` (the kind cannot be marked), changing nothing.
    Unsupported(String),
}

async fn mark(ctx: &Context, sample: &KindSample) -> Result<Marked, String> {
    let (kind, region) = (sample.kind, ctx.primary());
    let name = ctx.name("mrk", sample);
    let harness = ctx.harness();
    apply_ok(ctx, &harness, sample, &name, Variant::Base).await?;
    let handle = created_handle(&harness, &name)?;
    let ownership = || async {
        ctx.settle(|| ctx.backend.ownership(kind, region, &handle))
            .await
            .map_err(|e| format!("`ownership` of {handle} failed: {e}"))
    };
    let before = ownership().await?;
    let ours = infra_core::sdk::Marker::new(ctx.fleet.clone());
    match ctx.backend.mark(kind, region, &handle, &ours).await {
        Ok(()) => {}
        Err(e) if e.kind == ErrorKind::Invalid => {
            if ownership().await? != before {
                return Err(format!(
                    "`mark` answered Invalid ({e}) but changed the tags"
                ));
            }
            return Ok(Marked::Unsupported(e.message));
        }
        Err(e) => return Err(format!("marking a resource already ours failed: {e}")),
    }
    if ownership().await? != before {
        return Err("marking a resource already ours changed its tags".into());
    }
    let theirs = infra_core::sdk::Marker::new(format!("{}-other", ctx.fleet));
    match ctx.backend.mark(kind, region, &handle, &theirs).await {
        Err(e) if e.kind == ErrorKind::Conflict => {}
        Ok(()) => return Err("`mark` for another fleet took this fleet's resource".into()),
        Err(e) => {
            return Err(format!(
                "`mark` for another fleet answered {e}, not Conflict"
            ));
        }
    }
    if ownership().await? != before {
        return Err("a refused `mark` changed the resource's tags".into());
    }
    hand_over(ctx, kind, region, &handle, &before).await?;
    Ok(Marked::Yes)
}

/// A marker handed over from this fleet (`records move`) replaces this fleet's marker
/// and nothing else, and handing it back restores the tags; a provider that does not
/// replace markers answers `Conflict` and changes nothing.
async fn hand_over(
    ctx: &Context,
    kind: &'static str,
    region: &str,
    handle: &str,
    before: &infra_core::sdk::RawTags,
) -> Result<(), String> {
    use infra_core::sdk::Marker;
    let ownership = || async {
        ctx.settle(|| ctx.backend.ownership(kind, region, handle))
            .await
            .map_err(|e| format!("`ownership` of {handle} failed: {e}"))
    };
    let other = format!("{}-other", ctx.fleet);
    let handed = Marker::new(other.clone()).handed_over_from(ctx.fleet.clone());
    match ctx.backend.mark(kind, region, handle, &handed).await {
        Ok(()) => {}
        Err(e) if e.kind == ErrorKind::Conflict => {
            if ownership().await? != *before {
                return Err(format!(
                    "a hand-over the backend refused ({e}) changed the resource's tags"
                ));
            }
            return Ok(());
        }
        Err(e) => {
            return Err(format!(
                "a hand-over from this fleet answered {e}: neither done nor Conflict"
            ));
        }
    }
    let mut expected = before.clone();
    expected.insert(MARKER_KEY.to_owned(), other.clone());
    let after = ownership().await?;
    if after != expected {
        return Err(format!(
            "handed over to another fleet, the tags are {after:?}, not {expected:?}: only              the marker may change"
        ));
    }
    let back = Marker::new(ctx.fleet.clone()).handed_over_from(other);
    ctx.backend
        .mark(kind, region, handle, &back)
        .await
        .map_err(|e| format!("handing the resource back failed: {e}"))?;
    if ownership().await? != *before {
        return Err("handed back, the resource's tags are not what they were".into());
    }
    Ok(())
}
