//! A simulated node with a talosconfig written for it, and clients connected to it.

use std::time::Duration;

use infra_core::engine::SystemClock;
use infra_testkit::talos::{TalosSim, TalosSimBuilder};
use tempfile::TempDir;

use crate::attempt::{CommittedAttempt, ConfigArtifact};
use crate::connect::{ConnectOptions, NodeAddress, NodeChannel};
use crate::dispatch::{Delivery, DispatchClient, Dispatched};
use crate::observation::Observation;
use crate::observe::ObservationClient;
use crate::talosconfig::TalosConfig;

/// A running simulated node and clients for it.
pub(super) struct Node {
    pub(super) sim: TalosSim,
    pub(super) observer: ObservationClient,
    pub(super) dispatcher: DispatchClient,
    _dir: TempDir,
}

impl Node {
    pub(super) async fn start() -> Node {
        Node::start_with(TalosSim::builder()).await
    }

    pub(super) async fn start_with(builder: TalosSimBuilder) -> Node {
        let sim = builder.start().await.expect("simulator starts");
        let dir = tempfile::tempdir().expect("temp dir");
        let admin = sim.pki().admin_client().expect("client certificate");
        let path = sim
            .write_talosconfig(dir.path(), &admin)
            .expect("talosconfig");
        let config = TalosConfig::load(&path).expect("talosconfig loads");
        let context = config.context(None).expect("context");
        let credentials = context.admin_credentials().expect("os:admin");
        let address = NodeAddress::parse(&context.nodes()[0]).expect("node address");
        let options = ConnectOptions {
            connect_timeout: Duration::from_secs(2),
            call_deadline: Duration::from_secs(2),
            tls_server_name: None,
        };
        let channel = NodeChannel::open(&credentials, &address, &options)
            .await
            .expect("channel");
        Node {
            observer: ObservationClient::new(&channel),
            dispatcher: DispatchClient::new(&channel),
            sim,
            _dir: dir,
        }
    }

    pub(super) async fn observe(&self) -> Observation {
        self.observer.observe(&SystemClock::new()).await
    }

    /// Sends the artifact made of `name` with a committed attempt and the usual
    /// deadline.
    pub(super) async fn apply(&self, name: &str) -> (ConfigArtifact, Dispatched) {
        let artifact = super::apply::artifact(name);
        let dispatched = self
            .dispatcher
            .send(
                committed(&artifact, super::apply::DEADLINE),
                &artifact,
                Delivery::Apply,
            )
            .await
            .expect("sent");
        (artifact, dispatched)
    }

    pub(super) async fn shutdown(self) {
        self.sim.shutdown().await.expect("simulator stops");
    }
}

/// A committed attempt for `artifact`, as the store's attempt transaction makes one.
pub(super) fn committed(artifact: &ConfigArtifact, deadline: Duration) -> CommittedAttempt {
    CommittedAttempt::new(
        "op-1".to_owned(),
        1,
        "machine-a".to_owned(),
        artifact.digest(),
        deadline,
    )
}
