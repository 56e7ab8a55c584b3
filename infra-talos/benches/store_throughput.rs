//! Throughput of the store's commitment + attempt transaction pairs on PostgreSQL, and
//! its ratio to the database's own floor.
//!
//! ```sh
//! cargo bench -p infra-talos --bench store_throughput -- --pairs 1000 --workers 8
//! ```
//!
//! Reads the database from `--database` or `INFRA_TEST_DATABASE_URL` (without either it
//! says so and measures nothing), works in a fresh schema it drops at the end, and
//! prepares one machine per pair (each in its own rollout scope, so no two pairs
//! contend on a scope) with a plan, an approval and dispatch evidence. It then times
//! the pairs across the workers and, on the same rows and workers, *bare* pairs: two
//! transactions that each lock the machine row and bump its revision, the least a
//! commitment and an attempt must each do. The machines are taken in `--rounds` slices
//! (5 unless told), each timed as pairs and then as bare pairs, so that whatever the
//! database does meanwhile (autovacuum after the preparation's writes, a checkpoint)
//! falls on both sides alike instead of on whichever ran first. It prints one line:
//!
//! ```text
//! store_throughput pairs=<N> workers=<W> rounds=<R> pairs_per_second=<x> p50_ms=<..> p99_ms=<..> bare_pairs_per_second=<y> ratio_to_bare=<y/x>
//! ```
//!
//! `--test` (as `cargo bench -- --test` passes it) runs 20 pairs over 2 workers in 2
//! rounds: a check that the measurement runs, not a figure.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Clock, SystemClock};

use infra_talos::config_digest;
use infra_talos::contract::evidence::ObservationPurpose;
use infra_talos::contract::operation::ControllerId;
use infra_talos::contract::{Role, SpanMs};
use infra_talos::store::postgres::PgStore;
use infra_talos::store::{
    Actor, AdoptPlanSpec, AdoptionOutcome, BootstrapSpec, ContributionKind, DependencyCheck,
    IdentityKey, MachineSpec, ObservationRequest, ObservedFacts, PlanSpec, PrincipalKind,
    PrincipalSpec, ReleaseSpec, SealedArtifact, Store,
};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

const URL_VAR: &str = "INFRA_TEST_DATABASE_URL";
const CONTROLLER: ControllerId = ControllerId(0x7a);
const RELEASE: &str = "rel-bench";
const HANDOVER_RELEASE: &str = "rel-handover";

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Options {
    pairs: usize,
    workers: usize,
    rounds: usize,
    database: Option<String>,
}

fn options() -> Result<Options, Error> {
    let mut pairs = 1000;
    let mut workers = 8;
    let mut rounds = 5;
    let mut database = std::env::var(URL_VAR).ok().filter(|u| !u.is_empty());
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            // What `cargo bench` passes to every bench target.
            "--bench" => {}
            "--test" => {
                pairs = 20;
                workers = 2;
                rounds = 2;
            }
            "--pairs" => pairs = value()?.parse()?,
            "--workers" => workers = value()?.parse()?,
            "--rounds" => rounds = value()?.parse()?,
            "--database" => database = Some(value()?),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if pairs == 0 || workers == 0 || rounds == 0 {
        return Err("--pairs, --workers and --rounds must be positive".into());
    }
    Ok(Options {
        pairs,
        workers,
        rounds,
        database,
    })
}

fn machine_id(k: usize) -> String {
    format!("bench-{k:06}")
}

fn base_digest(machine: &str) -> infra_talos::digest::Digest {
    config_digest(format!("machine: {machine}\nversion: base\n").as_bytes())
}

/// A sealed stand-in: the store only ever sees these bytes and the digest.
fn sealed(machine: &str) -> SealedArtifact {
    let plain = format!("machine: {machine}\nrelease: {RELEASE}\n").into_bytes();
    SealedArtifact {
        key_provider: "transit".into(),
        key_id: format!("k-{machine}"),
        key_version: 1,
        ciphertext: plain.iter().map(|b| b ^ 0x5a).collect(),
        digest: config_digest(&plain),
    }
}

fn facts(machine: &str) -> ObservedFacts {
    ObservedFacts {
        smbios_uuid: Some(format!("uuid-{machine}")),
        node_id: Some(format!("node-{machine}")),
        cluster_id: Some("cluster-bench".into()),
        talos_version: Some("v1.13.6".into()),
        digest: Some(base_digest(machine)),
        config_version: Some(1),
        access_version: Some("access-v1".into()),
    }
}

/// Principals, machines and the release they all desire.
async fn inventory(store: &PgStore, ids: &[String]) -> Result<(), Error> {
    store
        .bootstrap(BootstrapSpec {
            // The store keeps the authority; authenticating against it is the
            // command set's, which the bench does not use.
            ca_certificate: "-----BEGIN CERTIFICATE-----\nTUlJQg==\n-----END CERTIFICATE-----\n"
                .into(),
            administrator: PrincipalSpec {
                id: "admin".into(),
                kind: PrincipalKind::Human,
                roles: vec![Role::RecoveryAdmin],
            },
            approval_policy: infra_talos::store::ApprovalPolicy::default(),
            administrator_certificate: None,
        })
        .await?;
    let admin = Actor::new("admin", Role::RecoveryAdmin);
    for (id, role) in [
        ("publisher", Role::Publisher),
        ("approver", Role::Approver),
        ("author", Role::Author),
    ] {
        store
            .register_principal(
                &admin,
                PrincipalSpec {
                    id: id.into(),
                    kind: PrincipalKind::Human,
                    roles: vec![role],
                },
            )
            .await?;
    }
    let author = Actor::new("author", Role::Author);
    for id in ids {
        store
            .create_machine(
                &author,
                MachineSpec {
                    id: id.clone(),
                    identity: IdentityKey::SmbiosUuid(format!("uuid-{id}")),
                    cluster_id: "cluster-bench".into(),
                    endpoint: format!("{id}.nodes:50000"),
                    rollout_scope: format!("scope-{id}"),
                    talos_minor: "1.13".into(),
                    import_digest: Some(base_digest(id)),
                },
            )
            .await?;
    }
    publish(store, HANDOVER_RELEASE, ids).await?;
    for id in ids {
        hand_over(store, id).await?;
    }
    publish(store, RELEASE, ids).await
}

/// Publish `release` for every machine.
async fn publish(store: &PgStore, release: &str, ids: &[String]) -> Result<(), Error> {
    store
        .publish_release(
            &Actor::new("publisher", Role::Publisher),
            ReleaseSpec {
                id: release.into(),
                artifacts: ids.iter().map(|m| (m.clone(), sealed(m))).collect(),
                contributions: vec![("author".into(), ContributionKind::Authored)],
            },
        )
        .await?;
    Ok(())
}

/// Hand the imported machine over (§6.3): an approved adopt plan of the handover
/// release, an observation of its base digest, and the adoption record.
async fn hand_over(store: &PgStore, machine: &str) -> Result<(), Error> {
    let plan = format!("handover-{machine}");
    let now = store.now().await?;
    let spec = AdoptPlanSpec {
        id: plan.clone(),
        machine: machine.into(),
        release: HANDOVER_RELEASE.into(),
        expires_at: now.plus(SpanMs::from_secs(3600)),
        max_evidence_age: SpanMs::from_secs(60),
    };
    store
        .create_adopt_plan(&Actor::new("publisher", Role::Publisher), spec)
        .await?;
    store
        .approve(&Actor::new("approver", Role::Approver), &plan)
        .await?;
    let ticket = store
        .begin_observation(ObservationRequest {
            machine: machine.into(),
            purpose: ObservationPurpose::Evidence,
            plan: Some(plan.clone()),
            controller: CONTROLLER,
        })
        .await?;
    store.record_observation(&ticket, facts(machine)).await?;
    match store.record_adoption(&plan, CONTROLLER).await? {
        AdoptionOutcome::Recorded { .. } => Ok(()),
        AdoptionOutcome::Held(hold) => Err(format!("{machine}: adoption held: {hold}").into()),
    }
}

/// A plan for the machine, its approval and dispatch evidence.
async fn prepare(store: &PgStore, machine: &str) -> Result<(), Error> {
    let plan = format!("plan-{machine}");
    let now = store.now().await?;
    store
        .create_plan(
            &Actor::new("publisher", Role::Publisher),
            PlanSpec {
                id: plan.clone(),
                machine: machine.into(),
                release: RELEASE.into(),
                expires_at: now.plus(SpanMs::from_secs(3600)),
                // Preparation of many plans may take a while; the evidence must still
                // count when the measured pairs run.
                max_evidence_age: SpanMs::from_secs(3600),
                transport_deadline: SpanMs::from_secs(5),
                verification_deadline: SpanMs::from_secs(30),
                max_attempts: 3,
                revert: false,
            },
        )
        .await?;
    store
        .approve(&Actor::new("approver", Role::Approver), &plan)
        .await?;
    let ticket = store
        .begin_observation(ObservationRequest {
            machine: machine.into(),
            purpose: ObservationPurpose::Evidence,
            plan: Some(plan.clone()),
            controller: CONTROLLER,
        })
        .await?;
    store.record_observation(&ticket, facts(machine)).await?;
    store
        .record_dependency_check(DependencyCheck {
            plan,
            controller: CONTROLLER,
            access_path: "talos/cluster-bench/access".into(),
            access_version: "access-v1".into(),
            artifact_decrypts: true,
        })
        .await?;
    Ok(())
}

/// One commitment and the attempt it leads to.
async fn pair(store: &PgStore, machine: &str) -> Result<(), Error> {
    let committed = store.commit(&format!("plan-{machine}"), CONTROLLER).await?;
    let proof = store.attempt(&committed.operation, committed.owner).await?;
    if proof.attempt() != 1 || proof.machine() != machine {
        return Err(format!(
            "unexpected proof for {machine}: attempt {}",
            proof.attempt()
        )
        .into());
    }
    Ok(())
}

/// Two bare transactions on the machine's row: each locks it and bumps its revision.
async fn bare_pair(store: &PgStore, machine: &str) -> Result<(), Error> {
    for _ in 0..2 {
        let mut tx = store.pool().begin().await?;
        sqlx::query("SELECT revision FROM machines WHERE id = $1 FOR UPDATE")
            .bind(machine)
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query("UPDATE machines SET revision = revision + 1 WHERE id = $1")
            .bind(machine)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    }
    Ok(())
}

/// Run `work` on every machine, spread over `workers` tasks; each task returns the
/// time each of its calls took.
async fn across<F, Fut>(
    clock: &Arc<SystemClock>,
    store: &Arc<PgStore>,
    ids: &[String],
    workers: usize,
    work: F,
) -> Result<Vec<Duration>, Error>
where
    F: Fn(Arc<PgStore>, String) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<(), Error>> + Send,
{
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let store = store.clone();
            let mine: Vec<String> = ids.iter().skip(w).step_by(workers).cloned().collect();
            let work = work.clone();
            let clock = clock.clone();
            tokio::spawn(async move {
                let mut took = Vec::with_capacity(mine.len());
                for id in mine {
                    let started = clock.now();
                    work(store.clone(), id).await?;
                    took.push(clock.now() - started);
                }
                Ok::<_, Error>(took)
            })
        })
        .collect();
    let mut all = Vec::with_capacity(ids.len());
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(all)
}

fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a non-empty sample"
    )]
    let k = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[k].as_secs_f64() * 1000.0
}

async fn measure(options: &Options, database: &str, schema: &str) -> Result<String, Error> {
    let connect = PgConnectOptions::from_str(database)?
        .application_name("store_throughput")
        .options([("search_path", schema)]);
    let pool_size = u32::try_from(options.workers)?.saturating_add(2);
    let store = Arc::new(PgStore::connect_with(connect, pool_size).await?);
    let ids: Vec<String> = (0..options.pairs).map(machine_id).collect();
    inventory(&store, &ids).await?;
    let clock = Arc::new(SystemClock::new());
    across(&clock, &store, &ids, options.workers, |s, id| async move {
        prepare(&s, &id).await
    })
    .await?;
    let (mut elapsed, mut bare) = (Duration::ZERO, Duration::ZERO);
    let mut took = Vec::with_capacity(ids.len());
    for slice in ids.chunks(ids.len().div_ceil(options.rounds)) {
        let started = clock.now();
        took.extend(
            across(&clock, &store, slice, options.workers, |s, id| async move {
                pair(&s, &id).await
            })
            .await?,
        );
        elapsed += clock.now() - started;
        let started = clock.now();
        across(&clock, &store, slice, options.workers, |s, id| async move {
            bare_pair(&s, &id).await
        })
        .await?;
        bare += clock.now() - started;
    }
    store.pool().close().await;
    took.sort_unstable();
    #[allow(clippy::cast_precision_loss, reason = "rates for display")]
    let (rate, bare_rate) = (
        options.pairs as f64 / elapsed.as_secs_f64(),
        options.pairs as f64 / bare.as_secs_f64(),
    );
    Ok(format!(
        "store_throughput pairs={} workers={} rounds={} pairs_per_second={rate:.1} p50_ms={:.2} p99_ms={:.2} bare_pairs_per_second={bare_rate:.1} ratio_to_bare={:.2}",
        options.pairs,
        options.workers,
        options.rounds,
        percentile_ms(&took, 0.50),
        percentile_ms(&took, 0.99),
        bare_rate / rate,
    ))
}

async fn schema_sql(url: &str, sql: String) -> Result<(), Error> {
    let admin = PgPoolOptions::new().max_connections(1).connect(url).await?;
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&admin)
        .await?;
    admin.close().await;
    Ok(())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Error> {
    let options = options()?;
    let Some(database) = options.database.clone() else {
        println!(
            "store_throughput: no database (set {URL_VAR} or pass --database); nothing measured"
        );
        return Ok(());
    };
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)?;
    let schema = format!(
        "bench_{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    schema_sql(&database, format!("CREATE SCHEMA {schema}")).await?;
    let outcome = measure(&options, &database, &schema).await;
    let dropped = schema_sql(&database, format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
    println!("{}", outcome?);
    dropped
}
