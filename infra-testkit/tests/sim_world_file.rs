//! The simulated cloud's world file is kept as a cloud keeps its storage: a write that
//! cannot be saved is not made, the file is written whole and private, several clients
//! share it without undoing each other, and each new world draws its own seed.

use std::path::Path;

use infra_core::kinds::*;
use infra_core::{
    engine::{MapEnv, settle},
    prelude::{Expr, Kind, Partial},
    sdk::{Backend, ErrorKind, Marker, SettledSpec, Sighting},
};
use infra_testkit::sim::{Op, Outcome, SimCloud, WorldFileError};
use serde_json::{Value, json};

const PARIS: &str = "eu-west-3";

async fn create<K: Kind>(
    backend: &dyn Backend,
    name: &str,
    spec: &K,
) -> Result<Sighting, infra_core::sdk::BackendError> {
    let settled = settle(spec, &MapEnv::new()).expect("the spec settles");
    backend
        .create(
            K::ID,
            PARIS,
            name,
            SettledSpec::new::<K>(&settled),
            &Marker::new("shop"),
        )
        .await
        .map(|w| w.expect_done("the simulated cloud writes at once"))
}

fn security_group() -> SecurityGroup {
    SecurityGroup {
        description: Expr::lit("web servers".to_string()),
        vpc_id: Partial::Unknown,
        ingress: Expr::lit(Default::default()),
        egress: Partial::Unknown,
        tags: Partial::Unknown,
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
fn an_empty_path_is_refused_naming_the_problem() {
    let err = SimCloud::open("").unwrap_err();
    assert!(matches!(err, WorldFileError::BadPath { .. }), "{err:?}");
    assert!(err.to_string().contains("the path is empty"), "{err}");
}

#[tokio::test]
async fn a_write_that_cannot_be_saved_fails_is_not_made_and_is_undone() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let path = missing.join("world.json");
    // Opening creates nothing: the missing directory is the first write's to report.
    let cloud = SimCloud::open(&path).unwrap();
    let aws = cloud.backend("aws");
    let err = create(&*aws, "web", &security_group()).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Other);
    assert!(!err.may_have_been_sent, "the file never saw it: not made");
    assert!(err.message.contains("could not save its world"), "{err}");
    assert!(err.message.contains("missing"), "names the place: {err}");
    // Nothing was made: not in memory, not in a list, not on disk.
    assert!(cloud.is_empty());
    assert!(aws.list("securityGroup", PARIS).await.unwrap().is_empty());
    assert!(cloud.writes().is_empty());
    let attempts = cloud.write_attempts();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].op, Op::Create);
    assert_eq!(attempts[0].outcome, Outcome::Failed(ErrorKind::Other));
    assert!(!attempts[0].applied);
    assert!(!missing.exists());

    // Once the directory exists the same call succeeds, and the failed one consumed
    // nothing: the handle is the one a fresh world of the same seed assigns first.
    std::fs::create_dir(&missing).unwrap();
    let made = create(&*aws, "web", &security_group()).await.unwrap();
    let twin = SimCloud::new(cloud.seed());
    let first = create(&*twin.backend("aws"), "web", &security_group())
        .await
        .unwrap();
    assert_eq!(made.handle, first.handle);
    assert_eq!(SimCloud::open(&path).unwrap().len(), 1);
}

#[cfg(unix)]
#[tokio::test]
async fn the_world_file_is_private_and_no_temporary_or_lock_file_stays() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let cloud = SimCloud::open(&path).unwrap();
    let aws = cloud.backend("aws");
    create(&*aws, "web", &security_group()).await.unwrap();
    assert_eq!(mode(&path), 0o600);
    // A file someone made readable to all is private again once it is next written
    // whole: here when the last handle is dropped and the journal, private from the
    // start, is folded into it.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    create(&*aws, "api", &security_group()).await.unwrap();
    assert_eq!(mode(&path.with_file_name("world.json.journal")), 0o600);
    drop((aws, cloud));
    assert_eq!(mode(&path), 0o600);
    assert_eq!(names_in(dir.path()), ["world.json"]);
}

#[tokio::test]
async fn a_temporary_file_left_by_a_killed_writer_is_removed_at_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let cloud = SimCloud::open(&path).unwrap();
    create(&*cloud.backend("aws"), "web", &security_group())
        .await
        .unwrap();
    for name in [
        ".world.json.infra-tmp-4242-7",
        ".world.json.infra-tmp-notes",
        ".other.json.infra-tmp-1-1",
        "notes.txt",
    ] {
        std::fs::write(dir.path().join(name), "half a world").unwrap();
    }
    let reopened = SimCloud::open(&path).unwrap();
    assert_eq!(reopened.len(), 1);
    // The lock file stays while a handle holds the world open.
    assert_eq!(
        names_in(dir.path()),
        [
            ".other.json.infra-tmp-1-1",
            ".world.json.infra-tmp-notes",
            "notes.txt",
            "world.json",
            "world.json.lock"
        ]
    );
    // And goes with the last of them.
    drop((cloud, reopened));
    assert_eq!(
        names_in(dir.path()),
        [
            ".other.json.infra-tmp-1-1",
            ".world.json.infra-tmp-notes",
            "notes.txt",
            "world.json"
        ]
    );
}

#[tokio::test]
async fn two_clients_of_one_file_never_undo_each_others_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let one = SimCloud::open(&path).unwrap();
    let two = SimCloud::open(&path).unwrap();
    let (aws1, aws2) = (one.backend("aws"), two.backend("aws"));
    let mut handles = Vec::new();
    for i in 0..3 {
        handles.push(create(&*aws1, &format!("one-{i}"), &security_group()).await);
        handles.push(create(&*aws2, &format!("two-{i}"), &security_group()).await);
    }
    let handles: Vec<String> = handles.into_iter().map(|s| s.unwrap().handle).collect();
    // Each client sees the other's resources, and no handle was handed out twice.
    assert_eq!(aws1.list("securityGroup", PARIS).await.unwrap().len(), 6);
    assert_eq!(one.len(), 6);
    let distinct: std::collections::BTreeSet<_> = handles.iter().collect();
    assert_eq!(distinct.len(), 6);
    // A name taken through one client is taken for the other.
    let err = create(&*aws2, "one-0", &security_group())
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict);
    // A delete through one client is seen by the other.
    aws2.delete("securityGroup", PARIS, &handles[0])
        .await
        .unwrap();
    assert!(one.resource(&handles[0]).is_none());
    let file = SimCloud::open(&path).unwrap();
    assert_eq!(file.len(), 5);
}

#[test]
fn concurrent_writers_on_threads_all_land_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let cloud = SimCloud::open(&path).unwrap();
                let aws = cloud.backend("aws");
                runtime.block_on(async {
                    for i in 0..15 {
                        create(&*aws, &format!("w{w}-{i}"), &security_group())
                            .await
                            .unwrap();
                    }
                });
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    assert_eq!(SimCloud::open(&path).unwrap().len(), 30);
    assert_eq!(names_in(dir.path()), ["world.json"]);
}

#[tokio::test]
async fn a_change_made_by_hand_between_two_calls_survives_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let cloud = SimCloud::open(&path).unwrap();
    let aws = cloud.backend("aws");
    let web = create(&*aws, "web", &security_group()).await.unwrap();

    // A person edits the file while the run waits at its prompt.
    let mut world: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    world["accounts"]["aws"] = json!("sim-aws-edited-by-hand");
    world["resources"][0]["config"]["description"] = json!("edited by hand");
    std::fs::write(&path, serde_json::to_vec_pretty(&world).unwrap()).unwrap();

    // Reads see the edit, and the next write keeps it.
    assert_eq!(aws.account().await.unwrap(), "sim-aws-edited-by-hand");
    create(&*aws, "api", &security_group()).await.unwrap();
    let reopened = SimCloud::open(&path).unwrap();
    assert_eq!(reopened.len(), 2);
    assert_eq!(reopened.account("aws"), "sim-aws-edited-by-hand");
    let edited = reopened.resource(&web.handle).unwrap();
    assert_eq!(edited.config["description"], json!("edited by hand"));
}

#[tokio::test]
async fn a_file_broken_by_someone_else_fails_calls_and_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let cloud = SimCloud::open(&path).unwrap();
    let aws = cloud.backend("aws");
    let web = create(&*aws, "web", &security_group()).await.unwrap();
    std::fs::write(&path, "{ half a world").unwrap();

    let err = aws
        .read("securityGroup", PARIS, &web.handle)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Other, "never NotFound: {err}");
    assert!(err.message.contains("not a simulated world"), "{err}");
    let err = create(&*aws, "api", &security_group()).await.unwrap_err();
    assert!(!err.may_have_been_sent);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ half a world");
}

async fn generated_secret(cloud: &SimCloud) -> String {
    let made = create(&*cloud.backend("aws"), "token", &Secrets::generated(32))
        .await
        .unwrap();
    cloud
        .stored_secret(&made.handle)
        .unwrap()
        .expose()
        .to_owned()
}

#[tokio::test]
async fn each_new_world_file_draws_its_own_seed_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let (one, two) = (SimCloud::open(&a).unwrap(), SimCloud::open(&b).unwrap());
    assert_ne!(one.seed(), two.seed());
    assert_ne!(generated_secret(&one).await, generated_secret(&two).await);
    // The seed is kept in the file: the same world keeps its behaviour.
    assert_eq!(SimCloud::open(&a).unwrap().seed(), one.seed());
    // A seed a test asks for still fixes everything.
    assert_eq!(
        generated_secret(&SimCloud::new(9)).await,
        generated_secret(&SimCloud::new(9)).await
    );
}

/// A world of three security groups whose last two writes are journal lines, left as
/// a killed process leaves it (no handle dropped, so nothing folded in); their handles.
async fn killed_after_three_writes(path: &Path) -> Vec<String> {
    let cloud = SimCloud::open(path).unwrap();
    let aws = cloud.backend("aws");
    let mut handles = Vec::new();
    for name in ["web", "api", "db"] {
        handles.push(create(&*aws, name, &security_group()).await.unwrap().handle);
    }
    std::mem::forget(aws);
    std::mem::forget(cloud);
    handles
}

fn handles_in(cloud: &SimCloud) -> Vec<String> {
    let mut handles: Vec<String> = cloud.resources().into_iter().map(|r| r.handle).collect();
    handles.sort();
    handles
}

#[tokio::test]
async fn a_write_is_a_journal_line_and_a_run_leaves_the_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let mut handles = killed_after_three_writes(&path).await;
    handles.sort();
    let journal = std::fs::read_to_string(path.with_file_name("world.json.journal")).unwrap();
    assert_eq!(journal.lines().count(), 2, "the first write makes the file");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(file["resources"].as_array().unwrap().len(), 1);
    // The next open replays the journal; dropping its last handle folds it in.
    let cloud = SimCloud::open(&path).unwrap();
    assert_eq!(handles_in(&cloud), handles);
    drop(cloud);
    assert_eq!(names_in(dir.path()), ["world.json"]);
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(file["resources"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn a_journal_line_cut_short_was_never_made_and_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let mut handles = killed_after_three_writes(&path).await;
    handles.sort();
    let journal_path = path.with_file_name("world.json.journal");
    let whole = std::fs::read(&journal_path).unwrap();
    // A process killed in the middle of its append.
    let mut torn = whole.clone();
    torn.extend_from_slice(br#"{"rng":12,"nextId":9,"accounts":{},"put":[{"id":"#);
    std::fs::write(&journal_path, &torn).unwrap();
    let cloud = SimCloud::open(&path).unwrap();
    assert_eq!(handles_in(&cloud), handles, "the cut line made nothing");
    assert_eq!(
        std::fs::read(&journal_path).unwrap(),
        whole,
        "and is cut off"
    );
    // The next write follows the last whole line.
    let aws = cloud.backend("aws");
    create(&*aws, "cache", &security_group()).await.unwrap();
    drop((aws, cloud));
    assert_eq!(SimCloud::open(&path).unwrap().len(), 4);
}

#[tokio::test]
async fn a_broken_journal_line_is_refused_with_its_line_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    killed_after_three_writes(&path).await;
    let journal_path = path.with_file_name("world.json.journal");
    let whole = std::fs::read_to_string(&journal_path).unwrap();
    let broken = format!("{}\nnot a change\n", whole.lines().next().unwrap());
    std::fs::write(&journal_path, &broken).unwrap();
    let file_before = std::fs::read(&path).unwrap();
    let err = SimCloud::open(&path).unwrap_err();
    assert!(
        matches!(err, WorldFileError::Malformed { line: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("world.json.journal:2:"), "{err}");
    assert_eq!(std::fs::read_to_string(&journal_path).unwrap(), broken);
    assert_eq!(std::fs::read(&path).unwrap(), file_before);
}

#[tokio::test]
async fn a_journal_replayed_over_the_file_it_was_folded_into_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let handles = killed_after_three_writes(&path).await;
    // One more line: the first group deleted.
    let cloud = SimCloud::open(&path).unwrap();
    let aws = cloud.backend("aws");
    aws.delete("securityGroup", PARIS, &handles[0])
        .await
        .unwrap();
    let journal_path = path.with_file_name("world.json.journal");
    let journal = std::fs::read(&journal_path).unwrap();
    // Folded in; then, as if killed before the journal was removed, it is back.
    cloud.save().unwrap();
    assert!(!journal_path.exists());
    let folded = handles_in(&cloud);
    drop((aws, cloud));
    std::fs::write(&journal_path, &journal).unwrap();
    let reopened = SimCloud::open(&path).unwrap();
    assert_eq!(handles_in(&reopened), folded);
    assert_eq!(folded.len(), 2);
    assert!(!folded.contains(&handles[0]));
}
