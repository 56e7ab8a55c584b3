//! A fleet of the Scaleway kinds whose lists are complete (their list answers each
//! resource whole, so observing them needs no read per resource): serverless container
//! and function namespaces, containers and functions in them, and Container Registry
//! namespaces. For counting the calls of a plan against the stand-in.

use std::collections::{BTreeMap, BTreeSet};

use infra_core::kinds::{
    Access, Container, ContainerNamespace, Function, FunctionNamespace, ImageRegistry,
};
use infra_core::prelude::{Expr, Fleet, Key, Partial, ScalewayRegion};

/// How many resources one group holds: a container namespace and a function namespace,
/// 39 containers and 39 functions in them, and 20 registry namespaces (Scaleway admits
/// 100 namespaces of each serverless product in a project: 100 groups at most).
const GROUP: usize = 100;

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

/// The fleet `{prefix}observed` declaring `n` resources in fr-par, in groups of
/// a hundred (the last one cut short): in each, first the two namespaces, then
/// containers, functions and registry namespaces in turn (two, two and one of every
/// five). Names are `{prefix}` and a letter and a number; keep `prefix` short and
/// lowercase (a container's name is at most 34 characters).
///
/// # Panics
/// When `n` is more than 100 groups.
#[must_use]
pub fn complete_list_fleet(prefix: &str, n: usize) -> Fleet {
    assert!(n <= 100 * GROUP, "at most 100 groups of {GROUP}");
    let here = ScalewayRegion::FrPar;
    let mut f = Fleet::builder(format!("{prefix}observed"));
    let env = || {
        known(BTreeMap::from([(
            "STAGE".to_owned(),
            "observed".to_owned(),
        )]))
    };
    let tags = || known(BTreeSet::from(["scenario=observed".to_owned()]));
    let mut containers: Option<Key<ContainerNamespace>> = None;
    let mut functions: Option<Key<FunctionNamespace>> = None;
    for i in 0..n {
        let (group, at) = (i / GROUP, i % GROUP);
        match at {
            0 => {
                let spec = ContainerNamespace {
                    description: known(format!("containers {group}")),
                    environment: env(),
                    secret_environment: Partial::Unknown,
                    tags: tags(),
                };
                containers = Some(f.declare(here, format!("{prefix}cn{group}"), spec));
            }
            1 => {
                let spec = FunctionNamespace {
                    description: known(format!("functions {group}")),
                    environment: env(),
                    secret_environment: Partial::Unknown,
                    tags: tags(),
                };
                functions = Some(f.declare(here, format!("{prefix}fn{group}"), spec));
            }
            _ => match ((at - 2) % 5, containers, functions) {
                (0 | 1, Some(namespace), _) => {
                    let spec = Container {
                        namespace,
                        image: Expr::lit("rg.fr-par.scw.cloud/observed/web:1.0".to_owned()),
                        port: known(8080),
                        cpu_limit: known(560),
                        memory_limit_mb: known(1024),
                        min_scale: known(0),
                        max_scale: known(2),
                        timeout_seconds: known(60),
                        environment: env(),
                        secret_environment: Partial::Unknown,
                        access: Access::Private.into(),
                    };
                    f.declare(here, format!("{prefix}c{i}"), spec);
                }
                (2 | 3, _, Some(namespace)) => {
                    let spec = Function {
                        namespace,
                        runtime: Expr::lit("python311".to_owned()),
                        handler: Expr::lit("handler.handle".to_owned()),
                        memory_mb: known(256),
                        min_scale: known(0),
                        max_scale: known(1),
                        timeout_seconds: known(60),
                        source_bucket: Partial::Known(None),
                        code: Partial::Unknown,
                        environment: env(),
                        access: Access::Private.into(),
                    };
                    f.declare(here, format!("{prefix}f{i}"), spec);
                }
                _ => {
                    let spec = ImageRegistry {
                        scan_on_push: known(false),
                        immutable_tags: known(false),
                        tags: known(BTreeMap::from([(
                            "scenario".to_owned(),
                            "observed".to_owned(),
                        )])),
                    };
                    f.declare(here, format!("{prefix}r{i}"), spec);
                }
            },
        }
    }
    f.build().expect("the observed fleet is sound")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_holds_n_resources_of_the_five_kinds() {
        let fleet = complete_list_fleet("o-", 250);
        let kinds: Vec<&str> = fleet.resources().map(|r| r.reference().kind).collect();
        assert_eq!(kinds.len(), 250);
        let count = |k: &str| kinds.iter().filter(|x| **x == k).count();
        assert_eq!(count("containerNamespace"), 3);
        assert_eq!(count("functionNamespace"), 3);
        assert_eq!(
            count("container") + count("function") + count("imageRegistry"),
            244
        );
        assert!(count("imageRegistry") > 0 && count("container") > 0 && count("function") > 0);
    }
}
