//! IAM: the `iam` kind, realised as an IAM role.
//!
//! **Regions.** IAM is global, but the engine lists per region. A role lives in the
//! region its fleet places it: `CreateRole` records that region in the role's
//! `infra-region` tag, together with the ownership marker, and `list` answers only the
//! roles whose `infra-region` names the region asked about. A role without that tag
//! (made outside this tool) is in no region's list. `read`, `update`, `delete` and
//! `ownership` of a role whose tag names another region answer `NotFound`, as for a
//! resource of another region; a role without the tag is read by its name wherever
//! asked. Role names are global all the same: one name in two regions is `Conflict`.
//! `infra-region` is bookkeeping, like the marker: a declaration may not set it, an
//! update keeps it, `ownership` returns it, and `read` leaves it out of `tags` (the
//! engine strips only the marker, so reporting it would be drift nobody declared).
//!
//! The handle is the role's name; the observed id is its ARN.
//!
//! What read reports when IAM does not say:
//! - `assumedBy`: the trust policy is always there. It is parsed back (URL-decoded
//!   when IAM answers it encoded) into the set of service principals of its
//!   statements of the shape create writes (`Allow`, `sts:AssumeRole`, service
//!   principals only, no condition). Any other statement is reported as its compact
//!   JSON, so that it shows as drift and an update rewrites the document. A document
//!   that cannot be parsed at all is `Unknown`, never an empty set.
//! - `policies`: the attached managed policies are always listed; none is the truth,
//!   an empty set. The canonical form, which create and read share, is: an AWS-managed
//!   policy by its bare name (`ReadOnlyAccess`, `AWSLambdaBasicExecutionRole`, whatever
//!   its path, `arn:aws:iam::aws:policy/service-role/…` included), any other by its
//!   ARN. A declared name is looked up among the AWS-managed policies (`ListPolicies`,
//!   scope `AWS`, only for names not attached yet) before anything is written; a name
//!   that is not there is `Invalid`. A declared AWS-managed ARN, or a name with a path,
//!   is refused (`Invalid`, naming the name to declare instead), since it would read
//!   back as the bare name and differ for ever. Customer-managed policies are declared
//!   by ARN. Inline policies are not part of the field.
//! - `description`: IAM leaves it out when the role has none, which is the truth `""`.
//! - `tags`: "no tags" is the truth, an empty map. The marker is included; the engine
//!   strips it.
//!
//! The marker and the region tag are written in `CreateRole`'s `Tags`, so no role of
//! ours exists unmarked. Policies are resolved before the role is created and attached
//! right after; an attach that fails leaves a marked role that the next apply repairs.
//! `mark` (taking over a role made elsewhere) writes the marker with `TagRole`, and the
//! region tag with it when the role has none, for the same reason.
//!
//! Delete refuses (`DependencyViolation`, leaving the role as it was) while the role
//! is in an instance profile; otherwise it detaches every managed policy, deletes
//! every inline policy (both are parts of the role), then deletes the role. IAM's own
//! `DeleteConflict` is `DependencyViolation` too.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_iam::types::{PolicyScopeType, Role, Tag};
use infra_core::kinds::{Iam, IamObserved, IamReported, IamSettled};
use infra_core::sdk::{
    CreateArgs, DeleteArgs, KindBackend, ListArgs, MarkArgs, OwnershipArgs, ReadArgs, Reading,
    UpdateArgs, Written,
};
use infra_core::{
    prelude::Partial,
    sdk::{BackendError, ErrorKind, Listed, RawTags},
};
use serde_json::{Value, json};

use crate::clients::{Clients, RegionClients};
use crate::error::classify;
use crate::tags::{keep_marker, marking, with_marker};

/// Codes that mean the role (or the entity the call names) does not exist.
const NO_ENTITY: &[&str] = &["NoSuchEntity"];
/// The tag recording the region a role lives in.
const REGION_TAG: &str = "infra-region";
/// The only action of the trust statements this module writes.
const ASSUME_ROLE: &str = "sts:AssumeRole";

/// The name of an AWS-managed policy from its ARN (`arn:<partition>:iam::aws:policy/`,
/// then a path, then the name), or `None` for any other ARN.
fn aws_managed_name(arn: &str) -> Option<&str> {
    let rest = arn.strip_prefix("arn:")?;
    let (_, tail) = rest.split_once(':')?;
    let path_and_name = tail.strip_prefix("iam::aws:policy/")?;
    path_and_name.rsplit('/').next().filter(|n| !n.is_empty())
}

/// An attached policy in the canonical form: its name if AWS-managed, else its ARN.
fn policy_form(arn: &str) -> String {
    aws_managed_name(arn).unwrap_or(arn).to_owned()
}

/// Checks that every declared policy is in the canonical form: an AWS-managed policy
/// by its bare name, any other by its ARN.
fn check_policies(spec: &IamSettled) -> Result<(), BackendError> {
    for declared in &spec.policies {
        if declared.starts_with("arn:") {
            if let Some(name) = aws_managed_name(declared) {
                return Err(BackendError::invalid(format!(
                    "policy {declared} is AWS-managed: declare it by its name `{name}`, the form \
                     read reports"
                )));
            }
        } else if declared.is_empty() || declared.contains('/') {
            return Err(BackendError::invalid(format!(
                "policy `{declared}` is neither an ARN nor the bare name of an AWS-managed policy"
            )));
        }
    }
    Ok(())
}

/// The ARNs of declared policies: an ARN is itself; a name is looked up among the
/// AWS-managed policies (their paths vary: `AWSLambdaBasicExecutionRole` is under
/// `service-role/`), and one that is not there is `Invalid`.
async fn resolve(
    c: &RegionClients,
    declared: &BTreeSet<&String>,
) -> Result<BTreeSet<String>, BackendError> {
    let mut out: BTreeSet<String> = declared
        .iter()
        .filter(|p| p.starts_with("arn:"))
        .map(|p| (*p).clone())
        .collect();
    let mut names: BTreeSet<&str> = declared
        .iter()
        .filter(|p| !p.starts_with("arn:"))
        .map(|p| p.as_str())
        .collect();
    if names.is_empty() {
        return Ok(out);
    }
    let mut pages = c
        .iam()
        .list_policies()
        .scope(PolicyScopeType::Aws)
        .max_items(1000)
        .into_paginator()
        .items()
        .send();
    while let Some(policy) = pages.next().await {
        let policy = policy.map_err(|e| classify("iam:ListPolicies", e, &[]))?;
        if let (Some(name), Some(arn)) = (policy.policy_name(), policy.arn())
            && names.remove(name)
        {
            out.insert(arn.to_owned());
            if names.is_empty() {
                return Ok(out);
            }
        }
    }
    let missing: Vec<&str> = names.into_iter().collect();
    Err(BackendError::invalid(format!(
        "no AWS-managed policy is named {}",
        missing.join(", ")
    ))
    .with_code("NoSuchEntity"))
}

fn check_tags(spec: &IamSettled) -> Result<(), BackendError> {
    if spec
        .tags
        .known()
        .is_some_and(|t| t.contains_key(REGION_TAG))
    {
        return Err(BackendError::invalid(format!(
            "the tag `{REGION_TAG}` records the region of an iam role and cannot be declared"
        )));
    }
    Ok(())
}

/// The trust policy letting `services` assume the role, built deterministically: one
/// statement, the services sorted.
fn trust_policy(services: &BTreeSet<String>) -> String {
    let statements: Vec<Value> = if services.is_empty() {
        Vec::new()
    } else {
        vec![json!({
            "Effect": "Allow",
            "Principal": { "Service": services.iter().collect::<Vec<_>>() },
            "Action": ASSUME_ROLE,
        })]
    };
    json!({ "Version": "2012-10-17", "Statement": statements }).to_string()
}

/// Decodes `%XX` escapes (and `+` as a space when `plus` is set).
fn percent_decode(text: &str, plus: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The trust policy document as JSON: as answered, or URL-decoded (IAM answers it
/// encoded).
fn parse_document(raw: &str) -> Option<Value> {
    serde_json::from_str(raw)
        .ok()
        .or_else(|| percent_decode(raw, false).and_then(|d| serde_json::from_str(&d).ok()))
        .or_else(|| percent_decode(raw, true).and_then(|d| serde_json::from_str(&d).ok()))
}

fn strings(v: &Value) -> Option<Vec<&str>> {
    match v {
        Value::String(s) => Some(vec![s.as_str()]),
        Value::Array(items) => items.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

/// The service principals of one statement of the shape [`trust_policy`] writes, or
/// `None` for any other statement.
fn services_of(statement: &Value) -> Option<Vec<&str>> {
    let s = statement.as_object()?;
    if s.keys()
        .any(|k| !matches!(k.as_str(), "Effect" | "Principal" | "Action" | "Sid"))
    {
        return None;
    }
    if s.get("Effect")?.as_str()? != "Allow" || strings(s.get("Action")?)? != [ASSUME_ROLE] {
        return None;
    }
    let principal = s.get("Principal")?.as_object()?;
    if principal.len() != 1 {
        return None;
    }
    strings(principal.get("Service")?)
}

/// `assumedBy` as the trust policy says it: the services of the statements of our
/// shape, and every other statement as its compact JSON.
fn assumed_by(raw: Option<&str>) -> Partial<BTreeSet<String>> {
    let Some(doc) = raw.and_then(parse_document) else {
        return Partial::Unknown;
    };
    let statements: Vec<&Value> = match doc.get("Statement") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.iter().collect(),
        Some(one) => vec![one],
    };
    let mut out = BTreeSet::new();
    for statement in statements {
        match services_of(statement) {
            Some(services) => out.extend(services.into_iter().map(str::to_owned)),
            None => {
                out.insert(statement.to_string());
            }
        }
    }
    Partial::Known(out)
}

fn raw_tags(tags: &[Tag]) -> RawTags {
    tags.iter()
        .map(|t| (t.key().to_owned(), t.value().to_owned()))
        .collect()
}

fn sdk_tags(tags: &RawTags) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .expect("key and value are set")
        })
        .collect()
}

fn not_here(name: &str, region: &str, c: &RegionClients) -> BackendError {
    BackendError::not_found(format!(
        "iam role {name} is in {region}, not in {}",
        c.region
    ))
    .with_code("NoSuchEntity")
}

/// The role, if it lives in this region (or records no region at all).
async fn get_role(c: &RegionClients, name: &str) -> Result<Role, BackendError> {
    let out = c
        .iam()
        .get_role()
        .role_name(name)
        .send()
        .await
        .map_err(|e| classify("iam:GetRole", e, NO_ENTITY))?;
    let role = out.role.ok_or_else(|| {
        BackendError::new(
            ErrorKind::Other,
            format!("iam:GetRole of {name} answered no role"),
        )
    })?;
    if let Some(region) = role
        .tags()
        .iter()
        .find(|t| t.key() == REGION_TAG)
        .map(Tag::value)
        && region != c.region
    {
        return Err(not_here(name, region, c));
    }
    Ok(role)
}

/// The ARNs of the managed policies attached to the role.
async fn attached(c: &RegionClients, name: &str) -> Result<BTreeSet<String>, BackendError> {
    let policies: Vec<_> = c
        .iam()
        .list_attached_role_policies()
        .role_name(name)
        .into_paginator()
        .items()
        .send()
        .collect::<Result<_, _>>()
        .await
        .map_err(|e| classify("iam:ListAttachedRolePolicies", e, NO_ENTITY))?;
    Ok(policies
        .iter()
        .filter_map(|p| p.policy_arn().map(str::to_owned))
        .collect())
}

fn reading(role: &Role, policies: &BTreeSet<String>) -> Reading<Iam> {
    let mut tags = raw_tags(role.tags());
    tags.remove(REGION_TAG);
    Reading::new(
        role.role_name(),
        IamObserved {
            id: role.arn().to_owned(),
        },
        IamReported {
            policies: Partial::Known(policies.iter().map(|p| policy_form(p)).collect()),
            assumed_by: assumed_by(role.assume_role_policy_document()),
            description: Partial::Known(role.description().unwrap_or_default().to_owned()),
            tags: Partial::Known(tags),
        },
    )
}

async fn attach(c: &RegionClients, name: &str, arn: &str) -> Result<(), BackendError> {
    match c
        .iam()
        .attach_role_policy()
        .role_name(name)
        .policy_arn(arn)
        .send()
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => {
            let e = classify("iam:AttachRolePolicy", e, &[]);
            // The role was just read, so the entity missing is the declared policy.
            if e.code.as_deref() == Some("NoSuchEntity") {
                Err(BackendError::invalid(e.message).with_code("NoSuchEntity"))
            } else {
                Err(e)
            }
        }
    }
}

async fn detach(c: &RegionClients, name: &str, arn: &str) -> Result<(), BackendError> {
    c.iam()
        .detach_role_policy()
        .role_name(name)
        .policy_arn(arn)
        .send()
        .await
        .map_err(|e| classify("iam:DetachRolePolicy", e, NO_ENTITY))?;
    Ok(())
}

/// What to attach (ARNs, resolved) and detach (ARNs) to bring the attached policies
/// to the declared ones, comparing in the canonical form; found before any write, so
/// that a policy that does not exist changes nothing.
async fn policy_changes(
    c: &RegionClients,
    current: &BTreeSet<String>,
    declared: &BTreeSet<String>,
) -> Result<(BTreeSet<String>, Vec<String>), BackendError> {
    let attached: BTreeSet<String> = current.iter().map(|arn| policy_form(arn)).collect();
    let missing: BTreeSet<&String> = declared.difference(&attached).collect();
    let attach = resolve(c, &missing).await?;
    let detach = current
        .iter()
        .filter(|arn| !declared.contains(&policy_form(arn)))
        .cloned()
        .collect();
    Ok((attach, detach))
}

/// Every role listed, with its tags when the listing carries them (IAM's `ListRoles`
/// does not; some stand-ins do).
async fn all_roles(c: &RegionClients) -> Result<Vec<Role>, BackendError> {
    c.iam()
        .list_roles()
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(|e| classify("iam:ListRoles", e, &[]))
}

/// A role's tags from `ListRoleTags`; `None` if the role went away meanwhile.
async fn list_role_tags(c: &RegionClients, name: &str) -> Result<Option<RawTags>, BackendError> {
    let tags: Result<Vec<Tag>, _> = c
        .iam()
        .list_role_tags()
        .role_name(name)
        .into_paginator()
        .items()
        .send()
        .collect()
        .await;
    match tags {
        Ok(tags) => Ok(Some(raw_tags(&tags))),
        Err(e) => match classify("iam:ListRoleTags", e, NO_ENTITY) {
            e if e.kind == ErrorKind::NotFound => Ok(None),
            e => Err(e),
        },
    }
}

/// `iam`: an IAM role, placed in a region by its `infra-region` tag.
pub(crate) struct IamRoles {
    clients: Arc<Clients>,
}

impl IamRoles {
    /// The kind, reaching AWS through `clients` (one set per region, made on first use).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        IamRoles { clients }
    }
}

#[async_trait]
impl KindBackend<Iam> for IamRoles {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let c = &self.clients.region(region);
        let mut listed = Vec::new();
        for role in all_roles(c).await? {
            let name = role.role_name();
            let tags = if role.tags().is_empty() {
                match list_role_tags(c, name).await? {
                    Some(tags) => tags,
                    None => continue,
                }
            } else {
                raw_tags(role.tags())
            };
            if tags.get(REGION_TAG) == Some(&c.region) {
                listed.push(Listed::new(name.to_owned(), name.to_owned()));
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Iam>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        let role = get_role(c, handle).await?;
        let policies = attached(c, handle).await?;
        Ok(reading(&role, &policies))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, Iam>,
    ) -> Result<Written<Reading<Iam>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        check_tags(spec)?;
        check_policies(spec)?;
        let policies = resolve(c, &spec.policies.iter().collect()).await?;
        let mut tags = with_marker(spec.tags.known(), marker);
        tags.insert(REGION_TAG.to_owned(), c.region.clone());
        let out = c
            .iam()
            .create_role()
            .role_name(name)
            .assume_role_policy_document(trust_policy(&spec.assumed_by))
            .set_description(spec.description.known().cloned())
            .set_tags(Some(sdk_tags(&tags)))
            .send()
            .await
            .map_err(|e| classify("iam:CreateRole", e, &[]))?;
        for arn in &policies {
            attach(c, name, arn).await?;
        }
        let read = match self.read(ReadArgs::new(region, name)).await {
            Err(e) if e.kind == ErrorKind::NotFound => {
                // Not visible yet (IAM is eventually consistent): CreateRole's own
                // answer describes the role, and the policies were attached just now.
                let role = out.role.ok_or(e)?;
                reading(&role, &policies)
            }
            other => other?,
        };
        Ok(Written::Done(read))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, Iam>,
    ) -> Result<Written<Reading<Iam>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let c = &self.clients.region(region);
        check_tags(spec)?;
        check_policies(spec)?;
        let role = get_role(c, handle).await?;
        let (to_attach, to_detach) =
            policy_changes(c, &attached(c, handle).await?, &spec.policies).await?;
        let iam = c.iam();
        if assumed_by(role.assume_role_policy_document()).known() != Some(&spec.assumed_by) {
            iam.update_assume_role_policy()
                .role_name(handle)
                .policy_document(trust_policy(&spec.assumed_by))
                .send()
                .await
                .map_err(|e| classify("iam:UpdateAssumeRolePolicy", e, NO_ENTITY))?;
        }
        if let Some(description) = spec.description.known()
            && role.description().unwrap_or_default() != description
        {
            iam.update_role()
                .role_name(handle)
                .description(description)
                .send()
                .await
                .map_err(|e| classify("iam:UpdateRole", e, NO_ENTITY))?;
        }
        if let Some(declared) = spec.tags.known() {
            let current = raw_tags(role.tags());
            let mut want = keep_marker(Some(declared), &current);
            if let Some(region) = current.get(REGION_TAG) {
                want.insert(REGION_TAG.to_owned(), region.clone());
            }
            let stale: Vec<String> = current
                .keys()
                .filter(|k| !want.contains_key(*k))
                .cloned()
                .collect();
            if !stale.is_empty() {
                iam.untag_role()
                    .role_name(handle)
                    .set_tag_keys(Some(stale))
                    .send()
                    .await
                    .map_err(|e| classify("iam:UntagRole", e, NO_ENTITY))?;
            }
            let changed: RawTags = want
                .iter()
                .filter(|(k, v)| current.get(*k) != Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !changed.is_empty() {
                iam.tag_role()
                    .role_name(handle)
                    .set_tags(Some(sdk_tags(&changed)))
                    .send()
                    .await
                    .map_err(|e| classify("iam:TagRole", e, NO_ENTITY))?;
            }
        }
        for arn in &to_attach {
            attach(c, handle, arn).await?;
        }
        for arn in &to_detach {
            detach(c, handle, arn).await?;
        }
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        get_role(c, handle).await?;
        let iam = c.iam();
        let profiles: Vec<_> = iam
            .list_instance_profiles_for_role()
            .role_name(handle)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<_, _>>()
            .await
            .map_err(|e| classify("iam:ListInstanceProfilesForRole", e, NO_ENTITY))?;
        if !profiles.is_empty() {
            let names: Vec<&str> = profiles.iter().map(|p| p.instance_profile_name()).collect();
            return Err(BackendError::new(
                ErrorKind::DependencyViolation,
                format!(
                    "iam role {handle} is still in instance profiles {}",
                    names.join(", ")
                ),
            )
            .with_code("DeleteConflict"));
        }
        for arn in attached(c, handle).await? {
            detach(c, handle, &arn).await?;
        }
        let inline: Vec<String> = iam
            .list_role_policies()
            .role_name(handle)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<_, _>>()
            .await
            .map_err(|e| classify("iam:ListRolePolicies", e, NO_ENTITY))?;
        for policy in inline {
            iam.delete_role_policy()
                .role_name(handle)
                .policy_name(policy)
                .send()
                .await
                .map_err(|e| classify("iam:DeleteRolePolicy", e, NO_ENTITY))?;
        }
        iam.delete_role()
            .role_name(handle)
            .send()
            .await
            .map_err(|e| classify("iam:DeleteRole", e, NO_ENTITY))?;
        Ok(())
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        let role = get_role(c, handle).await?;
        Ok(raw_tags(role.tags()))
    }

    /// Writes the marker, and with it the `infra-region` tag of the region asked about
    /// when the role records none (a role made outside this tool): the two are written
    /// together, as `CreateRole` does, so that a marked role is listed in its region
    /// like every other role of ours instead of being in no region's list (where the
    /// engine would believe it gone). The region tag is bookkeeping that `read` leaves
    /// out of `tags`; every other tag, and a region tag already there, stay as they
    /// were. A role whose region tag names another region is `NotFound`, as for `read`.
    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        let current = raw_tags(get_role(c, handle).await?.tags());
        if let Some(mut pair) = marking(&current, marker, &format!("iam role {handle}"))? {
            if !current.contains_key(REGION_TAG) {
                pair.insert(REGION_TAG.to_owned(), c.region.clone());
            }
            // TagRole adds to the role's tags; the others stay as they are.
            c.iam()
                .tag_role()
                .role_name(handle)
                .set_tags(Some(sdk_tags(&pair)))
                .send()
                .await
                .map_err(|e| classify("iam:TagRole", e, NO_ENTITY))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_trust_policy_reads_back_as_the_services_it_was_built_from() {
        let services = set(&["lambda.amazonaws.com", "ec2.amazonaws.com"]);
        let doc = trust_policy(&services);
        assert_eq!(assumed_by(Some(&doc)), Partial::Known(services.clone()));
        let encoded: String = doc
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        assert_eq!(assumed_by(Some(&encoded)), Partial::Known(services));
        assert_eq!(
            assumed_by(Some(&trust_policy(&BTreeSet::new()))),
            Partial::Known(BTreeSet::new())
        );
    }

    #[test]
    fn a_statement_of_another_shape_shows_as_itself() {
        let doc = r#"{"Version":"2012-10-17","Statement":{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"sts:AssumeRole"}}"#;
        let Partial::Known(got) = assumed_by(Some(doc)) else {
            panic!("unknown")
        };
        assert_eq!(got.len(), 1);
        assert!(got.iter().next().unwrap().contains("arn:aws:iam::1:root"));
        assert_eq!(assumed_by(Some("not json")), Partial::Unknown);
    }

    #[test]
    fn policies_read_back_in_the_form_they_are_declared_in() {
        assert_eq!(
            policy_form("arn:aws:iam::aws:policy/ReadOnlyAccess"),
            "ReadOnlyAccess"
        );
        assert_eq!(
            policy_form("arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"),
            "AWSLambdaBasicExecutionRole"
        );
        assert_eq!(policy_form("arn:aws-cn:iam::aws:policy/X"), "X");
        let own = "arn:aws:iam::123456789012:policy/mine";
        assert_eq!(policy_form(own), own);
        let spec = |p: &str| IamSettled {
            policies: set(&[p]),
            assumed_by: BTreeSet::new(),
            description: Partial::Unknown,
            tags: Partial::Unknown,
        };
        assert!(check_policies(&spec("ReadOnlyAccess")).is_ok());
        assert!(check_policies(&spec(own)).is_ok());
        for bad in [
            "arn:aws:iam::aws:policy/ReadOnlyAccess",
            "service-role/X",
            "",
        ] {
            assert_eq!(
                check_policies(&spec(bad)).unwrap_err().kind,
                ErrorKind::Invalid,
                "{bad}"
            );
        }
    }
}
