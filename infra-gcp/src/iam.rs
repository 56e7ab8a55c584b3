//! The `iam` kind: a service account and the roles it is granted on the project.
//!
//! **The handle** is the account's email, `{name}@{project}.iam.gserviceaccount.com`;
//! the account id is the declared name, which must be 6 to 30 characters of lowercase
//! letters, digits and hyphens, starting with a letter and not ending with a hyphen
//! (refused as `Invalid` before any call otherwise). The observed `id` is the email.
//! Calls name the account `projects/{project}/serviceAccounts/{email}`.
//!
//! **Service accounts have no labels.** The ownership marker, the declared tags and the
//! region are kept in the account's `description`, after the human description, in a
//! trailer of this crate's own: a last line starting `[infra]`, then `key=value` pairs
//! separated by single spaces, the marker first, the region second, the declared tags
//! after in key order:
//!
//! ```text
//! Runs the web front end.
//! [infra] managed-by-infra=shop infra-region=europe-west1 team=web
//! ```
//!
//! With no human description the trailer is the whole description. Keys and values
//! follow the label rules (lowercase letters, digits, `_` and `-`; `labels::check`), so
//! a pair can hold neither a space nor a second `=`, and a last line that does not parse
//! as such a trailer whole is prose: the account then has no tags. A declared
//! description may not have a line starting `[infra]` (refused before any call). The
//! whole description, trailer included, is at most 256 bytes, as IAM allows: a longer
//! one is refused before any call, naming the bytes the trailer takes.
//!
//! `read` splits the description: `description` is the human part, `tags` are the
//! trailer's pairs except the `infra-region` bookkeeping (the marker stays: the engine
//! strips it). `ownership` answers the trailer's pairs raw. The marker is written by
//! `CreateServiceAccount` itself, in the description it sends, so no account of ours
//! exists unmarked. `update` rewrites the description (one `PatchServiceAccount` with
//! `updateMask=description`, only when it changes), keeping the marker and the region.
//! `mark` rewrites it with the marker added (and `infra-region` when the account has
//! none, so that it is listed in the region it was marked in), refusing an account that
//! carries another fleet's marker (`Conflict`).
//!
//! **Regions.** Service accounts are global. The region an account was declared in is
//! the trailer's `infra-region`; `list` (every page of `ListServiceAccounts`) answers
//! the accounts whose trailer names the region asked about, and no other (an account
//! made elsewhere, without a trailer, is in no region's list). `read`, `update`,
//! `delete`, `ownership` and `mark` of an account whose trailer names another region
//! answer `NotFound`; an account without one is read wherever asked. Account ids are
//! unique in the project all the same: one name in two regions is `Conflict`.
//!
//! **`policies`** are roles granted on the project: for each, the member
//! `serviceAccount:{email}` is in the project policy's unconditional binding of that
//! role. A role is `roles/…`, `projects/{p}/roles/…` or `organizations/{o}/roles/…`
//! (anything else is refused before any call). The project policy is shared by the
//! whole project, so it is changed by read-modify-write (`getIamPolicy`, then
//! `setIamPolicy` with the `etag` read): a stale etag (409 `ABORTED`, someone else
//! changed the policy meanwhile) is read again and retried, up to five times, so that
//! the other writer's bindings are kept. Conditional bindings are never changed, and a
//! role granted only under a condition is not reported.
//!
//! **`assumedBy`** are the members allowed to act as the account: those granted
//! `roles/iam.serviceAccountUser` on the account itself (the account's own IAM policy,
//! changed by read-modify-write the same way; its other roles are left alone). A member
//! is `user:…`, `serviceAccount:…`, `group:…` (an email), `domain:…`, or a
//! `principal://…` / `principalSet://…` identifier; anything else is refused before any
//! call.
//!
//! **Create** sends `CreateServiceAccount` (account id, display name = the name, the
//! description with its trailer), then grants the roles and the users. IAM is
//! eventually consistent: right after the create, a policy write may not see the new
//! account yet (404, or 400 "does not exist"); each is retried a few times on the
//! clock. When the grants fail all the same, the error says that the account exists,
//! carrying the marker, and that the next apply converges. The read after the create
//! answers from `CreateServiceAccount`'s answer when the account is not visible yet. A
//! create whose answer was lost looks the account up by email and marker.
//!
//! **Delete** removes the member from every binding of the project policy (conditional
//! ones included), then deletes the account (whose own policy goes with it). An absent
//! account is `NotFound`. Removing the bindings first matters: IAM leaves a deleted
//! account's bindings in place, rewritten `deleted:serviceAccount:{email}?uid={id}`,
//! where they would stay for ever.
//!
//! What read reports when IAM does not say:
//! - `policies`: the project policy is always answered; no binding holding the account
//!   is the truth, an empty set.
//! - `assumedBy`: the account's policy is always answered; no
//!   `roles/iam.serviceAccountUser` binding is the truth, an empty set.
//! - `description`: IAM leaves out an empty description, which is the truth `""`; the
//!   trailer is never part of it.
//! - `tags`: an account without a trailer has no tags, the truth `{}`. The marker is
//!   included; `infra-region` is not.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use google_cloud_gax::paginator::ItemPaginator as _;
use google_cloud_iam_admin_v1::model::ServiceAccount;
use google_cloud_iam_v1::model::{Binding, GetPolicyOptions, Policy};
use infra_core::kinds::{Iam, IamObserved, IamReported, IamSettled};
use infra_core::prelude::Partial;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MARKER_KEY,
    MarkArgs, OwnershipArgs, RawTags, ReadArgs, Reading, UpdateArgs, Written,
};

use crate::clients::Clients;
use crate::error::{NOT_FOUND, classify};
use crate::labels::{self, REGION_LABEL};
use crate::poll::settle_uncertain;

/// The start of the description's last line that holds the trailer.
const TRAILER: &str = "[infra]";
/// The most bytes IAM keeps in a description.
const MAX_DESCRIPTION: usize = 256;
/// The role that lets a member act as the account.
const ACT_AS: &str = "roles/iam.serviceAccountUser";
/// The policy version asked for, so that conditional bindings are answered whole and
/// written back as they were.
const POLICY_VERSION: i32 = crate::policy::VERSION;
/// How many times a grant right after the create is tried while IAM does not see the
/// new account yet.
const FRESH_ATTEMPTS: u32 = 4;

/// Whether `id` is a valid account id: 6 to 30 characters, `[a-z]([-a-z0-9]*[a-z0-9])`.
fn valid_account_id(id: &str) -> bool {
    (6..=30).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && !id.ends_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn check_account_id(name: &str) -> Result<(), BackendError> {
    if valid_account_id(name) {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "`{name}` cannot be a service account id: it must be 6 to 30 characters of \
             lowercase letters, digits and hyphens, starting with a letter and not ending \
             with a hyphen"
        )))
    }
}

/// Whether `role` names a role: predefined (`roles/…`) or custom
/// (`projects/{p}/roles/…`, `organizations/{o}/roles/…`).
fn valid_role(role: &str) -> bool {
    let id_ok = |id: &str| {
        !id.is_empty()
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    };
    let parts: Vec<&str> = role.split('/').collect();
    match parts.as_slice() {
        ["roles", id] => id_ok(id),
        ["projects" | "organizations", parent, "roles", id] => {
            !parent.is_empty()
                && parent
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-')
                && id_ok(id)
        }
        _ => false,
    }
}

fn check_roles(roles: &BTreeSet<String>) -> Result<(), BackendError> {
    let bad: Vec<&str> = roles
        .iter()
        .filter(|r| !valid_role(r))
        .map(String::as_str)
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "policies of a service account are roles, `roles/…`, `projects/{{project}}/roles/…` \
             or `organizations/{{org}}/roles/…`: refused {bad:?}"
        )))
    }
}

/// Whether `member` is a principal IAM binds: `user:`, `serviceAccount:`, `group:` (an
/// email), `domain:`, `principal://…` or `principalSet://…`.
fn valid_member(member: &str) -> bool {
    if member.chars().any(char::is_whitespace) {
        return false;
    }
    let email = |rest: &str| {
        rest.split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'))
    };
    if let Some(rest) = member
        .strip_prefix("user:")
        .or_else(|| member.strip_prefix("serviceAccount:"))
        .or_else(|| member.strip_prefix("group:"))
    {
        return email(rest);
    }
    if let Some(domain) = member.strip_prefix("domain:") {
        return domain.contains('.') && !domain.contains('@');
    }
    member
        .strip_prefix("principal://")
        .or_else(|| member.strip_prefix("principalSet://"))
        .is_some_and(|rest| !rest.is_empty())
}

fn check_members(members: &BTreeSet<String>) -> Result<(), BackendError> {
    let bad: Vec<&str> = members
        .iter()
        .filter(|m| !valid_member(m))
        .map(String::as_str)
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "assumedBy of a service account are members: `user:EMAIL`, \
             `serviceAccount:EMAIL`, `group:EMAIL`, `domain:DOMAIN`, `principal://…` or \
             `principalSet://…`: refused {bad:?}"
        )))
    }
}

/// Refuses a declared description that would be mistaken for a trailer.
fn check_human(description: &str) -> Result<(), BackendError> {
    if description.lines().any(|l| l.starts_with(TRAILER)) {
        return Err(BackendError::invalid(format!(
            "a service account's description may not have a line starting `{TRAILER}`: \
             this provider keeps the account's tags there"
        )));
    }
    Ok(())
}

/// The trailer line of `pairs`: the marker first, the region second, then the rest in
/// key order. Empty pairs make no line.
fn trailer(pairs: &RawTags) -> Option<String> {
    if pairs.is_empty() {
        return None;
    }
    let mut line = TRAILER.to_owned();
    let first = [MARKER_KEY, REGION_LABEL];
    let ordered = first
        .iter()
        .filter_map(|k| pairs.get_key_value(*k))
        .chain(pairs.iter().filter(|(k, _)| !first.contains(&k.as_str())));
    for (k, v) in ordered {
        line.push(' ');
        line.push_str(k);
        line.push('=');
        line.push_str(v);
    }
    Some(line)
}

/// The description written: the human part, then the trailer on a line of its own.
fn compose(human: &str, pairs: &RawTags) -> String {
    match trailer(pairs) {
        None => human.to_owned(),
        Some(line) if human.is_empty() => line,
        Some(line) => format!("{human}\n{line}"),
    }
}

/// The pairs of a trailer line, or `None` when the line is not one, whole.
fn parse_trailer(line: &str) -> Option<RawTags> {
    let rest = line.strip_prefix(TRAILER)?;
    if rest.is_empty() {
        return Some(RawTags::new());
    }
    let rest = rest.strip_prefix(' ')?;
    let mut pairs = RawTags::new();
    for token in rest.split(' ') {
        let (k, v) = token.split_once('=')?;
        if !labels::valid_key(k) || !labels::valid_value(v) || pairs.contains_key(k) {
            return None;
        }
        pairs.insert(k.to_owned(), v.to_owned());
    }
    Some(pairs)
}

/// A description split into its human part and its trailer's pairs (empty when it has
/// no trailer).
fn split(description: &str) -> (String, RawTags) {
    let (human, last) = match description.rsplit_once('\n') {
        Some((human, last)) => (human, last),
        None => ("", description),
    };
    match parse_trailer(last) {
        Some(pairs) => (human.to_owned(), pairs),
        None => (description.to_owned(), RawTags::new()),
    }
}

fn check_length(description: &str, human: &str) -> Result<(), BackendError> {
    if description.len() > MAX_DESCRIPTION {
        return Err(BackendError::invalid(format!(
            "a service account's description holds at most {MAX_DESCRIPTION} bytes; the \
             description ({} bytes) with the trailer of its marker, region and tags ({} \
             bytes) would take {}",
            human.len(),
            description.len() - human.len(),
            description.len()
        )));
    }
    Ok(())
}

/// The member naming the account `email` in IAM policies.
fn member_of(email: &str) -> String {
    format!("serviceAccount:{email}")
}

/// The roles whose unconditional bindings hold `member`.
fn roles_of(policy: &Policy, member: &str) -> BTreeSet<String> {
    policy
        .bindings
        .iter()
        .filter(|b| b.condition.is_none() && b.members.iter().any(|m| m == member))
        .map(|b| b.role.clone())
        .collect()
}

/// The members of the unconditional bindings of `role`.
fn members_of(policy: &Policy, role: &str) -> BTreeSet<String> {
    policy
        .bindings
        .iter()
        .filter(|b| b.condition.is_none() && b.role == role)
        .flat_map(|b| b.members.iter().cloned())
        .collect()
}

/// Brings the unconditional bindings holding `member` to exactly `roles`; answers
/// whether the policy changed. Every other member, and every conditional binding, stay.
fn grant_roles(policy: &mut Policy, member: &str, roles: &BTreeSet<String>) -> bool {
    let mut changed = false;
    let mut missing: BTreeSet<&String> = roles.iter().collect();
    for binding in policy.bindings.iter_mut().filter(|b| b.condition.is_none()) {
        let holds = binding.members.iter().any(|m| m == member);
        if roles.contains(&binding.role) {
            if missing.remove(&binding.role) && !holds {
                binding.members.push(member.to_owned());
                changed = true;
            }
        } else if holds {
            binding.members.retain(|m| m != member);
            changed = true;
        }
    }
    for role in missing {
        policy.bindings.push(
            Binding::new()
                .set_role(role.clone())
                .set_members([member.to_owned()]),
        );
        changed = true;
    }
    policy.bindings.retain(|b| !b.members.is_empty());
    changed
}

/// Brings the unconditional bindings of `role` to exactly `members`; answers whether
/// the policy changed.
fn set_role_members(policy: &mut Policy, role: &str, members: &BTreeSet<String>) -> bool {
    if members_of(policy, role) == *members
        && policy
            .bindings
            .iter()
            .filter(|b| b.condition.is_none() && b.role == role)
            .count()
            <= 1
    {
        return false;
    }
    policy
        .bindings
        .retain(|b| b.condition.is_some() || b.role != role);
    if !members.is_empty() {
        policy.bindings.push(
            Binding::new()
                .set_role(role.to_owned())
                .set_members(members.iter().cloned()),
        );
    }
    true
}

/// Removes `member` from every binding, conditional ones included; answers whether the
/// policy changed.
fn remove_member(policy: &mut Policy, member: &str) -> bool {
    let mut changed = false;
    for binding in &mut policy.bindings {
        let before = binding.members.len();
        binding.members.retain(|m| m != member);
        changed |= binding.members.len() != before;
    }
    policy.bindings.retain(|b| !b.members.is_empty());
    changed
}

/// The IAM policy a read-modify-write changes.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// The project's.
    Project,
    /// The service account's own (its resource name).
    Account(&'a str),
}

/// `iam` on Google Cloud: a service account and its role bindings.
pub(crate) struct ServiceAccounts {
    clients: Arc<Clients>,
}

impl ServiceAccounts {
    /// The kind, reaching Google Cloud through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        ServiceAccounts { clients }
    }

    fn project(&self) -> &str {
        self.clients.project()
    }

    fn email(&self, name: &str) -> String {
        format!("{name}@{}.iam.gserviceaccount.com", self.project())
    }

    fn resource(&self, email: &str) -> String {
        format!("projects/{}/serviceAccounts/{email}", self.project())
    }

    /// `GetServiceAccount` of `handle`, whatever its region.
    async fn get(&self, handle: &str) -> Result<ServiceAccount, BackendError> {
        if !handle.contains('@') || handle.contains('/') {
            return Err(BackendError::invalid(format!(
                "`{handle}` is not a service account's email"
            )));
        }
        self.clients
            .iam()
            .await?
            .get_service_account()
            .set_name(self.resource(handle))
            .send()
            .await
            .map_err(|e| classify("iam:GetServiceAccount", e, NOT_FOUND))
    }

    /// The account `handle`, if it lives in `region` (or records no region).
    async fn account(&self, region: &str, handle: &str) -> Result<ServiceAccount, BackendError> {
        let account = self.get(handle).await?;
        let (_, pairs) = split(&account.description);
        match pairs.get(REGION_LABEL) {
            Some(theirs) if theirs != region => Err(BackendError::not_found(format!(
                "service account {handle} is in {theirs}, not in {region}"
            ))
            .with_code("NOT_FOUND")),
            _ => Ok(account),
        }
    }

    async fn get_policy(&self, target: Target<'_>) -> Result<Policy, BackendError> {
        let options = GetPolicyOptions::new().set_requested_policy_version(POLICY_VERSION);
        match target {
            Target::Project => self
                .clients
                .projects()
                .await?
                .get_iam_policy()
                .set_resource(format!("projects/{}", self.project()))
                .set_options(options)
                .send()
                .await
                .map_err(|e| classify("resourcemanager:projects.getIamPolicy", e, &[])),
            Target::Account(resource) => self
                .clients
                .iam()
                .await?
                .get_iam_policy()
                .set_resource(resource)
                .set_options(options)
                .send()
                .await
                .map_err(|e| classify("iam:GetIamPolicy", e, NOT_FOUND)),
        }
    }

    async fn set_policy(&self, target: Target<'_>, policy: Policy) -> Result<Policy, BackendError> {
        match target {
            Target::Project => self
                .clients
                .projects()
                .await?
                .set_iam_policy()
                .set_resource(format!("projects/{}", self.project()))
                .set_policy(policy)
                .send()
                .await
                .map_err(|e| classify("resourcemanager:projects.setIamPolicy", e, &[])),
            Target::Account(resource) => self
                .clients
                .iam()
                .await?
                .set_iam_policy()
                .set_resource(resource)
                .set_policy(policy)
                .send()
                .await
                .map_err(|e| classify("iam:SetIamPolicy", e, NOT_FOUND)),
        }
    }

    /// Read-modify-write of a policy (`policy::modify`): `edit` changes what was read
    /// (answering whether it did), and the result is written with the etag read; a
    /// stale etag (409 `ABORTED`) starts again from a fresh read, a few times, waiting on
    /// the clock in between.
    async fn modify(
        &self,
        target: Target<'_>,
        edit: impl Fn(&mut Policy) -> bool,
    ) -> Result<(), BackendError> {
        let what = match target {
            Target::Project => format!("project {}", self.project()),
            Target::Account(resource) => resource.to_owned(),
        };
        crate::policy::modify(
            self.clients.clock(),
            &what,
            || self.get_policy(target),
            |p| self.set_policy(target, p),
            edit,
        )
        .await
        .map(drop)
    }

    /// Grants the account `email` exactly `roles` on the project.
    async fn grant_roles(&self, email: &str, roles: &BTreeSet<String>) -> Result<(), BackendError> {
        let member = member_of(email);
        self.modify(Target::Project, |p| grant_roles(p, &member, roles))
            .await
    }

    /// Lets exactly `members` act as the account `email`.
    async fn grant_users(
        &self,
        email: &str,
        members: &BTreeSet<String>,
    ) -> Result<(), BackendError> {
        let resource = self.resource(email);
        self.modify(Target::Account(&resource), |p| {
            set_role_members(p, ACT_AS, members)
        })
        .await
    }

    /// The grants of a new account: each tried again on the clock while IAM does not
    /// see the account yet (404, or a 400 that names it).
    async fn grant_fresh(&self, email: &str, spec: &IamSettled) -> Result<(), BackendError> {
        let unseen = |e: &BackendError| {
            e.kind == ErrorKind::NotFound
                || (e.kind == ErrorKind::Invalid && e.message.contains(email))
        };
        let mut wait = Duration::from_secs(1);
        for attempt in 1..=FRESH_ATTEMPTS {
            let result = async {
                self.grant_roles(email, &spec.policies).await?;
                self.grant_users(email, &spec.assumed_by).await
            }
            .await;
            match result {
                Err(e) if attempt < FRESH_ATTEMPTS && unseen(&e) => {
                    tracing::debug!("service account {email} not visible yet: {e}");
                    self.clients.clock().sleep(wait).await;
                    wait *= 2;
                }
                other => return other,
            }
        }
        Ok(())
    }

    /// The account read whole: the account, the project's roles, its users.
    async fn read_account(&self, account: &ServiceAccount) -> Result<Reading<Iam>, BackendError> {
        let project = self.get_policy(Target::Project).await?;
        let own = self.get_policy(Target::Account(&account.name)).await?;
        Ok(reading(
            account,
            roles_of(&project, &member_of(&account.email)),
            members_of(&own, ACT_AS),
        ))
    }

    /// Looks for the account a create may have made: its trailer's pairs and itself.
    async fn find(&self, email: &str) -> Result<Option<(RawTags, ServiceAccount)>, BackendError> {
        match self.get(email).await {
            Ok(account) => Ok(Some((split(&account.description).1, account))),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes `description` on the account `email`.
    async fn patch_description(
        &self,
        email: &str,
        description: String,
    ) -> Result<(), BackendError> {
        self.clients
            .iam()
            .await?
            .patch_service_account()
            .set_service_account(
                ServiceAccount::new()
                    .set_name(self.resource(email))
                    .set_description(description),
            )
            .set_update_mask(google_cloud_wkt::FieldMask::default().set_paths(["description"]))
            .send()
            .await
            .map_err(|e| classify("iam:PatchServiceAccount", e, NOT_FOUND))?;
        Ok(())
    }
}

/// The read of `account`, granted `roles` on the project and assumable by `users`.
fn reading(
    account: &ServiceAccount,
    roles: BTreeSet<String>,
    users: BTreeSet<String>,
) -> Reading<Iam> {
    let (human, pairs) = split(&account.description);
    Reading::new(
        account.email.clone(),
        IamObserved {
            id: account.email.clone(),
        },
        IamReported {
            policies: Partial::Known(roles),
            assumed_by: Partial::Known(users),
            description: Partial::Known(human),
            tags: Partial::Known(labels::reported(&pairs)),
        },
    )
}

/// The account id of an email (its part before `@`).
fn account_id(email: &str) -> &str {
    email.split('@').next().unwrap_or(email)
}

#[async_trait]
impl KindBackend<Iam> for ServiceAccounts {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let mut accounts = self
            .clients
            .iam()
            .await?
            .list_service_accounts()
            .set_name(format!("projects/{}", self.project()))
            .set_page_size(100)
            .by_item();
        let mut listed = Vec::new();
        while let Some(account) = accounts.next().await {
            let account = account.map_err(|e| classify("iam:ListServiceAccounts", e, &[]))?;
            let (_, pairs) = split(&account.description);
            if pairs.get(REGION_LABEL).map(String::as_str) == Some(region) {
                listed.push(Listed::new(
                    account_id(&account.email).to_owned(),
                    account.email.clone(),
                ));
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Iam>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let account = self.account(region, handle).await?;
        self.read_account(&account).await
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
        check_account_id(name)?;
        check_roles(&spec.policies)?;
        check_members(&spec.assumed_by)?;
        let human = spec.description.known().cloned().unwrap_or_default();
        check_human(&human)?;
        let pairs = labels::for_create(spec.tags.known(), marker, &[(REGION_LABEL, region)])?;
        let description = compose(&human, &pairs);
        check_length(&description, &human)?;
        let email = self.email(name);
        let sent = self
            .clients
            .iam()
            .await?
            .create_service_account()
            .set_name(format!("projects/{}", self.project()))
            .set_account_id(name)
            .set_service_account(
                ServiceAccount::new()
                    .set_display_name(name)
                    .set_description(description),
            )
            .send()
            .await;
        let created = match sent {
            Ok(account) => account,
            Err(e) => {
                let err = classify("iam:CreateServiceAccount", e, &[]);
                let what = format!("iam:CreateServiceAccount of {email}");
                settle_uncertain(err, marker, &what, self.find(&email)).await?
            }
        };
        if let Err(e) = self.grant_fresh(&email, spec).await {
            return Err(BackendError {
                message: format!(
                    "service account {email} was created, carrying this fleet's marker, but its \
                     role bindings could not all be written: {}; the next apply finishes them",
                    e.message
                ),
                ..e
            });
        }
        let read = match self.read(ReadArgs::new(region, &email)).await {
            Err(e) if e.kind == ErrorKind::NotFound && !created.email.is_empty() => {
                // Not visible yet (IAM is eventually consistent): the create's answer
                // describes the account, and its bindings were written just now.
                reading(&created, spec.policies.clone(), spec.assumed_by.clone())
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
        check_roles(&spec.policies)?;
        check_members(&spec.assumed_by)?;
        if let Some(human) = spec.description.known() {
            check_human(human)?;
        }
        let account = self.account(region, handle).await?;
        let (current_human, current) = split(&account.description);
        let human = spec.description.known().cloned().unwrap_or(current_human);
        let pairs = match spec.tags.known() {
            Some(declared) => labels::for_update(declared, &current)?,
            None => current,
        };
        let description = compose(&human, &pairs);
        check_length(&description, &human)?;
        if description != account.description {
            self.patch_description(handle, description).await?;
        }
        self.grant_roles(handle, &spec.policies).await?;
        self.grant_users(handle, &spec.assumed_by).await?;
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        self.account(region, handle).await?;
        let member = member_of(handle);
        self.modify(Target::Project, |p| remove_member(p, &member))
            .await?;
        self.clients
            .iam()
            .await?
            .delete_service_account()
            .set_name(self.resource(handle))
            .send()
            .await
            .map_err(|e| classify("iam:DeleteServiceAccount", e, NOT_FOUND))?;
        Ok(())
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let account = self.account(region, handle).await?;
        Ok(split(&account.description).1)
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let account = self.account(region, handle).await?;
        let (human, current) = split(&account.description);
        let what = format!("service account {handle}");
        if let Some(mut pairs) = labels::marking(&current, marker, &what)? {
            pairs
                .entry(REGION_LABEL.to_owned())
                .or_insert_with(|| region.to_owned());
            labels::check(&pairs)?;
            let description = compose(&human, &pairs);
            check_length(&description, &human)?;
            self.patch_description(handle, description).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> RawTags {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn policy(bindings: &[(&str, &[&str])]) -> Policy {
        Policy::new().set_bindings(bindings.iter().map(|(role, members)| {
            Binding::new()
                .set_role(*role)
                .set_members(members.iter().map(|m| (*m).to_owned()))
        }))
    }

    #[test]
    fn the_trailer_round_trips_with_tags_and_region_after_the_human_description() {
        let all = pairs(&[
            ("team", "web"),
            ("managed-by-infra", "shop"),
            ("infra-region", "europe-west1"),
            ("empty", ""),
        ]);
        let text = compose("Runs the web front end.\nSecond line.", &all);
        assert_eq!(
            text,
            "Runs the web front end.\nSecond line.\n[infra] managed-by-infra=shop \
             infra-region=europe-west1 empty= team=web"
        );
        assert_eq!(
            split(&text),
            (
                "Runs the web front end.\nSecond line.".to_owned(),
                all.clone()
            )
        );
        // No human part: the trailer is the whole description.
        let bare = compose("", &all);
        assert!(bare.starts_with("[infra] managed-by-infra=shop"));
        assert_eq!(split(&bare), (String::new(), all.clone()));
        // A human part ending in a newline keeps it.
        assert_eq!(split(&compose("x\n", &all)), ("x\n".to_owned(), all));
        // Nothing to keep: no trailer at all.
        assert_eq!(compose("plain", &RawTags::new()), "plain");
    }

    #[test]
    fn prose_is_never_mistaken_for_a_trailer() {
        for prose in [
            "",
            "Runs the front end",
            "line one\n[infra]x=y",
            "line one\n[infra] Team=web",
            "[infra] a=b c",
            "[infra] a=b  c=d",
            "[infra] a=b a=c",
            "[infra] a=b=c",
            "see [infra] a=b",
        ] {
            assert_eq!(
                split(prose),
                (prose.to_owned(), RawTags::new()),
                "{prose:?}"
            );
        }
        assert!(check_human("two\n[infra] lines").is_err());
        assert!(check_human("mentions [infra] inside").is_ok());
    }

    #[test]
    fn a_description_longer_than_iam_keeps_is_refused_naming_the_trailer() {
        let all = pairs(&[
            ("managed-by-infra", "shop"),
            ("infra-region", "europe-west1"),
        ]);
        let human = "d".repeat(201);
        let text = compose(&human, &all);
        let err = check_length(&text, &human).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid);
        assert!(err.message.contains("256"), "{}", err.message);
        let fits = "d".repeat(100);
        assert!(check_length(&compose(&fits, &all), &fits).is_ok());
    }

    #[test]
    fn account_ids_roles_and_members_are_checked_as_iam_does() {
        for ok in ["runner", "a-b-c-d", "abcdef1", &"a".repeat(30)] {
            assert!(valid_account_id(ok), "{ok}");
        }
        for bad in [
            "abc",
            "1runner",
            "runner-",
            "Runner",
            "run_ner",
            &"a".repeat(31),
        ] {
            assert!(!valid_account_id(bad), "{bad}");
        }
        for ok in [
            "roles/viewer",
            "roles/iam.serviceAccountUser",
            "projects/my-proj/roles/custom_1",
            "organizations/1234/roles/auditor",
        ] {
            assert!(valid_role(ok), "{ok}");
        }
        for bad in [
            "viewer",
            "roles/",
            "roles/a/b",
            "projects/p/roles/",
            "folders/1/roles/x",
            "arn:aws:iam::aws:policy/X",
        ] {
            assert!(!valid_role(bad), "{bad}");
        }
        for ok in [
            "user:someone@example.com",
            "serviceAccount:runner@p.iam.gserviceaccount.com",
            "group:ops@example.com",
            "domain:example.com",
            "principal://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/subject/s",
            "principalSet://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/*",
        ] {
            assert!(valid_member(ok), "{ok}");
        }
        for bad in [
            "someone@example.com",
            "user:someone",
            "lambda.amazonaws.com",
            "allUsers",
            "deleted:serviceAccount:x@p.iam.gserviceaccount.com?uid=1",
            "user: someone@example.com",
            "principal://",
        ] {
            assert!(!valid_member(bad), "{bad}");
        }
        assert_eq!(
            check_members(&set(&["user:a@example.com", "nobody"]))
                .unwrap_err()
                .kind,
            ErrorKind::Invalid
        );
    }

    #[test]
    fn granting_roles_touches_only_the_accounts_membership() {
        let me = "serviceAccount:me@p.iam.gserviceaccount.com";
        let mut p = policy(&[
            ("roles/owner", &["user:boss@example.com"]),
            ("roles/viewer", &["user:v@example.com", me]),
            ("roles/editor", &[me]),
        ]);
        p.bindings.push(
            serde_json::from_value(serde_json::json!({
                "role": "roles/storage.admin",
                "members": [me],
                "condition": {"title": "always", "expression": "true"},
            }))
            .expect("a conditional binding"),
        );
        assert_eq!(
            roles_of(&p, me),
            set(&["roles/viewer", "roles/editor"]),
            "a conditional grant is not reported"
        );
        let wanted = set(&["roles/viewer", "roles/run.invoker"]);
        assert!(grant_roles(&mut p, me, &wanted));
        assert_eq!(roles_of(&p, me), wanted);
        assert_eq!(
            members_of(&p, "roles/owner"),
            set(&["user:boss@example.com"])
        );
        assert_eq!(
            members_of(&p, "roles/viewer"),
            set(&["user:v@example.com", me])
        );
        assert!(
            !p.bindings.iter().any(|b| b.role == "roles/editor"),
            "an emptied binding is dropped"
        );
        assert!(
            p.bindings
                .iter()
                .any(|b| b.role == "roles/storage.admin" && b.condition.is_some()),
            "conditional bindings stay"
        );
        assert!(!grant_roles(&mut p, me, &wanted), "nothing left to change");
        assert!(remove_member(&mut p, me));
        assert!(roles_of(&p, me).is_empty());
        assert!(!p.bindings.iter().any(|b| b.role == "roles/storage.admin"));
        assert_eq!(members_of(&p, "roles/viewer"), set(&["user:v@example.com"]));
    }

    #[test]
    fn the_users_of_an_account_are_the_members_of_its_service_account_user_binding() {
        let mut p = policy(&[
            (ACT_AS, &["user:a@example.com"]),
            (
                "roles/iam.serviceAccountTokenCreator",
                &["user:t@example.com"],
            ),
        ]);
        let wanted = set(&["user:b@example.com", "group:g@example.com"]);
        assert!(set_role_members(&mut p, ACT_AS, &wanted));
        assert_eq!(members_of(&p, ACT_AS), wanted);
        assert_eq!(
            members_of(&p, "roles/iam.serviceAccountTokenCreator"),
            set(&["user:t@example.com"])
        );
        assert!(!set_role_members(&mut p, ACT_AS, &wanted));
        assert!(set_role_members(&mut p, ACT_AS, &BTreeSet::new()));
        assert!(!p.bindings.iter().any(|b| b.role == ACT_AS));
    }
}
