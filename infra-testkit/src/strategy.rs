//! Strategies that generate fleets, and that change them the way people do.
//!
//! A generated fleet is first a [`FleetShape`]: plain data (kinds, references by
//! position, a number for a field that updates in place and one for a field that forces
//! a replace, a placement), which proptest shrinks like any vector, and which prints as
//! a short readable listing. [`FleetShape::build`] declares the real fleet.
//!
//! ```
//! use infra_testkit::strategy::{fleet_shape, FleetShape};
//! use proptest::strategy::{Strategy, ValueTree};
//! use proptest::test_runner::TestRunner;
//!
//! let mut runner = TestRunner::deterministic();
//! let shape: FleetShape = fleet_shape(1..8).new_tree(&mut runner).unwrap().current();
//! let fleet = shape.build().expect("generated fleets are sound");
//! assert_eq!(fleet.len(), shape.resources.len());
//! ```
//!
//! The graphs have fan-out (several instances on one group, several functions in one
//! namespace), fan-in (a composed secret reading a password and a database; a function
//! reading a namespace and a bucket), diamonds (both at once), deep chains (dead-letter
//! queues), cross-cloud edges (Scaleway namespaces reading AWS secrets, Scaleway
//! functions fetching from AWS buckets), optional fields left unknown, and placements in
//! several regions of each provider.

use std::collections::BTreeMap;
use std::fmt;

use infra_core::kinds::*;
use infra_core::prelude::{
    AwsRegion, CheckReport, Expr, Fleet, FleetBuilder, GcpRegion, Key, Partial, ScalewayRegion,
    compose_secret,
};
use proptest::prelude::*;

/// The kinds a generated fleet uses. Each is declared on a provider that realises it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShapeKind {
    /// An object store on AWS, GCP or Scaleway (by placement).
    Bucket,
    /// An S3 bucket (AWS).
    S3Bucket,
    /// A queue, with a dead-letter reference to an earlier queue (AWS): deep chains.
    Queue,
    /// A security group (AWS).
    Group,
    /// An instance on an earlier group (AWS): fan-out.
    Instance,
    /// A secret whose value the provider generates (AWS or GCP).
    Secret,
    /// A database whose password is an earlier secret (AWS).
    Database,
    /// A secret composed from an earlier secret and, if any, a database's endpoint:
    /// fan-in, and a diamond with the database.
    Composed,
    /// A Scaleway function namespace reading an earlier secret: a cross-cloud edge.
    Namespace,
    /// A Scaleway function in an earlier namespace, fetching from an S3 bucket if any:
    /// fan-in across clouds.
    Function,
}

impl ShapeKind {
    /// Every kind, in the order strategies draw from.
    pub const ALL: [ShapeKind; 10] = [
        ShapeKind::Bucket,
        ShapeKind::S3Bucket,
        ShapeKind::Queue,
        ShapeKind::Group,
        ShapeKind::Instance,
        ShapeKind::Secret,
        ShapeKind::Database,
        ShapeKind::Composed,
        ShapeKind::Namespace,
        ShapeKind::Function,
    ];
}

/// One resource of a generated fleet.
#[derive(Clone, PartialEq, Eq)]
pub struct ResourceShape {
    /// Its name (unique in the fleet).
    pub name: String,
    /// What it is.
    pub kind: ShapeKind,
    /// Which earlier resource each of its references picks (taken modulo the candidates).
    pub picks: [u16; 2],
    /// The value of a field that changes in place.
    pub knob: u8,
    /// The value of a field whose change forces a replace.
    pub fixed: u8,
    /// Which region of its provider (taken modulo the regions used).
    pub place: u8,
    /// Leave optional fields unsaid.
    pub sparse: bool,
}

impl fmt::Debug for ResourceShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} picks={:?} knob={} fixed={} place={}{}",
            self.name,
            self.kind,
            self.picks,
            self.knob,
            self.fixed,
            self.place,
            if self.sparse { " sparse" } else { "" }
        )
    }
}

/// A generated fleet, before it is declared.
#[derive(Clone, PartialEq, Eq)]
pub struct FleetShape {
    /// The fleet's name.
    pub fleet: String,
    /// The resources, in declaration order; references only point backwards.
    pub resources: Vec<ResourceShape>,
    /// Names released with `forget`.
    pub forgets: Vec<(ShapeKind, String)>,
}

impl fmt::Debug for FleetShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fleet {} ({} resources)",
            self.fleet,
            self.resources.len()
        )?;
        for r in &self.resources {
            writeln!(f, "  {r:?}")?;
        }
        for (kind, name) in &self.forgets {
            writeln!(f, "  forget {kind:?} {name}")?;
        }
        Ok(())
    }
}

/// A resource shape with a given name.
pub fn resource_shape(name: String) -> impl Strategy<Value = ResourceShape> {
    (
        prop::sample::select(ShapeKind::ALL.to_vec()),
        any::<[u16; 2]>(),
        1u8..4,
        1u8..3,
        0u8..2,
        prop::bool::weighted(0.3),
    )
        .prop_map(
            move |(kind, picks, knob, fixed, place, sparse)| ResourceShape {
                name: name.clone(),
                kind,
                picks,
                knob,
                fixed,
                place,
                sparse,
            },
        )
}

/// Fleets of `size` resources.
pub fn fleet_shape(size: std::ops::Range<usize>) -> impl Strategy<Value = FleetShape> {
    prop::collection::vec(
        (
            prop::sample::select(ShapeKind::ALL.to_vec()),
            any::<[u16; 2]>(),
            1u8..4,
            1u8..3,
            0u8..2,
            prop::bool::weighted(0.3),
        ),
        size,
    )
    .prop_map(|items| FleetShape {
        fleet: "generated".to_owned(),
        resources: items
            .into_iter()
            .enumerate()
            .map(
                |(i, (kind, picks, knob, fixed, place, sparse))| ResourceShape {
                    name: format!("r{i:02}-res"),
                    kind,
                    picks,
                    knob,
                    fixed,
                    place,
                    sparse,
                },
            )
            .collect(),
        forgets: Vec::new(),
    })
}

/// A change people make to a fleet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Change a field that updates in place.
    ChangeMutable {
        /// Which resource (modulo the count).
        at: u16,
    },
    /// Change a field whose change forces a replace.
    ChangeForcesReplace {
        /// Which resource (modulo the count).
        at: u16,
    },
    /// Delete a line (and the lines that referred to it, which would no longer
    /// compile): what remains in the cloud is an orphan of the ledger.
    DeleteLine {
        /// Which resource (modulo the count).
        at: u16,
    },
    /// Add a resource at the end.
    Add(ResourceShape),
    /// Delete a line and release its resource with `forget`: its record goes, the
    /// cloud keeps it. Only a resource with no references either way is released.
    Forget {
        /// Which resource (modulo the count).
        at: u16,
    },
    /// Rename a resource: the old one is an orphan, the new one a create.
    Rename {
        /// Which resource (modulo the count).
        at: u16,
    },
}

/// Mutations, drawn with weights close to how often people make them.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => any::<u16>().prop_map(|at| Mutation::ChangeMutable { at }),
        1 => any::<u16>().prop_map(|at| Mutation::ChangeForcesReplace { at }),
        2 => any::<u16>().prop_map(|at| Mutation::DeleteLine { at }),
        2 => (0u16..1000).prop_flat_map(|n| resource_shape(format!("added-{n:03}"))).prop_map(Mutation::Add),
        1 => any::<u16>().prop_map(|at| Mutation::Forget { at }),
        1 => any::<u16>().prop_map(|at| Mutation::Rename { at }),
    ]
}

/// What a kind becomes when what it refers to does not exist: the first kind down its
/// chain of requirements that needs nothing missing.
fn effective_kinds(resources: &[ResourceShape]) -> Vec<ShapeKind> {
    let mut seen: BTreeMap<ShapeKind, usize> = BTreeMap::new();
    let mut out = Vec::with_capacity(resources.len());
    for r in resources {
        let has =
            |k: ShapeKind, seen: &BTreeMap<ShapeKind, usize>| seen.get(&k).is_some_and(|n| *n > 0);
        let secret_like = |seen: &BTreeMap<ShapeKind, usize>| {
            has(ShapeKind::Secret, seen) || has(ShapeKind::Composed, seen)
        };
        let mut kind = r.kind;
        loop {
            let next = match kind {
                ShapeKind::Instance if !has(ShapeKind::Group, &seen) => ShapeKind::Group,
                ShapeKind::Database | ShapeKind::Composed | ShapeKind::Namespace
                    if !secret_like(&seen) =>
                {
                    ShapeKind::Secret
                }
                ShapeKind::Function if !has(ShapeKind::Namespace, &seen) => ShapeKind::Namespace,
                other => other,
            };
            if next == kind {
                break;
            }
            kind = next;
        }
        *seen.entry(kind).or_default() += 1;
        out.push(kind);
    }
    out
}

impl FleetShape {
    /// The kind each resource is declared as: a kind whose reference has nothing to
    /// point at becomes the kind it needs (an instance with no group is a group).
    pub fn kinds(&self) -> Vec<ShapeKind> {
        effective_kinds(&self.resources)
    }

    /// Applies a mutation.
    pub fn mutate(&mut self, mutation: &Mutation) {
        let n = self.resources.len();
        let at = |i: u16| usize::from(i) % n.max(1);
        match mutation {
            Mutation::Add(r) => {
                let mut r = r.clone();
                while self.resources.iter().any(|x| x.name == r.name) {
                    r.name.push('x');
                }
                self.forgets.retain(|(_, name)| name != &r.name);
                self.resources.push(r);
            }
            _ if n == 0 => {}
            Mutation::ChangeMutable { at: i } => {
                let r = &mut self.resources[at(*i)];
                r.knob = r.knob % 3 + 1;
                r.sparse = false;
            }
            Mutation::ChangeForcesReplace { at: i } => {
                let r = &mut self.resources[at(*i)];
                r.fixed = r.fixed % 2 + 1;
            }
            Mutation::DeleteLine { at: i } => self.delete_line(at(*i)),
            Mutation::Forget { at: i } => {
                let i = at(*i);
                let kind = self.kinds()[i];
                let name = self.resources[i].name.clone();
                // Only a line nothing refers to, and that refers to nothing, is released:
                // a released resource still holding another fleet resource would make
                // that one undeletable, which is the cloud's refusal to make, not a
                // property to test here.
                if !self.referenced(i) && self.references()[i].is_empty() {
                    self.resources.remove(i);
                    self.forgets.push((kind, name));
                }
            }
            Mutation::Rename { at: i } => {
                let i = at(*i);
                let mut name = format!("{}-v2", self.resources[i].name);
                while self.resources.iter().any(|x| x.name == name) {
                    name.push('x');
                }
                self.resources[i].name = name;
            }
        }
    }

    /// Whether a later resource refers to resource `i`.
    fn referenced(&self, i: usize) -> bool {
        let refs = self.references();
        refs.iter().any(|r| r.contains(&i))
    }

    /// Deletes a line and every line referring to it, transitively.
    fn delete_line(&mut self, i: usize) {
        let refs = self.references();
        let mut gone = vec![false; self.resources.len()];
        gone[i] = true;
        for j in i + 1..self.resources.len() {
            if refs[j].iter().any(|&d| gone[d]) {
                gone[j] = true;
            }
        }
        let mut index = 0;
        self.resources.retain(|_| {
            let keep = !gone[index];
            index += 1;
            keep
        });
    }

    /// What each resource refers to, by position.
    pub fn references(&self) -> Vec<Vec<usize>> {
        self.declare(
            std::slice::from_mut(&mut Fleet::builder(&self.fleet)),
            &|_| 0,
        )
    }

    /// The resources that reach one another through references (either way), by
    /// position: a fleet can be split between these and no finer, since a reference
    /// never leaves its fleet.
    pub fn components(&self) -> Vec<Vec<usize>> {
        let refs = self.references();
        let mut root: Vec<usize> = (0..refs.len()).collect();
        fn find(root: &mut [usize], mut i: usize) -> usize {
            while root[i] != i {
                root[i] = root[root[i]];
                i = root[i];
            }
            i
        }
        for (i, targets) in refs.iter().enumerate() {
            for &j in targets {
                let (a, b) = (find(&mut root, i), find(&mut root, j));
                root[a.max(b)] = a.min(b);
            }
        }
        let mut parts: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for i in 0..refs.len() {
            let r = find(&mut root, i);
            parts.entry(r).or_default().push(i);
        }
        parts.into_values().collect()
    }

    /// The fleet split in two: the resources at the positions `second` names are
    /// declared in a fleet named `second_name`, the others in this shape's own fleet,
    /// each exactly as [`FleetShape::build`] declares it. `second` must be a union of
    /// [`FleetShape::components`] (a reference never leaves its fleet); forgets are
    /// left out.
    ///
    /// # Panics
    ///
    /// When a reference crosses between the two parts.
    pub fn build_split(
        &self,
        second: &std::collections::BTreeSet<usize>,
        second_name: &str,
    ) -> [Result<Fleet, CheckReport>; 2] {
        for (i, targets) in self.references().iter().enumerate() {
            for j in targets {
                assert_eq!(
                    second.contains(&i),
                    second.contains(j),
                    "resource {i} refers to resource {j} across the split"
                );
            }
        }
        let mut builders = [Fleet::builder(&self.fleet), Fleet::builder(second_name)];
        self.declare(&mut builders, &|i| usize::from(second.contains(&i)));
        let [first, second] = builders;
        [first.build(), second.build()]
    }

    /// Declares the fleet.
    pub fn build(&self) -> Result<Fleet, CheckReport> {
        let mut builder = Fleet::builder(&self.fleet);
        self.declare(std::slice::from_mut(&mut builder), &|_| 0);
        for (kind, name) in &self.forgets {
            match kind {
                ShapeKind::Bucket => {
                    builder.forget::<infra_core::prelude::Aws, ObjectStore>(name.clone());
                    builder.forget::<infra_core::prelude::Gcp, ObjectStore>(name.clone());
                    builder.forget::<infra_core::prelude::Scaleway, ObjectStore>(name.clone());
                }
                ShapeKind::S3Bucket => {
                    builder.forget::<infra_core::prelude::Aws, S3Bucket>(name.clone())
                }
                ShapeKind::Queue => {
                    builder.forget::<infra_core::prelude::Aws, Queues>(name.clone())
                }
                ShapeKind::Group => {
                    builder.forget::<infra_core::prelude::Aws, SecurityGroup>(name.clone())
                }
                ShapeKind::Instance => {
                    builder.forget::<infra_core::prelude::Aws, AwsInstance>(name.clone())
                }
                ShapeKind::Secret | ShapeKind::Composed => {
                    builder.forget::<infra_core::prelude::Aws, Secrets>(name.clone());
                    builder.forget::<infra_core::prelude::Gcp, Secrets>(name.clone());
                }
                ShapeKind::Database => {
                    builder.forget::<infra_core::prelude::Aws, Postgres>(name.clone())
                }
                ShapeKind::Namespace => {
                    builder.forget::<infra_core::prelude::Scaleway, FunctionNamespace>(name.clone())
                }
                ShapeKind::Function => {
                    builder.forget::<infra_core::prelude::Scaleway, Function>(name.clone())
                }
            }
        }
        builder.build()
    }

    /// Declares every resource into the builder `part` names for it; returns, per
    /// resource, the positions it refers to.
    fn declare(
        &self,
        builders: &mut [FleetBuilder],
        part: &dyn Fn(usize) -> usize,
    ) -> Vec<Vec<usize>> {
        let kinds = self.kinds();
        let mut groups: Vec<(usize, Key<SecurityGroup>)> = Vec::new();
        let mut secrets: Vec<(usize, Key<Secrets>)> = Vec::new();
        let mut databases: Vec<(usize, Key<Postgres>)> = Vec::new();
        let mut queues: Vec<(usize, Key<Queues>)> = Vec::new();
        let mut namespaces: Vec<(usize, Key<FunctionNamespace>)> = Vec::new();
        let mut s3: Vec<(usize, Key<S3Bucket>)> = Vec::new();
        let mut refs = Vec::with_capacity(self.resources.len());
        let aws = [AwsRegion::EuWest3, AwsRegion::UsEast1];
        let gcp = [GcpRegion::EuropeWest1, GcpRegion::UsCentral1];
        let scw = [ScalewayRegion::FrPar, ScalewayRegion::NlAms];
        fn pick<T: Copy>(from: &[(usize, T)], p: u16) -> (usize, T) {
            from[usize::from(p) % from.len()]
        }
        fn maybe<T>(sparse: bool, value: T) -> Partial<Expr<T>>
        where
            T: infra_core::prelude::Value,
        {
            if sparse {
                Partial::Unknown
            } else {
                Partial::Known(Expr::lit(value))
            }
        }
        for (i, (r, kind)) in self.resources.iter().zip(kinds).enumerate() {
            let f = &mut builders[part(i)];
            let place = usize::from(r.place) % 2;
            let name = r.name.clone();
            let knob = u32::from(r.knob);
            let mut mine = Vec::new();
            match kind {
                ShapeKind::Bucket => {
                    let spec = ObjectStore {
                        versioning: Partial::Known(Expr::lit(r.knob % 2 == 0)),
                        expire_after_days: maybe(r.sparse, Some(knob * 30)),
                        tags: Partial::Unknown,
                    };
                    match r.fixed % 3 {
                        0 => f.declare(gcp[place], name, spec),
                        1 => f.declare(aws[place], name, spec),
                        _ => f.declare(scw[place], name, spec),
                    };
                }
                ShapeKind::S3Bucket => {
                    let key = f.declare(
                        aws[place],
                        name,
                        S3Bucket {
                            versioning: maybe(r.sparse, r.knob % 2 == 1),
                            object_lock: Partial::Known(Expr::lit(r.fixed == 2)),
                            block_public_access: Partial::Unknown,
                            tags: maybe(
                                r.sparse,
                                BTreeMap::from([("knob".to_owned(), r.knob.to_string())]),
                            ),
                        },
                    );
                    s3.push((i, key));
                }
                ShapeKind::Queue => {
                    let dead_letter = if !queues.is_empty() && r.picks[0] % 4 != 0 {
                        let (j, key) = pick(&queues, r.picks[1]);
                        mine.push(j);
                        Some(key)
                    } else {
                        None
                    };
                    let key = f.declare(
                        aws[0],
                        name,
                        Queues {
                            fifo: Expr::lit(r.fixed == 2),
                            visibility_timeout_seconds: Partial::Known(Expr::lit(knob * 10)),
                            retention_seconds: maybe(r.sparse, 86_400 * knob),
                            dead_letter: Partial::Known(dead_letter),
                            max_receive_count: Partial::Unknown,
                            tags: Partial::Unknown,
                        },
                    );
                    queues.push((i, key));
                }
                ShapeKind::Group => {
                    let key = f.declare(
                        aws[place],
                        name,
                        SecurityGroup {
                            description: format!("generated group {}", r.fixed).into(),
                            vpc_id: Partial::Unknown,
                            ingress: Expr::lit(
                                [Rule::tcp(u16::from(r.knob) * 1000, "10.0.0.0/8")].into(),
                            ),
                            egress: Partial::Unknown,
                            tags: Partial::Unknown,
                        },
                    );
                    groups.push((i, key));
                }
                ShapeKind::Instance => {
                    let (j, group) = pick(&groups, r.picks[0]);
                    mine.push(j);
                    let size = if r.fixed == 1 {
                        BurstableSize::Nano
                    } else {
                        BurstableSize::Micro
                    };
                    // An instance lives in its group's region.
                    let region = aws[usize::from(self.resources[j].place) % 2];
                    f.declare(
                        region,
                        name,
                        AwsInstance {
                            tags: Partial::Known(Expr::lit(BTreeMap::from([(
                                "knob".to_owned(),
                                r.knob.to_string(),
                            )]))),
                            ..AwsInstance::new(Image::Latest, InstanceType::T3(size), group)
                        },
                    );
                }
                ShapeKind::Secret => {
                    let spec = Secrets {
                        description: maybe(r.sparse, format!("knob {}", r.knob)),
                        ..Secrets::generated(16 + u16::from(r.fixed))
                    };
                    // Generated secrets live on AWS; one in three on GCP.
                    let key = if r.picks[1] % 3 == 0 {
                        f.declare(gcp[place], name, spec)
                    } else {
                        f.declare(aws[0], name, spec)
                    };
                    secrets.push((i, key));
                }
                ShapeKind::Database => {
                    let (j, password) = pick(&secrets, r.picks[0]);
                    mine.push(j);
                    let key = f.declare(
                        aws[0],
                        name,
                        Postgres {
                            backup_retention_days: Partial::Known(Expr::lit(knob * 3)),
                            ..Postgres::classic(PostgresClassic {
                                engine_version: "16",
                                instance_class: "db.t4g.micro",
                                master_username: if r.fixed == 1 { "app" } else { "admin" },
                                master_password: password,
                            })
                        },
                    );
                    databases.push((i, key));
                }
                ShapeKind::Composed => {
                    let (j, password) = pick(&secrets, r.picks[0]);
                    mine.push(j);
                    let value = match databases.last() {
                        Some(&(d, db)) => {
                            mine.push(d);
                            let host =
                                Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
                            compose_secret!(
                                "postgres://app:{}@{}/app",
                                Expr::secret(password),
                                host
                            )
                        }
                        None => compose_secret!("token:{}", Expr::secret(password)),
                    };
                    let key = f.declare(
                        aws[0],
                        name,
                        Secrets {
                            description: maybe(r.sparse, format!("knob {}", r.knob)),
                            ..Secrets::composed(value)
                        },
                    );
                    secrets.push((i, key));
                }
                ShapeKind::Namespace => {
                    let (j, secret) = pick(&secrets, r.picks[0]);
                    mine.push(j);
                    let key = f.declare(
                        scw[place],
                        name,
                        FunctionNamespace {
                            description: Partial::Known(Expr::lit(format!("knob {}", r.knob))),
                            environment: Partial::Unknown,
                            secret_environment: Partial::Known(BTreeMap::from([(
                                "SECRET".to_owned(),
                                secret,
                            )])),
                            tags: Partial::Unknown,
                        },
                    );
                    namespaces.push((i, key));
                }
                ShapeKind::Function => {
                    let (j, namespace) = pick(&namespaces, r.picks[0]);
                    mine.push(j);
                    let source = s3.last().map(|&(b, bucket)| {
                        mine.push(b);
                        bucket
                    });
                    // A function lives in its namespace's region.
                    let region = scw[usize::from(self.resources[j].place) % 2];
                    f.declare(
                        region,
                        name,
                        Function {
                            namespace,
                            runtime: if r.fixed == 1 { "python311" } else { "node22" }.into(),
                            handler: "main.handle".into(),
                            memory_mb: Partial::Known(Expr::lit(128 * knob)),
                            min_scale: Partial::Unknown,
                            max_scale: maybe(r.sparse, knob + 1),
                            timeout_seconds: Partial::Unknown,
                            source_bucket: Partial::Known(source),
                            code: Partial::Unknown,
                            environment: Partial::Unknown,
                            access: if r.sparse {
                                Access::Public
                            } else {
                                Access::Private
                            }
                            .into(),
                        },
                    );
                }
            }
            refs.push(mine);
        }
        refs
    }
}
