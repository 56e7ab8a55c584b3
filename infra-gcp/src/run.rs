//! Cloud Run services: the `compute` kind, as a Cloud Run service (Admin API v2) built
//! from a source archive in Cloud Storage, or running a container image.
//!
//! The handle is the service's resource name,
//! `projects/{project}/locations/{region}/services/{name}`; the name is the service id,
//! which Cloud Run wants as lowercase letters, digits and hyphens, starting with a letter,
//! not ending with a hyphen, at most 49 characters (refused as `Invalid` before any
//! call). Cloud Run is regional: `list` asks the region's own services, and a handle
//! naming another region is `NotFound` in this one.
//!
//! How the declaration is carried:
//! - `code` `gs://bucket/object` (a source archive): `buildConfig.sourceLocation`;
//!   Cloud Run builds the function from it. `handler` is `buildConfig.functionTarget`
//!   and `runtime` (`python312`, `nodejs22`: Cloud Run's runtime ids) is the build's
//!   base image, `{region}-docker.pkg.dev/serverless-runtimes/google-22-full/runtimes/{runtime}`;
//!   a runtime written `{stack}/{runtime}` (`google-24/nodejs24`) names another stack.
//!   A runtime written the Lambda way (`python3.12`) is refused as `Invalid`. The
//!   container's image is Cloud Run's sample image until the build replaces it (as in
//!   Google's own example of this API); an update that changes none of the three build
//!   inputs keeps the built image, so that it builds nothing again.
//! - any other `code` is a container image reference, run as it is (a `scheme://` URL
//!   other than `gs://` is refused as `Invalid`). An image is already built: `runtime`
//!   and `handler` cannot be carried, are not sent, and read reports them `Unknown`
//!   (never compared), rather than refusing a declaration the kind makes mandatory.
//! - `memoryMb` is the container's `resources.limits.memory` (`"256Mi"`, 128 MiB to
//!   32 GiB). Cloud Run ties memory to CPU: above 512 MiB it needs a whole CPU, above
//!   4 GiB two, above 8 GiB four; and four CPUs need at least 2 GiB. When the CPU the
//!   service has (1 by default) does not fit the declared memory, `limits.cpu` is set to
//!   the least that does; otherwise it is left alone. A new `resources` block keeps
//!   Cloud Run's default of CPU allocated only during requests (`cpuIdle`).
//! - `timeoutSeconds` is `template.timeout` (1 to 3600 s on Cloud Run).
//! - `environment` and `secretEnvironment` are the container's `env`; a secret variable
//!   is `valueSource.secretKeyRef { secret: <the secrets handle>, version: "latest" }`,
//!   so Cloud Run reads the value when an instance starts and this module never does.
//!   A secrets handle is `projects/{project}/secrets/{id}` (a bare id is taken too);
//!   anything else, a version included, is refused as `Invalid`.
//!   `PORT`, `K_SERVICE`, `K_REVISION` and `K_CONFIGURATION` are Cloud Run's own and
//!   refused as `Invalid`, as is a variable in both maps.
//! - `role` is `template.serviceAccount`, the service account's email (the `iam`
//!   kind's handle); none is the project's default compute service account.
//! - `tags` are the service's labels.
//! - `access` is the service's IAM policy (`access.rs`): private unless declared,
//!   public when `allUsers` holds `roles/run.invoker`. Every create and update brings
//!   the policy to what is declared (writing nothing when it says so already), so a
//!   service found public when declared private is made private again; every read asks
//!   for the policy (`GetIamPolicy`), one call more than the service itself.
//!
//! Every write is a long-running operation, awaited with the client's own poller
//! (`google-cloud-lro`) on the configuration's polling policy. An
//! update sends the whole service as it should be (Cloud Run v2 replaces it), starting
//! from what `GetService` answered, so that what the declaration does not say is kept;
//! it carries the service's etag, so that a change made in between is a `Conflict`
//! rather than overwritten. A change to the template (image, build, memory, timeout,
//! environment, identity) makes a new revision, reported as `version`; a change of
//! labels alone does not.
//!
//! The marker is one of the labels of `CreateService` itself. A create whose answer was
//! lost, or whose operation was still running at the deadline, is settled by looking
//! the service up by name (`GetService`) and its labels. A create whose operation
//! fails (a build that fails, a revision that never becomes ready) is reported failed;
//! Cloud Run may keep the service, marked, and the next apply then finds it by name
//! and updates it.
//!
//! What read reports when Cloud Run does not say:
//! - `runtime`: `Unknown` for a service with no build (an image), or a build with no
//!   base image; a base image outside `serverless-runtimes` is reported as it is.
//! - `handler`: `Unknown` with no build, or a build with no function target.
//! - `code`: the build's source location; with no build, the container's image;
//!   `Unknown` when the service has neither.
//! - `codeSha256`: `Unknown`, always: Cloud Run reports no digest of the source
//!   archive (nor the image digest as the kind defines it), so the field is never
//!   compared, and new code behind an unchanged `gs://` location is not noticed.
//! - `memoryMb`: `Unknown` when the container has no memory limit, or one that is not
//!   a whole number of MiB.
//! - `timeoutSeconds`: `Unknown` when the template has no timeout, or a fractional one.
//! - `environment`, `secretEnvironment`: no variables is the truth, empty maps; both
//!   `Unknown` when the service has no container. A secret named by id alone is
//!   reported as its resource name in this project (the secrets kind's handle); the
//!   version a reference pins is not compared.
//! - `role`: none when the template names no account or the project's default compute
//!   account (`{number}-compute@developer.gserviceaccount.com`); `Unknown` without a
//!   template.
//! - `tags`: the labels (none is the truth, an empty map), marker included.
//!
//! Observed: `id` is the resource name, `url` the service's `uri` (`Unknown` while
//! Cloud Run has assigned none), `version` its latest ready revision (`Unknown` before
//! one is ready). With several containers, the first is the one described here.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use google_cloud_gax::paginator::ItemPaginator as _;
use google_cloud_lro::Poller as _;
use google_cloud_run_v2::model::{
    BuildConfig, Container, EnvVar, EnvVarSource, ResourceRequirements, RevisionTemplate,
    SecretKeySelector, Service,
};
use infra_core::kinds::{
    Access, Compute, ComputeObserved, ComputeReported, ComputeSettled, EnvVars,
};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    OwnershipArgs, RawTags, ReadArgs, Reading, UpdateArgs, Written,
};

use crate::clients::Clients;
use crate::error::{NOT_FOUND, classify};
use crate::labels;
use crate::poll;

mod access;

/// The image a source-built service names until its build replaces it: Cloud Run's
/// sample image, as Google's example of a function built by Cloud Run uses.
const SOURCE_PLACEHOLDER_IMAGE: &str = "us-docker.pkg.dev/cloudrun/container/hello";
/// The operating system stack of a base image named by its runtime id alone.
const DEFAULT_STACK: &str = "google-22-full";
/// Environment variables Cloud Run sets itself and refuses to take.
const RESERVED_ENV: &[&str] = &["PORT", "K_SERVICE", "K_REVISION", "K_CONFIGURATION"];
/// The longest request timeout Cloud Run allows, in seconds.
const MAX_TIMEOUT_SECONDS: u32 = 3600;
/// Cloud Run's memory range, in MiB.
const MEMORY_RANGE_MIB: std::ops::RangeInclusive<u32> = 128..=32 * 1024;
/// Reads tried after a write before answering from the write's own answer.
const READS_AFTER_WRITE: u32 = 3;

/// The resource name of a service, in parts.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ServiceName {
    project: String,
    region: String,
    id: String,
}

impl ServiceName {
    /// `projects/{project}/locations/{region}/services/{id}` in parts, or `None`.
    fn parse(handle: &str) -> Option<ServiceName> {
        let parts: Vec<&str> = handle.split('/').collect();
        match parts.as_slice() {
            ["projects", project, "locations", region, "services", id]
                if !project.is_empty() && !region.is_empty() && !id.is_empty() =>
            {
                Some(ServiceName {
                    project: (*project).to_owned(),
                    region: (*region).to_owned(),
                    id: (*id).to_owned(),
                })
            }
            _ => None,
        }
    }

    fn parent(&self) -> String {
        format!("projects/{}/locations/{}", self.project, self.region)
    }

    fn full(&self) -> String {
        format!("{}/services/{}", self.parent(), self.id)
    }
}

/// Refuses a service id Cloud Run would refuse.
fn check_service_id(id: &str) -> Result<(), BackendError> {
    let well_formed = (1..=49).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && !id.ends_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if well_formed {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "`{id}` cannot name a Cloud Run service: a service id is 1 to 49 lowercase \
             letters, digits and hyphens, starting with a letter and not ending with a hyphen"
        )))
    }
}

/// Where the code comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Code<'a> {
    /// A source archive in Cloud Storage, `gs://bucket/object`, that Cloud Run builds.
    Source(&'a str),
    /// A container image reference, run as it is.
    Image(&'a str),
}

fn code_of(code: &str) -> Result<Code<'_>, BackendError> {
    if let Some(rest) = code.strip_prefix("gs://") {
        return match rest.split_once('/') {
            Some((bucket, object)) if !bucket.is_empty() && !object.is_empty() => {
                Ok(Code::Source(code))
            }
            _ => Err(BackendError::invalid(format!(
                "`code` is {code:?}; a source archive in Cloud Storage is written \
                 `gs://bucket/object`"
            ))),
        };
    }
    if code.is_empty() || code.contains("://") || code.chars().any(char::is_whitespace) {
        return Err(BackendError::invalid(format!(
            "`code` is {code:?}; Cloud Run takes a source archive in Cloud Storage \
             (`gs://bucket/object`) or a container image reference \
             (`europe-west1-docker.pkg.dev/project/repo/image:tag`)"
        )));
    }
    Ok(Code::Image(code))
}

/// A runtime id (`python312`) or `{stack}/{runtime id}` (`google-24/nodejs24`), split.
fn runtime_parts(runtime: &str) -> Result<(&str, &str), BackendError> {
    let (stack, id) = runtime.split_once('/').unwrap_or((DEFAULT_STACK, runtime));
    let id_ok = id.starts_with(|c: char| c.is_ascii_lowercase())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let stack_ok = !stack.is_empty()
        && stack
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if id_ok && stack_ok {
        Ok((stack, id))
    } else {
        Err(BackendError::invalid(format!(
            "`runtime` is {runtime:?}; Cloud Run names runtimes by id, lowercase letters and \
             digits such as `python312` or `nodejs22` (optionally after a stack: \
             `google-24/nodejs24`)"
        )))
    }
}

/// The base image a build of `runtime` in `region` starts from.
fn base_image(region: &str, runtime: &str) -> Result<String, BackendError> {
    let (stack, id) = runtime_parts(runtime)?;
    Ok(format!(
        "{region}-docker.pkg.dev/serverless-runtimes/{stack}/runtimes/{id}"
    ))
}

/// The runtime a base image stands for: the inverse of [`base_image`], and any other
/// base image as it is.
fn runtime_of(base: &str) -> String {
    let parts: Vec<&str> = base.split('/').collect();
    match parts.as_slice() {
        [_, "serverless-runtimes", stack, "runtimes", id] if !id.is_empty() => {
            if *stack == DEFAULT_STACK {
                (*id).to_owned()
            } else {
                format!("{stack}/{id}")
            }
        }
        _ => base.to_owned(),
    }
}

/// A memory size as Cloud Run's quantity.
fn memory_quantity(mib: u32) -> String {
    format!("{mib}Mi")
}

/// A quantity (`512Mi`, `1Gi`, `1G`, `536870912`) in whole MiB, or `None`.
fn memory_mib(quantity: &str) -> Option<u32> {
    let split = quantity
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(quantity.len());
    let (number, unit) = quantity.split_at(split);
    let factor: f64 = match unit {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bytes = number.parse::<f64>().ok()? * factor;
    let mib = bytes / (1024.0 * 1024.0);
    (mib.fract() == 0.0 && mib >= 0.0 && mib <= f64::from(u32::MAX)).then_some(mib as u32)
}

/// A CPU quantity (`1`, `2`, `1000m`, `0.5`) in thousandths of a CPU, or `None`.
fn cpu_millis(quantity: &str) -> Option<u32> {
    let millis = match quantity.strip_suffix('m') {
        Some(m) => m.parse::<f64>().ok()?,
        None => quantity.parse::<f64>().ok()? * 1000.0,
    };
    (millis.fract() == 0.0 && millis > 0.0 && millis <= 1e6).then_some(millis as u32)
}

/// The CPUs (in thousandths) Cloud Run allows with `mib` of memory: at least, at most.
fn cpu_bounds(mib: u32) -> (u32, u32) {
    let least = match mib {
        0..=512 => 0,
        513..=4096 => 1000,
        4097..=8192 => 2000,
        8193..=16384 => 4000,
        16385..=24576 => 6000,
        _ => 8000,
    };
    let most = match mib {
        0..=2047 => 2000,
        2048..=4095 => 4000,
        _ => 8000,
    };
    (least, most)
}

/// The CPU limit to write with `mib` of memory when the service's (`current`, Cloud
/// Run's default of one CPU when unset) does not fit; `None` to leave it.
fn cpu_for(mib: u32, current: Option<&str>) -> Option<String> {
    let (least, most) = cpu_bounds(mib);
    let now = current.and_then(cpu_millis).unwrap_or(1000);
    if (least..=most).contains(&now) {
        return None;
    }
    Some((least.max(1000) / 1000).to_string())
}

/// The secrets handle of a `secretKeyRef.secret` as stored: a bare id is a secret of
/// this project.
fn secret_handle(project: &str, stored: &str) -> String {
    if stored.starts_with("projects/") {
        stored.to_owned()
    } else {
        format!("projects/{project}/secrets/{stored}")
    }
}

/// Refuses a secret reference Cloud Run would refuse: it takes a secret's id, or its
/// resource name `projects/{project}/secrets/{id}` (no version: the latest is read).
fn check_secret(var: &str, secret: &str) -> Result<(), BackendError> {
    let id_ok = |id: &str| {
        (1..=255).contains(&id.len())
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    let parts: Vec<&str> = secret.split('/').collect();
    let ok = match parts.as_slice() {
        [id] => id_ok(id),
        ["projects", project, "secrets", id] => !project.is_empty() && id_ok(id),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "`secretEnvironment.{var}` is {secret:?}; Cloud Run takes a Secret Manager \
             secret by id or as `projects/{{project}}/secrets/{{id}}`"
        )))
    }
}

/// Whether `email` is a project's default compute service account.
fn is_default_identity(email: &str) -> bool {
    email
        .strip_suffix("-compute@developer.gserviceaccount.com")
        .is_some_and(|number| !number.is_empty() && number.chars().all(|c| c.is_ascii_digit()))
}

/// The secret's reference, if `var` is a secret variable.
fn secret_ref(var: &EnvVar) -> Option<&SecretKeySelector> {
    var.value_source()
        .and_then(|source| source.secret_key_ref.as_ref())
}

/// The container's variables apart: the plain ones and the secrets' handles.
fn split_env(
    project: &str,
    env: &[EnvVar],
) -> (
    EnvVars,
    BTreeMap<String, Handle<infra_core::kinds::Secrets>>,
) {
    let mut plain = EnvVars::new();
    let mut secret = BTreeMap::new();
    for var in env {
        match secret_ref(var) {
            Some(selector) => {
                secret.insert(
                    var.name.clone(),
                    Handle::new(secret_handle(project, &selector.secret)),
                );
            }
            None => {
                plain.insert(var.name.clone(), var.value().cloned().unwrap_or_default());
            }
        }
    }
    (plain, secret)
}

fn check_env_name(name: &str) -> Result<(), BackendError> {
    if name.is_empty() || name.contains('=') {
        return Err(BackendError::invalid(format!(
            "{name:?} cannot name an environment variable"
        )));
    }
    if RESERVED_ENV.contains(&name) {
        return Err(BackendError::invalid(format!(
            "the environment variable {name} is set by Cloud Run itself and cannot be declared \
             (reserved: {})",
            RESERVED_ENV.join(", ")
        )));
    }
    Ok(())
}

/// The container's variables as the spec wants them: a map the spec leaves unsaid keeps
/// the container's own entries, as they are.
fn desired_env(spec: &ComputeSettled, current: &[EnvVar]) -> Result<Vec<EnvVar>, BackendError> {
    let plain: Vec<EnvVar> = match spec.environment.known() {
        Some(vars) => vars
            .iter()
            .map(|(k, v)| EnvVar::new().set_name(k).set_value(v))
            .collect(),
        None => current
            .iter()
            .filter(|v| secret_ref(v).is_none())
            .cloned()
            .collect(),
    };
    let secret: Vec<EnvVar> = match spec.secret_environment.known() {
        Some(vars) => vars
            .iter()
            .map(|(k, h)| {
                EnvVar::new().set_name(k).set_value_source(
                    EnvVarSource::new().set_secret_key_ref(
                        SecretKeySelector::new()
                            .set_secret(h.as_str())
                            .set_version("latest"),
                    ),
                )
            })
            .collect(),
        None => current
            .iter()
            .filter(|v| secret_ref(v).is_some())
            .cloned()
            .collect(),
    };
    let mut seen = std::collections::BTreeSet::new();
    for var in plain.iter().chain(&secret) {
        check_env_name(&var.name)?;
        if !seen.insert(var.name.as_str()) {
            return Err(BackendError::invalid(format!(
                "the environment variable {} is given twice (in both `environment` and \
                 `secretEnvironment`?)",
                var.name
            )));
        }
    }
    for (var, handle) in spec.secret_environment.known().into_iter().flatten() {
        check_secret(var, handle.as_str())?;
    }
    Ok(plain.into_iter().chain(secret).collect())
}

/// The service account email to write for `role`.
fn identity(role: Option<&Handle<infra_core::kinds::Iam>>) -> Result<String, BackendError> {
    match role {
        None => Ok(String::new()),
        Some(h) if h.as_str().contains('@') && !h.as_str().contains('/') => {
            Ok(h.as_str().to_owned())
        }
        Some(h) => Err(BackendError::invalid(format!(
            "`role` is {:?}; Cloud Run runs as a service account named by its email",
            h.as_str()
        ))),
    }
}

/// Brings `service` to what `spec` says, leaving what it does not say as it is.
fn apply_spec(
    service: &mut Service,
    spec: &ComputeSettled,
    region: &str,
) -> Result<(), BackendError> {
    let code = code_of(&spec.code)?;
    let template = service
        .template
        .get_or_insert_with(RevisionTemplate::default);
    if template.containers.is_empty() {
        template.containers.push(Container::new());
    }
    let container = &mut template.containers[0];
    match code {
        Code::Source(location) => {
            let base = base_image(region, &spec.runtime)?;
            if spec.handler.is_empty() {
                return Err(BackendError::invalid(
                    "`handler` is empty; a function built by Cloud Run needs its entry point",
                ));
            }
            let build = service.build_config.get_or_insert_with(BuildConfig::new);
            let rebuilt = build.source_location != location
                || build.function_target != spec.handler
                || build.base_image != base;
            build.source_location = location.to_owned();
            build.function_target = spec.handler.clone();
            build.base_image = base;
            if rebuilt || container.image.is_empty() {
                container.image = SOURCE_PLACEHOLDER_IMAGE.to_owned();
            }
        }
        Code::Image(image) => {
            service.build_config = None;
            container.image = image.to_owned();
            container.base_image_uri.clear();
        }
    }
    if let Some(&mib) = spec.memory_mb.known() {
        if !MEMORY_RANGE_MIB.contains(&mib) {
            return Err(BackendError::invalid(format!(
                "`memoryMb` is {mib}; Cloud Run takes 128 to 32768 MiB"
            )));
        }
        let resources = container
            .resources
            .get_or_insert_with(|| ResourceRequirements::new().set_cpu_idle(true));
        resources
            .limits
            .insert("memory".to_owned(), memory_quantity(mib));
        if let Some(cpu) = cpu_for(mib, resources.limits.get("cpu").map(String::as_str)) {
            resources.limits.insert("cpu".to_owned(), cpu);
        }
    }
    if let Some(&seconds) = spec.timeout_seconds.known() {
        if !(1..=MAX_TIMEOUT_SECONDS).contains(&seconds) {
            return Err(BackendError::invalid(format!(
                "`timeoutSeconds` is {seconds}; Cloud Run takes 1 to {MAX_TIMEOUT_SECONDS}"
            )));
        }
        template.timeout = Some(google_cloud_wkt::Duration::clamp(i64::from(seconds), 0));
    }
    container.env = desired_env(spec, &container.env)?;
    let account = identity(spec.role.as_ref())?;
    // The default identity stays as Cloud Run wrote it.
    if !(account.is_empty() && is_default_identity(&template.service_account)) {
        template.service_account = account;
    }
    Ok(())
}

/// Whether two templates differ in more than their revision name.
fn template_changed(before: Option<&RevisionTemplate>, after: Option<&RevisionTemplate>) -> bool {
    let unnamed = |t: Option<&RevisionTemplate>| {
        t.cloned().map(|mut t| {
            t.revision.clear();
            t
        })
    };
    unnamed(before) != unnamed(after)
}

fn known<T>(value: Option<T>) -> Partial<T> {
    value.map_or(Partial::Unknown, Partial::Known)
}

/// What read reports of `service`, known by `handle`, callable by `access`.
fn reading(
    project: &str,
    handle: &str,
    service: &Service,
    access: Partial<Access>,
) -> Reading<Compute> {
    let template = service.template.as_ref();
    let container = template.and_then(|t| t.containers.first());
    let build = service
        .build_config
        .as_ref()
        .filter(|b| !b.source_location.is_empty());
    let (runtime, handler, code) = match build {
        Some(b) => (
            known((!b.base_image.is_empty()).then(|| runtime_of(&b.base_image))),
            known((!b.function_target.is_empty()).then(|| b.function_target.clone())),
            Partial::Known(b.source_location.clone()),
        ),
        None => (
            Partial::Unknown,
            Partial::Unknown,
            known(
                container
                    .filter(|c| !c.image.is_empty())
                    .map(|c| c.image.clone()),
            ),
        ),
    };
    let memory_mb = known(
        container
            .and_then(|c| c.resources.as_ref())
            .and_then(|r| r.limits.get("memory"))
            .and_then(|m| memory_mib(m)),
    );
    let timeout_seconds = known(
        template
            .and_then(|t| t.timeout.as_ref())
            .filter(|d| d.nanos() == 0)
            .and_then(|d| u32::try_from(d.seconds()).ok()),
    );
    let (environment, secret_environment) = match container {
        Some(c) => {
            let (plain, secret) = split_env(project, &c.env);
            (Partial::Known(plain), Partial::Known(secret))
        }
        None => (Partial::Unknown, Partial::Unknown),
    };
    let role = known(template.map(|t| {
        let email = t.service_account.as_str();
        (!email.is_empty() && !is_default_identity(email)).then(|| Handle::new(email))
    }));
    let tags = Partial::Known(labels::reported(&labels::from_map(&service.labels)));
    Reading::new(
        handle,
        ComputeObserved {
            id: service.name.clone(),
            url: known((!service.uri.is_empty()).then(|| service.uri.clone())),
            version: known(
                (!service.latest_ready_revision.is_empty())
                    .then(|| service.latest_ready_revision.clone()),
            ),
        },
        ComputeReported {
            runtime,
            handler,
            code,
            code_sha256: Partial::Unknown,
            memory_mb,
            timeout_seconds,
            environment,
            secret_environment,
            role,
            tags,
            access,
        },
    )
}

fn not_found(what: &str, handle: &str, why: &str) -> BackendError {
    BackendError::new(ErrorKind::NotFound, format!("{what}: {handle} {why}")).with_code("NOT_FOUND")
}

/// `Compute` on Google Cloud: Cloud Run services.
pub(crate) struct RunServices {
    clients: Arc<Clients>,
}

impl RunServices {
    /// The kind, reaching Google Cloud through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        RunServices { clients }
    }

    /// The parts of `handle`, which must name a service of this project in `region`:
    /// one of another region is `NotFound` here.
    fn name_in(&self, what: &str, region: &str, handle: &str) -> Result<ServiceName, BackendError> {
        let Some(name) = ServiceName::parse(handle) else {
            return Err(BackendError::invalid(format!(
                "{what}: {handle:?} is not a Cloud Run service name \
                 (projects/{{project}}/locations/{{region}}/services/{{id}})"
            )));
        };
        if name.project != self.clients.project() {
            return Err(BackendError::invalid(format!(
                "{what}: {handle} is in project {}, and this backend acts in {}",
                name.project,
                self.clients.project()
            )));
        }
        if name.region != region {
            return Err(not_found(
                what,
                handle,
                &format!("is in {}, not in {region}", name.region),
            ));
        }
        Ok(name)
    }

    async fn get(&self, name: &str) -> Result<Service, BackendError> {
        self.clients
            .run_services()
            .await?
            .get_service()
            .set_name(name)
            .send()
            .await
            .map_err(|e| classify("run:GetService", e, NOT_FOUND))
    }

    /// The service `name`, `None` when it does not exist.
    async fn find(&self, name: &str) -> Result<Option<(RawTags, Service)>, BackendError> {
        match self.get(name).await {
            Ok(service) => Ok(Some((labels::from_map(&service.labels), service))),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A read after a write: a few tries on the clock while the service is not yet
    /// visible, then the write's own answer.
    async fn read_after_write(
        &self,
        name: &str,
        answered: Service,
    ) -> Result<Service, BackendError> {
        for attempt in 0..READS_AFTER_WRITE {
            match self.get(name).await {
                Ok(service) => return Ok(service),
                Err(e) if e.kind == ErrorKind::NotFound => {
                    tracing::debug!("run:GetService after a write: not visible yet ({attempt})");
                    self.clients
                        .clock()
                        .sleep(self.clients.polling().first)
                        .await;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(answered)
    }

    /// What read reports of `service`, its access read from its IAM policy.
    async fn reading_of(
        &self,
        name: &str,
        service: &Service,
    ) -> Result<Reading<Compute>, BackendError> {
        let policy = access::get(&self.clients, name).await?;
        Ok(reading(
            self.clients.project(),
            name,
            service,
            Partial::Known(access::access_of(&policy)),
        ))
    }

    /// Sends `service` as the whole new state of the service, and awaits it.
    async fn replace(&self, service: Service) -> Result<Service, BackendError> {
        const WHAT: &str = "run:UpdateService";
        let request = self
            .clients
            .run_services()
            .await?
            .update_service()
            .set_service(service);
        self.clients
            .polled(request)
            .poller()
            .until_done()
            .await
            .map_err(|e| classify(WHAT, e, NOT_FOUND))
    }
}

#[async_trait]
impl KindBackend<Compute> for RunServices {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let parent = format!("projects/{}/locations/{region}", self.clients.project());
        let mut services = self
            .clients
            .run_services()
            .await?
            .list_services()
            .set_parent(&parent)
            .by_item();
        let mut listed = Vec::new();
        while let Some(service) = services.next().await {
            let service = service.map_err(|e| classify("run:ListServices", e, &[]))?;
            // The handle is written the way `create` answers it, whatever form of the
            // project the name carries.
            if let Some(name) = ServiceName::parse(&service.name) {
                let handle = ServiceName {
                    project: self.clients.project().to_owned(),
                    region: region.to_owned(),
                    id: name.id.clone(),
                };
                listed.push(Listed::new(name.id, handle.full()));
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Compute>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let name = self.name_in("run:GetService", region, handle)?;
        let service = self.get(&name.full()).await?;
        self.reading_of(&name.full(), &service).await
    }

    async fn create(
        &self,
        args: CreateArgs<'_, Compute>,
    ) -> Result<Written<Reading<Compute>>, BackendError> {
        const WHAT: &str = "run:CreateService";
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        check_service_id(name)?;
        let target = ServiceName {
            project: self.clients.project().to_owned(),
            region: region.to_owned(),
            id: name.to_owned(),
        };
        let mut service = Service::new();
        apply_spec(&mut service, spec, region)?;
        service.labels = labels::for_create(spec.tags.known(), marker, &[])?
            .into_iter()
            .collect::<HashMap<_, _>>();
        let full = target.full();
        let request = self
            .clients
            .run_services()
            .await?
            .create_service()
            .set_parent(target.parent())
            .set_service_id(name)
            .set_service(service);
        let done = self
            .clients
            .polled(request)
            .poller()
            .until_done()
            .await
            .map_err(|e| classify(WHAT, e, &[]));
        let created = match done {
            Ok(service) => service,
            Err(err) => poll::settle_uncertain(err, marker, WHAT, self.find(&full)).await?,
        };
        let service = self.read_after_write(&full, created).await?;
        let access = access::set(&self.clients, &full, spec.access).await?;
        Ok(Written::Done(reading(
            self.clients.project(),
            &full,
            &service,
            Partial::Known(access),
        )))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, Compute>,
    ) -> Result<Written<Reading<Compute>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let name = self.name_in("run:UpdateService", region, handle)?;
        let full = name.full();
        let current = self.get(&full).await?;
        let mut service = current.clone();
        service.name = full.clone();
        apply_spec(&mut service, spec, region)?;
        if let Some(declared) = spec.tags.known() {
            let now = labels::from_map(&current.labels);
            service.labels = labels::for_update(declared, &now)?.into_iter().collect();
        }
        if template_changed(current.template.as_ref(), service.template.as_ref())
            && let Some(template) = service.template.as_mut()
        {
            // A named revision cannot be made twice: the new one is named by Cloud Run.
            template.revision.clear();
        }
        let service = if service == current {
            current
        } else {
            let updated = self.replace(service).await?;
            self.read_after_write(&full, updated).await?
        };
        let access = access::set(&self.clients, &full, spec.access).await?;
        Ok(Written::Done(reading(
            self.clients.project(),
            &full,
            &service,
            Partial::Known(access),
        )))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        const WHAT: &str = "run:DeleteService";
        let DeleteArgs { region, handle, .. } = args;
        let name = self.name_in(WHAT, region, handle)?;
        let request = self
            .clients
            .run_services()
            .await?
            .delete_service()
            .set_name(name.full());
        self.clients
            .polled(request)
            .poller()
            .until_done()
            .await
            .map(|_| ())
            .map_err(|e| classify(WHAT, e, NOT_FOUND))
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let name = self.name_in("run:GetService", region, handle)?;
        let service = self.get(&name.full()).await?;
        Ok(labels::from_map(&service.labels))
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let name = self.name_in("run:UpdateService", region, handle)?;
        let full = name.full();
        let current = self.get(&full).await?;
        let now = labels::from_map(&current.labels);
        let what = format!("Cloud Run service {full}");
        if let Some(all) = labels::marking(&now, marker, &what)? {
            let mut service = current;
            service.name = full;
            service.labels = all.into_iter().collect();
            self.replace(service).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infra_core::prelude::Handle;

    fn spec(code: &str) -> ComputeSettled {
        ComputeSettled {
            runtime: "python312".to_owned(),
            handler: "app.handler".to_owned(),
            code: code.to_owned(),
            code_sha256: Partial::Unknown,
            memory_mb: Partial::Known(256),
            timeout_seconds: Partial::Known(30),
            environment: Partial::Known(EnvVars::from([("MODE".to_owned(), "test".to_owned())])),
            secret_environment: Partial::Known(BTreeMap::from([(
                "DB_PASSWORD".to_owned(),
                Handle::new("projects/p1/secrets/db"),
            )])),
            role: Some(Handle::new("runner@p1.iam.gserviceaccount.com")),
            tags: Partial::Known(RawTags::from([("team".to_owned(), "web".to_owned())])),
            access: Access::Private,
        }
    }

    #[test]
    fn service_ids_follow_cloud_runs_rules() {
        for good in ["a", "app-1", "ct1abc-mkr-compute", &"a".repeat(49)] {
            assert!(check_service_id(good).is_ok(), "{good}");
        }
        for bad in ["", "1app", "App", "app-", "app_1", "app.1", &"a".repeat(50)] {
            assert_eq!(
                check_service_id(bad).unwrap_err().kind,
                ErrorKind::Invalid,
                "{bad}"
            );
        }
    }

    #[test]
    fn a_handle_is_the_resource_name() {
        let name = ServiceName::parse("projects/p1/locations/europe-west1/services/app").unwrap();
        assert_eq!(name.id, "app");
        assert_eq!(name.parent(), "projects/p1/locations/europe-west1");
        assert_eq!(
            name.full(),
            "projects/p1/locations/europe-west1/services/app"
        );
        assert!(ServiceName::parse("app").is_none());
        assert!(ServiceName::parse("projects/p1/locations/europe-west1/jobs/app").is_none());
    }

    #[test]
    fn code_is_a_source_archive_or_an_image() {
        assert_eq!(
            code_of("gs://b/src/app.zip").unwrap(),
            Code::Source("gs://b/src/app.zip")
        );
        assert_eq!(
            code_of("europe-west1-docker.pkg.dev/p/r/app:1").unwrap(),
            Code::Image("europe-west1-docker.pkg.dev/p/r/app:1")
        );
        for bad in [
            "gs://b",
            "gs:///o",
            "s3://b/k",
            "https://x/app.zip",
            "",
            "a b",
        ] {
            assert_eq!(code_of(bad).unwrap_err().kind, ErrorKind::Invalid, "{bad}");
        }
    }

    #[test]
    fn runtimes_round_trip_through_the_base_image() {
        let base = base_image("europe-west1", "python312").unwrap();
        assert_eq!(
            base,
            "europe-west1-docker.pkg.dev/serverless-runtimes/google-22-full/runtimes/python312"
        );
        assert_eq!(runtime_of(&base), "python312");
        let other = base_image("us-central1", "google-24/nodejs24").unwrap();
        assert_eq!(
            other,
            "us-central1-docker.pkg.dev/serverless-runtimes/google-24/runtimes/nodejs24"
        );
        assert_eq!(runtime_of(&other), "google-24/nodejs24");
        assert_eq!(runtime_of("gcr.io/p/custom-base"), "gcr.io/p/custom-base");
        for bad in ["python3.12", "Python312", "", "google-24/", "a/b/c"] {
            assert_eq!(
                base_image("europe-west1", bad).unwrap_err().kind,
                ErrorKind::Invalid,
                "{bad}"
            );
        }
    }

    #[test]
    fn memory_and_cpu_are_cloud_run_quantities() {
        assert_eq!(memory_quantity(256), "256Mi");
        assert_eq!(memory_mib("256Mi"), Some(256));
        assert_eq!(memory_mib("2Gi"), Some(2048));
        assert_eq!(memory_mib("536870912"), Some(512));
        assert_eq!(memory_mib("512M"), None, "not a whole number of MiB");
        assert_eq!(memory_mib("lots"), None);
        assert_eq!(cpu_millis("1"), Some(1000));
        assert_eq!(cpu_millis("1000m"), Some(1000));
        assert_eq!(cpu_millis("0.5"), Some(500));
        assert_eq!(cpu_millis("x"), None);
        // The default CPU fits up to 4 GiB; more memory needs more CPUs, and fewer
        // CPUs than a large memory needs are raised, never lowered without need.
        assert_eq!(cpu_for(128, None), None);
        assert_eq!(cpu_for(4096, None), None);
        assert_eq!(cpu_for(6144, None), Some("2".to_owned()));
        assert_eq!(cpu_for(10240, Some("2")), Some("4".to_owned()));
        assert_eq!(cpu_for(10240, Some("4")), None);
        assert_eq!(cpu_for(1024, Some("500m")), Some("1".to_owned()));
        assert_eq!(cpu_for(1024, Some("4")), Some("1".to_owned()));
        assert_eq!(cpu_for(256, Some("0.5")), None);
    }

    #[test]
    fn a_spec_becomes_a_service_and_reads_back_the_same() {
        let mut service =
            Service::new().set_name("projects/p1/locations/europe-west1/services/app");
        apply_spec(&mut service, &spec("gs://code/app.zip"), "europe-west1").unwrap();
        let build = service.build_config.as_ref().unwrap();
        assert_eq!(build.source_location, "gs://code/app.zip");
        assert_eq!(build.function_target, "app.handler");
        assert!(build.base_image.ends_with("/runtimes/python312"));
        let template = service.template.as_ref().unwrap();
        assert_eq!(
            template.service_account,
            "runner@p1.iam.gserviceaccount.com"
        );
        assert_eq!(template.timeout.as_ref().unwrap().seconds(), 30);
        let container = &template.containers[0];
        assert_eq!(container.image, SOURCE_PLACEHOLDER_IMAGE);
        let resources = container.resources.as_ref().unwrap();
        assert_eq!(resources.limits["memory"], "256Mi");
        assert!(
            resources.cpu_idle,
            "a new resources block keeps CPU allocated per request"
        );
        assert_eq!(container.env.len(), 2);
        let secret = secret_ref(&container.env[1]).unwrap();
        assert_eq!(
            (secret.secret.as_str(), secret.version.as_str()),
            ("projects/p1/secrets/db", "latest")
        );
        service.labels = HashMap::from([("team".to_owned(), "web".to_owned())]);

        let read = reading(
            "p1",
            "projects/p1/locations/europe-west1/services/app",
            &service,
            Partial::Known(Access::Private),
        );
        let reported = read.reported();
        assert_eq!(reported["runtime"], "python312");
        assert_eq!(reported["handler"], "app.handler");
        assert_eq!(reported["code"], "gs://code/app.zip");
        assert_eq!(reported["memoryMb"], 256);
        assert_eq!(reported["timeoutSeconds"], 30);
        assert_eq!(reported["environment"]["MODE"], "test");
        assert_eq!(
            reported["secretEnvironment"]["DB_PASSWORD"],
            "projects/p1/secrets/db"
        );
        assert_eq!(reported["role"], "runner@p1.iam.gserviceaccount.com");
        assert_eq!(reported["tags"]["team"], "web");
        assert!(
            !reported.contains_key("codeSha256"),
            "Cloud Run says no digest"
        );
    }

    #[test]
    fn an_image_carries_no_runtime_or_handler_and_an_unchanged_build_is_kept() {
        let mut service = Service::new();
        apply_spec(&mut service, &spec("gs://code/app.zip"), "europe-west1").unwrap();
        // The build replaced the placeholder: an update that changes no build input
        // keeps the built image.
        service.template.as_mut().unwrap().containers[0].image = "built@sha256:1".to_owned();
        let mut again = service.clone();
        apply_spec(&mut again, &spec("gs://code/app.zip"), "europe-west1").unwrap();
        assert_eq!(again, service);
        let mut moved = service.clone();
        apply_spec(&mut moved, &spec("gs://code/app-2.zip"), "europe-west1").unwrap();
        assert_eq!(
            moved.template.as_ref().unwrap().containers[0].image,
            SOURCE_PLACEHOLDER_IMAGE
        );

        let mut image = service.clone();
        apply_spec(
            &mut image,
            &spec("europe-west1-docker.pkg.dev/p1/r/app:1"),
            "europe-west1",
        )
        .unwrap();
        assert!(image.build_config.is_none());
        let read = reading(
            "p1",
            "projects/p1/locations/europe-west1/services/app",
            &image,
            Partial::Known(Access::Private),
        );
        let reported = read.reported();
        assert_eq!(reported["code"], "europe-west1-docker.pkg.dev/p1/r/app:1");
        assert!(!reported.contains_key("runtime") && !reported.contains_key("handler"));
    }

    #[test]
    fn what_the_spec_leaves_unsaid_is_kept() {
        let mut service = Service::new();
        apply_spec(&mut service, &spec("gs://code/app.zip"), "europe-west1").unwrap();
        let mut quiet = spec("gs://code/app.zip");
        quiet.memory_mb = Partial::Unknown;
        quiet.timeout_seconds = Partial::Unknown;
        quiet.environment = Partial::Unknown;
        quiet.secret_environment = Partial::Unknown;
        let mut again = service.clone();
        apply_spec(&mut again, &quiet, "europe-west1").unwrap();
        assert_eq!(again, service);
    }

    #[test]
    fn refusals_come_before_any_call() {
        let mut both = spec("gs://code/app.zip");
        both.environment =
            Partial::Known(EnvVars::from([("DB_PASSWORD".to_owned(), "x".to_owned())]));
        let mut reserved = spec("gs://code/app.zip");
        reserved.environment = Partial::Known(EnvVars::from([("PORT".to_owned(), "1".to_owned())]));
        let mut long = spec("gs://code/app.zip");
        long.timeout_seconds = Partial::Known(3601);
        let mut role = spec("gs://code/app.zip");
        role.role = Some(Handle::new("runner"));
        let mut version = spec("gs://code/app.zip");
        version.secret_environment = Partial::Known(BTreeMap::from([(
            "DB".to_owned(),
            Handle::new("projects/p1/secrets/db/versions/1"),
        )]));
        for bad in [both, reserved, long, role, version] {
            let err = apply_spec(&mut Service::new(), &bad, "europe-west1").unwrap_err();
            assert_eq!(err.kind, ErrorKind::Invalid, "{}", err.message);
        }
    }

    #[test]
    fn the_default_identity_is_no_role_and_a_bare_secret_id_is_a_handle() {
        assert!(is_default_identity(
            "123456789012-compute@developer.gserviceaccount.com"
        ));
        assert!(!is_default_identity("runner@p1.iam.gserviceaccount.com"));
        let mut service = Service::new();
        let mut template = RevisionTemplate::default();
        template.service_account = "123456789012-compute@developer.gserviceaccount.com".to_owned();
        template.containers.push(
            Container::new().set_env([EnvVar::new().set_name("KEY").set_value_source(
                EnvVarSource::new()
                    .set_secret_key_ref(SecretKeySelector::new().set_secret("api-key")),
            )]),
        );
        service.template = Some(template);
        let read = reading(
            "p1",
            "projects/p1/locations/europe-west1/services/app",
            &service,
            Partial::Known(Access::Private),
        );
        let reported = read.reported();
        assert_eq!(reported["role"], serde_json::Value::Null);
        assert_eq!(
            reported["secretEnvironment"]["KEY"],
            "projects/p1/secrets/api-key"
        );
        // Updating to "no role" leaves the default identity as Cloud Run wrote it.
        let mut none = spec("gs://code/app.zip");
        none.role = None;
        apply_spec(&mut service, &none, "europe-west1").unwrap();
        assert_eq!(
            service.template.as_ref().unwrap().service_account,
            "123456789012-compute@developer.gserviceaccount.com"
        );
    }
}
