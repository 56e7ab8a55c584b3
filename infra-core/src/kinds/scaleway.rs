//! Kinds only Scaleway realises.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

#[cfg(any(test, feature = "testing"))]
use infra_derive::Sample;
use infra_derive::Spec;

use super::{Access, EnvVars, S3Bucket, Secrets, check_range};
use crate::{Expr, Key, Partial};

/// A namespace grouping Scaleway serverless functions.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "functionNamespace", observed = NamespaceObserved)]
pub struct FunctionNamespace {
    /// A human description.
    pub description: Partial<Expr<String>>,
    /// Environment variables every function of the namespace sees.
    pub environment: Partial<Expr<EnvVars>>,
    /// Secret environment variables, by reference to this fleet's secrets.
    pub secret_environment: Partial<BTreeMap<String, Key<Secrets>>>,
    /// Tags (Scaleway tags are plain strings). A set.
    pub tags: Partial<Expr<BTreeSet<String>>>,
}

/// What Scaleway reports about a function or container namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamespaceObserved {
    /// The namespace's id.
    pub id: String,
    /// The registry endpoint the namespace's images live in.
    pub registry_endpoint: Partial<String>,
}

/// A Scaleway serverless function.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "function", observed = ServerlessObserved, check = Function::check_fields)]
pub struct Function {
    /// The namespace. A function cannot move to another namespace.
    #[spec(replace)]
    pub namespace: Key<FunctionNamespace>,
    /// The runtime (`python311`, `node22`).
    pub runtime: Expr<String>,
    /// The entry point (`handler.handle`).
    pub handler: Expr<String>,
    /// Memory in MiB (128 to 4096).
    pub memory_mb: Partial<Expr<u32>>,
    /// Fewest instances kept running (0 to 50).
    pub min_scale: Partial<Expr<u32>>,
    /// Most instances (1 to 50).
    pub max_scale: Partial<Expr<u32>>,
    /// Longest run in seconds (1 to 900).
    pub timeout_seconds: Partial<Expr<u32>>,
    /// An S3 bucket (on AWS) the code is fetched from. Unsaid: not decided;
    /// `None`: said, there is none.
    pub source_bucket: Partial<Option<Key<S3Bucket>>>,
    /// The code archive to deploy: a zip file on the machine that applies
    /// (`dist/api.zip`), uploaded through the function's upload URL and deployed. Clouds
    /// do not say where deployed code came from, so a new archive is deployed when this
    /// location changes; replacing the file behind an unchanged location is not seen.
    /// Unsaid: the function's code is left as it is.
    pub code: Partial<Expr<String>>,
    /// Environment variables.
    pub environment: Partial<Expr<EnvVars>>,
    /// Who may call it over HTTP (Scaleway's `privacy`): [`Access::Private`] unless the
    /// fleet says otherwise.
    pub access: Expr<Access>,
}

impl Function {
    fn check_fields(&self, problems: &mut Vec<String>) {
        check_range(problems, "memoryMb", &self.memory_mb, 128..=4096);
        check_range(problems, "minScale", &self.min_scale, 0..=50);
        check_range(problems, "maxScale", &self.max_scale, 1..=50);
        check_range(problems, "timeoutSeconds", &self.timeout_seconds, 1..=900);
        check_scale(problems, &self.min_scale, &self.max_scale);
        if let Some(code) = self.code.known().and_then(|e| e.as_lit())
            && code.trim().is_empty()
        {
            problems.push("`code` is empty: name the archive to deploy, or leave it unsaid".into());
        }
    }
}

fn check_scale(problems: &mut Vec<String>, min: &Partial<Expr<u32>>, max: &Partial<Expr<u32>>) {
    if let (Some(min), Some(max)) = (
        min.known().and_then(|e| e.as_lit()),
        max.known().and_then(|e| e.as_lit()),
    ) && min > max
    {
        problems.push(format!("`minScale` ({min}) exceeds `maxScale` ({max})"));
    }
}

/// What Scaleway reports about a function or a container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerlessObserved {
    /// Its id.
    pub id: String,
    /// The domain it answers on.
    pub domain_name: Partial<String>,
}

/// A namespace grouping Scaleway serverless containers.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "containerNamespace", observed = NamespaceObserved)]
pub struct ContainerNamespace {
    /// A human description.
    pub description: Partial<Expr<String>>,
    /// Environment variables every container of the namespace sees.
    pub environment: Partial<Expr<EnvVars>>,
    /// Secret environment variables, by reference to this fleet's secrets.
    pub secret_environment: Partial<BTreeMap<String, Key<Secrets>>>,
    /// Tags (plain strings). A set.
    pub tags: Partial<Expr<BTreeSet<String>>>,
}

/// A Scaleway serverless container.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "container", observed = ServerlessObserved, check = Container::check_fields)]
pub struct Container {
    /// The namespace. A container cannot move to another namespace.
    #[spec(replace)]
    pub namespace: Key<ContainerNamespace>,
    /// The image to run (`rg.fr-par.scw.cloud/ns/app:1.4`).
    pub image: Expr<String>,
    /// The port the container listens on.
    pub port: Partial<Expr<u16>>,
    /// CPU limit in thousandths of a vCPU (70 to 4000).
    pub cpu_limit: Partial<Expr<u32>>,
    /// Memory limit in MiB (128 to 4096).
    pub memory_limit_mb: Partial<Expr<u32>>,
    /// Fewest instances kept running (0 to 50).
    pub min_scale: Partial<Expr<u32>>,
    /// Most instances (1 to 50).
    pub max_scale: Partial<Expr<u32>>,
    /// Longest a request may run, in seconds (1 to 900).
    pub timeout_seconds: Partial<Expr<u32>>,
    /// Environment variables.
    pub environment: Partial<Expr<EnvVars>>,
    /// Secret environment variables, by reference to this fleet's secrets.
    pub secret_environment: Partial<BTreeMap<String, Key<Secrets>>>,
    /// Who may call it over HTTP (Scaleway's `privacy`): [`Access::Private`] unless the
    /// fleet says otherwise.
    pub access: Expr<Access>,
}

impl Container {
    fn check_fields(&self, problems: &mut Vec<String>) {
        check_range(problems, "cpuLimit", &self.cpu_limit, 70..=4000);
        check_range(problems, "memoryLimitMb", &self.memory_limit_mb, 128..=4096);
        check_range(problems, "minScale", &self.min_scale, 0..=50);
        check_range(problems, "maxScale", &self.max_scale, 1..=50);
        check_range(problems, "timeoutSeconds", &self.timeout_seconds, 1..=900);
        check_scale(problems, &self.min_scale, &self.max_scale);
    }
}
