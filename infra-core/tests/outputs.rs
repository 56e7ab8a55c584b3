//! Outputs through the command-line runner on the simulated cloud: printed from the
//! records without a cloud call, read again with `--refresh`, a secret shown only when
//! named — and then never written anywhere but standard output.

mod support;

use infra_core::kinds::{ObjectStore, ObjectStoreObserved, Secrets};
use infra_core::prelude::{AwsRegion, CheckReport, Expr, Fleet};
use infra_testkit::sim::SimCloud;
use support::console::{answering, json};

fn fleet() -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("outputs");
    let here = AwsRegion::EuWest3;
    let password = f.declare(here, "db-password", Secrets::generated(24));
    let assets = f.declare(here, "outputs-assets", ObjectStore::new());
    f.output(
        "assets-id",
        Expr::observed(assets).map(|o: &ObjectStoreObserved| o.id.clone()),
    );
    f.secret_output("db-password", password);
    f.build()
}

fn assets_id(cloud: &SimCloud) -> String {
    let found = cloud.find("aws", "objectStore", "outputs-assets");
    found[0].observed["id"].as_str().unwrap().to_owned()
}

/// Every byte of every file under `dir`, as text.
fn everything_under(dir: &std::path::Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            text.push_str(&everything_under(&path));
        } else {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
    text
}

#[tokio::test]
async fn outputs_are_read_from_the_records_without_calling_the_clouds() {
    let cloud = support::cloud(41);
    let mut s = answering(false, true);

    // Nothing observed yet: not known, and the run says so.
    let (code, out, err) = s.run(fleet(), &cloud, &["output", "--json"]).await;
    assert_eq!(code, 1, "{out}{err}");
    let values = &json(&out)["values"];
    assert!(
        values["assets-id"]["unknown"]
            .as_str()
            .unwrap()
            .contains("aws/objectStore/outputs-assets (eu-west-3) has not been observed"),
        "{out}"
    );

    let (code, _, err) = s.run(fleet(), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{err}");
    cloud.clear_calls();
    let (code, out, err) = s.run(fleet(), &cloud, &["output"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "assets-id = \"{}\"\ndb-password = (sensitive: `output --show-secret db-password` shows it)\n",
            assets_id(&cloud)
        )
    );
    assert!(cloud.calls().is_empty(), "{:?}", cloud.calls());

    // One output by name: its value alone.
    let (code, out, _) = s.run(fleet(), &cloud, &["output", "assets-id"]).await;
    assert_eq!(code, 0);
    assert_eq!(out, format!("{}\n", assets_id(&cloud)));
    // A secret one by name, not asked to be shown: an error, and nothing a script
    // could take for its value.
    let (code, out, err) = s.run(fleet(), &cloud, &["output", "db-password"]).await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("output `db-password` is a secret: `output db-password --show-secret db-password` prints its value"),
        "{err}"
    );
    let (code, out, _) = s.run(fleet(), &cloud, &["output", "--json"]).await;
    assert_eq!(code, 0);
    let doc = json(&out);
    assert_eq!(doc["outputs"], "v1");
    assert_eq!(doc["values"]["assets-id"]["value"], assets_id(&cloud));
    assert_eq!(
        doc["values"]["db-password"],
        serde_json::json!({"sensitive": true})
    );
    assert!(cloud.calls().is_empty(), "{:?}", cloud.calls());
}

#[tokio::test]
async fn a_secret_output_is_shown_only_when_named_and_never_recorded() {
    let cloud = support::cloud(42);
    let mut s = answering(false, true);
    let (code, _, err) = s.run(fleet(), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{err}");
    let handle = cloud.find("aws", "secrets", "db-password")[0]
        .handle
        .clone();
    let secret = cloud.stored_secret(&handle).unwrap().expose().to_owned();
    assert!(secret.len() >= 24);

    let (code, out, err) = s
        .run(fleet(), &cloud, &["output", "--show-secret", "db-password"])
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("db-password = {secret}\n")), "{out}");
    let (code, out, _) = s
        .run(
            fleet(),
            &cloud,
            &["output", "db-password", "--show-secret", "db-password"],
        )
        .await;
    assert_eq!(code, 0);
    assert_eq!(out, format!("{secret}\n"));
    let (code, out, _) = s
        .run(
            fleet(),
            &cloud,
            &["output", "--json", "--show-secret", "db-password"],
        )
        .await;
    assert_eq!(code, 0);
    assert_eq!(json(&out)["values"]["db-password"]["value"], secret);

    // Not named: not shown, in any form; and no record holds it.
    for args in [
        &["output"][..],
        &["output", "--json"],
        &["output", "--refresh"],
    ] {
        let (code, out, err) = s.run(fleet(), &cloud, args).await;
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(!out.contains(&secret) && !err.contains(&secret), "{args:?}");
    }
    assert!(!everything_under(s.state.path()).contains(&secret));

    // A plain output is not a secret, and a typo is refused with the nearest name.
    let (code, _, err) = s
        .run(fleet(), &cloud, &["output", "--show-secret", "assets-id"])
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("output `assets-id` is not a secret"), "{err}");
    let (code, _, err) = s.run(fleet(), &cloud, &["output", "db-pasword"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("did you mean `db-password`?"), "{err}");
}

#[tokio::test]
async fn refresh_reads_the_clouds_when_the_records_know_nothing() {
    let cloud = support::cloud(43);
    let (code, _, err) = answering(false, true)
        .run(fleet(), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0, "{err}");
    // Another machine: records of its own, empty.
    let mut other = answering(false, true);
    let (code, _, err) = other.run(fleet(), &cloud, &["output", "assets-id"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("has not been observed"), "{err}");
    let (code, out, err) = other
        .run(fleet(), &cloud, &["output", "assets-id", "--refresh"])
        .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, format!("{}\n", assets_id(&cloud)));
}

#[tokio::test]
async fn a_plain_output_may_not_read_a_secret() {
    let mut f = Fleet::builder("outputs");
    let password = f.declare(AwsRegion::EuWest3, "db-password", Secrets::generated(24));
    f.output("leak", Expr::secret(password));
    let cloud = support::cloud(44);
    let (code, _, err) = answering(false, true)
        .run(f.build(), &cloud, &["check"])
        .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("output `leak`: it reads a secret's value") && err.contains("secret_output"),
        "{err}"
    );
}
