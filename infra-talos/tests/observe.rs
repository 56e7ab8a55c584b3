//! Observation of a simulated Talos node over real gRPC with mutual TLS: what is
//! read, and how every read that fails shows as missing evidence.
#![cfg(feature = "grpc")]

use std::path::Path;
use std::time::Duration;

use infra_core::engine::ManualClock;
use infra_talos::talosconfig::{TalosConfigProblem, TalosContext};
use infra_talos::{
    ConnectOptions, MissingReason, NodeAddress, NodeChannel, Observation, ObservationClient, Read,
    TalosConfig, config_digest,
};
use infra_testkit::talos::{
    ADMIN_ROLE, ClientCert, NodeFacts, ReadFault, SimResource, TalosSim, TestPki,
};

fn options() -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_secs(2),
        call_deadline: Duration::from_secs(2),
        tls_server_name: None,
    }
}

fn context_for(sim: &TalosSim, dir: &Path, client: &ClientCert) -> TalosContext {
    let path = sim.write_talosconfig(dir, client).expect("talosconfig");
    TalosConfig::load(&path)
        .expect("talosconfig loads")
        .context(None)
        .expect("context")
}

async fn observer(sim: &TalosSim, dir: &Path, client: &ClientCert) -> ObservationClient {
    let context = context_for(sim, dir, client);
    let credentials = context.admin_credentials().expect("os:admin");
    let address = NodeAddress::parse(&context.nodes()[0]).expect("address");
    let channel = NodeChannel::open(&credentials, &address, &options())
        .await
        .expect("channel");
    ObservationClient::new(&channel)
}

async fn admin_observer(sim: &TalosSim, dir: &Path) -> ObservationClient {
    observer(sim, dir, &sim.pki().admin_client().expect("client")).await
}

async fn observe(client: &ObservationClient) -> Observation {
    client.observe(&ManualClock::new()).await
}

fn missing<T>(reason: MissingReason) -> Read<T> {
    Read::missing(reason)
}

#[tokio::test]
async fn reads_version_identity_cluster_and_digest() {
    let facts = NodeFacts {
        smbios_uuid: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".into(),
        node_id: "node-id-a".into(),
        cluster_id: "cluster-id-a".into(),
        talos_version: "v1.10.4".into(),
        config: b"version: v1alpha1\nmachine:\n  type: controlplane\n".to_vec(),
        ..NodeFacts::default()
    };
    let sim = TalosSim::builder()
        .facts(facts.clone())
        .start()
        .await
        .expect("start");
    let dir = tempfile::tempdir().expect("dir");
    let client = admin_observer(&sim, dir.path()).await;

    let observation = observe(&client).await;
    assert_eq!(
        observation.identity.smbios_uuid,
        Read::Ok(facts.smbios_uuid.clone())
    );
    assert_eq!(
        observation.identity.node_id,
        Read::Ok(facts.node_id.clone())
    );
    assert_eq!(observation.cluster_id, Read::Ok(facts.cluster_id.clone()));
    assert_eq!(observation.talos_version, Read::Ok("v1.10.4".to_owned()));
    assert_eq!(
        observation.config_digest,
        Read::Ok(config_digest(&facts.config))
    );
    assert_eq!(observation.config_version, Read::Ok("1".to_owned()));
    assert!(observation.started <= observation.ended);

    let system = client
        .system_information()
        .await
        .into_result()
        .expect("read");
    assert_eq!(system.uuid, facts.smbios_uuid);
    assert_eq!(system.serial_number, facts.serial_number);
    let cluster = client.cluster_info().await.into_result().expect("read");
    assert_eq!(cluster.cluster_name, facts.cluster_name);
    let listed = client
        .list("config", "MachineConfigs.config.talos.dev")
        .await
        .into_result()
        .expect("listed");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].id.as_str(), listed[0].version.as_str()),
        ("v1alpha1", "1")
    );

    assert!(sim.apply_requests().is_empty());
    sim.shutdown().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_band_drift_shows_as_a_digest_and_version_change() {
    let sim = TalosSim::start().await.expect("start");
    let dir = tempfile::tempdir().expect("dir");
    let client = admin_observer(&sim, dir.path()).await;
    let before = observe(&client).await;

    let drifted = b"version: v1alpha1\nmachine:\n  type: worker\n  drifted: true\n";
    sim.drift_config(drifted.to_vec());
    let after = observe(&client).await;
    assert_eq!(after.config_digest, Read::Ok(config_digest(drifted)));
    assert_ne!(after.config_digest, before.config_digest);
    assert_eq!(after.config_version, Read::Ok("2".to_owned()));
    assert!(sim.apply_requests().is_empty());
    sim.shutdown().await.expect("stop");
}

#[tokio::test]
async fn another_identity_shows_up_in_the_observation() {
    let sim = TalosSim::start().await.expect("start");
    let dir = tempfile::tempdir().expect("dir");
    let client = admin_observer(&sim, dir.path()).await;
    let before = observe(&client).await;

    sim.set_identity("11111111-2222-3333-4444-555555555555", "another-node");
    sim.set_cluster_id("another-cluster");
    let after = observe(&client).await;
    assert_eq!(
        after.identity.smbios_uuid,
        Read::Ok("11111111-2222-3333-4444-555555555555".to_owned())
    );
    assert_eq!(after.identity.node_id, Read::Ok("another-node".to_owned()));
    assert_eq!(after.cluster_id, Read::Ok("another-cluster".to_owned()));
    assert_ne!(after.identity, before.identity);
    // The configuration did not change.
    assert_eq!(after.config_digest, before.config_digest);
    sim.shutdown().await.expect("stop");
}

#[tokio::test]
async fn a_permission_denied_read_is_missing_evidence_not_absence() {
    let sim = TalosSim::start().await.expect("start");
    sim.fail_reads(SimResource::MachineConfig, ReadFault::PermissionDenied);
    sim.fail_reads(SimResource::Identity, ReadFault::PermissionDenied);
    let dir = tempfile::tempdir().expect("dir");
    let client = admin_observer(&sim, dir.path()).await;

    let observation = observe(&client).await;
    assert_eq!(
        observation.config_digest,
        missing(MissingReason::PermissionDenied)
    );
    assert_eq!(
        observation.config_version,
        missing(MissingReason::PermissionDenied)
    );
    assert_eq!(
        observation.identity.node_id,
        missing(MissingReason::PermissionDenied)
    );
    // The other values were still read.
    assert!(observation.identity.smbios_uuid.is_read());
    assert!(observation.talos_version.is_read());
    sim.shutdown().await.expect("stop");
}

#[tokio::test]
async fn each_failed_read_says_why() {
    let sim = TalosSim::start().await.expect("start");
    sim.fail_reads(SimResource::Version, ReadFault::Unavailable);
    sim.fail_reads(SimResource::ClusterInfo, ReadFault::NotFound);
    sim.fail_reads(SimResource::SystemInformation, ReadFault::Malformed);
    sim.fail_reads(SimResource::MachineConfig, ReadFault::Malformed);
    let dir = tempfile::tempdir().expect("dir");
    let client = admin_observer(&sim, dir.path()).await;

    let observation = observe(&client).await;
    assert_eq!(
        observation.talos_version,
        missing(MissingReason::Unreachable)
    );
    assert_eq!(observation.cluster_id, missing(MissingReason::NotFound));
    assert!(
        matches!(
            observation.identity.smbios_uuid.reason(),
            Some(MissingReason::Malformed(_))
        ),
        "{observation:?}"
    );
    assert!(matches!(
        observation.config_digest.reason(),
        Some(MissingReason::Malformed(_))
    ));
    assert!(observation.identity.node_id.is_read());

    sim.clear_faults();
    let empty_uuid = NodeFacts {
        smbios_uuid: String::new(),
        ..sim.facts()
    };
    sim.set_facts(empty_uuid);
    let observation = observe(&client).await;
    assert!(
        matches!(
            observation.identity.smbios_uuid.reason(),
            Some(MissingReason::Malformed(detail)) if detail.contains("empty")
        ),
        "an empty UUID is missing, not a default: {observation:?}"
    );
    sim.shutdown().await.expect("stop");
}

/// A read whose connection the node cuts is missing (unreachable), never a value;
/// the other reads of the same observation, and the next observation once the node
/// answers, go over a new connection.
#[tokio::test]
async fn a_connection_lost_during_a_read_leaves_that_value_missing() {
    let sim = TalosSim::start().await.expect("start");
    let dir = tempfile::tempdir().expect("dir");
    let client = admin_observer(&sim, dir.path()).await;
    sim.fail_reads(SimResource::MachineConfig, ReadFault::ConnectionLost);
    let observation = observe(&client).await;
    assert_eq!(
        observation.config_digest,
        missing(MissingReason::Unreachable),
        "{observation:?}"
    );
    sim.clear_faults();
    let observation = observe(&client).await;
    assert_eq!(
        observation.config_digest.value(),
        Some(&config_digest(&sim.facts().config)),
        "{observation:?}"
    );
    assert!(observation.talos_version.is_read());
    sim.shutdown().await.expect("stop");
}

#[tokio::test]
async fn an_unreachable_node_leaves_every_value_missing() {
    let sim = TalosSim::start().await.expect("start");
    let dir = tempfile::tempdir().expect("dir");
    let client = admin_observer(&sim, dir.path()).await;
    sim.shutdown().await.expect("stop");

    let observation = observe(&client).await;
    for reason in [
        observation.talos_version.reason(),
        observation.config_digest.reason(),
        observation.config_version.reason(),
        observation.identity.smbios_uuid.reason(),
        observation.identity.node_id.reason(),
        observation.cluster_id.reason(),
    ] {
        assert_eq!(reason, Some(&MissingReason::Unreachable), "{observation:?}");
    }
}

#[tokio::test]
async fn a_client_certificate_from_another_ca_is_refused() {
    let sim = TalosSim::start().await.expect("start");
    let dir = tempfile::tempdir().expect("dir");
    let stranger = TestPki::untrusted_client(ADMIN_ROLE).expect("client");
    let client = observer(&sim, dir.path(), &stranger).await;

    let observation = observe(&client).await;
    assert_eq!(
        observation.talos_version,
        missing(MissingReason::Unreachable)
    );
    assert_eq!(
        observation.config_digest,
        missing(MissingReason::Unreachable)
    );
    assert!(
        sim.requests().is_empty(),
        "no request got past the handshake"
    );
    sim.shutdown().await.expect("stop");
}

#[tokio::test]
async fn a_talosconfig_without_os_admin_is_refused() {
    let sim = TalosSim::start().await.expect("start");
    let dir = tempfile::tempdir().expect("dir");
    let reader = sim.pki().client("os:reader").expect("client");
    let context = context_for(&sim, dir.path(), &reader);
    let refused = context.admin_credentials().expect_err("not an admin");
    assert!(matches!(
        refused.problem,
        TalosConfigProblem::NotAdmin { ref organisations, .. } if organisations == "os:reader"
    ));
    let shown = refused.to_string();
    assert!(shown.contains("talosconfig"), "{shown}");
    assert!(shown.contains("os:admin"), "{shown}");
    assert!(sim.requests().is_empty());
    sim.shutdown().await.expect("stop");
}

#[tokio::test]
async fn a_server_name_other_than_the_certificate_s_is_refused() {
    let sim = TalosSim::start().await.expect("start");
    let dir = tempfile::tempdir().expect("dir");
    let context = context_for(&sim, dir.path(), &sim.pki().admin_client().expect("client"));
    let credentials = context.admin_credentials().expect("os:admin");
    let address = NodeAddress::parse(&sim.node_address()).expect("address");

    let named = ConnectOptions {
        tls_server_name: Some("localhost".to_owned()),
        ..options()
    };
    let channel = NodeChannel::open(&credentials, &address, &named)
        .await
        .expect("channel");
    assert!(ObservationClient::new(&channel).version().await.is_read());

    let misnamed = ConnectOptions {
        tls_server_name: Some("not-this-node.example".to_owned()),
        ..options()
    };
    let channel = NodeChannel::open(&credentials, &address, &misnamed)
        .await
        .expect("channel");
    assert_eq!(
        ObservationClient::new(&channel).version().await,
        missing(MissingReason::Unreachable)
    );
    sim.shutdown().await.expect("stop");
}
