//! The simulator's own checks, through the generated client over mutual TLS.

use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::api::cosi::resource as cosi;
use super::api::machine;
use super::api::machine::apply_configuration_request::Mode;
use super::*;

fn channel(sim: &TalosSim, client: &ClientCert) -> Channel {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(sim.pki().ca_pem()))
        .identity(Identity::from_pem(client.cert_pem(), client.key_pem()))
        .domain_name("127.0.0.1");
    Endpoint::from_shared(sim.endpoint())
        .expect("endpoint")
        .connect_timeout(Duration::from_secs(2))
        .tls_config(tls)
        .expect("tls config")
        .connect_lazy()
}

fn apply_request(data: &[u8]) -> machine::ApplyConfigurationRequest {
    machine::ApplyConfigurationRequest {
        data: data.to_vec(),
        mode: Mode::NoReboot as i32,
        dry_run: false,
        try_mode_timeout: None,
    }
}

#[tokio::test]
async fn serves_version_and_resources_over_mutual_tls() {
    let sim = TalosSim::builder()
        .talos_version("v1.9.9")
        .node_id("node-x")
        .start()
        .await
        .expect("start");
    let channel = channel(&sim, &sim.pki().admin_client().expect("client"));
    let mut machine = machine::machine_service_client::MachineServiceClient::new(channel.clone());
    let version = machine.version(()).await.expect("version").into_inner();
    assert_eq!(
        version.messages[0].version.as_ref().map(|v| v.tag.as_str()),
        Some("v1.9.9")
    );

    let mut state = cosi::state_client::StateClient::new(channel);
    let identity = state
        .get(cosi::GetRequest {
            namespace: "cluster".into(),
            r#type: "Identities.cluster.talos.dev".into(),
            id: "local".into(),
            options: None,
        })
        .await
        .expect("get")
        .into_inner();
    let spec = identity.resource.and_then(|r| r.spec).expect("spec");
    assert_eq!(spec.yaml_spec, "nodeId: \"node-x\"\n");

    let mut listed = state
        .list(cosi::ListRequest {
            namespace: "config".into(),
            r#type: "MachineConfigs.config.talos.dev".into(),
            options: None,
        })
        .await
        .expect("list")
        .into_inner();
    let first = listed.message().await.expect("item").expect("one item");
    assert_eq!(
        first.resource.and_then(|r| r.metadata).map(|m| m.version),
        Some("1".to_owned())
    );
    assert!(listed.message().await.expect("end").is_none());

    let calls: Vec<_> = sim
        .requests()
        .into_iter()
        .map(|r| r.call.method())
        .collect();
    assert_eq!(
        calls,
        [
            "/machine.MachineService/Version",
            "/cosi.resource.State/Get",
            "/cosi.resource.State/List"
        ]
    );
    sim.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_and_stops_on_a_multi_thread_runtime() {
    let sim = TalosSim::start().await.expect("start");
    let mut machine = machine::machine_service_client::MachineServiceClient::new(channel(
        &sim,
        &sim.pki().admin_client().expect("client"),
    ));
    machine
        .apply_configuration(apply_request(b"version: v1alpha1\n# changed\n"))
        .await
        .expect("apply");
    assert_eq!(sim.config(), b"version: v1alpha1\n# changed\n");
    assert_eq!(sim.config_version(), 2);
    let applies = sim.apply_requests();
    assert_eq!(applies.len(), 1);
    assert_eq!(
        applies[0].call,
        RecordedCall::ApplyConfiguration {
            mode: ApplyMode::NoReboot,
            dry_run: false,
            data_digest: config_digest_hex(b"version: v1alpha1\n# changed"),
        }
    );
    sim.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn refuses_a_client_certificate_from_another_ca() {
    let sim = TalosSim::start().await.expect("start");
    let stranger = TestPki::untrusted_client(ADMIN_ROLE).expect("client");
    let mut machine =
        machine::machine_service_client::MachineServiceClient::new(channel(&sim, &stranger));
    assert!(machine.version(()).await.is_err());
    assert!(sim.requests().is_empty());
    sim.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_lost_response_lands_then_cuts_the_connection() {
    let sim = TalosSim::start().await.expect("start");
    sim.fail_next_apply(ApplyFault::LoseResponse);
    let mut machine = machine::machine_service_client::MachineServiceClient::new(channel(
        &sim,
        &sim.pki().admin_client().expect("client"),
    ));
    let outcome = tokio::time::timeout(
        Duration::from_secs(5),
        machine.apply_configuration(apply_request(b"landed: true\n")),
    )
    .await
    .expect("the cut is seen before the test's own timeout");
    let status = outcome.expect_err("no answer");
    assert!(
        std::error::Error::source(&status).is_some(),
        "a transport error, not a status from the server: {status:?}"
    );
    assert_eq!(sim.config(), b"landed: true\n");
    // The channel reconnects: the first call after the cut may still find the
    // connection broken, a later one gets through.
    let mut answered = false;
    for _ in 0..3 {
        if machine.version(()).await.is_ok() {
            answered = true;
            break;
        }
    }
    assert!(answered, "the channel reconnects after the cut");
    sim.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_read_meets_a_cut_connection_until_cleared() {
    let sim = TalosSim::start().await.expect("start");
    sim.fail_reads(SimResource::Version, ReadFault::ConnectionLost);
    let mut machine = machine::machine_service_client::MachineServiceClient::new(channel(
        &sim,
        &sim.pki().admin_client().expect("client"),
    ));
    let outcome = tokio::time::timeout(Duration::from_secs(5), machine.version(()))
        .await
        .expect("the cut is seen before the test's own timeout");
    let status = outcome.expect_err("no answer");
    assert!(
        std::error::Error::source(&status).is_some(),
        "a transport error, not a status from the server: {status:?}"
    );
    // Control: `Unavailable` is a status the server sends, with no transport error.
    sim.fail_reads(SimResource::Version, ReadFault::Unavailable);
    let mut refused = None;
    for _ in 0..3 {
        if let Err(status) = machine.version(()).await
            && std::error::Error::source(&status).is_none()
        {
            refused = Some(status);
            break;
        }
    }
    let refused = refused.expect("a status from the server once reconnected");
    assert_eq!(refused.code(), tonic::Code::Unavailable);
    sim.clear_faults();
    assert!(machine.version(()).await.is_ok());
    sim.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_held_apply_lands_on_release_and_drop_stops_the_server() {
    let sim = TalosSim::start().await.expect("start");
    sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let before = sim.config();
    let mut machine = machine::machine_service_client::MachineServiceClient::new(channel(
        &sim,
        &sim.pki().admin_client().expect("client"),
    ));
    let mut request = tonic::Request::new(apply_request(b"held: true\n"));
    request.set_timeout(Duration::from_millis(200));
    let gave_up = tokio::time::timeout(
        Duration::from_millis(300),
        machine.apply_configuration(request),
    )
    .await;
    assert!(!matches!(gave_up, Ok(Ok(_))), "no answer while held");
    assert_eq!(sim.config(), before);
    assert_eq!(sim.held_count(), 1);
    assert_eq!(sim.release_held(), 1);
    assert_eq!(sim.config(), b"held: true\n");
    assert_eq!(sim.config_version(), 2);
    let addr = sim.addr();
    drop(sim);
    // Dropped: nothing accepts on the port any more.
    let mut refused = false;
    for _ in 0..50 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "the listener is closed after drop");
}
