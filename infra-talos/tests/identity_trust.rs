//! The trust root, from the outside (issue 36): a certificate is accepted only when
//! the store binds its fingerprint to its principal in a journaled act, and a
//! revoked subject stays refused after the database is restored from a backup
//! taken before its revocation, because every revocation is also written to the
//! denied-subject list kept outside the database.
//!
//! Through the command set on an SQLite store and through `serve` over HTTPS; the
//! same refusals on PostgreSQL, with `pg_dump` and `pg_restore`, are in
//! `restore_postgres.rs`.
#![cfg(feature = "cli")]

mod cli_support;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cli_support::bench::*;
use cli_support::{PKI, https};
use infra_talos::identity::{Authority, DeniedList, Fingerprint, issue_client};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A certificate for `principal` signed with the bench's authority key, offline,
/// and never journaled: written with its key and the authority's certificate in
/// `<bench>/<folder>/pki`, as [`https`] and [`as_files`] expect.
fn mint_offline(bench: &Bench, folder: &str, principal: &str) -> PathBuf {
    let pki = bench.dir.path().join(PKI);
    let ca_cert = std::fs::read_to_string(pki.join("ca.crt")).unwrap();
    let ca_key = std::fs::read_to_string(pki.join("ca.key")).unwrap();
    let minted = issue_client(
        &ca_cert,
        &ca_key,
        principal,
        cli_support::wall_now(),
        std::time::Duration::from_secs(3600),
    )
    .unwrap();
    let root = bench.dir.path().join(folder);
    let dir = root.join(PKI);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.crt"), ca_cert).unwrap();
    std::fs::write(
        dir.join(format!("{principal}.crt")),
        &minted.certificate_pem,
    )
    .unwrap();
    std::fs::write(
        dir.join(format!("{principal}.key")),
        minted.key_pem.as_str(),
    )
    .unwrap();
    root
}

/// The flags that act as `principal` in `role` with the certificate and key in
/// `<root>/pki`, followed by `args`.
fn as_files(root: &Path, principal: &str, role: &str, args: &[&str]) -> Vec<String> {
    let pki = root.join(PKI);
    let mut line = vec![
        "--certificate".to_owned(),
        pki.join(format!("{principal}.crt")).display().to_string(),
        "--private-key".to_owned(),
        pki.join(format!("{principal}.key")).display().to_string(),
        "--as".to_owned(),
        role.to_owned(),
    ];
    line.extend(args.iter().map(|a| (*a).to_owned()));
    line
}

async fn run_as(bench: &Bench, line: &[String]) -> Ran {
    let args: Vec<&str> = line.iter().map(String::as_str).collect();
    bench.cli(None, &args).await
}

fn fingerprint_of(file: &Path) -> Fingerprint {
    Fingerprint::of_pem(&std::fs::read_to_string(file).unwrap()).unwrap()
}

async fn status_and_body(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    (status, response.text().await.expect("body"))
}

/// A certificate signed with the authority's key but never journaled proves no one,
/// on the command line's road and through the service, and says what to do; the
/// certificate `principal add --pki` issued, journaled with its fingerprint, is
/// accepted. (Before certificate bindings, the minted one was accepted as bob.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_never_journaled_is_refused_by_every_road() {
    let bench = Bench::new().await;
    bench.proposed_plan("p1").await;
    let minted = mint_offline(&bench, "minted", "bob");
    let minted_fp = fingerprint_of(&minted.join(PKI).join("bob.crt"));

    let ran = run_as(
        &bench,
        &as_files(&minted, "bob", "approver", &["approve", "p1"]),
    )
    .await;
    assert_eq!(ran.code, ExitCode::from(2), "{}{}", ran.out, ran.err);
    assert!(
        ran.err.contains(&format!(
            "the certificate {minted_fp} for bob was never journaled"
        )),
        "{}",
        ran.err
    );
    assert!(
        ran.err.contains("principal bind-certificate bob FILE"),
        "{}",
        ran.err
    );

    // The journal holds bob's issued certificate, by the fingerprint of the file.
    let journal: Value =
        serde_json::from_str(&bench.ok(ROOT, &["principal", "journal", "--json"]).await).unwrap();
    let issued_fp = fingerprint_of(&bench.dir.path().join(PKI).join("bob.crt"));
    let bound: Vec<&Value> = journal
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "certificate_bound" && e["principal"] == "bob")
        .collect();
    assert_eq!(bound.len(), 1, "{journal}");
    assert_eq!(
        bound[0]["detail"],
        format!("certificate {issued_fp} (issued)"),
        "{journal}"
    );
    assert_ne!(issued_fp, minted_fp);

    // Through the service: refused with the same reason; the journaled one acts.
    let (service, base) = bench.serve(false).await;
    let impostor = https(&minted, Some("bob"));
    let (status, body) = status_and_body(
        impostor
            .get(format!("{base}/api/v1/whoami"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("was never journaled"), "{body}");
    let (status, _) = status_and_body(
        impostor
            .post(format!("{base}/api/v1/tokens"))
            .json(&json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a token for an unjournaled certificate"
    );
    let bob = https(bench.dir.path(), Some("bob"));
    let (status, body) = status_and_body(
        bob.post(format!("{base}/api/v1/plans/p1/approve"))
            .json(&json!({"as": "approver"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    service.shutdown().await;
    bench.stop().await;
}

/// `principal certificate` issues and binds in one journaled act; when the store
/// refuses the binding (an authority that is not the installation's), no
/// certificate or key file is left behind. An existing certificate is bound by
/// recovery-admin only, to the principal it names, and is accepted from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issuing_binds_and_existing_certificates_are_bound_by_recovery_admin() {
    let bench = Bench::imported().await;
    // Another authority's directory: the files are written, the binding refused,
    // and the files removed.
    let other = bench.dir.path().join("other-pki");
    std::fs::create_dir(&other).unwrap();
    let authority = Authority::generate("elsewhere", cli_support::wall_now()).unwrap();
    std::fs::write(other.join("ca.crt"), &authority.certificate_pem).unwrap();
    std::fs::write(other.join("ca.key"), authority.key_pem.as_str()).unwrap();
    let other_arg = other.display().to_string();
    let ran = bench
        .cli(
            ROOT,
            &["principal", "certificate", "ann", "--pki", &other_arg],
        )
        .await;
    assert_eq!(ran.code, ExitCode::from(1), "{}{}", ran.out, ran.err);
    assert!(
        ran.err.contains("refused: binding a certificate: the certificate is not accepted by the installation's authority"),
        "{}",
        ran.err
    );
    assert!(!other.join("ann.crt").exists() && !other.join("ann.key").exists());

    // Reissued from the installation's own authority: bound, journaled, accepted.
    let again = bench.dir.path().join("again");
    std::fs::create_dir(&again).unwrap();
    for file in ["ca.crt", "ca.key"] {
        std::fs::copy(bench.dir.path().join(PKI).join(file), again.join(file)).unwrap();
    }
    let again_arg = again.display().to_string();
    let out = bench
        .ok(
            ROOT,
            &["principal", "certificate", "ann", "--pki", &again_arg],
        )
        .await;
    let fp = fingerprint_of(&again.join("ann.crt"));
    assert!(out.contains(&format!("{fp}, journaled")), "{out}");

    // An existing certificate (minted offline) is refused until recovery-admin binds it.
    let minted = mint_offline(&bench, "minted", "alice");
    let file = minted.join(PKI).join("alice.crt");
    let file_arg = file.display().to_string();
    let act = as_files(
        &minted,
        "alice",
        "publisher",
        &["plan", MACHINE, "--id", "p9"],
    );
    let ran = run_as(&bench, &act).await;
    assert_eq!(ran.code, ExitCode::from(2), "{}", ran.err);
    assert!(ran.err.contains("was never journaled"), "{}", ran.err);
    for (actor, says) in [
        (BOB, "the role approver may not do this"),
        (ALICE, "the role publisher may not do this"),
    ] {
        let ran = bench
            .cli(
                actor,
                &["principal", "bind-certificate", "alice", &file_arg],
            )
            .await;
        assert_eq!(ran.code, ExitCode::from(1), "{}", ran.err);
        assert!(ran.err.contains(says), "{}", ran.err);
    }
    let ran = bench
        .cli(ROOT, &["principal", "bind-certificate", "bob", &file_arg])
        .await;
    assert_eq!(ran.code, ExitCode::from(1), "{}", ran.err);
    assert!(
        ran.err.contains("the certificate names alice, not bob"),
        "{}",
        ran.err
    );
    let out = bench
        .ok(ROOT, &["principal", "bind-certificate", "alice", &file_arg])
        .await;
    let fp = fingerprint_of(&file);
    assert!(out.starts_with(&format!("certificate {fp} (")), "{out}");
    let journal = bench.ok(ROOT, &["principal", "journal"]).await;
    assert!(
        journal.contains(&format!("certificate {fp} (existing certificate bound)")),
        "{journal}"
    );
    // Bound once only.
    let ran = bench
        .cli(ROOT, &["principal", "bind-certificate", "alice", &file_arg])
        .await;
    assert_eq!(ran.code, ExitCode::from(1), "{}", ran.err);
    assert!(ran.err.contains("exists already"), "{}", ran.err);
    // Alice's minted certificate now acts (the plan is made or refused by the
    // contract, not by authentication).
    let ran = run_as(&bench, &act).await;
    assert!(!ran.err.contains("never journaled"), "{}", ran.err);
    assert_ne!(ran.code, ExitCode::from(2), "{}", ran.err);
    bench.stop().await;
}

/// A store at schema version 9 (certificates bound to nothing) is migrated when the
/// command opens it; every certificate is refused until bound, saying how; the
/// administrator binds its own on the database (and only its own, first), and then
/// acts and binds the others'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_upgraded_from_version_9_binds_its_certificates_on_the_database() {
    use infra_talos::contract::Role;
    use infra_talos::store::sqlite::SqliteStore;
    use infra_talos::store::{
        Actor, ApprovalPolicy, BootstrapSpec, PrincipalKind, PrincipalSpec, Settings, Store,
    };

    let bench = Bench::imported().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let authority = Authority::generate("old installation", cli_support::wall_now()).unwrap();
    let old = SqliteStore::open_at_version_for_tests(Some(&path), Settings::default(), 9)
        .await
        .unwrap();
    old.bootstrap(BootstrapSpec {
        ca_certificate: authority.certificate_pem.clone(),
        administrator: PrincipalSpec {
            id: "root".into(),
            kind: PrincipalKind::Human,
            roles: vec![Role::RecoveryAdmin],
        },
        approval_policy: ApprovalPolicy::default(),
        administrator_certificate: None,
    })
    .await
    .unwrap();
    old.register_principal(
        &Actor::new("root", Role::RecoveryAdmin),
        PrincipalSpec {
            id: "bob".into(),
            kind: PrincipalKind::Human,
            roles: vec![Role::Approver],
        },
    )
    .await
    .unwrap();
    old.pool().close().await;
    drop(old);
    // Certificates the old installation issued (version 9 journaled none).
    let pki = dir.path().join(PKI);
    std::fs::create_dir(&pki).unwrap();
    for who in ["root", "bob"] {
        let issued = issue_client(
            &authority.certificate_pem,
            &authority.key_pem,
            who,
            cli_support::wall_now(),
            std::time::Duration::from_secs(3600),
        )
        .unwrap();
        std::fs::write(pki.join(format!("{who}.crt")), &issued.certificate_pem).unwrap();
        std::fs::write(pki.join(format!("{who}.key")), issued.key_pem.as_str()).unwrap();
    }
    let database = format!("sqlite:{}", path.display());
    let on_old = |principal: &str, role: &str, args: &[&str]| {
        let mut line = vec!["--database".to_owned(), database.clone()];
        line.extend(as_files(dir.path(), principal, role, args));
        line
    };
    let root_crt = pki.join("root.crt").display().to_string();
    let bob_crt = pki.join("bob.crt").display().to_string();

    let ran = run_as(
        &bench,
        &on_old(
            "root",
            "recovery-admin",
            &["principal", "add", "carol", "--role", "author"],
        ),
    )
    .await;
    assert_eq!(ran.code, ExitCode::from(2), "{}", ran.err);
    assert!(ran.err.contains("was never journaled"), "{}", ran.err);
    assert!(ran.err.contains("before schema version 10"), "{}", ran.err);
    // The first binding is of the presented certificate, to its presenter.
    let ran = run_as(
        &bench,
        &on_old(
            "root",
            "recovery-admin",
            &["principal", "bind-certificate", "bob", &bob_crt],
        ),
    )
    .await;
    assert_eq!(ran.code, ExitCode::from(1), "{}", ran.err);
    assert!(
        ran.err
            .contains("the first binding is of the certificate you present"),
        "{}",
        ran.err
    );
    // bob cannot take the first step for root's authority either.
    let ran = run_as(
        &bench,
        &on_old(
            "bob",
            "approver",
            &["principal", "bind-certificate", "bob", &bob_crt],
        ),
    )
    .await;
    assert_eq!(ran.code, ExitCode::from(1), "{}", ran.err);
    assert!(
        ran.err.contains("the role approver may not do this"),
        "{}",
        ran.err
    );
    let ran = run_as(
        &bench,
        &on_old(
            "root",
            "recovery-admin",
            &["principal", "bind-certificate", "root", &root_crt],
        ),
    )
    .await;
    assert_eq!(ran.code, ExitCode::SUCCESS, "{}", ran.err);
    assert!(
        ran.out.contains("(the installation's first binding)"),
        "{}",
        ran.out
    );
    // Root now acts; bob is refused until root binds bob's certificate.
    let ran = run_as(
        &bench,
        &on_old(
            "bob",
            "approver",
            &["principal", "bind-certificate", "bob", &bob_crt],
        ),
    )
    .await;
    assert_eq!(ran.code, ExitCode::from(2), "{}", ran.err);
    assert!(ran.err.contains("was never journaled"), "{}", ran.err);
    let ran = run_as(
        &bench,
        &on_old(
            "root",
            "recovery-admin",
            &["principal", "bind-certificate", "bob", &bob_crt],
        ),
    )
    .await;
    assert_eq!(ran.code, ExitCode::SUCCESS, "{}", ran.err);
    let ran = run_as(
        &bench,
        &on_old(
            "root",
            "recovery-admin",
            &["principal", "add", "carol", "--role", "author"],
        ),
    )
    .await;
    assert_eq!(ran.code, ExitCode::SUCCESS, "{}", ran.err);
    bench.stop().await;
}

/// Takes an SQLite backup of the bench's store (`VACUUM INTO`, as an operator's
/// online backup would), written to `file`.
async fn sqlite_backup(bench: &Bench, file: &Path) {
    use sqlx::Connection as _;
    let options =
        sqlx::sqlite::SqliteConnectOptions::new().filename(bench.dir.path().join("store.db"));
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "VACUUM INTO '{}'",
        file.display()
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
}

/// Puts the backup `file` back as the bench's store.
fn sqlite_restore(bench: &Bench, file: &Path) {
    let store = bench.dir.path().join("store.db");
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", store.display()));
    }
    std::fs::copy(file, &store).unwrap();
}

/// A revocation made on the command line is written to the denied-subject list;
/// the database is restored from a backup taken before it; the restored database
/// trusts bob again, yet the command line and the service refuse bob, naming the
/// list. A revocation made through the service is written to the same list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_survives_a_database_restore_through_the_denied_list() {
    let bench = Bench::new().await;
    bench.proposed_plan("p1").await;
    let list = DeniedList::new(bench.denied_list());
    assert!(list.create_if_missing().unwrap());
    let backup = bench.dir.path().join("backup.db");
    sqlite_backup(&bench, &backup).await;

    let bob_fp = fingerprint_of(&bench.dir.path().join(PKI).join("bob.crt"));
    let out = bench.ok(ROOT, &["revoke", "--identity", "bob"]).await;
    assert_eq!(
        out,
        format!(
            "identity bob revoked by root (recovery-admin)\n\
             bob added to the denied-subject list {}\n",
            list.path().display()
        )
    );
    let text = std::fs::read_to_string(list.path()).unwrap();
    assert!(
        text.ends_with(&format!(
            "deny bob {bob_fp} # revoked by root (recovery-admin)\n"
        )),
        "{text}"
    );

    sqlite_restore(&bench, &backup);
    // The restored database trusts bob again …
    let principals: Value =
        serde_json::from_str(&bench.ok(ROOT, &["principal", "journal", "--json"]).await).unwrap();
    assert!(
        !principals
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "revoked"),
        "the backup predates the revocation: {principals}"
    );
    // … and without the list, bob would act (what a restore did before the list).
    let ran = bench
        .cli_env(
            BOB,
            &["approve", "p1"],
            true,
            &[("INFRA_TALOS_DENIED_SUBJECTS", "")],
        )
        .await;
    assert_eq!(ran.code, ExitCode::SUCCESS, "{}", ran.err);
    // With it, bob is refused on the command line's road, naming the list.
    let ran = bench.cli(BOB, &["cancel", "p1"]).await;
    assert_eq!(ran.code, ExitCode::from(2), "{}{}", ran.out, ran.err);
    assert!(
        ran.err.contains("bob is on the denied-subject list"),
        "{}",
        ran.err
    );

    // And through the service, by certificate.
    let (service, base) = bench.serve(false).await;
    let bob = https(bench.dir.path(), Some("bob"));
    let (status, body) = status_and_body(
        bob.get(format!("{base}/api/v1/whoami"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("bob is on the denied-subject list"), "{body}");
    // A revocation through the service is written to the list too.
    let root = https(bench.dir.path(), Some("root"));
    let (status, body) = status_and_body(
        root.post(format!("{base}/api/v1/principals/alice/revoke"))
            .json(&json!({"as": "recovery-admin"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let text = std::fs::read_to_string(list.path()).unwrap();
    let alice_fp = fingerprint_of(&bench.dir.path().join(PKI).join("alice.crt"));
    assert!(
        text.ends_with(&format!(
            "deny alice {alice_fp} # revoked by root (recovery-admin)\n"
        )),
        "{text}"
    );
    assert_eq!(text.lines().filter(|l| l.starts_with("deny ")).count(), 2);
    let (status, _) = status_and_body(
        root.get(format!("{base}/api/v1/whoami"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    service.shutdown().await;
    bench.stop().await;
}

/// A configured list that is missing, is not a readable file, or is corrupt is
/// never read as empty: the command line refuses to authenticate, the service
/// refuses to start, and a service already running answers 503, each naming the
/// file and what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_unreadable_or_corrupt_list_is_refused_clearly() {
    let bench = Bench::new().await;
    let list = bench.denied_list();
    let shown = list.display().to_string();
    let configured = [("INFRA_TALOS_DENIED_SUBJECTS", shown.as_str())];
    let every = std::time::Duration::from_secs(3600);

    // Missing.
    let ran = bench
        .cli_env(
            ROOT,
            &["principal", "add", "eve", "--role", "author"],
            true,
            &configured,
        )
        .await;
    assert_eq!(ran.code, ExitCode::from(2), "{}", ran.err);
    assert!(
        ran.err.contains(&format!(
            "the denied-subject list {shown} does not exist: a missing list is never read as empty"
        )),
        "{}",
        ran.err
    );
    let refused = bench
        .start_service(false, every, Some(DeniedList::new(&list)))
        .await
        .expect_err("the service started without its list");
    assert!(refused.to_string().contains("does not exist"), "{refused}");

    // Not a readable file (a directory in its place: never "empty").
    std::fs::create_dir(&list).unwrap();
    let ran = bench
        .cli_env(
            ROOT,
            &["principal", "add", "eve", "--role", "author"],
            true,
            &configured,
        )
        .await;
    assert_eq!(ran.code, ExitCode::from(2), "{}", ran.err);
    assert!(ran.err.contains("cannot be read"), "{}", ran.err);
    std::fs::remove_dir(&list).unwrap();

    // Corrupt: a line that is not a denial, and a last line cut short.
    for (text, line) in [("deny bob\nbob\n", 2), ("deny bob\ndeny al", 2)] {
        std::fs::write(&list, text).unwrap();
        let ran = bench
            .cli_env(
                ROOT,
                &["principal", "add", "eve", "--role", "author"],
                true,
                &configured,
            )
            .await;
        assert_eq!(ran.code, ExitCode::from(2), "{}", ran.err);
        assert!(
            ran.err
                .contains(&format!("{shown} is corrupt at line {line}")),
            "{}",
            ran.err
        );
        let refused = bench
            .start_service(false, every, Some(DeniedList::new(&list)))
            .await
            .expect_err("the service started with a corrupt list");
        assert!(refused.to_string().contains("is corrupt"), "{refused}");
    }
    let journal = bench.ok(ROOT, &["principal", "journal"]).await;
    assert!(!journal.contains("eve"), "{journal}");

    // A running service whose list turns unreadable authenticates no one.
    std::fs::write(&list, "").unwrap();
    let (service, base) = bench.serve(false).await;
    let root = https(bench.dir.path(), Some("root"));
    let (status, _) = status_and_body(
        root.get(format!("{base}/api/v1/whoami"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    std::fs::write(&list, "deny\n").unwrap();
    let (status, body) = status_and_body(
        root.get(format!("{base}/api/v1/whoami"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("cannot authenticate"), "{body}");
    service.shutdown().await;

    bench.stop().await;
}

/// Through the service (`--server`): `principal certificate` issues from the local
/// authority and binds through `POST /api/v1/principals/{id}/certificates`, and
/// the service accepts the new certificate; an existing certificate is bound by the
/// same road.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_are_bound_through_the_service() {
    let bench = Bench::imported().await;
    let (service, base) = bench.serve(false).await;
    let ca = bench
        .dir
        .path()
        .join(PKI)
        .join("ca.crt")
        .display()
        .to_string();
    let through = |args: &[&str]| -> Vec<String> {
        ["--server", base.as_str(), "--server-ca", ca.as_str()]
            .iter()
            .chain(args)
            .map(|a| (*a).to_owned())
            .collect()
    };
    let fresh = bench.dir.path().join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    for file in ["ca.crt", "ca.key"] {
        std::fs::copy(bench.dir.path().join(PKI).join(file), fresh.join(file)).unwrap();
    }
    let fresh_arg = fresh.display().to_string();
    let line = through(&["principal", "certificate", "ann", "--pki", &fresh_arg]);
    let args: Vec<&str> = line.iter().map(String::as_str).collect();
    let out = bench.ok(ROOT, &args).await;
    let fp = fingerprint_of(&fresh.join("ann.crt"));
    assert!(out.contains(&format!("{fp}, journaled")), "{out}");
    // The new certificate proves ann to the service.
    let ann_dir = bench.dir.path().join("ann-only");
    std::fs::create_dir_all(ann_dir.join(PKI)).unwrap();
    for file in ["ca.crt", "ann.crt", "ann.key"] {
        std::fs::copy(fresh.join(file), ann_dir.join(PKI).join(file)).unwrap();
    }
    let ann = https(&ann_dir, Some("ann"));
    let (status, body) = status_and_body(
        ann.get(format!("{base}/api/v1/whoami"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A publisher may not issue: refused before anything is written.
    let line = through(&["principal", "certificate", "ann", "--pki", &fresh_arg]);
    std::fs::remove_file(fresh.join("ann.crt")).unwrap();
    std::fs::remove_file(fresh.join("ann.key")).unwrap();
    let args: Vec<&str> = line.iter().map(String::as_str).collect();
    let ran = bench.cli(ALICE, &args).await;
    assert_eq!(ran.code, ExitCode::from(1), "{}{}", ran.out, ran.err);
    assert!(
        ran.err.contains("recovery-admin issues certificates"),
        "{}",
        ran.err
    );
    assert!(!fresh.join("ann.crt").exists());
    // An existing certificate, bound through the service.
    let minted = mint_offline(&bench, "minted", "bob");
    let file = minted.join(PKI).join("bob.crt").display().to_string();
    let line = through(&["principal", "bind-certificate", "bob", &file]);
    let args: Vec<&str> = line.iter().map(String::as_str).collect();
    let out = bench.ok(ROOT, &args).await;
    assert!(
        out.contains("bound to bob by root (recovery-admin)"),
        "{out}"
    );
    let bob = https(&minted, Some("bob"));
    let (status, body) = status_and_body(
        bob.get(format!("{base}/api/v1/whoami"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    service.shutdown().await;
    bench.stop().await;
}
