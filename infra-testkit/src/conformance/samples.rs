//! Samples of the fourteen built-in kinds, for every provider that realises each.
//!
//! Every sample says as many fields as its kind has, so that a field a backend reads
//! back wrongly (a sentinel where the cloud said nothing) shows up as drift. The values
//! are well-formed for the kind's checks; a real cloud may need values of its own
//! (existing code artifacts for `compute`, an instance class it sells for
//! `postgres`): a provider author then writes its own sample for that kind with
//! [`KindSample::new`] and passes it instead.

use std::collections::BTreeSet;

use infra_core::kinds::*;
use infra_core::prelude::{Aws, Expr, FleetBuilder, Gcp, Partial, Provider, Scaleway, Supports};

use super::{KindSample, Variant};

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

fn tags(variant: Variant) -> Partial<Expr<Tags>> {
    let mut tags = Tags::from([("suite".to_owned(), "conformance".to_owned())]);
    if variant == Variant::Mutable {
        tags.insert("variant".to_owned(), "mutable".to_owned());
    }
    known(tags)
}

fn string_tags(variant: Variant) -> Partial<Expr<BTreeSet<String>>> {
    let mut tags = BTreeSet::from(["suite=conformance".to_owned()]);
    if variant == Variant::Mutable {
        tags.insert("variant=mutable".to_owned());
    }
    known(tags)
}

fn environment(variant: Variant) -> Partial<Expr<EnvVars>> {
    let mode = if variant == Variant::Mutable {
        "changed"
    } else {
        "test"
    };
    known(EnvVars::from([("MODE".to_owned(), mode.to_owned())]))
}

fn dep(name: &str) -> String {
    format!("{name}-dep")
}

fn dep2(name: &str) -> String {
    format!("{name}-dep2")
}

fn iam(provider: &str, variant: Variant) -> Iam {
    // Google Cloud grants roles to members; Scaleway grants permission sets to an
    // application, which nothing assumes; the others name policies and services.
    let (policies, assumers): (&[&str], &[&str]) = match provider {
        "gcp" => (&["roles/viewer"], &["user:conformance@example.com"]),
        "scaleway" => (&["ObjectStorageReadOnly"], &[]),
        _ => (&["conformance-read-only"], &["conformance.example"]),
    };
    let set = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
    Iam {
        policies: Expr::lit(set(policies)),
        assumed_by: Expr::lit(set(assumers)),
        description: known("an identity of the conformance suite".to_owned()),
        tags: tags(variant),
    }
}

fn object_store(variant: Variant) -> ObjectStore {
    ObjectStore {
        versioning: known(variant == Variant::Mutable),
        expire_after_days: known(Some(30)),
        tags: tags(Variant::Base),
    }
}

/// An archive on this machine for the samples whose cloud uploads code from where the
/// fleet is applied: the empty zip archive, written once per process in the temporary
/// directory.
fn local_archive() -> String {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let path =
            std::env::temp_dir().join(format!("infra-conformance-{}.zip", std::process::id()));
        if let Err(e) = std::fs::write(&path, super::staged::EMPTY_ZIP) {
            panic!(
                "the sample archive {} cannot be written: {e}",
                path.display()
            );
        }
        path.to_string_lossy().into_owned()
    })
    .clone()
}

fn compute(provider: &str, variant: Variant) -> Compute {
    // Cloud Run builds a function from a source archive in Cloud Storage; Scaleway
    // deploys an archive uploaded from the machine that applies.
    let (runtime, code) = match provider {
        "gcp" => ("python312", "gs://conformance-code/app.zip".to_owned()),
        "scaleway" => ("python3.12", local_archive()),
        _ => (
            "python3.12",
            "https://example.invalid/conformance/app.zip".to_owned(),
        ),
    };
    Compute {
        runtime: Expr::lit(runtime.to_owned()),
        handler: Expr::lit("app.handler".to_owned()),
        code: Expr::lit(code),
        code_sha256: Partial::Unknown,
        memory_mb: known(if variant == Variant::Mutable {
            256
        } else {
            128
        }),
        timeout_seconds: known(30),
        environment: environment(Variant::Base),
        secret_environment: Partial::Unknown,
        role: None,
        tags: tags(Variant::Base),
        access: Access::Private.into(),
    }
}

fn queues(provider: &str, variant: Variant) -> Queues {
    Queues {
        fifo: Expr::lit(variant == Variant::Replace),
        visibility_timeout_seconds: known(if variant == Variant::Mutable { 60 } else { 30 }),
        retention_seconds: known(345_600),
        dead_letter: Partial::Known(None),
        max_receive_count: Partial::Unknown,
        // Scaleway Queues take no tags.
        tags: if provider == "scaleway" {
            Partial::Unknown
        } else {
            tags(variant)
        },
    }
}

fn secrets(variant: Variant) -> Secrets {
    Secrets {
        description: known(if variant == Variant::Mutable {
            "a secret of the conformance suite, described again".to_owned()
        } else {
            "a secret of the conformance suite".to_owned()
        }),
        // A Secret Manager secret on GCP has no description: the tags change with it.
        tags: tags(variant),
        ..Secrets::generated(24)
    }
}

fn image_registry(provider: &str, variant: Variant) -> ImageRegistry {
    ImageRegistry {
        // A Scaleway registry namespace has no scanning (a declared `true` is refused):
        // there, only the tags change.
        scan_on_push: known(variant == Variant::Mutable && provider != "scaleway"),
        immutable_tags: known(false),
        tags: tags(variant),
    }
}

fn postgres_class(provider: &str) -> &'static str {
    match provider {
        "gcp" => "db-f1-micro",
        "scaleway" => "DB-DEV-S",
        _ => "db.t4g.micro",
    }
}

fn declare_postgres<P>(fleet: &mut FleetBuilder, region: P::Region, name: &str, variant: Variant)
where
    P: Provider + Supports<Secrets> + Supports<Postgres>,
{
    let password = fleet.declare(region, dep(name), secrets(Variant::Base));
    let user = if variant == Variant::Replace {
        "conformance2"
    } else {
        "conformance"
    };
    fleet.declare(
        region,
        name,
        Postgres {
            storage_gb: known(20),
            backup_retention_days: known(if variant == Variant::Mutable { 14 } else { 7 }),
            tags: tags(Variant::Base),
            ..Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: postgres_class(P::ID),
                master_username: user,
                master_password: password,
            })
        },
    );
}

/// The samples of the seven portable kinds on provider `P`.
fn portable<P>() -> Vec<KindSample>
where
    P: Provider
        + Supports<Iam>
        + Supports<ObjectStore>
        + Supports<Compute>
        + Supports<Queues>
        + Supports<Secrets>
        + Supports<ImageRegistry>
        + Supports<Postgres>,
{
    vec![
        KindSample::new::<P, Iam>(|f, region, name, v| {
            f.declare(region, name, iam(P::ID, v));
        })
        .mutable(true),
        KindSample::new::<P, ObjectStore>(|f, region, name, v| {
            f.declare(region, name, object_store(v));
        })
        .mutable(true),
        KindSample::new::<P, Compute>(|f, region, name, v| {
            f.declare(region, name, compute(P::ID, v));
        })
        .mutable(true),
        KindSample::new::<P, Queues>(|f, region, name, v| {
            f.declare(region, name, queues(P::ID, v));
        })
        .mutable(true)
        .replace(true),
        KindSample::new::<P, Secrets>(|f, region, name, v| {
            f.declare(region, name, secrets(v));
        })
        .mutable(true),
        KindSample::new::<P, ImageRegistry>(|f, region, name, v| {
            f.declare(region, name, image_registry(P::ID, v));
        })
        .mutable(true),
        KindSample::new::<P, Postgres>(declare_postgres::<P>)
            .mutable(true)
            .replace(true),
    ]
}

fn security_group(variant: Variant) -> SecurityGroup {
    let mut ingress = BTreeSet::from([Rule::tcp(443, "0.0.0.0/0")]);
    if variant == Variant::Mutable {
        ingress.insert(Rule::tcp(80, "10.0.0.0/8"));
    }
    SecurityGroup {
        description: Expr::lit(if variant == Variant::Replace {
            "a group of the conformance suite, described again".to_owned()
        } else {
            "a group of the conformance suite".to_owned()
        }),
        vpc_id: Partial::Unknown,
        ingress: Expr::lit(ingress),
        egress: Partial::Unknown,
        tags: tags(Variant::Base),
    }
}

fn aws_only() -> Vec<KindSample> {
    vec![
        KindSample::new::<Aws, S3Bucket>(|f, region, name, v| {
            f.declare(
                region,
                name,
                S3Bucket {
                    versioning: known(v != Variant::Mutable),
                    object_lock: known(v == Variant::Replace),
                    block_public_access: known(true),
                    tags: tags(Variant::Base),
                },
            );
        })
        .mutable(true)
        .replace(true),
        KindSample::new::<Aws, SecurityGroup>(|f, region, name, v| {
            f.declare(region, name, security_group(v));
        })
        .mutable(true)
        .replace(true),
        KindSample::new::<Aws, AwsInstance>(|f, region, name, v| {
            let group = f.declare(region, dep(name), security_group(Variant::Base));
            let size = if v == Variant::Replace {
                BurstableSize::Small
            } else {
                BurstableSize::Micro
            };
            f.declare(
                region,
                name,
                AwsInstance {
                    user_data: known("#!/bin/sh\ntrue\n".to_owned()),
                    tags: tags(v),
                    ..AwsInstance::new(Image::Latest, InstanceType::T3(size), group)
                },
            );
        })
        .mutable(true)
        .replace(true),
    ]
}

fn function_namespace(variant: Variant) -> FunctionNamespace {
    FunctionNamespace {
        description: known("functions of the conformance suite".to_owned()),
        environment: environment(variant),
        secret_environment: Partial::Unknown,
        tags: string_tags(Variant::Base),
    }
}

fn container_namespace(variant: Variant) -> ContainerNamespace {
    ContainerNamespace {
        description: known("containers of the conformance suite".to_owned()),
        environment: environment(variant),
        secret_environment: Partial::Unknown,
        tags: string_tags(Variant::Base),
    }
}

fn scaleway_only() -> Vec<KindSample> {
    vec![
        KindSample::new::<Scaleway, FunctionNamespace>(|f, region, name, v| {
            f.declare(region, name, function_namespace(v));
        })
        .mutable(true),
        KindSample::new::<Scaleway, Function>(|f, region, name, v| {
            // Two namespaces in every variant: the replace moves the function.
            let first = f.declare(region, dep(name), function_namespace(Variant::Base));
            let second = f.declare(region, dep2(name), function_namespace(Variant::Base));
            f.declare(
                region,
                name,
                Function {
                    namespace: if v == Variant::Replace { second } else { first },
                    runtime: Expr::lit("python311".to_owned()),
                    handler: Expr::lit("handler.handle".to_owned()),
                    memory_mb: known(if v == Variant::Mutable { 512 } else { 256 }),
                    min_scale: known(0),
                    max_scale: known(2),
                    timeout_seconds: known(60),
                    source_bucket: Partial::Known(None),
                    code: Partial::Unknown,
                    environment: environment(Variant::Base),
                    access: Access::Private.into(),
                },
            );
        })
        .mutable(true)
        .replace(true),
        KindSample::new::<Scaleway, ContainerNamespace>(|f, region, name, v| {
            f.declare(region, name, container_namespace(v));
        })
        .mutable(true),
        KindSample::new::<Scaleway, Container>(|f, region, name, v| {
            let first = f.declare(region, dep(name), container_namespace(Variant::Base));
            let second = f.declare(region, dep2(name), container_namespace(Variant::Base));
            f.declare(
                region,
                name,
                Container {
                    namespace: if v == Variant::Replace { second } else { first },
                    image: Expr::lit("rg.fr-par.scw.cloud/conformance/app:1".to_owned()),
                    port: known(8080),
                    cpu_limit: known(1000),
                    memory_limit_mb: known(if v == Variant::Mutable { 1024 } else { 2048 }),
                    min_scale: known(0),
                    max_scale: known(2),
                    timeout_seconds: known(300),
                    environment: environment(Variant::Base),
                    secret_environment: Partial::Unknown,
                    access: Access::Private.into(),
                },
            );
        })
        .mutable(true)
        .replace(true),
    ]
}

/// Samples of the fourteen built-in kinds: one per (provider, kind) the built-in
/// providers realise, AWS, GCP and Scaleway alike. Give them all to the suite: it runs
/// those of the backend's provider whose kind the backend declares.
///
/// Kinds whose divergence table has no field that forces a replace (`iam`,
/// `objectStore`, `compute`, `secrets`, `imageRegistry`, `functionNamespace`,
/// `containerNamespace`) have no [`Variant::Replace`].
pub fn builtin() -> Vec<KindSample> {
    let mut samples = portable::<Aws>();
    samples.extend(aws_only());
    samples.extend(portable::<Gcp>());
    samples.extend(portable::<Scaleway>());
    samples.extend(scaleway_only());
    samples
}

/// The built-in samples of one provider.
pub fn builtin_for(provider: &str) -> Vec<KindSample> {
    builtin()
        .into_iter()
        .filter(|s| s.provider == provider)
        .collect()
}
