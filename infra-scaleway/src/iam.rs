//! The `iam` kind: a Scaleway IAM application and the one policy attached to it that
//! grants the declared permission sets on the configured project (IAM `v1alpha1`).
//!
//! **The handle** is the application's id (a UUID); the observed `id` is the same.
//! Applications live in the project's organization (`clients.organization_id()`: the
//! configured one, else the project's), and every call names it. A name is 1 to 64
//! characters of letters, digits, spaces and `( ) . _ -`, and a description at most 200
//! characters, as IAM documents: anything else is refused before any call.
//!
//! **Names may repeat in Scaleway IAM**; here they may not (`duplicate_names()` is
//! false: the kind has no field that forces a replace, so the engine never needs two).
//! `create` first lists the organization's applications of that name and answers
//! `Conflict` when one records this region, or records none (an application made
//! elsewhere, which the message says how to take over). The check and the create are
//! two calls: two fleets racing on one name can both pass it.
//!
//! **The marker and the region** travel in the application's `tags` (plain strings,
//! `key=value`): `POST /applications` carries `managed-by-infra=<fleet>` and
//! `infra-region=<region>` with the declared tags, so no application of ours exists
//! unmarked. IAM is global; the region an application was declared in is its
//! `infra-region` tag. `list` (every page of `GET /applications?organization_id=…`)
//! answers the applications whose tag names the region asked about, and no other;
//! `read`, `update`, `delete`, `ownership` and `mark` of an application whose tag names
//! another region answer `NotFound`, and one without the tag is read wherever asked.
//! `update` keeps the marker and the region tag whatever is declared (a declared
//! `infra-region` tag is refused); `mark` adds the marker (and the region tag when there
//! is none) with one `PATCH`, refusing another fleet's marker (`Conflict`).
//!
//! **`policies`** are permission-set names (`ObjectStorageReadOnly`,
//! `SecretManagerReadOnly`, …). Before anything is written, `GET /permission-sets` is
//! asked (every page): a name IAM does not know, or one whose scope is not `projects`
//! (an organization-wide set such as `IAMManager`), is refused as `Invalid`. The sets are
//! granted by **this kind's policy**: the policy attached to the application
//! (`application_id`) that bears the application's name, found by listing the
//! organization's policies with `application_ids=<id>` (and filtered again here on
//! `application_id`, which the list answers). It is created (`POST /policies`, carrying
//! the application's marker in its tags) with one rule, `{permission_set_names,
//! project_ids: [project]}`; a change replaces its rules in place (`PUT /rules`); an
//! empty set of policies means no policy at all (an existing one is deleted). A policy
//! write after a new application failed says that the application exists, with the
//! marker, and that the next apply finishes the policy.
//!
//! Other policies attached to the application (made elsewhere) are left alone, but what
//! they grant is reported: `read` answers the union of the permission sets of every
//! unconditional rule, of every policy attached to the application, that is scoped to
//! the configured project. An `update` after which such a policy still grants sets that
//! are not declared answers `Conflict`, naming it, rather than leave a drift that no
//! write of this kind can remove.
//!
//! **`assumedBy`**: Scaleway has no trust policy. An application is used through API
//! keys, which are made for it and handed out; no service assumes it. Only the empty set
//! can be declared; any service named there is refused as `Invalid` before any call,
//! saying so.
//!
//! **Delete** deletes this kind's policy, then the application (which also deletes its
//! API keys). Scaleway does not delete the other policies attached to a deleted
//! application: they stay, without a principal.
//!
//! What read reports when Scaleway does not say:
//! - `policies`: the policies and their rules are always answered; no policy attached
//!   is the truth, an empty set. Rules on other projects, on the organization, or under
//!   a condition are not reported.
//! - `assumedBy`: never said (nothing assumes an application): `Unknown`.
//! - `description`: always answered; an empty one is the truth `""`.
//! - `tags`: always answered; the marker is included, `infra-region` is not.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::{Iam, IamObserved, IamReported, IamSettled, Tags};
use infra_core::prelude::Partial;
use infra_core::sdk::poll::settle_uncertain;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    Marker, Ownership, OwnershipArgs, RawTags, ReadArgs, Reading, Router, UpdateArgs, Written,
};
use serde::{Deserialize, Serialize};

use crate::api::Call;
use crate::clients::Clients;
use crate::tags;

/// Where applications are.
const APPLICATIONS: &str = "/iam/v1alpha1/applications";
/// Where policies are.
const POLICIES: &str = "/iam/v1alpha1/policies";
/// Where a policy's rules are read and replaced.
const RULES: &str = "/iam/v1alpha1/rules";
/// The permission sets IAM knows.
const PERMISSION_SETS: &str = "/iam/v1alpha1/permission-sets";
/// The bookkeeping tag holding the region an application was declared in.
const REGION_TAG: &str = "infra-region";
/// The scope of the permission sets this kind grants.
const PROJECT_SCOPE: &str = "projects";
/// The most characters IAM keeps in a name.
const MAX_NAME: usize = 64;
/// The most characters IAM keeps in a description.
const MAX_DESCRIPTION: usize = 200;
/// `not_found` of an application: the application is absent.
const NO_APPLICATION: &[&str] = &["application"];
/// `not_found` of a policy: the policy is absent.
const NO_POLICY: &[&str] = &["policy"];

/// An application, as IAM answers it.
#[derive(Clone, Debug, Deserialize)]
struct Application {
    id: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    tags: Vec<String>,
}

/// A policy, as IAM answers it (its rules are read apart).
#[derive(Clone, Debug, Deserialize)]
struct Policy {
    id: String,
    name: String,
    #[serde(default)]
    application_id: Option<String>,
}

/// A rule of a policy.
#[derive(Clone, Debug, Default, Deserialize)]
struct Rule {
    #[serde(default)]
    permission_set_names: Option<Vec<String>>,
    #[serde(default)]
    project_ids: Option<Vec<String>>,
    #[serde(default)]
    organization_id: Option<String>,
    #[serde(default)]
    condition: Option<String>,
}

/// A permission set IAM knows.
#[derive(Clone, Debug, Deserialize)]
struct PermissionSet {
    name: String,
    #[serde(default)]
    scope_type: String,
}

/// The body of `POST /applications`.
#[derive(Serialize)]
struct NewApplication<'a> {
    name: &'a str,
    description: &'a str,
    organization_id: &'a str,
    tags: Vec<String>,
}

/// The body of `PATCH /applications/{id}`: only what changes.
#[derive(Default, Serialize)]
struct ApplicationPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<Vec<String>>,
}

/// A rule as written: permission sets on projects.
#[derive(Debug, PartialEq, Serialize)]
struct RuleSpec {
    permission_set_names: Vec<String>,
    project_ids: Vec<String>,
}

/// The body of `POST /policies`.
#[derive(Serialize)]
struct NewPolicy<'a> {
    name: &'a str,
    description: String,
    organization_id: &'a str,
    tags: Vec<String>,
    rules: Vec<RuleSpec>,
    application_id: &'a str,
}

/// The body of `PUT /rules`.
#[derive(Serialize)]
struct SetRules<'a> {
    policy_id: &'a str,
    rules: Vec<RuleSpec>,
}

/// Whether `name` is a name IAM takes: 1 to 64 characters of `[a-zA-Z0-9()._- ]`.
fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.chars().count())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "()._- ".contains(c))
}

/// Refuses what IAM would refuse of a declaration, before any call.
fn check_declared(name: Option<&str>, spec: &IamSettled) -> Result<(), BackendError> {
    if let Some(name) = name.filter(|n| !valid_name(n)) {
        return Err(BackendError::invalid(format!(
            "`{name}` cannot be an IAM application's name: it must be 1 to {MAX_NAME} \
             characters of letters, digits, spaces and `( ) . _ -`"
        )));
    }
    if let Some(description) = spec.description.known()
        && description.chars().count() > MAX_DESCRIPTION
    {
        return Err(BackendError::invalid(format!(
            "an IAM application's description holds at most {MAX_DESCRIPTION} characters; \
             this one has {}",
            description.chars().count()
        )));
    }
    if !spec.assumed_by.is_empty() {
        return Err(BackendError::invalid(format!(
            "assumedBy must be empty on Scaleway: an IAM application is used through its API \
             keys, and no service can be allowed to assume it (declared: {:?})",
            spec.assumed_by
        )));
    }
    if spec
        .tags
        .known()
        .is_some_and(|t| t.contains_key(REGION_TAG))
    {
        return Err(BackendError::invalid(format!(
            "the tag `{REGION_TAG}` is this provider's own (the region an application was \
             declared in) and cannot be declared"
        )));
    }
    Ok(())
}

/// Refuses a handle that is not an id (it becomes a path segment).
fn check_handle(handle: &str) -> Result<(), BackendError> {
    if !handle.is_empty() && handle.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "`{handle}` is not an IAM application id"
        )))
    }
}

/// The region an application's tags record.
fn region_of(tags: &[String]) -> Option<&str> {
    tags.iter()
        .find_map(|t| t.strip_prefix(REGION_TAG)?.strip_prefix('='))
}

/// The tags a create sends: the declared ones, the marker, the region.
fn create_tags(declared: Option<&Tags>, marker: &Marker, region: &str) -> Vec<String> {
    let declared = declared.map(tags::from_map).unwrap_or_default();
    let mut all = tags::for_create(declared, marker);
    all.push(format!("{REGION_TAG}={region}"));
    all.sort();
    all
}

/// The tags an update sends: the declared ones, with the marker and the region tag
/// `current` carries.
fn update_tags(declared: &Tags, current: &[String]) -> Vec<String> {
    let mut all = tags::for_update(tags::from_map(declared), current);
    all.extend(
        current
            .iter()
            .filter(|t| t.split('=').next() == Some(REGION_TAG))
            .cloned(),
    );
    all.sort();
    all.dedup();
    all
}

/// The tags reported: all but the region's bookkeeping.
fn reported_tags(current: &[String]) -> Tags {
    let mut map = tags::to_map(current);
    map.remove(REGION_TAG);
    map
}

/// Whether two tag lists hold the same strings.
fn same_tags(a: &[String], b: &[String]) -> bool {
    a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>()
}

/// The permission sets granted on `project` by the unconditional rules among `rules`.
fn project_grants(rules: &[Rule], project: &str) -> BTreeSet<String> {
    rules
        .iter()
        .filter(|r| r.condition.as_deref().unwrap_or("").is_empty())
        .filter(|r| {
            r.project_ids
                .as_ref()
                .is_some_and(|p| p.iter().any(|id| id == project))
        })
        .flat_map(|r| r.permission_set_names.iter().flatten().cloned())
        .collect()
}

/// The rules this kind's policy holds for `sets` (none for no sets).
fn wanted_rules(sets: &BTreeSet<String>, project: &str) -> Vec<RuleSpec> {
    if sets.is_empty() {
        return Vec::new();
    }
    vec![RuleSpec {
        permission_set_names: sets.iter().cloned().collect(),
        project_ids: vec![project.to_owned()],
    }]
}

/// Whether `rules` are exactly the one rule granting `sets` on `project`.
fn rules_are(rules: &[Rule], sets: &BTreeSet<String>, project: &str) -> bool {
    match rules {
        [rule] => {
            rule.condition.as_deref().unwrap_or("").is_empty()
                && rule.organization_id.is_none()
                && rule.project_ids.as_deref() == Some(&[project.to_owned()][..])
                && rule
                    .permission_set_names
                    .iter()
                    .flatten()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    == *sets
                && !sets.is_empty()
        }
        _ => false,
    }
}

/// Refuses declared sets that IAM does not know, or that are not granted on projects.
fn check_sets(declared: &BTreeSet<String>, known: &[PermissionSet]) -> Result<(), BackendError> {
    let unknown: Vec<&str> = declared
        .iter()
        .filter(|d| !known.iter().any(|k| &k.name == *d))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(BackendError::invalid(format!(
            "policies of a Scaleway IAM application are permission-set names, and IAM knows \
             none named {unknown:?} (GET /iam/v1alpha1/permission-sets lists them)"
        )));
    }
    let elsewhere: Vec<String> = known
        .iter()
        .filter(|k| declared.contains(&k.name) && k.scope_type != PROJECT_SCOPE)
        .map(|k| format!("{} ({})", k.name, k.scope_type))
        .collect();
    if !elsewhere.is_empty() {
        return Err(BackendError::invalid(format!(
            "this provider grants permission sets on the project only, and these are granted \
             on another scope: {elsewhere:?}"
        )));
    }
    Ok(())
}

/// This kind's policy among those attached to `app`: the first bearing its name.
fn ours<'p>(app: &Application, attached: &'p [Policy]) -> Option<&'p Policy> {
    attached.iter().find(|p| p.name == app.name)
}

/// `iam` on Scaleway: an IAM application and its policy.
pub(crate) struct Applications {
    clients: Arc<Clients>,
}

/// Adds this product's kinds to `router`.
pub(crate) fn register(mut router: Router, clients: &Arc<Clients>) -> Router {
    router.add::<Iam>(Applications {
        clients: Arc::clone(clients),
    });
    router
}

impl Applications {
    fn project(&self) -> &str {
        self.clients.project_id()
    }

    /// `GET /applications/{id}`, whatever its region.
    async fn get(&self, handle: &str) -> Result<Application, BackendError> {
        check_handle(handle)?;
        let call = Call::get(
            "iam: GET /iam/v1alpha1/applications/{id}",
            format!("{APPLICATIONS}/{handle}"),
        )
        .not_found(NO_APPLICATION);
        self.clients.api().call(call).await
    }

    /// The application `handle`, if it lives in `region` (or records no region).
    async fn application(&self, region: &str, handle: &str) -> Result<Application, BackendError> {
        let app = self.get(handle).await?;
        match region_of(&app.tags) {
            Some(theirs) if theirs != region => Err(BackendError::not_found(format!(
                "the IAM application {handle} is in {theirs}, not in {region}"
            ))
            .with_code("not_found")),
            _ => Ok(app),
        }
    }

    /// The organization's applications whose name is exactly `name`.
    async fn named(&self, org: &str, name: &str) -> Result<Vec<Application>, BackendError> {
        let call = Call::get("iam: GET /iam/v1alpha1/applications", APPLICATIONS)
            .query("organization_id", org)
            .query("name", name);
        let all: Vec<Application> = self.clients.api().list_all(call, "applications").await?;
        Ok(all.into_iter().filter(|a| a.name == name).collect())
    }

    /// Refuses a name an application of this region (or of none) already bears.
    async fn check_free(&self, org: &str, region: &str, name: &str) -> Result<(), BackendError> {
        for app in self.named(org, name).await? {
            let why = match region_of(&app.tags) {
                Some(theirs) if theirs == region => format!("in {region}"),
                Some(_) => continue,
                None => format!(
                    "with no `{REGION_TAG}` tag (tag it `{REGION_TAG}={region}` to take it \
                     over)"
                ),
            };
            return Err(BackendError::new(
                ErrorKind::Conflict,
                format!(
                    "an IAM application named `{name}` already exists {why}: {}; Scaleway lets \
                     names repeat, this provider does not",
                    app.id
                ),
            )
            .with_code("already_exists"));
        }
        Ok(())
    }

    /// The application a create whose answer was lost may have made: named `name`, in
    /// `region`, this fleet's first.
    async fn find(
        &self,
        org: &str,
        region: &str,
        name: &str,
        marker: &Marker,
    ) -> Result<Option<(RawTags, Application)>, BackendError> {
        let here: Vec<Application> = self
            .named(org, name)
            .await?
            .into_iter()
            .filter(|a| region_of(&a.tags) == Some(region))
            .collect();
        let mine = here
            .iter()
            .find(|a| matches!(marker.verdict(&tags::to_map(&a.tags)), Ownership::Ours));
        Ok(mine
            .or(here.first())
            .map(|a| (tags::to_map(&a.tags), a.clone())))
    }

    /// Refuses declared permission sets IAM does not know (asked only when some are).
    async fn check_permission_sets(
        &self,
        org: &str,
        declared: &BTreeSet<String>,
    ) -> Result<(), BackendError> {
        if declared.is_empty() {
            return Ok(());
        }
        let call = Call::get("iam: GET /iam/v1alpha1/permission-sets", PERMISSION_SETS)
            .query("organization_id", org);
        let known: Vec<PermissionSet> =
            self.clients.api().list_all(call, "permission_sets").await?;
        check_sets(declared, &known)
    }

    /// The policies attached to `app`.
    async fn attached(&self, org: &str, app: &Application) -> Result<Vec<Policy>, BackendError> {
        let call = Call::get("iam: GET /iam/v1alpha1/policies", POLICIES)
            .query("organization_id", org)
            .query("application_ids", app.id.clone());
        let all: Vec<Policy> = self.clients.api().list_all(call, "policies").await?;
        Ok(all
            .into_iter()
            .filter(|p| p.application_id.as_deref() == Some(app.id.as_str()))
            .collect())
    }

    /// The rules of the policy `id` (none when it went away meanwhile).
    async fn rules(&self, id: &str) -> Result<Vec<Rule>, BackendError> {
        let call = Call::get("iam: GET /iam/v1alpha1/rules", RULES)
            .query("policy_id", id)
            .not_found(NO_POLICY);
        match self.clients.api().list_all(call, "rules").await {
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Vec::new()),
            other => other,
        }
    }

    /// The application read whole: itself, and what its policies grant on the project.
    async fn reading(&self, app: &Application) -> Result<Reading<Iam>, BackendError> {
        let org = self.clients.organization_id().await?;
        let mut granted = BTreeSet::new();
        for policy in self.attached(&org, app).await? {
            granted.extend(project_grants(
                &self.rules(&policy.id).await?,
                self.project(),
            ));
        }
        Ok(Reading::new(
            app.id.clone(),
            IamObserved { id: app.id.clone() },
            IamReported {
                policies: Partial::Known(granted),
                assumed_by: Partial::Unknown,
                description: Partial::Known(app.description.clone()),
                tags: Partial::Known(reported_tags(&app.tags)),
            },
        )
        .with_raw_tags(tags::to_map(&app.tags)))
    }

    /// `PATCH /applications/{id}`.
    async fn patch(&self, id: &str, patch: &ApplicationPatch) -> Result<(), BackendError> {
        let call = Call::patch(
            "iam: PATCH /iam/v1alpha1/applications/{id}",
            format!("{APPLICATIONS}/{id}"),
        )
        .not_found(NO_APPLICATION);
        self.clients.api().act(call, Some(patch)).await
    }

    /// `DELETE /policies/{id}`; a policy already gone is fine.
    async fn delete_policy(&self, id: &str) -> Result<(), BackendError> {
        let call = Call::delete(
            "iam: DELETE /iam/v1alpha1/policies/{id}",
            format!("{POLICIES}/{id}"),
        )
        .not_found(NO_POLICY);
        match self.clients.api().act(call, None::<&()>).await {
            Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// `POST /policies`: this kind's policy for `app`, granting `sets`, carrying the
    /// application's marker. A lost answer is settled by looking for the policy again.
    async fn create_policy(
        &self,
        org: &str,
        app: &Application,
        sets: &BTreeSet<String>,
    ) -> Result<(), BackendError> {
        let body = NewPolicy {
            name: &app.name,
            description: format!(
                "The permission sets of the application {} on the project {}",
                app.name,
                self.project()
            ),
            organization_id: org,
            tags: app
                .tags
                .iter()
                .filter(|t| tags::is_marker(t))
                .cloned()
                .collect(),
            rules: wanted_rules(sets, self.project()),
            application_id: &app.id,
        };
        let call = Call::create("iam: POST /iam/v1alpha1/policies", POLICIES);
        match self.clients.api().act(call, Some(&body)).await {
            Err(e) if e.may_have_been_sent => {
                let attached = self.attached(org, app).await.map_err(|_| e.clone())?;
                match ours(app, &attached) {
                    Some(_) => Ok(()),
                    None => Err(e),
                }
            }
            other => other,
        }
    }

    /// Brings this kind's policy of `app` to granting exactly `sets`, then refuses
    /// (`Conflict`) other attached policies that grant sets not declared.
    async fn write_policy(
        &self,
        org: &str,
        app: &Application,
        sets: &BTreeSet<String>,
    ) -> Result<(), BackendError> {
        let attached = self.attached(org, app).await?;
        let mine = ours(app, &attached);
        match mine {
            None if sets.is_empty() => {}
            None => self.create_policy(org, app, sets).await?,
            Some(policy) if sets.is_empty() => self.delete_policy(&policy.id).await?,
            Some(policy) => {
                if !rules_are(&self.rules(&policy.id).await?, sets, self.project()) {
                    let body = SetRules {
                        policy_id: &policy.id,
                        rules: wanted_rules(sets, self.project()),
                    };
                    let call = Call::put("iam: PUT /iam/v1alpha1/rules", RULES);
                    self.clients.api().act(call, Some(&body)).await?;
                }
            }
        }
        let others = attached
            .iter()
            .filter(|p| mine.is_none_or(|m| m.id != p.id));
        for other in others {
            let extra: Vec<String> = project_grants(&self.rules(&other.id).await?, self.project())
                .difference(sets)
                .cloned()
                .collect();
            if !extra.is_empty() {
                return Err(BackendError::new(
                    ErrorKind::Conflict,
                    format!(
                        "the policy `{}` ({}), attached to the IAM application {} but not this \
                         provider's, grants {extra:?} on the project, which are not declared: \
                         declare them, or detach or delete that policy",
                        other.name, other.id, app.id
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[async_trait]
impl KindBackend<Iam> for Applications {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let org = self.clients.organization_id().await?;
        let call = Call::get("iam: GET /iam/v1alpha1/applications", APPLICATIONS)
            .query("organization_id", org);
        let all: Vec<Application> = self.clients.api().list_all(call, "applications").await?;
        Ok(all
            .into_iter()
            .filter(|a| region_of(&a.tags) == Some(region))
            .map(|a| Listed::new(a.name, a.id))
            .collect())
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Iam>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let app = self.application(region, handle).await?;
        self.reading(&app).await
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
        check_declared(Some(name), spec)?;
        let org = self.clients.organization_id().await?;
        self.check_permission_sets(&org, &spec.policies).await?;
        self.check_free(&org, region, name).await?;
        let body = NewApplication {
            name,
            description: spec.description.known().map_or("", String::as_str),
            organization_id: &org,
            tags: create_tags(spec.tags.known(), marker, region),
        };
        let call = Call::create("iam: POST /iam/v1alpha1/applications", APPLICATIONS);
        let app: Application = match self.clients.api().send(call, Some(&body)).await {
            Ok(app) => app,
            Err(e) => {
                let what = format!("iam: the application `{name}` in {region}");
                settle_uncertain(e, marker, &what, self.find(&org, region, name, marker)).await?
            }
        };
        if let Err(e) = self.write_policy(&org, &app, &spec.policies).await {
            return Err(BackendError {
                message: format!(
                    "the IAM application `{name}` ({}) was created, carrying this fleet's \
                     marker, but its policy could not be written: {}; the next apply finishes it",
                    app.id, e.message
                ),
                ..e
            });
        }
        let read = self.read(ReadArgs::new(region, &app.id)).await?;
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
        check_declared(None, spec)?;
        let app = self.application(region, handle).await?;
        let org = self.clients.organization_id().await?;
        self.check_permission_sets(&org, &spec.policies).await?;
        let patch = ApplicationPatch {
            description: spec
                .description
                .known()
                .filter(|d| **d != app.description)
                .cloned(),
            tags: spec
                .tags
                .known()
                .map(|declared| update_tags(declared, &app.tags))
                .filter(|wanted| !same_tags(wanted, &app.tags)),
        };
        if patch.description.is_some() || patch.tags.is_some() {
            self.patch(handle, &patch).await?;
        }
        self.write_policy(&org, &app, &spec.policies).await?;
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let app = self.application(region, handle).await?;
        let org = self.clients.organization_id().await?;
        if let Some(policy) = ours(&app, &self.attached(&org, &app).await?) {
            self.delete_policy(&policy.id).await?;
        }
        let call = Call::delete(
            "iam: DELETE /iam/v1alpha1/applications/{id}",
            format!("{APPLICATIONS}/{handle}"),
        )
        .not_found(NO_APPLICATION);
        self.clients.api().act(call, None::<&()>).await
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let app = self.application(region, handle).await?;
        Ok(tags::to_map(&app.tags))
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let app = self.application(region, handle).await?;
        let what = format!("the IAM application {handle}");
        if let Some(mut wanted) = tags::marking(&app.tags, marker, &what)? {
            if region_of(&wanted).is_none() {
                wanted.push(format!("{REGION_TAG}={region}"));
            }
            let patch = ApplicationPatch {
                tags: Some(wanted),
                ..ApplicationPatch::default()
            };
            self.patch(handle, &patch).await?;
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

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn rule(sets: &[&str], projects: Option<&[&str]>, condition: &str) -> Rule {
        Rule {
            permission_set_names: Some(strings(sets)),
            project_ids: projects.map(strings),
            organization_id: projects.is_none().then(|| "org".to_owned()),
            condition: Some(condition.to_owned()),
        }
    }

    fn spec(assumed_by: &[&str], tags: &[(&str, &str)]) -> IamSettled {
        IamSettled {
            policies: set(&["ObjectStorageReadOnly"]),
            assumed_by: set(assumed_by),
            description: Partial::Known("d".to_owned()),
            tags: Partial::Known(
                tags.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
        }
    }

    #[test]
    fn names_are_checked_as_iam_documents_them() {
        for ok in ["web", "My app (v2)", "a.b_c-d", &"x".repeat(64)] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "a/b", "é", "tab\there", "semi;colon", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert!(check_declared(Some("web"), &spec(&[], &[])).is_ok());
        let long = IamSettled {
            description: Partial::Known("d".repeat(201)),
            ..spec(&[], &[])
        };
        assert_eq!(
            check_declared(None, &long).unwrap_err().kind,
            ErrorKind::Invalid
        );
        assert!(check_handle("0000002a-5ca1-4e00-8000-000000000007").is_ok());
        assert!(check_handle("../policies").is_err() && check_handle("").is_err());
    }

    #[test]
    fn an_assumer_or_a_region_tag_is_refused_with_the_reason() {
        let err = check_declared(Some("web"), &spec(&["lambda.amazonaws.com"], &[])).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid);
        assert!(err.message.contains("API keys"), "{}", err.message);
        let err = check_declared(None, &spec(&[], &[("infra-region", "x")])).unwrap_err();
        assert!(err.message.contains("infra-region"), "{}", err.message);
    }

    #[test]
    fn the_marker_and_the_region_are_written_kept_and_the_region_never_reported() {
        let declared: Tags = [("team".to_owned(), "web".to_owned())].into();
        let sent = create_tags(Some(&declared), &Marker::new("shop"), "fr-par");
        assert_eq!(
            sent,
            strings(&["infra-region=fr-par", "managed-by-infra=shop", "team=web"])
        );
        assert_eq!(region_of(&sent), Some("fr-par"));
        assert_eq!(region_of(&strings(&["infra-regional=x"])), None);
        let changed: Tags = [("team".to_owned(), "ops".to_owned())].into();
        assert_eq!(
            update_tags(&changed, &sent),
            strings(&["infra-region=fr-par", "managed-by-infra=shop", "team=ops"])
        );
        let reported = reported_tags(&sent);
        assert_eq!(
            reported.get("managed-by-infra").map(String::as_str),
            Some("shop")
        );
        assert!(!reported.contains_key(REGION_TAG));
        assert!(same_tags(&strings(&["b", "a"]), &strings(&["a", "b"])));
    }

    #[test]
    fn grants_are_the_unconditional_rules_on_the_project() {
        let rules = [
            rule(&["A", "B"], Some(&["p", "q"]), ""),
            rule(&["C"], Some(&["q"]), ""),
            rule(&["D"], None, ""),
            rule(&["E"], Some(&["p"]), "request.ip == 1.2.3.4"),
        ];
        assert_eq!(project_grants(&rules, "p"), set(&["A", "B"]));
        assert_eq!(
            wanted_rules(&set(&["B", "A"]), "p"),
            vec![RuleSpec {
                permission_set_names: strings(&["A", "B"]),
                project_ids: strings(&["p"]),
            }]
        );
        assert!(wanted_rules(&BTreeSet::new(), "p").is_empty());
        assert!(rules_are(
            &[rule(&["B", "A"], Some(&["p"]), "")],
            &set(&["A", "B"]),
            "p"
        ));
        assert!(!rules_are(
            &[rule(&["A"], Some(&["p"]), "")],
            &set(&["A", "B"]),
            "p"
        ));
        assert!(!rules_are(
            &[rule(&["A"], Some(&["p", "q"]), "")],
            &set(&["A"]),
            "p"
        ));
        assert!(!rules_are(&rules[..2], &set(&["A", "B"]), "p"));
        assert!(!rules_are(&[], &BTreeSet::new(), "p"));
    }

    #[test]
    fn unknown_or_organization_wide_permission_sets_are_refused() {
        let known = [
            PermissionSet {
                name: "ObjectStorageReadOnly".to_owned(),
                scope_type: "projects".to_owned(),
            },
            PermissionSet {
                name: "IAMManager".to_owned(),
                scope_type: "organization".to_owned(),
            },
        ];
        assert!(check_sets(&set(&["ObjectStorageReadOnly"]), &known).is_ok());
        let unknown = check_sets(&set(&["conformance-read-only"]), &known).unwrap_err();
        assert_eq!(unknown.kind, ErrorKind::Invalid);
        assert!(unknown.message.contains("conformance-read-only"));
        let scoped = check_sets(&set(&["IAMManager"]), &known).unwrap_err();
        assert!(
            scoped.message.contains("organization"),
            "{}",
            scoped.message
        );
    }
}

#[cfg(test)]
#[path = "recorded/iam.rs"]
mod recorded;
