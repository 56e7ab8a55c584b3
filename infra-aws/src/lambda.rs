//! Lambda: the `compute` kind, as a function whose code is a zip archive in S3.
//!
//! The handle and the name are the function's name. `code` is an `s3://bucket/key` URL
//! (anything else is refused as `Invalid`); `role` is the handle of an IAM role (its
//! name), made into the role's ARN with the account STS names. Lambda has no default
//! role, so a function without one is refused as `Invalid`.
//!
//! `secretEnvironment` puts each secret's handle (its ARN) in the environment, under
//! the variable's name: the function reads the value at run time, and this module never
//! fetches it. Which variables hold secrets is recorded in the tag
//! [`SECRET_ENV_TAG`] (the names, separated by `:`), so that a read can tell the two
//! maps apart; that tag is bookkeeping, kept out of the reported `tags`.
//!
//! What read reports when Lambda does not say:
//! - `runtime`, `handler`: absent for an image-based function: `Unknown`.
//! - `code`: `Unknown`, always. Lambda keeps the code it was given but not the bucket
//!   and key it was fetched from. A change of `code` is still seen: for a field the
//!   cloud does not report, the engine compares the declaration with what this fleet
//!   last wrote there (kept in the observation cache), so a new location is an update,
//!   and every update deploys the declared archive again. Without that record (the
//!   cache deleted, a function first written by another tool), a change of `code` alone
//!   is not seen until another change updates the function.
//! - `codeSha256`: the digest of the code as deployed, Lambda's `CodeSha256` (base64
//!   SHA-256 of the archive); `Unknown` if Lambda leaves it out or answers it empty.
//!   This is how a new archive uploaded over an unchanged `s3://bucket/key` is noticed:
//!   declare the new archive's digest ([`infra_core::kinds::code_digest`]), it differs
//!   from the deployed one, and the update redeploys from the location. Left unsaid,
//!   the digest is reported but never compared.
//! - `memoryMb`, `timeoutSeconds`: Lambda always answers; absent is `Unknown`.
//! - `environment`: no environment is the truth, an empty map; an environment Lambda
//!   could not decrypt is `Unknown`. The secret variables are left out of it.
//! - `secretEnvironment`: the variables the bookkeeping tag names, with their ARNs; no
//!   tag is the truth, an empty map.
//! - `role`: the role's name, from its ARN.
//! - `tags`: `GetFunction`'s tags (none is the truth, an empty map); when Lambda could
//!   not read them (`TagsError`), `Unknown`. The marker is included; the engine strips
//!   it.
//!
//! - `access`: `Unknown`, never compared. A function is called through IAM alone: this
//!   module makes no function URL and reads none, and a function declared
//!   [`Access::Public`] is refused as `Invalid` before any call.
//!
//! The marker is part of `CreateFunction` itself (its `Tags`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_lambda::client::Waiters as _;
use aws_sdk_lambda::operation::get_function::GetFunctionOutput;
use aws_sdk_lambda::types::{Environment, FunctionCode, FunctionConfiguration, Runtime};
use aws_smithy_runtime_api::client::waiters::error::WaiterError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use infra_core::kinds::{
    Access, Compute, ComputeObserved, ComputeReported, ComputeSettled, EnvVars,
};
use infra_core::sdk::{
    CreateArgs, DeleteArgs, KindBackend, ListArgs, MarkArgs, OwnershipArgs, ReadArgs, Reading,
    UpdateArgs, Written,
};
use infra_core::{
    prelude::{Handle, Partial},
    sdk::{BackendError, ErrorKind, Listed, RawTags},
};

use crate::clients::{Clients, RegionClients};
use crate::error::classify;
use crate::tag_index::{self, Indexed};
use crate::tags::{TagChanges, keep_marker, marking, tag_changes, with_marker};

/// Codes that mean the function does not exist.
const NO_FUNCTION: &[&str] = &["ResourceNotFoundException"];
/// The tag naming the environment variables that hold secrets' ARNs.
pub(crate) const SECRET_ENV_TAG: &str = "infra-secret-env";
/// The separator of the names in [`SECRET_ENV_TAG`] (tag values may not hold commas;
/// variable names never hold a colon).
const SECRET_ENV_SEPARATOR: char = ':';
/// The longest a create or an update waits for the function to be ready.
const MAX_WAIT: Duration = Duration::from_secs(10 * 60);

/// Refuses a function declared public: this module makes no function URL.
fn private_only(access: Access) -> Result<(), BackendError> {
    match access {
        Access::Private => Ok(()),
        Access::Public => Err(BackendError::invalid(
            "`access` is public, but infra-aws makes no Lambda function URL: a function is \
             called through IAM alone (declare it private)",
        )),
    }
}

/// An `s3://bucket/key` URL as its bucket and key.
fn s3_location(code: &str) -> Result<(&str, &str), BackendError> {
    code.strip_prefix("s3://")
        .and_then(|rest| rest.split_once('/'))
        .filter(|(bucket, key)| !bucket.is_empty() && !key.is_empty())
        .ok_or_else(|| {
            BackendError::invalid(format!(
                "`code` is {code:?}; Lambda takes a zip archive in S3, written `s3://bucket/key`"
            ))
        })
}

/// The ARN of the IAM role named `name`, in the caller's account and partition.
async fn role_arn(
    c: &RegionClients,
    role: Option<&Handle<infra_core::kinds::Iam>>,
) -> Result<String, BackendError> {
    let Some(role) = role else {
        return Err(BackendError::invalid(
            "`role` is none, and Lambda has no default role: a function must name the IAM \
             role it runs as",
        ));
    };
    let identity = c
        .sts()
        .get_caller_identity()
        .send()
        .await
        .map_err(|e| classify("sts:GetCallerIdentity", e, &[]))?;
    let account = identity.account().ok_or_else(|| {
        BackendError::new(ErrorKind::Other, "sts:GetCallerIdentity named no account")
    })?;
    let partition = identity
        .arn()
        .and_then(|arn| arn.split(':').nth(1))
        .filter(|p| !p.is_empty())
        .unwrap_or("aws");
    Ok(format!(
        "arn:{partition}:iam::{account}:role/{}",
        role.as_str()
    ))
}

/// The role's name from its ARN (`arn:aws:iam::1:role/path/name` names `name`).
fn role_name(arn: &str) -> Option<&str> {
    let (_, resource) = arn.split_once(":role/")?;
    resource.rsplit('/').next().filter(|n| !n.is_empty())
}

fn secret_names(tags: &RawTags) -> Vec<String> {
    tags.get(SECRET_ENV_TAG)
        .map(|v| {
            v.split(SECRET_ENV_SEPARATOR)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The whole environment: the plain variables and the secrets' ARNs.
fn environment(
    plain: &EnvVars,
    secret: &BTreeMap<String, String>,
) -> Result<Environment, BackendError> {
    if let Some(both) = plain.keys().find(|k| secret.contains_key(*k)) {
        return Err(BackendError::invalid(format!(
            "the variable {both} is in both `environment` and `secretEnvironment`"
        )));
    }
    let variables: HashMap<String, String> = plain
        .iter()
        .chain(secret.iter())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(Environment::builder()
        .set_variables(Some(variables))
        .build())
}

/// The bookkeeping tag's value for these secret variables, or `None` when there are none.
fn secret_tag(secret: &BTreeMap<String, String>) -> Option<String> {
    (!secret.is_empty()).then(|| {
        secret
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(&SECRET_ENV_SEPARATOR.to_string())
    })
}

fn i32_of(value: u32, field: &str) -> Result<i32, BackendError> {
    i32::try_from(value)
        .map_err(|_| BackendError::invalid(format!("`{field}` is {value}, too large for Lambda")))
}

/// A function as `GetFunction` describes it.
struct Function {
    config: FunctionConfiguration,
    /// `None` when Lambda could not read them.
    tags: Option<RawTags>,
}

impl Function {
    fn arn(&self) -> Result<&str, BackendError> {
        self.config.function_arn().ok_or_else(|| {
            BackendError::new(ErrorKind::Other, "lambda:GetFunction named no function ARN")
        })
    }

    /// Every variable, secret or not; `None` when Lambda could not decrypt them.
    fn variables(&self) -> Option<BTreeMap<String, String>> {
        match self.config.environment() {
            None => Some(BTreeMap::new()),
            Some(env) if env.error().is_some() => None,
            Some(env) => Some(
                env.variables()
                    .map(|v| v.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    .unwrap_or_default(),
            ),
        }
    }

    /// The plain variables and the secret ones, apart.
    fn split_environment(&self) -> Option<(EnvVars, BTreeMap<String, String>)> {
        let mut plain = self.variables()?;
        let names = secret_names(self.tags.as_ref()?);
        let secret = names.iter().filter_map(|n| plain.remove_entry(n)).collect();
        Some((plain, secret))
    }
}

fn function_of(out: GetFunctionOutput) -> Result<Function, BackendError> {
    let tags = if out.tags_error().is_some() {
        None
    } else {
        Some(
            out.tags()
                .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
        )
    };
    let config = out.configuration.ok_or_else(|| {
        BackendError::new(
            ErrorKind::Other,
            "lambda:GetFunction answered no configuration",
        )
    })?;
    Ok(Function { config, tags })
}

async fn get(c: &RegionClients, name: &str) -> Result<Function, BackendError> {
    let out = c
        .lambda()
        .get_function()
        .function_name(name)
        .send()
        .await
        .map_err(|e| classify("lambda:GetFunction", e, NO_FUNCTION))?;
    function_of(out)
}

/// The function's raw tags, asking `ListTags` when `GetFunction` could not read them.
async fn raw_tags(c: &RegionClients, f: &Function) -> Result<RawTags, BackendError> {
    if let Some(tags) = &f.tags {
        return Ok(tags.clone());
    }
    let out = c
        .lambda()
        .list_tags()
        .resource(f.arn()?)
        .send()
        .await
        .map_err(|e| classify("lambda:ListTags", e, NO_FUNCTION))?;
    Ok(out
        .tags()
        .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default())
}

async fn url(c: &RegionClients, name: &str) -> Result<Partial<String>, BackendError> {
    match c
        .lambda()
        .get_function_url_config()
        .function_name(name)
        .send()
        .await
    {
        Ok(out) => Ok(Partial::Known(out.function_url().to_owned())),
        Err(e) => match classify("lambda:GetFunctionUrlConfig", e, NO_FUNCTION) {
            // No URL configured (or the function vanished since): nothing to report.
            e if e.kind == ErrorKind::NotFound => Ok(Partial::Unknown),
            e => Err(e),
        },
    }
}

fn known<T>(value: Option<T>) -> Partial<T> {
    value.map_or(Partial::Unknown, Partial::Known)
}

async fn reading(
    c: &RegionClients,
    name: &str,
    f: &Function,
) -> Result<Reading<Compute>, BackendError> {
    let config = &f.config;
    let (environment, secret_environment) = match f.split_environment() {
        Some((plain, secret)) => (
            Partial::Known(plain),
            Partial::Known(
                secret
                    .into_iter()
                    .map(|(k, v)| (k, Handle::new(v)))
                    .collect(),
            ),
        ),
        None => (Partial::Unknown, Partial::Unknown),
    };
    let tags = known(f.tags.clone().map(|mut t| {
        t.remove(SECRET_ENV_TAG);
        t
    }));
    Ok(Reading::new(
        name,
        ComputeObserved {
            id: f.arn()?.to_owned(),
            url: url(c, name).await?,
            version: known(config.version().map(str::to_owned)),
        },
        ComputeReported {
            runtime: known(config.runtime().map(|r| r.as_str().to_owned())),
            handler: known(config.handler().map(str::to_owned)),
            // Lambda does not report where the code came from, only what it is.
            code: Partial::Unknown,
            // An empty digest names no code (moto answers one when it could not fetch
            // the archive): unknown, not a value to compare.
            code_sha256: known(
                config
                    .code_sha256()
                    .filter(|d| !d.is_empty())
                    .map(str::to_owned),
            ),
            memory_mb: known(config.memory_size().and_then(|m| u32::try_from(m).ok())),
            timeout_seconds: known(config.timeout().and_then(|t| u32::try_from(t).ok())),
            environment,
            secret_environment,
            role: known(
                config
                    .role()
                    .and_then(role_name)
                    .map(|n| Some(Handle::new(n))),
            ),
            tags,
            // Not read (see the module documentation): never compared.
            access: Partial::Unknown,
        },
    ))
}

/// A waiter's failure as a [`BackendError`].
fn waited<O, E>(what: &str, err: WaiterError<O, E>) -> BackendError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match err {
        WaiterError::OperationFailed(failed) => classify(what, failed.into_error(), NO_FUNCTION),
        WaiterError::ExceededMaxWait(_) => BackendError::new(
            ErrorKind::Unavailable,
            format!(
                "{what}: the function is not ready after {} minutes",
                MAX_WAIT.as_secs() / 60
            ),
        ),
        WaiterError::FailureState(_) => BackendError::new(
            ErrorKind::Other,
            format!("{what}: the function ended in a failed state (see its StateReason)"),
        ),
        // The waiter could not be built (or a failure this SDK version adds).
        _ => BackendError::new(ErrorKind::Other, format!("{what}: the wait could not run")),
    }
}

async fn wait_updated(c: &RegionClients, name: &str) -> Result<(), BackendError> {
    c.lambda()
        .wait_until_function_updated_v2()
        .function_name(name)
        .wait(MAX_WAIT)
        .await
        .map_err(|e| waited("lambda:GetFunction (waiting for the update)", e))?;
    Ok(())
}

/// The secrets' handles by variable name.
fn secret_arns(spec: &ComputeSettled) -> Option<BTreeMap<String, String>> {
    spec.secret_environment.known().map(|m| {
        m.iter()
            .map(|(k, h)| (k.clone(), h.as_str().to_owned()))
            .collect()
    })
}

/// Brings the function's tags to `target`.
async fn set_tags(
    c: &RegionClients,
    arn: &str,
    target: &RawTags,
    current: &RawTags,
) -> Result<(), BackendError> {
    let TagChanges {
        remove: stale,
        write,
    } = tag_changes(current, target, &[]);
    if !stale.is_empty() {
        c.lambda()
            .untag_resource()
            .resource(arn)
            .set_tag_keys(Some(stale))
            .send()
            .await
            .map_err(|e| classify("lambda:UntagResource", e, NO_FUNCTION))?;
    }
    let changed: HashMap<String, String> = write.into_iter().collect();
    if !changed.is_empty() {
        c.lambda()
            .tag_resource()
            .resource(arn)
            .set_tags(Some(changed))
            .send()
            .await
            .map_err(|e| classify("lambda:TagResource", e, NO_FUNCTION))?;
    }
    Ok(())
}

/// `compute`, realised as a Lambda function.
pub(crate) struct LambdaFunctions {
    clients: Arc<Clients>,
}

impl LambdaFunctions {
    /// The kind, reaching AWS through `clients` (one set per region, made on first use).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        LambdaFunctions { clients }
    }
}

#[async_trait]
impl KindBackend<Compute> for LambdaFunctions {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let c = &self.clients.region(region);
        let functions = c
            .lambda()
            .list_functions()
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| classify("lambda:ListFunctions", e, &[]))?;
        let listed = functions
            .iter()
            .filter_map(|f| f.function_name())
            .map(|name| Listed::new(name.to_owned(), name.to_owned()))
            .collect();
        // ListFunctions carries no tags: the marker is learnt from the tag index.
        Ok(tag_index::with_tags(&self.clients, c, Indexed::Function, listed).await)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Compute>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        let f = get(c, handle).await?;
        reading(c, handle, &f).await
    }

    async fn create(
        &self,
        args: CreateArgs<'_, Compute>,
    ) -> Result<Written<Reading<Compute>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        private_only(spec.access)?;
        let c = &self.clients.region(region);
        let (bucket, key) = s3_location(&spec.code)?;
        let role = role_arn(c, spec.role.as_ref()).await?;
        let secret = secret_arns(spec).unwrap_or_default();
        let plain = spec.environment.known().cloned().unwrap_or_default();
        let env = environment(&plain, &secret)?;
        let mut tags = with_marker(spec.tags.known(), marker);
        if let Some(names) = secret_tag(&secret) {
            tags.insert(SECRET_ENV_TAG.to_owned(), names);
        }
        let memory = spec
            .memory_mb
            .known()
            .map(|&m| i32_of(m, "memoryMb"))
            .transpose()?;
        let timeout = spec
            .timeout_seconds
            .known()
            .map(|&t| i32_of(t, "timeoutSeconds"))
            .transpose()?;
        c.lambda()
            .create_function()
            .function_name(name)
            .runtime(Runtime::from(spec.runtime.as_str()))
            .handler(&spec.handler)
            .role(role)
            .code(
                FunctionCode::builder()
                    .s3_bucket(bucket)
                    .s3_key(key)
                    .build(),
            )
            .set_memory_size(memory)
            .set_timeout(timeout)
            .environment(env)
            .set_tags(Some(tags.into_iter().collect()))
            .send()
            .await
            .map_err(|e| classify("lambda:CreateFunction", e, &[]))?;
        c.lambda()
            .wait_until_function_active_v2()
            .function_name(name)
            .wait(MAX_WAIT)
            .await
            .map_err(|e| waited("lambda:GetFunction (waiting for the new function)", e))?;
        let read = self.read(ReadArgs::new(region, name)).await?;
        Ok(Written::Done(read))
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
        private_only(spec.access)?;
        let c = &self.clients.region(region);
        let (bucket, key) = s3_location(&spec.code)?;
        let role = role_arn(c, spec.role.as_ref()).await?;
        let current = get(c, handle).await?;
        let current_tags = raw_tags(c, &current).await?;
        // A map left unsaid keeps what the function has.
        let (plain_now, secret_now) = match current.split_environment() {
            Some(split) => split,
            None => {
                let mut plain = current.variables().unwrap_or_default();
                let secret = secret_names(&current_tags)
                    .iter()
                    .filter_map(|n| plain.remove_entry(n))
                    .collect();
                (plain, secret)
            }
        };
        let plain = spec.environment.known().cloned().unwrap_or(plain_now);
        let secret = secret_arns(spec).unwrap_or(secret_now);
        let env = environment(&plain, &secret)?;
        let memory = spec
            .memory_mb
            .known()
            .map(|&m| i32_of(m, "memoryMb"))
            .transpose()?;
        let timeout = spec
            .timeout_seconds
            .known()
            .map(|&t| i32_of(t, "timeoutSeconds"))
            .transpose()?;
        c.lambda()
            .update_function_configuration()
            .function_name(handle)
            .runtime(Runtime::from(spec.runtime.as_str()))
            .handler(&spec.handler)
            .role(role)
            .set_memory_size(memory)
            .set_timeout(timeout)
            .environment(env)
            .send()
            .await
            .map_err(|e| classify("lambda:UpdateFunctionConfiguration", e, NO_FUNCTION))?;
        wait_updated(c, handle).await?;
        // Lambda does not say where the deployed code came from: the declared archive is
        // deployed again (the same archive leaves the same code). A `code` that differs
        // from the one this fleet last wrote, or a declared `codeSha256` that differs from
        // the deployed code's, brings the update here, and this call fetches the archive
        // now under the location.
        c.lambda()
            .update_function_code()
            .function_name(handle)
            .s3_bucket(bucket)
            .s3_key(key)
            .send()
            .await
            .map_err(|e| classify("lambda:UpdateFunctionCode", e, NO_FUNCTION))?;
        wait_updated(c, handle).await?;
        let mut target = match spec.tags.known() {
            Some(declared) => keep_marker(Some(declared), &current_tags),
            None => current_tags.clone(),
        };
        match secret_tag(&secret) {
            Some(names) => target.insert(SECRET_ENV_TAG.to_owned(), names),
            None => target.remove(SECRET_ENV_TAG),
        };
        set_tags(c, current.arn()?, &target, &current_tags).await?;
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        c.lambda()
            .delete_function()
            .function_name(handle)
            .send()
            .await
            .map_err(|e| classify("lambda:DeleteFunction", e, NO_FUNCTION))?;
        Ok(())
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        let f = get(c, handle).await?;
        raw_tags(c, &f).await
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        let f = get(c, handle).await?;
        let current = raw_tags(c, &f).await?;
        if let Some(pair) = marking(&current, marker, &format!("function {handle}"))? {
            // TagResource adds to the function's tags; the others stay as they are.
            c.lambda()
                .tag_resource()
                .resource(f.arn()?)
                .set_tags(Some(pair.into_iter().collect()))
                .send()
                .await
                .map_err(|e| classify("lambda:TagResource", e, NO_FUNCTION))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_an_s3_url() {
        assert_eq!(s3_location("s3://b/k/app.zip").unwrap(), ("b", "k/app.zip"));
        for bad in [
            "https://example.invalid/app.zip",
            "s3://b",
            "s3:///k",
            "s3://b/",
        ] {
            assert_eq!(
                s3_location(bad).unwrap_err().kind,
                ErrorKind::Invalid,
                "{bad}"
            );
        }
    }

    #[test]
    fn the_role_is_named_from_its_arn() {
        assert_eq!(role_name("arn:aws:iam::1:role/app"), Some("app"));
        assert_eq!(
            role_name("arn:aws:iam::1:role/service-role/app"),
            Some("app")
        );
        assert_eq!(role_name("arn:aws:iam::1:user/app"), None);
    }

    #[test]
    fn secret_names_round_trip_through_the_tag() {
        let secret = BTreeMap::from([
            ("DB".to_owned(), "arn:a".to_owned()),
            ("API_KEY".to_owned(), "arn:b".to_owned()),
        ]);
        let tags = RawTags::from([(SECRET_ENV_TAG.to_owned(), secret_tag(&secret).unwrap())]);
        assert_eq!(
            secret_names(&tags),
            vec!["API_KEY".to_owned(), "DB".to_owned()]
        );
        assert_eq!(secret_tag(&BTreeMap::new()), None);
    }
}
