//! Records from every schema version this project has shipped, run through the runner
//! on the simulated cloud they describe: each plans "No changes" as it is, is migrated
//! on the first write with the file as it was kept beside it (`<file>.v<N>.bak`), and a
//! record of a newer version is refused and left exactly as it was.
//!
//! The corpus is `tests/fixtures/records/<record>-v<N>/`: one entry per record and
//! schema version, each a state directory (`state/`) and the world it matches
//! (`world.json`, a simulated cloud's file); its README names the commit whose code
//! wrote each entry. The list of versions is derived from the version constants, so a
//! version without an entry fails `every_schema_version_has_a_corpus_entry`. The entries
//! of this build's versions are written by
//!
//! ```text
//! cargo test -p infra-core --test records_versions -- --ignored write_the_entries_of_this_builds_versions
//! ```
//!
//! which adds only the entries that are missing, never rewriting one.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use infra_core::kinds::ObjectStore;
use infra_core::prelude::{AwsRegion, CheckReport, Fleet};
use infra_core::records::{CACHE_VERSION, LEDGER_VERSION, LockHolder, MANIFEST_VERSION};
use infra_testkit::sim::SimCloud;
use support::console::{Session, answering};

/// Where the corpus is.
fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/records")
}

/// The fleet every entry's records describe: two buckets in Paris and one in Virginia;
/// `grown` adds a fourth, so that a run has something to write.
fn shop(grown: bool) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("shop");
    f.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
    f.declare(AwsRegion::EuWest3, "shop-logs", ObjectStore::new());
    f.declare(AwsRegion::UsEast1, "shop-archive", ObjectStore::new());
    if grown {
        f.declare(AwsRegion::EuWest3, "shop-media", ObjectStore::new());
    }
    f.build()
}

/// The versions of the lock file. `lock.json` carries no version field: it describes
/// the run holding the lock, for the runs it turns away, and has had one shape since
/// the lock was made. A change of that shape adds a version here, and an entry.
const LOCK_FILE_VERSION: u32 = 1;

/// The number of a plan file's version (`v1` is 1).
fn plan_file_version() -> u32 {
    infra_core::engine::PLAN_FILE_VERSION
        .strip_prefix('v')
        .and_then(|n| n.parse().ok())
        .expect("the plan file's version reads as v<N>")
}

/// Every (record, version) this build reads, from the version constants: each needs an
/// entry in the corpus.
fn schemas() -> Vec<(&'static str, u32)> {
    let mut all = Vec::new();
    let mut upto = |record, newest| all.extend((1..=newest).map(|v| (record, v)));
    upto("ledger", LEDGER_VERSION);
    upto("cache", CACHE_VERSION);
    upto("manifest", MANIFEST_VERSION);
    upto("plan", plan_file_version());
    upto("lock", LOCK_FILE_VERSION);
    #[cfg(feature = "postgres")]
    upto(
        "postgres",
        u32::try_from(infra_core::records::PostgresStore::SCHEMA_VERSION).expect("a small number"),
    );
    all
}

/// The version this build writes of a file record.
fn current(record: &str) -> u32 {
    match record {
        "ledger" => LEDGER_VERSION,
        "cache" => CACHE_VERSION,
        "manifest" => MANIFEST_VERSION,
        other => panic!("{other} is not a record file of the file store"),
    }
}

/// Every file under `dir`, by its path relative to `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().map(Result::unwrap) {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    for rel in files_under(from) {
        let target = to.join(&rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(from.join(&rel), target).unwrap();
    }
}

/// The record a file holds, by the version field it carries: (record, version).
fn record_of(text: &str) -> Option<(&'static str, u32)> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let number = |field| Some(u32::try_from(value.get(field)?.as_u64()?).unwrap());
    if let Some(v) = number("manifest") {
        return Some(("manifest", v));
    }
    if let Some(v) = number("ledger") {
        return Some(("ledger", v));
    }
    number("cache").map(|v| ("cache", v))
}

/// The record files of a state directory: relative path → (record, version, bytes).
fn records_in(state: &Path) -> BTreeMap<PathBuf, (&'static str, u32, Vec<u8>)> {
    files_under(state)
        .into_iter()
        .filter(|rel| rel.extension().is_some_and(|e| e == "json"))
        .filter_map(|rel| {
            let bytes = std::fs::read(state.join(&rel)).unwrap();
            let (record, version) = record_of(std::str::from_utf8(&bytes).ok()?)?;
            Some((rel, (record, version, bytes)))
        })
        .collect()
}

/// Where the file store keeps a record file once it has read it: the cache files of
/// the layout before the manifest (`<fleet>/<provider>/<kind>.json`) move under
/// `<fleet>/cache/`.
fn home_of(rel: &Path) -> PathBuf {
    let parts: Vec<_> = rel.components().collect();
    match parts.as_slice() {
        [fleet, provider, kind] if provider.as_os_str() != "cache" => {
            Path::new(fleet).join("cache").join(provider).join(kind)
        }
        _ => rel.to_path_buf(),
    }
}

/// The backup a record of version `version` is kept as.
fn backup_of(path: &Path, version: u32) -> PathBuf {
    let mut name = path.file_name().unwrap().to_os_string();
    name.push(format!(".v{version}.bak"));
    path.with_file_name(name)
}

/// One entry of the corpus.
struct Entry {
    name: String,
    dir: PathBuf,
}

impl Entry {
    fn all() -> Vec<Entry> {
        let mut all: Vec<Entry> = std::fs::read_dir(corpus())
            .unwrap()
            .map(Result::unwrap)
            .filter(|e| e.file_type().unwrap().is_dir())
            .map(|e| Entry {
                name: e.file_name().to_string_lossy().into_owned(),
                dir: e.path(),
            })
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        assert!(!all.is_empty(), "no corpus at {}", corpus().display());
        all
    }

    fn named(name: &str) -> Entry {
        Entry::all()
            .into_iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no corpus entry {name}"))
    }

    /// The entries that are a state directory of the file store.
    fn of_file_store() -> Vec<Entry> {
        Entry::all()
            .into_iter()
            .filter(|e| e.dir.join("state").is_dir())
            .collect()
    }

    /// A copy of the entry: its world opened from a copy of its file, and a session
    /// whose state directory holds a copy of its records (empty for the PostgreSQL
    /// entries).
    fn set_up(&self) -> Copy {
        let world_dir = tempfile::tempdir().unwrap();
        let world = world_dir.path().join("world.json");
        std::fs::copy(self.dir.join("world.json"), &world).unwrap();
        let cloud = SimCloud::open(&world).unwrap();
        let session = answering(false, true);
        if self.dir.join("state").is_dir() {
            copy_dir(&self.dir.join("state"), session.state.path());
        }
        Copy {
            cloud,
            session,
            _world: world_dir,
        }
    }
}

/// A copy of an entry, to run the runner on.
struct Copy {
    cloud: SimCloud,
    session: Session,
    _world: tempfile::TempDir,
}

impl Copy {
    async fn run(&mut self, grown: bool, args: &[&str]) -> (u8, String, String) {
        self.session.run(shop(grown), &self.cloud, args).await
    }

    fn state(&self) -> &Path {
        self.session.state.path()
    }
}

#[test]
fn every_schema_version_has_a_corpus_entry() {
    let readme = std::fs::read_to_string(corpus().join("README.md")).unwrap();
    let mut missing = Vec::new();
    for (record, version) in schemas() {
        let name = format!("{record}-v{version}");
        let dir = corpus().join(&name);
        if !dir.is_dir() {
            missing.push(name);
            continue;
        }
        assert!(
            readme.contains(&format!("`{name}`")),
            "the corpus README does not name {name}'s commit"
        );
        assert!(dir.join("world.json").is_file(), "{name} has no world");
        match record {
            "plan" => {
                let file: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap();
                assert_eq!(file["planFile"], format!("v{version}"), "{name}");
            }
            "lock" => {
                let text = std::fs::read_to_string(dir.join("state/shop/lock.json")).unwrap();
                let holder: LockHolder = serde_json::from_str(&text).unwrap();
                assert!(!holder.id.is_empty(), "{name}");
            }
            "postgres" => {
                let sql = std::fs::read_to_string(dir.join("records.sql")).unwrap();
                assert!(
                    sql.contains(&format!("VALUES ({version}, ")),
                    "{name} records no schema version {version}"
                );
            }
            _ => {
                let held: Vec<u32> = records_in(&dir.join("state"))
                    .into_values()
                    .filter(|(r, _, _)| *r == record)
                    .map(|(_, v, _)| v)
                    .collect();
                assert!(
                    !held.is_empty() && held.iter().all(|v| *v == version),
                    "{name} holds {record} files of versions {held:?}"
                );
            }
        }
    }
    assert!(
        missing.is_empty(),
        "no corpus entry for {missing:?}: a schema version changed without one. Write it with \
         `cargo test -p infra-core --test records_versions -- --ignored \
         write_the_entries_of_this_builds_versions`, then name the commit in \
         tests/fixtures/records/README.md"
    );
    // And no entry names a version this build does not read.
    let known: Vec<String> = schemas().iter().map(|(r, v)| format!("{r}-v{v}")).collect();
    for entry in Entry::all() {
        if entry.name.starts_with("postgres-") && cfg!(not(feature = "postgres")) {
            continue;
        }
        assert!(
            known.contains(&entry.name),
            "{} names no version this build reads",
            entry.name
        );
    }
}

#[tokio::test]
async fn every_entry_plans_no_changes_against_its_world_and_writes_nothing() {
    for entry in Entry::of_file_store() {
        let mut copy = entry.set_up();
        let before = records_in(copy.state());
        let (code, out, err) = copy.run(false, &["plan", "--detailed-exitcode"]).await;
        assert_eq!(code, 0, "{}: {out}{err}", entry.name);
        assert!(out.contains("No changes"), "{}: {out}", entry.name);
        assert_eq!(
            records_in(copy.state()),
            before,
            "{}: a plan wrote",
            entry.name
        );
        assert!(copy.cloud.writes().is_empty(), "{}", entry.name);
    }
}

#[tokio::test]
async fn the_first_write_migrates_each_earlier_record_keeping_it_beside_as_it_was() {
    for entry in Entry::of_file_store() {
        let mut copy = entry.set_up();
        let before = records_in(copy.state());
        let (code, out, err) = copy.run(true, &["apply", "--yes"]).await;
        assert_eq!(code, 0, "{}: {out}{err}", entry.name);
        let after = records_in(copy.state());
        for (rel, (record, version, bytes)) in &before {
            let home = home_of(rel);
            let backup = backup_of(&copy.state().join(&home), *version);
            if *version < current(record) {
                assert_eq!(
                    std::fs::read(&backup).ok().as_ref(),
                    Some(bytes),
                    "{}: {} was not kept as {} byte for byte",
                    entry.name,
                    rel.display(),
                    backup.display()
                );
            } else {
                assert!(!backup.exists(), "{}: {}", entry.name, backup.display());
            }
            let (now, version, _) = after
                .get(&home)
                .unwrap_or_else(|| panic!("{}: {} is gone", entry.name, home.display()));
            assert_eq!(*version, current(now), "{}: {}", entry.name, home.display());
            if home != *rel {
                assert!(!copy.state().join(rel).exists(), "{}", rel.display());
            }
        }
        // Nothing but backups was added beside the records.
        for rel in files_under(copy.state()) {
            let name = rel.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                after.contains_key(&rel) || name.ends_with(".bak"),
                "{}: {} was left in the state directory",
                entry.name,
                rel.display()
            );
        }

        let (code, out, err) = copy.run(true, &["plan", "--detailed-exitcode"]).await;
        assert_eq!(code, 0, "{}: {out}{err}", entry.name);
        assert!(out.contains("No changes"), "{}: {out}", entry.name);

        // A second write migrates nothing, and the backups stay as they were.
        let kept: Vec<(PathBuf, Vec<u8>)> = files_under(copy.state())
            .into_iter()
            .filter(|r| r.to_string_lossy().ends_with(".bak"))
            .map(|r| {
                let bytes = std::fs::read(copy.state().join(&r)).unwrap();
                (r, bytes)
            })
            .collect();
        let (code, out, err) = copy.run(false, &["apply", "--yes"]).await;
        assert_eq!(code, 0, "{}: {out}{err}", entry.name);
        for (rel, bytes) in kept {
            assert_eq!(std::fs::read(copy.state().join(&rel)).unwrap(), bytes);
        }
    }
}

#[tokio::test]
async fn a_backup_holding_something_else_stops_a_writing_run_before_any_cloud_call() {
    let entry = Entry::named("ledger-v1");
    let mut copy = entry.set_up();
    let ledger = copy.state().join("shop/ledger.json");
    let backup = copy.state().join("shop/ledger.json.v1.bak");
    std::fs::write(&backup, "{\"notes\": \"kept by hand\"}\n").unwrap();
    let before: Vec<(PathBuf, Vec<u8>)> = files_under(copy.state())
        .into_iter()
        .map(|r| {
            let bytes = std::fs::read(copy.state().join(&r)).unwrap();
            (r, bytes)
        })
        .collect();

    let (code, out, err) = copy.run(true, &["apply", "--yes"]).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(&ledger.display().to_string()) && err.contains(&backup.display().to_string()),
        "the refusal names both files: {err}"
    );
    assert!(err.contains("from schema version 1 to"), "{err}");
    assert!(copy.cloud.writes().is_empty(), "a cloud call was made");
    for (rel, bytes) in before {
        assert_eq!(
            std::fs::read(copy.state().join(&rel)).unwrap(),
            bytes,
            "{}",
            rel.display()
        );
    }
    // Moved away, the migration goes ahead.
    std::fs::remove_file(&backup).unwrap();
    let (code, out, err) = copy.run(true, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(backup.is_file());
}

#[tokio::test]
async fn the_lock_file_of_every_version_left_by_a_killed_run_is_read_and_taken_over() {
    for version in 1..=LOCK_FILE_VERSION {
        let entry = Entry::named(&format!("lock-v{version}"));
        let mut copy = entry.set_up();
        let left: LockHolder =
            serde_json::from_slice(&std::fs::read(copy.state().join("shop/lock.json")).unwrap())
                .unwrap();
        let (code, out, err) = copy.run(true, &["apply", "--yes"]).await;
        assert_eq!(code, 0, "lock-v{version}: {out}{err}");
        // Read, not just overwritten: the run names the holder the file described.
        assert!(
            err.contains("was taken over") && err.contains(&left.id),
            "lock-v{version}: {err}"
        );
        assert!(
            !copy.state().join("shop/lock.json").exists(),
            "the lock is released"
        );
    }
}

/// Every file under `dir` with its bytes and modification time.
fn exactly(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, SystemTime)> {
    files_under(dir)
        .into_iter()
        .map(|rel| {
            let path = dir.join(&rel);
            let meta = std::fs::metadata(&path).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            (rel, (bytes, meta.modified().unwrap()))
        })
        .collect()
}

/// Sets a file's modification time to a day before now, so that any write shows.
fn age(path: &Path) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        .unwrap();
}

/// `text` with its schema version raised by one and a field this build does not know.
fn newer(text: &str, record: &str) -> String {
    let mut value: serde_json::Value = serde_json::from_str(text).unwrap();
    let next = current(record) + 1;
    value[record] = next.into();
    value["writtenBy"] = "a later build".into();
    serde_json::to_string_pretty(&value).unwrap() + "\n"
}

#[tokio::test]
async fn a_record_of_a_newer_version_is_refused_and_left_exactly_as_it_was() {
    // The entry of this build's ledger is this build's records, all in their place.
    let entry = Entry::named(&format!("ledger-v{LEDGER_VERSION}"));
    for record in ["ledger", "cache", "manifest"] {
        let mut copy = entry.set_up();
        let (rel, _) = records_in(copy.state())
            .into_iter()
            .find(|(_, (r, _, _))| *r == record)
            .unwrap();
        let path = copy.state().join(&rel);
        std::fs::write(
            &path,
            newer(&std::fs::read_to_string(&path).unwrap(), record),
        )
        .unwrap();
        for file in files_under(copy.state()) {
            age(&copy.state().join(file));
        }
        let before = exactly(copy.state());

        for args in [
            &["plan"][..],
            &["apply", "--yes"],
            &["destroy", "--yes"],
            &["refresh"],
            &["discover"],
        ] {
            let (code, out, err) = copy.run(true, args).await;
            assert_eq!(code, 1, "{record}: {args:?}: {out}{err}");
            assert!(
                err.contains("newer than this build understands")
                    && err.contains(&path.display().to_string()),
                "{record}: {args:?}: {err}"
            );
        }
        assert_eq!(
            exactly(copy.state()),
            before,
            "{record}: the records changed"
        );
        assert!(copy.cloud.writes().is_empty(), "{record}: a cloud call");
    }
}

#[tokio::test]
async fn a_plan_file_of_every_version_applies_as_it_was_made() {
    for version in 1..=plan_file_version() {
        let entry = Entry::named(&format!("plan-v{version}"));
        let mut copy = entry.set_up();
        let file = copy.state().join("plan.json");
        std::fs::copy(entry.dir.join("plan.json"), &file).unwrap();
        let file = file.to_str().unwrap().to_owned();
        let (code, out, err) = copy.run(true, &["apply", &file]).await;
        assert_eq!(code, 0, "plan-v{version}: {out}{err}");
        assert!(out.contains("Apply complete"), "{out}");
        assert!(
            !copy
                .cloud
                .find("aws", "objectStore", "shop-media")
                .is_empty()
        );
        let (code, out, _) = copy.run(true, &["plan", "--detailed-exitcode"]).await;
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("No changes"), "{out}");
    }
}

#[tokio::test]
async fn a_plan_file_of_a_newer_version_is_refused_and_left_exactly_as_it_was() {
    let entry = Entry::named(&format!("plan-v{}", plan_file_version()));
    let mut copy = entry.set_up();
    let file = copy.state().join("plan.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(entry.dir.join("plan.json")).unwrap()).unwrap();
    value["planFile"] = format!("v{}", plan_file_version() + 1).into();
    value["writtenBy"] = "a later build".into();
    std::fs::write(&file, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    age(&file);
    let before = exactly(copy.state());
    let path = file.to_str().unwrap().to_owned();
    let (code, out, err) = copy.run(true, &["apply", &path]).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("written by a newer version of infra") && err.contains(&path),
        "{err}"
    );
    assert_eq!(exactly(copy.state()), before);
    assert!(copy.cloud.writes().is_empty());
}

/// Writes the corpus entries of this build's versions that are missing: the fleet
/// `shop` applied on a fresh simulated cloud, its state directory and world kept; the
/// plan entry also keeps `plan --out` of the grown fleet; the lock entry also keeps the
/// `lock.json` a run killed while holding the lock leaves. Never rewrites an entry.
#[tokio::test]
#[ignore = "writes corpus entries: run by hand when a schema version changes"]
async fn write_the_entries_of_this_builds_versions() {
    let mut written = Vec::new();
    for (record, version) in schemas() {
        let newest = schemas()
            .iter()
            .filter(|(r, _)| *r == record)
            .map(|(_, v)| *v)
            .max();
        let name = format!("{record}-v{version}");
        let dir = corpus().join(&name);
        if Some(version) != newest || dir.exists() || record == "postgres" {
            continue;
        }
        write_entry(record, &dir).await;
        written.push(name);
    }
    println!(
        "written: {written:?}; name the commit of each in {}",
        corpus().join("README.md").display()
    );
}

async fn write_entry(record: &str, dir: &Path) {
    let world_dir = tempfile::tempdir().unwrap();
    let world = world_dir.path().join("world.json");
    let cloud = SimCloud::open(&world).unwrap();
    let mut s = answering(false, true);
    let (code, out, err) = s.run(shop(false), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{out}{err}");
    std::fs::create_dir_all(dir).unwrap();
    if record == "plan" {
        let file = dir.join("plan.json");
        let (code, out, err) = s
            .run(
                shop(true),
                &cloud,
                &["plan", "--out", file.to_str().unwrap()],
            )
            .await;
        assert_eq!(code, 0, "{out}{err}");
    }
    if record == "lock" {
        // As a run killed holding the lock leaves it: the kernel's lock is gone with the
        // process, its description stays. The process id cannot be running (above the
        // largest Linux allows).
        let holder = LockHolder {
            id: "5eed10c4c0ffee00".into(),
            host: "build-host".into(),
            pid: 4_194_305,
            verb: "apply".into(),
            since: 1_764_547_200,
        };
        let text = serde_json::to_vec_pretty(&holder).unwrap();
        std::fs::write(s.state.path().join("shop/lock.json"), text).unwrap();
    }
    cloud.save().unwrap();
    drop(cloud);
    copy_dir(s.state.path(), &dir.join("state"));
    std::fs::copy(&world, dir.join("world.json")).unwrap();
}

/// The PostgreSQL entries: the tables of each schema version, loaded into a database of
/// their own.
#[cfg(feature = "postgres")]
mod on_postgresql {
    use sqlx::Connection as _;
    use sqlx::postgres::PgConnection;

    use super::support::pg::{self, Db, database_url};
    use super::*;

    /// Every row of the store's tables, as one text: what a run must leave as it was.
    async fn tables(url: &str) -> String {
        let mut conn = PgConnection::connect(url).await.expect("connect");
        let mut out = String::new();
        for table in [
            "infra_schema_versions",
            "infra_ledger_rows",
            "infra_cache_entries",
        ] {
            let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT t::text FROM {table} t ORDER BY t::text"
            )))
            .fetch_all(&mut conn)
            .await
            .expect("a table of the store");
            out.push_str(&format!("{table}: {rows:?}\n"));
        }
        conn.close().await.expect("close");
        out
    }

    #[tokio::test]
    async fn the_tables_of_every_schema_version_plan_no_changes_and_take_writes() {
        let Some(admin) = database_url("the tables of every schema version") else {
            return;
        };
        let newest = u32::try_from(infra_core::records::PostgresStore::SCHEMA_VERSION).unwrap();
        for version in 1..=newest {
            let entry = Entry::named(&format!("postgres-v{version}"));
            let db = Db::new(&admin, &entry.name);
            pg::sql(
                &db.url,
                &std::fs::read_to_string(entry.dir.join("records.sql")).unwrap(),
            );
            let mut copy = entry.set_up();
            let loaded = tables(&db.url).await;

            let (code, out, err) = copy
                .run(
                    false,
                    &["--records", &db.url, "plan", "--detailed-exitcode"],
                )
                .await;
            assert_eq!(code, 0, "{}: {out}{err}", entry.name);
            assert!(out.contains("No changes"), "{}: {out}", entry.name);
            assert!(copy.cloud.writes().is_empty());
            if version == newest {
                assert_eq!(tables(&db.url).await, loaded, "a plan changed the tables");
            }
            // An earlier schema was brought to this build's (in one transaction, by the
            // store's first connection), its rows kept.
            let mut conn = PgConnection::connect(&db.url).await.unwrap();
            let versions: Vec<i64> =
                sqlx::query_scalar("SELECT version FROM infra_schema_versions ORDER BY version")
                    .fetch_all(&mut conn)
                    .await
                    .unwrap();
            let rows: i64 =
                sqlx::query_scalar("SELECT count(*) FROM infra_ledger_rows WHERE fleet = 'shop'")
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
            conn.close().await.unwrap();
            assert_eq!(versions, (1..=i64::from(newest)).collect::<Vec<_>>());
            assert_eq!(rows, 3, "{}", entry.name);

            let (code, out, err) = copy
                .run(true, &["--records", &db.url, "apply", "--yes"])
                .await;
            assert_eq!(code, 0, "{}: {out}{err}", entry.name);
            let (code, out, err) = copy
                .run(true, &["--records", &db.url, "plan", "--detailed-exitcode"])
                .await;
            assert_eq!(code, 0, "{}: {out}{err}", entry.name);
            assert!(out.contains("No changes"), "{}: {out}", entry.name);
            drop(db);
        }
    }

    #[tokio::test]
    async fn tables_of_a_newer_schema_are_refused_and_left_as_they_were() {
        let Some(admin) = database_url("tables of a newer schema") else {
            return;
        };
        let newest = infra_core::records::PostgresStore::SCHEMA_VERSION;
        let entry = Entry::named(&format!("postgres-v{newest}"));
        let db = Db::new(&admin, "corpus_newer");
        pg::sql(
            &db.url,
            &std::fs::read_to_string(entry.dir.join("records.sql")).unwrap(),
        );
        pg::sql(
            &db.url,
            &format!(
                "INSERT INTO infra_schema_versions (version, name, checksum) \
                 VALUES ({}, 'a later migration', 'of a later build')",
                newest + 1
            ),
        );
        let before = tables(&db.url).await;
        let mut copy = entry.set_up();
        for args in [&["plan"][..], &["apply", "--yes"], &["destroy", "--yes"]] {
            let argv: Vec<&str> = ["--records", db.url.as_str()]
                .into_iter()
                .chain(args.iter().copied())
                .collect();
            let (code, out, err) = copy.run(true, &argv).await;
            assert_eq!(code, 1, "{args:?}: {out}{err}");
            assert!(
                err.contains("newer than this build understands"),
                "{args:?}: {err}"
            );
        }
        assert_eq!(tables(&db.url).await, before);
        assert!(copy.cloud.writes().is_empty());
        drop(db);
    }
}
