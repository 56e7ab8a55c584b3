//! `records move`, driven as a person would against the simulated cloud: a fleet split
//! in two and merged back creates and deletes nothing (counted in the cloud's own call
//! log), what it prints and how it exits (snapshots), what is on disk in both fleets'
//! state directories, which markers the cloud holds, every refusal changing nothing,
//! and a run killed at each of its writes leaving records that neither fleet's next
//! run creates or deletes anything from, and that the same move run again completes.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use infra_core::kinds::*;
use infra_core::prelude::{AwsRegion, CheckReport, Expr, Fleet, Partial};
use infra_core::records::{
    CacheEntry, FileStore, Ledger, LedgerRow, LockError, LockGuard, LockHolder, RecordError,
    RecordStore, move_rows,
};
use infra_core::sdk::{ErrorKind, MARKER_KEY, Marker};
use infra_testkit::sim::{Op, SimCloud};
use support::console::{Session, answering, json};

const HERE: AwsRegion = AwsRegion::EuWest3;

/// The estate: a site's bucket and a worker's queue and token. `shop` declares what
/// `site` and `worker` say; the worker's part moves to fleet `worker`.
fn declared(fleet: &str, site: bool, worker: bool) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder(fleet);
    if site {
        f.declare(HERE, "site-assets", ObjectStore::new());
    }
    if worker {
        f.declare(
            HERE,
            "jobs",
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: Partial::Known(Expr::lit(30)),
                retention_seconds: Partial::Unknown,
                dead_letter: Partial::Known(None),
                max_receive_count: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
        f.declare(HERE, "worker-token", Secrets::generated(24));
    }
    f.build()
}

/// The whole estate in one fleet.
fn shop() -> Result<Fleet, CheckReport> {
    declared("shop", true, true)
}

/// The shop without the worker's part.
fn site() -> Result<Fleet, CheckReport> {
    declared("shop", true, false)
}

/// The worker's part as a fleet of its own.
fn worker() -> Result<Fleet, CheckReport> {
    declared("worker", false, true)
}

const MOVED: [&str; 2] = ["jobs", "worker-token"];

fn row(kind: &str, name: &str) -> LedgerRow {
    LedgerRow {
        provider: "aws".into(),
        kind: kind.into(),
        name: name.into(),
        region: "eu-west-3".into(),
    }
}

fn rows_of(ledger: &Ledger) -> Vec<String> {
    ledger.rows.iter().map(|r| r.name.clone()).collect()
}

/// The marker each resource of the cloud carries, by name.
fn markers(cloud: &SimCloud) -> BTreeMap<String, String> {
    cloud
        .resources()
        .into_iter()
        .map(|r| {
            let marker = r.raw_tags.get(MARKER_KEY).cloned().unwrap_or_default();
            (r.name, marker)
        })
        .collect()
}

/// Creates and deletes the cloud received (its own log, not our report).
fn creates_and_deletes(cloud: &SimCloud) -> Vec<String> {
    cloud
        .calls()
        .into_iter()
        .filter(|c| matches!(c.op, Op::Create | Op::Delete))
        .map(|c| format!("{:?} {:?}", c.op, c.name))
        .collect()
}

/// Every file of the state directory and its bytes (the lock file aside: it lives only
/// while a run holds it).
fn files(s: &Session) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.file_name().is_some_and(|n| n != "lock.json") {
                let name = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(s.state.path(), s.state.path(), &mut out);
    out
}

/// The session's output with its state directory's path made stable.
fn stable(s: &Session, text: &str) -> String {
    text.replace(s.state.path().to_str().unwrap(), "[STATE]")
}

async fn plan_is_empty(cloud: &SimCloud, s: &mut Session, f: Result<Fleet, CheckReport>) {
    let (code, out, err) = s.run(f, cloud, &["plan", "--detailed-exitcode"]).await;
    assert_eq!(code, 0, "the plan is not empty:\n{out}{err}");
    assert!(out.contains("No changes"), "{out}");
}

async fn applied(cloud: &SimCloud, s: &mut Session) {
    let (code, out, err) = s.run(shop(), cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{out}{err}");
    cloud.clear_calls();
}

#[tokio::test]
async fn a_split_and_a_merge_move_markers_and_records_and_create_and_delete_nothing() {
    let cloud = support::cloud(71);
    let mut s = answering(false, true);
    applied(&cloud, &mut s).await;

    // The split: the worker's part goes to fleet `worker`.
    let (code, out, err) = s
        .run(
            shop(),
            &cloud,
            &[
                "records",
                "move",
                "jobs",
                "worker-token",
                "--to",
                "worker",
                "--yes",
            ],
        )
        .await;
    assert_eq!(code, 0, "{out}{err}");
    insta::assert_snapshot!("split", stable(&s, &out));

    // What is on disk: each fleet's own directory holds its part.
    let store = FileStore::new(s.state.path());
    assert_eq!(
        rows_of(&store.load_ledger("shop").unwrap()),
        ["site-assets"]
    );
    assert_eq!(
        rows_of(&store.load_ledger("worker").unwrap()),
        ["jobs", "worker-token"]
    );
    for (fleet, kind, names) in [
        ("shop", "objectStore", vec!["site-assets"]),
        ("shop", "queues", vec![]),
        ("shop", "secrets", vec![]),
        ("worker", "queues", vec!["jobs"]),
        ("worker", "secrets", vec!["worker-token"]),
    ] {
        let cached: Vec<String> = store
            .load_cache(fleet, "aws", kind)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(cached, names, "{fleet}'s cache of {kind}");
    }
    assert!(s.state.path().join("worker/ledger.json").is_file());
    assert!(
        s.state
            .path()
            .join("worker/cache/aws/queues.json")
            .is_file()
    );
    assert!(!s.state.path().join("shop/cache/aws/queues.json").exists());

    // What the cloud holds: the moved resources carry the worker's marker.
    let marked = markers(&cloud);
    assert_eq!(marked["site-assets"], "shop");
    for name in MOVED {
        assert_eq!(marked[name], "worker", "{name}");
    }
    // The only writes were the two markers.
    let writes: Vec<(Op, Option<String>)> =
        cloud.writes().into_iter().map(|c| (c.op, c.name)).collect();
    assert_eq!(
        writes,
        [
            (Op::Update, Some("jobs".to_owned())),
            (Op::Update, Some("worker-token".to_owned())),
        ]
    );

    // Each fleet declaring its part plans nothing.
    plan_is_empty(&cloud, &mut s, site()).await;
    plan_is_empty(&cloud, &mut s, worker()).await;

    // The merge back, run by the worker's program, read as JSON.
    let (code, out, err) = s
        .run(
            worker(),
            &cloud,
            &[
                "records",
                "move",
                "jobs",
                "worker-token",
                "--to",
                "shop",
                "--yes",
                "--json",
            ],
        )
        .await;
    assert_eq!(code, 0, "{out}{err}");
    insta::assert_snapshot!("merge_json", out);
    // With --json, the plan went to standard error and standard output is one document.
    assert!(
        err.contains("records move: from fleet `worker` to fleet `shop`"),
        "{err}"
    );
    let outcome = json(&out);
    assert_eq!(outcome["move"], "v1");
    assert!(store.load_ledger("worker").unwrap().is_empty());
    assert_eq!(
        rows_of(&store.load_ledger("shop").unwrap()),
        ["site-assets", "jobs", "worker-token"]
    );
    assert!(markers(&cloud).values().all(|m| m == "shop"));
    plan_is_empty(&cloud, &mut s, shop()).await;
    plan_is_empty(&cloud, &mut s, declared("worker", false, false)).await;

    assert_eq!(creates_and_deletes(&cloud), Vec::<String>::new());
}

#[tokio::test]
async fn the_rows_keep_their_marks() {
    let cloud = support::cloud(72);
    let mut s = answering(false, true);
    applied(&cloud, &mut s).await;
    let store = FileStore::new(s.state.path());
    let mut ledger = store.load_ledger("shop").unwrap();
    ledger.discovered.insert(row("queues", "jobs"));
    store.save_ledger("shop", &ledger).unwrap();

    let (code, out, err) = s
        .run(
            shop(),
            &cloud,
            &["records", "move", "jobs", "--to", "worker", "--yes"],
        )
        .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("row (discovered)"), "{out}");
    let theirs = store.load_ledger("worker").unwrap();
    assert!(theirs.is_discovered(&row("queues", "jobs")));
    assert!(store.load_ledger("shop").unwrap().discovered.is_empty());
}

/// Runs a move that must be refused, and asserts that nothing changed: not a file of
/// the state directory, not a tag in the cloud.
async fn refused(
    cloud: &SimCloud,
    s: &mut Session,
    f: Result<Fleet, CheckReport>,
    args: &[&str],
) -> String {
    let (before_files, before_cloud) = (files(s), cloud.resources());
    cloud.clear_calls();
    let (code, out, err) = s.run(f, cloud, args).await;
    assert_eq!(code, 1, "{args:?} was not refused:\n{out}{err}");
    assert!(files(s) == before_files, "{args:?} changed the records");
    assert!(
        cloud.resources() == before_cloud,
        "{args:?} changed the cloud"
    );
    assert!(cloud.writes().is_empty(), "{args:?} wrote to the cloud");
    stable(s, &format!("{out}{err}"))
}

#[tokio::test]
async fn every_refusal_changes_nothing() {
    let cloud = support::cloud(73);
    let mut s = answering(false, true);
    applied(&cloud, &mut s).await;
    let mv = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut args = vec!["records", "move", "jobs", "--to", "worker"];
        args.extend(extra);
        args
    };
    let mut said = String::new();

    // No terminal and no --yes: the plan is shown, and nothing is done.
    said.push_str("$ records move jobs --to worker   (no terminal)\n");
    said.push_str(&refused(&cloud, &mut s, shop(), &mv(&[])).await);
    // Declined at the question.
    let mut declining = support::console::session(true, Box::new(|_| false));
    declining.state = std::mem::replace(&mut s.state, tempfile::tempdir().unwrap());
    said.push_str("\n$ records move jobs --to worker   (answered no)\n");
    said.push_str(&refused(&cloud, &mut declining, shop(), &mv(&[])).await);
    s.state = declining.state;

    // An address this fleet does not manage.
    said.push_str("\n$ records move job --to worker --yes\n");
    let args = ["records", "move", "job", "--to", "worker", "--yes"];
    said.push_str(&refused(&cloud, &mut s, shop(), &args).await);
    // The fleet itself, and a name no fleet can have.
    said.push_str("\n$ records move jobs --to shop --yes\n");
    let args = ["records", "move", "jobs", "--to", "shop", "--yes"];
    said.push_str(&refused(&cloud, &mut s, shop(), &args).await);
    said.push_str("\n$ records move jobs --to ../elsewhere --yes\n");
    let args = ["records", "move", "jobs", "--to", "../elsewhere", "--yes"];
    said.push_str(&refused(&cloud, &mut s, shop(), &args).await);
    // The destination's records in another store.
    let elsewhere = tempfile::tempdir().unwrap();
    let other = format!("file:{}", elsewhere.path().display());
    said.push_str("\n$ records move jobs --to worker --to-records file:[ELSEWHERE] --yes\n");
    let args = [
        "records",
        "move",
        "jobs",
        "--to",
        "worker",
        "--yes",
        "--to-records",
        &other,
    ];
    let text = refused(&cloud, &mut s, shop(), &args).await;
    said.push_str(&text.replace(elsewhere.path().to_str().unwrap(), "[ELSEWHERE]"));

    // A resource carrying another fleet's marker, and one carrying none.
    let jobs = cloud.find("aws", "queues", "jobs").remove(0);
    let mut tags = jobs.raw_tags.clone();
    tags.insert(MARKER_KEY.to_owned(), "billing".to_owned());
    cloud.set_raw_tags(&jobs.handle, tags.clone());
    said.push_str("\n$ records move jobs --to worker --yes   (jobs carries billing's marker)\n");
    said.push_str(&refused(&cloud, &mut s, shop(), &mv(&["--yes"])).await);
    tags.remove(MARKER_KEY);
    cloud.set_raw_tags(&jobs.handle, tags);
    said.push_str("\n$ records move jobs --to worker --yes   (jobs carries no marker)\n");
    said.push_str(&refused(&cloud, &mut s, shop(), &mv(&["--yes"])).await);
    cloud.set_raw_tags(&jobs.handle, jobs.raw_tags.clone());

    // The destination already manages that address while the resource is this fleet's.
    let store = FileStore::new(s.state.path());
    let theirs = Ledger {
        rows: [row("queues", "jobs")].into(),
        ..Ledger::default()
    };
    store.save_ledger("worker", &theirs).unwrap();
    said.push_str(
        "\n$ records move jobs worker-token --to worker --yes   (worker's records hold jobs)\n",
    );
    let args = [
        "records",
        "move",
        "jobs",
        "worker-token",
        "--to",
        "worker",
        "--yes",
        "--json",
    ];
    let text = refused(&cloud, &mut s, shop(), &args).await;
    said.push_str(&text);
    insta::assert_snapshot!("refusals", said);
}

/// The records of the state directory, whose writes fail from the `n`th on (0: every
/// one): a run killed after its first writes, each of which is atomic.
struct KilledAfter {
    files: FileStore,
    left: AtomicUsize,
}

impl KilledAfter {
    fn write(&self) -> Result<(), RecordError> {
        let left = self.left.load(Ordering::SeqCst);
        if left == 0 {
            return Err(RecordError::Io {
                path: self.files.root().to_owned(),
                source: std::io::Error::other("killed"),
            });
        }
        self.left.store(left - 1, Ordering::SeqCst);
        Ok(())
    }
}

impl RecordStore for KilledAfter {
    fn load_ledger(&self, fleet: &str) -> Result<Ledger, RecordError> {
        self.files.load_ledger(fleet)
    }
    fn save_ledger(&self, fleet: &str, ledger: &Ledger) -> Result<(), RecordError> {
        self.write()?;
        self.files.save_ledger(fleet, ledger)
    }
    fn load_cache(&self, fleet: &str, p: &str, k: &str) -> Result<Vec<CacheEntry>, RecordError> {
        self.files.load_cache(fleet, p, k)
    }
    fn save_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
        entries: &[CacheEntry],
    ) -> Result<(), RecordError> {
        self.write()?;
        self.files.save_cache(fleet, provider, kind, entries)
    }
    fn cached_pairs(&self, fleet: &str) -> Result<Vec<(String, String)>, RecordError> {
        self.files.cached_pairs(fleet)
    }
    fn try_lock(&self, fleet: &str, holder: &LockHolder) -> Result<LockGuard, LockError> {
        self.files.try_lock(fleet, holder)
    }
    fn force_unlock(&self, fleet: &str, id: &str) -> Result<LockHolder, LockError> {
        self.files.force_unlock(fleet, id)
    }
}

/// The writes of records a whole move of the worker's part makes: two cache pairs and
/// one ledger in each fleet.
const RECORD_WRITES: usize = 6;

/// Where a run of the move is killed: after `markers` markers were rewritten and
/// `records` writes of records were made.
#[derive(Clone, Copy, Debug)]
struct KilledAt {
    markers: usize,
    records: usize,
}

/// Leaves the records and the cloud as a move of the worker's part killed at `at`
/// would: the markers of the first resources rewritten (as the runner writes them),
/// then a prefix of the writes of records.
async fn killed(cloud: &SimCloud, s: &Session, at: KilledAt) {
    let backend = cloud.backend("aws");
    let marker = Marker::new("worker").handed_over_from("shop");
    for (kind, name) in [("queues", "jobs"), ("secrets", "worker-token")]
        .into_iter()
        .take(at.markers)
    {
        let handle = cloud.find("aws", kind, name).remove(0).handle;
        backend
            .mark(kind, "eu-west-3", &handle, &marker)
            .await
            .unwrap();
    }
    if at.markers < MOVED.len() {
        return; // killed among the markers: no record was written yet
    }
    let store = KilledAfter {
        files: FileStore::new(s.state.path()),
        left: AtomicUsize::new(at.records),
    };
    let rows: BTreeSet<LedgerRow> = [row("queues", "jobs"), row("secrets", "worker-token")].into();
    let moved = move_rows(&store, "shop", "worker", &rows);
    assert_eq!(
        moved.is_ok(),
        at.records >= RECORD_WRITES,
        "{at:?}: {moved:?}"
    );
}

#[tokio::test]
async fn a_move_killed_at_any_write_is_safe_for_both_fleets_and_completed_by_a_rerun() {
    let mut points: Vec<KilledAt> = (0..MOVED.len())
        .map(|markers| KilledAt {
            markers,
            records: 0,
        })
        .collect();
    points.extend((0..=RECORD_WRITES).map(|records| KilledAt {
        markers: MOVED.len(),
        records,
    }));
    for at in points {
        let cloud = support::cloud(74);
        let mut s = answering(false, true);
        applied(&cloud, &mut s).await;
        killed(&cloud, &s, at).await;

        // The next run of either fleet: the shop still declaring everything (its
        // declaration changes once the move is done), the worker declaring its part.
        // Neither creates nor deletes anything, whatever it reports.
        for f in [shop(), worker()] {
            let (_, out, err) = s.run(f, &cloud, &["apply", "--yes"]).await;
            assert_eq!(
                creates_and_deletes(&cloud),
                Vec::<String>::new(),
                "{at:?}:\n{out}{err}"
            );
        }
        // Once every marker is the worker's, the shop may drop the declarations at
        // once: its records cannot make it delete what carries another fleet's marker.
        if at.markers == MOVED.len() {
            let (_, out, err) = s.run(site(), &cloud, &["apply", "--yes"]).await;
            assert_eq!(
                creates_and_deletes(&cloud),
                Vec::<String>::new(),
                "{at:?}:\n{out}{err}"
            );
        }

        // The same move again completes it.
        let args = [
            "records",
            "move",
            "jobs",
            "worker-token",
            "--to",
            "worker",
            "--yes",
        ];
        let (code, out, err) = s.run(shop(), &cloud, &args).await;
        assert_eq!(
            code, 0,
            "{at:?}: the rerun did not complete the move:\n{out}{err}"
        );
        let store = FileStore::new(s.state.path());
        assert_eq!(
            rows_of(&store.load_ledger("shop").unwrap()),
            ["site-assets"],
            "{at:?}"
        );
        assert_eq!(
            rows_of(&store.load_ledger("worker").unwrap()),
            ["jobs", "worker-token"],
            "{at:?}"
        );
        assert!(
            store
                .load_cache("shop", "aws", "queues")
                .unwrap()
                .is_empty(),
            "{at:?}: an observation stayed behind"
        );
        plan_is_empty(&cloud, &mut s, site()).await;
        plan_is_empty(&cloud, &mut s, worker()).await;
        assert_eq!(creates_and_deletes(&cloud), Vec::<String>::new(), "{at:?}");
    }
}

#[tokio::test]
async fn a_resource_whose_marker_cannot_be_rewritten_stays_and_the_rest_moves() {
    let cloud = support::cloud(75);
    let mut s = answering(false, true);
    applied(&cloud, &mut s).await;
    cloud.fail_nth_matching(
        infra_testkit::sim::CallFilter {
            op: Some(Op::Update),
            kind: Some("secrets".to_owned()),
            ..infra_testkit::sim::CallFilter::any()
        },
        1,
        ErrorKind::Denied,
        false,
    );
    let args = [
        "records",
        "move",
        "jobs",
        "worker-token",
        "--to",
        "worker",
        "--yes",
        "--json",
    ];
    let (code, out, err) = s.run(shop(), &cloud, &args).await;
    assert_eq!(code, 1, "{out}{err}");
    let outcome = json(&out);
    let by_address: BTreeMap<String, String> = outcome["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["address"].as_str().unwrap().to_owned(),
                r["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(by_address["aws/queues/jobs (eu-west-3)"], "moved");
    assert_eq!(by_address["aws/secrets/worker-token (eu-west-3)"], "failed");
    let store = FileStore::new(s.state.path());
    assert_eq!(
        rows_of(&store.load_ledger("shop").unwrap()),
        ["site-assets", "worker-token"]
    );
    assert_eq!(rows_of(&store.load_ledger("worker").unwrap()), ["jobs"]);
    assert_eq!(markers(&cloud)["worker-token"], "shop");
    // Run again, the rest moves.
    let args = ["records", "move", "worker-token", "--to", "worker", "--yes"];
    let (code, out, err) = s.run(shop(), &cloud, &args).await;
    assert_eq!(code, 0, "{out}{err}");
    plan_is_empty(&cloud, &mut s, site()).await;
    plan_is_empty(&cloud, &mut s, worker()).await;
}

mod split_and_merge {
    //! The property: a generated fleet applied on the simulated cloud, split in two
    //! along its components with `records move`, then merged back, reaches the cloud
    //! with no create and no delete (counted in the cloud's own call log), and both
    //! fleets plan "No changes" at each stage.

    use std::collections::BTreeSet;

    use infra_core::prelude::Fleet;
    use infra_testkit::sim::SimCloud;
    use infra_testkit::strategy::{FleetShape, fleet_shape};
    use proptest::prelude::*;

    use super::support;
    use super::support::console::{Session, answering};
    use super::{creates_and_deletes, plan_is_empty};

    const SECOND: &str = "generated-b";

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
    }

    /// The positions going to the second fleet: the components `mask` picks (at least
    /// one).
    fn second_part(shape: &FleetShape, mask: u32) -> BTreeSet<usize> {
        let components = shape.components();
        let mut picked: BTreeSet<usize> = components
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << (i % 32)) != 0)
            .flat_map(|(_, c)| c.iter().copied())
            .collect();
        if picked.is_empty() {
            picked.extend(components[0].iter().copied());
        }
        picked
    }

    async fn moved(
        cloud: &SimCloud,
        s: &mut Session,
        fleet: Result<Fleet, infra_core::prelude::CheckReport>,
        names: &[String],
        to: &str,
    ) -> Result<(), TestCaseError> {
        let mut args = vec!["records", "move"];
        args.extend(names.iter().map(String::as_str));
        args.extend(["--to", to, "--yes"]);
        let (code, out, err) = s.run(fleet, cloud, &args).await;
        prop_assert_eq!(code, 0, "{:?}:\n{}{}", args, out, err);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn a_fleet_split_and_merged_back_creates_and_deletes_nothing(
            shape in fleet_shape(1..9),
            mask in any::<u32>(),
            seed in 0u64..1000,
        ) {
            runtime().block_on(async {
                let cloud = support::cloud(seed);
                let mut s = answering(false, true);
                let (code, out, err) = s.run(shape.build(), &cloud, &["apply", "--yes"]).await;
                prop_assert_eq!(code, 0, "{}{}", out, err);
                cloud.clear_calls();

                let second = second_part(&shape, mask);
                let names: Vec<String> =
                    second.iter().map(|&i| shape.resources[i].name.clone()).collect();
                let [first_part, second_part] = shape.build_split(&second, SECOND);

                // Split.
                moved(&cloud, &mut s, shape.build(), &names, SECOND).await?;
                plan_is_empty(&cloud, &mut s, first_part).await;
                plan_is_empty(&cloud, &mut s, second_part).await;

                // Merged back, by the second fleet's program.
                let [_, second_part] = shape.build_split(&second, SECOND);
                moved(&cloud, &mut s, second_part, &names, &shape.fleet).await?;
                plan_is_empty(&cloud, &mut s, shape.build()).await;
                plan_is_empty(&cloud, &mut s, Fleet::builder(SECOND).build()).await;

                prop_assert_eq!(creates_and_deletes(&cloud), Vec::<String>::new());
                Ok(())
            })?;
        }
    }
}
