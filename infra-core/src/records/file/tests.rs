use super::*;
use crate::records::LockError;

fn row(name: &str) -> LedgerRow {
    LedgerRow {
        provider: "aws".into(),
        kind: "s3Bucket".into(),
        name: name.into(),
        region: "eu-west-3".into(),
    }
}

#[test]
fn a_ledger_round_trips_and_its_file_is_stable() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let ledger = Ledger {
        rows: [row("b-bucket"), row("a-bucket"), row("c-bucket")].into(),
        discovered: [row("b-bucket")].into(),
        intents: [row("c-bucket")].into(),
        deleting: [row("a-bucket")].into(),
    };
    store.save_ledger("shop", &ledger).unwrap();
    assert_eq!(store.load_ledger("shop").unwrap(), ledger);
    let text = std::fs::read_to_string(dir.path().join("shop/ledger.json")).unwrap();
    assert!(
        text.starts_with("{\n  \"ledger\": 3,\n  \"fleet\": \"shop\",\n  \"serial\": 1,"),
        "{text}"
    );
    assert_eq!(text.matches("\"discovered\": true").count(), 1, "{text}");
    assert_eq!(text.matches("\"intent\": true").count(), 1, "{text}");
    assert_eq!(text.matches("\"deleting\": true").count(), 1, "{text}");
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path().join("shop"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["ledger.json"]);
}

#[test]
fn a_version_1_ledger_is_read_and_rewritten_as_version_3() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let path = dir.path().join("shop/ledger.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        r#"{"ledger": 1, "fleet": "shop", "rows": [{"provider": "aws", "kind": "s3Bucket", "name": "a-bucket", "region": "eu-west-3"}]}"#,
    )
    .unwrap();
    let ledger = store.load_ledger("shop").unwrap();
    assert_eq!(ledger.rows, [row("a-bucket")].into());
    assert!(ledger.discovered.is_empty());
    let before = std::fs::read(&path).unwrap();
    store.save_ledger("shop", &ledger).unwrap();
    assert_eq!(store.load_ledger("shop").unwrap(), ledger);
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("\"ledger\": 3")
    );
    // The file as version 1 wrote it is kept beside it, byte for byte.
    let backup = dir.path().join("shop/ledger.json.v1.bak");
    assert_eq!(std::fs::read(&backup).unwrap(), before);
    // The next write has nothing to migrate, and leaves the backup as it is.
    store.save_ledger("shop", &Ledger::default()).unwrap();
    assert_eq!(std::fs::read(&backup).unwrap(), before);
}

const LEDGER_V1: &str = r#"{"ledger": 1, "fleet": "shop", "rows": [{"provider": "aws", "kind": "s3Bucket", "name": "a-bucket", "region": "eu-west-3"}]}"#;

#[test]
fn a_backup_with_other_content_is_never_overwritten_and_the_migration_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let path = dir.path().join("shop/ledger.json");
    let backup = dir.path().join("shop/ledger.json.v1.bak");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, LEDGER_V1).unwrap();
    std::fs::write(&backup, "an earlier backup\n").unwrap();
    let err = store.save_ledger("shop", &Ledger::default()).unwrap_err();
    assert!(matches!(err, RecordError::BackupDiffers { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("ledger.json:"), "{text}");
    assert!(text.contains("ledger.json.v1.bak"), "{text}");
    assert!(
        text.contains(&format!("from schema version 1 to {LEDGER_VERSION}")),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), LEDGER_V1);
    assert_eq!(
        std::fs::read_to_string(&backup).unwrap(),
        "an earlier backup\n"
    );
    // A run that would write is refused when it takes the lock, before anything else.
    let Err(err) = store.try_lock("shop", &LockHolder::this_process("apply")) else {
        panic!("the lock was taken");
    };
    assert!(err.to_string().contains("ledger.json.v1.bak"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), LEDGER_V1);
}

#[test]
fn a_backup_left_by_a_stopped_migration_is_taken_as_it_is() {
    // A run stopped after keeping the backup and before writing the new version.
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let path = dir.path().join("shop/ledger.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, LEDGER_V1).unwrap();
    std::fs::write(dir.path().join("shop/ledger.json.v1.bak"), LEDGER_V1).unwrap();
    let ledger = store.load_ledger("shop").unwrap();
    store.save_ledger("shop", &ledger).unwrap();
    assert_eq!(
        store.load_ledger("shop").unwrap().rows,
        [row("a-bucket")].into()
    );
}

#[test]
fn a_newer_record_is_never_written_over_nor_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let path = dir.path().join("shop/ledger.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let newer = format!(
        r#"{{"ledger": {}, "fleet": "shop", "rows": [], "later": true}}"#,
        LEDGER_VERSION + 1
    );
    std::fs::write(&path, &newer).unwrap();
    let err = store.save_ledger("shop", &Ledger::default()).unwrap_err();
    assert!(matches!(err, RecordError::NewerVersion { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), newer);
    // The generic write path refuses it too, whoever calls it.
    let err = io::write_record(
        &path,
        &serde_json::json!({"ledger": LEDGER_VERSION}),
        LEDGER_VERSION,
    )
    .unwrap_err();
    assert!(matches!(err, RecordError::NewerVersion { .. }), "{err}");
    let err = io::remove_record(&path, LEDGER_VERSION).unwrap_err();
    assert!(matches!(err, RecordError::NewerVersion { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), newer);
    let names: Vec<String> = std::fs::read_dir(dir.path().join("shop"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["ledger.json"], "no backup, no temporary file");
}

#[test]
fn a_version_1_cache_emptied_is_kept_as_its_backup() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let entry = CacheEntry {
        name: "a-bucket".into(),
        region: "eu-west-3".into(),
        handle: "a-bucket".into(),
        observed: serde_json::json!({"id": "a-bucket"}),
        written: serde_json::Map::new(),
    };
    store
        .save_cache("shop", "aws", "s3Bucket", &[entry])
        .unwrap();
    let path = store.cache_path("shop", "aws", "s3Bucket").unwrap();
    let v1 = std::fs::read_to_string(&path)
        .unwrap()
        .replace(&format!("\"cache\": {CACHE_VERSION}"), "\"cache\": 1");
    std::fs::write(&path, &v1).unwrap();
    store.save_cache("shop", "aws", "s3Bucket", &[]).unwrap();
    assert!(!path.exists());
    let backup = io::backup_path(&path, 1);
    assert!(
        backup.ends_with("cache/aws/s3Bucket.json.v1.bak"),
        "{}",
        backup.display()
    );
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), v1);
    assert!(store.cached_pairs("shop").unwrap().is_empty());
}

#[test]
fn a_missing_ledger_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        FileStore::new(dir.path())
            .load_ledger("shop")
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_malformed_ledger_is_refused_with_path_and_line_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let path = dir.path().join("shop/ledger.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let broken = "{\n  \"ledger\": 1,\n  \"fleet\": \"shop\",\n  \"rows\": [\n    {\"provider\": \"aws\"}\n  ]\n}\n";
    std::fs::write(&path, broken).unwrap();
    let err = store.load_ledger("shop").unwrap_err();
    match &err {
        RecordError::Malformed { path: p, line, .. } => {
            assert_eq!(p, &path);
            assert_eq!(*line, 5);
        }
        other => panic!("expected a malformed-file error, got {other:?}"),
    }
    assert!(err.to_string().contains("ledger.json:5:"), "{err}");
    assert!(err.to_string().contains("missing field `kind`"), "{err}");
    // Saving over it is refused too, and the file is untouched.
    assert!(store.save_ledger("shop", &Ledger::default()).is_err());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
}

#[test]
fn a_newer_ledger_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let path = dir.path().join("shop/ledger.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let newer = "{\"ledger\": 4, \"fleet\": \"shop\", \"rows\": [], \"owners\": {}}";
    std::fs::write(&path, newer).unwrap();
    let err = store.load_ledger("shop").unwrap_err();
    assert!(
        matches!(
            err,
            RecordError::NewerVersion {
                found: 4,
                supported: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(store.save_ledger("shop", &Ledger::default()).is_err());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), newer);
}

#[test]
fn an_emptied_cache_pair_deletes_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let entry = CacheEntry {
        name: "logs".into(),
        region: "eu-west-3".into(),
        handle: "arn:aws:s3:::logs".into(),
        observed: serde_json::json!({"arn": "arn:aws:s3:::logs", "region": "eu-west-3"}),
        written: serde_json::Map::new(),
    };
    store
        .save_cache("shop", "aws", "s3Bucket", std::slice::from_ref(&entry))
        .unwrap();
    assert_eq!(
        store.load_cache("shop", "aws", "s3Bucket").unwrap(),
        vec![entry]
    );
    assert_eq!(
        store.cached_pairs("shop").unwrap(),
        vec![("aws".to_owned(), "s3Bucket".to_owned())]
    );
    assert!(dir.path().join("shop/cache/aws/s3Bucket.json").exists());
    store.save_cache("shop", "aws", "s3Bucket", &[]).unwrap();
    assert!(!dir.path().join("shop/cache/aws/s3Bucket.json").exists());
    assert!(
        store
            .load_cache("shop", "aws", "s3Bucket")
            .unwrap()
            .is_empty()
    );
    assert!(store.cached_pairs("shop").unwrap().is_empty());
}

#[test]
fn names_that_would_escape_the_state_directory_are_refused() {
    let store = FileStore::new("/nonexistent");
    for bad in ["../etc", "a/b", "a\\b", "..", "", "tab\there"] {
        assert!(
            matches!(store.ledger_path(bad), Err(RecordError::BadName { .. })),
            "{bad:?} was accepted"
        );
    }
    assert!(store.cache_path("shop", "aws", "../../x").is_err());
}

#[test]
fn a_cache_an_earlier_version_wrote_is_adopted_once_and_nothing_else_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let fleet = dir.path().join("shop");
    store
        .save_ledger(
            "shop",
            &Ledger {
                rows: [row("logs")].into(),
                ..Ledger::default()
            },
        )
        .unwrap();
    // Where an earlier version kept the cache of the ledger's pair, and a look-alike
    // of a pair the ledger does not name.
    std::fs::create_dir_all(fleet.join("aws")).unwrap();
    let earlier = r#"{"cache": 2, "provider": "aws", "kind": "s3Bucket", "entries": [
        {"name": "logs", "region": "eu-west-3", "handle": "arn:aws:s3:::logs", "observed": {}}]}"#;
    std::fs::write(fleet.join("aws/s3Bucket.json"), earlier).unwrap();
    std::fs::write(fleet.join("aws/queue.json"), "not ours").unwrap();

    let holder = LockHolder::this_process("apply");
    drop(store.try_lock("shop", &holder).unwrap());
    let entries = store.load_cache("shop", "aws", "s3Bucket").unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].handle, "arn:aws:s3:::logs");
    assert!(
        !fleet.join("aws/s3Bucket.json").exists(),
        "moved under cache/"
    );
    assert_eq!(
        std::fs::read_to_string(fleet.join("aws/queue.json")).unwrap(),
        "not ours"
    );
    // Once: a manifest now exists, and a second lock changes nothing.
    drop(store.try_lock("shop", &holder).unwrap());
    assert_eq!(store.cached_pairs("shop").unwrap().len(), 1);
}

#[test]
fn the_lock_is_exclusive_released_on_drop_and_says_who_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let first = LockHolder::this_process("apply");
    let guard = store.try_lock("shop", &first).unwrap();
    assert!(guard.replaced().is_none());
    // A second store on the same directory is another opener: refused, told who.
    let second = FileStore::new(dir.path());
    match second.try_lock("shop", &LockHolder::this_process("destroy")) {
        Err(LockError::Held { holder, .. }) => assert_eq!(holder.as_deref(), Some(&first)),
        other => panic!("expected the lock to be held, got {other:?}"),
    }
    // Another fleet's lock is another lock.
    drop(
        second
            .try_lock("billing", &LockHolder::this_process("apply"))
            .unwrap(),
    );
    drop(guard);
    assert!(!dir.path().join("shop/lock.json").exists());
    drop(
        second
            .try_lock("shop", &LockHolder::this_process("destroy"))
            .unwrap(),
    );
}

fn ledger_of(names: &[&str]) -> Ledger {
    Ledger {
        rows: names.iter().map(|n| row(n)).collect(),
        ..Ledger::default()
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn progress_is_journaled_read_back_and_folded_into_the_next_save() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    store
        .save_ledger("shop", &ledger_of(&["a", "b", "c"]))
        .unwrap();
    let ledger_text = std::fs::read_to_string(dir.path().join("shop/ledger.json")).unwrap();
    store
        .record_progress(
            "shop",
            &LedgerProgress {
                deleting: vec![row("a"), row("b")],
                dropped: vec![],
            },
        )
        .unwrap();
    store
        .record_progress(
            "shop",
            &LedgerProgress {
                deleting: vec![row("c")],
                dropped: vec![row("a")],
            },
        )
        .unwrap();
    // The ledger file was not rewritten: the batches are in the journal.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("shop/ledger.json")).unwrap(),
        ledger_text
    );
    assert_eq!(
        names_in(&dir.path().join("shop")),
        ["ledger.journal", "ledger.json"]
    );
    // Another store (the next run) reads them.
    let next = FileStore::new(dir.path());
    let read = next.load_ledger("shop").unwrap();
    assert_eq!(read.rows, [row("b"), row("c")].into());
    assert_eq!(read.deleting, [row("b"), row("c")].into());
    next.save_ledger("shop", &read).unwrap();
    assert_eq!(names_in(&dir.path().join("shop")), ["ledger.json"]);
    assert_eq!(next.load_ledger("shop").unwrap(), read);
}

#[test]
fn a_journal_that_follows_an_earlier_ledger_is_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    store.save_ledger("shop", &ledger_of(&["a", "b"])).unwrap();
    store
        .record_progress(
            "shop",
            &LedgerProgress {
                deleting: vec![],
                dropped: vec![row("a")],
            },
        )
        .unwrap();
    let journal = dir.path().join("shop/ledger.journal");
    let kept = std::fs::read(&journal).unwrap();
    // A run killed between the new ledger's rename and the journal's removal.
    store.save_ledger("shop", &ledger_of(&["a", "b"])).unwrap();
    std::fs::write(&journal, kept).unwrap();
    let read = FileStore::new(dir.path()).load_ledger("shop").unwrap();
    assert_eq!(
        read.rows,
        [row("a"), row("b")].into(),
        "a stale journal was read"
    );
}

#[test]
fn a_journal_line_cut_short_is_ignored_and_a_malformed_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    store.save_ledger("shop", &ledger_of(&["a", "b"])).unwrap();
    store
        .record_progress(
            "shop",
            &LedgerProgress {
                deleting: vec![row("a")],
                dropped: vec![],
            },
        )
        .unwrap();
    let journal = dir.path().join("shop/ledger.journal");
    let whole = std::fs::read_to_string(&journal).unwrap();
    std::fs::write(
        &journal,
        format!("{whole}{{\"dropped\":{{\"provider\":\"aws\""),
    )
    .unwrap();
    let read = FileStore::new(dir.path()).load_ledger("shop").unwrap();
    assert_eq!(read.rows, [row("a"), row("b")].into());
    assert_eq!(read.deleting, [row("a")].into());
    std::fs::write(&journal, format!("{whole}{{\"renamed\": 1}}\n")).unwrap();
    let err = FileStore::new(dir.path()).load_ledger("shop").unwrap_err();
    assert!(
        matches!(err, RecordError::Malformed { line: 3, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("ledger.journal"), "{err}");
}

#[test]
fn a_journal_of_a_newer_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    store.save_ledger("shop", &ledger_of(&["a"])).unwrap();
    std::fs::write(
        dir.path().join("shop/ledger.journal"),
        "{\"journal\":9,\"fleet\":\"shop\",\"follows\":\"\"}\n",
    )
    .unwrap();
    let err = store.load_ledger("shop").unwrap_err();
    assert!(
        matches!(err, RecordError::NewerVersion { found: 9, .. }),
        "{err}"
    );
    let err = store.save_ledger("shop", &ledger_of(&["a"])).unwrap_err();
    assert!(matches!(err, RecordError::NewerVersion { .. }), "{err}");
}

#[test]
fn a_version_2_ledger_is_read_and_a_version_4_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let path = dir.path().join("shop/ledger.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        r#"{"ledger": 2, "fleet": "shop", "rows": [{"provider": "aws", "kind": "s3Bucket", "name": "a", "region": "eu-west-3", "intent": true}]}"#,
    )
    .unwrap();
    let ledger = store.load_ledger("shop").unwrap();
    assert_eq!(ledger.intents, [row("a")].into());
    assert!(ledger.deleting.is_empty());
    let newer = r#"{"ledger": 4, "fleet": "shop", "rows": []}"#;
    std::fs::write(&path, newer).unwrap();
    let err = store.load_ledger("shop").unwrap_err();
    assert!(
        matches!(err, RecordError::NewerVersion { found: 4, .. }),
        "{err}"
    );
    assert!(store.save_ledger("shop", &ledger).is_err());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), newer);
}
