//! Applies through the dispatch client, and each fault as the client sees it.

use std::time::Duration;

use infra_testkit::talos::{ApplyFault, ApplyMode, Landing, RecordedCall};
use tonic::Code;

use super::support::{Node, committed};
use crate::attempt::ConfigArtifact;
use crate::digest::config_digest;
use crate::dispatch::{ApplyResponse, Delivery, DispatchError, TransportOutcome};
use crate::observation::{MissingReason, Read};

pub(super) const DEADLINE: Duration = Duration::from_secs(2);

pub(super) fn artifact(marker: &str) -> ConfigArtifact {
    ConfigArtifact::new(format!(
        "version: v1alpha1\nmachine:\n  type: worker\n  token: {marker}\n"
    ))
}

#[tokio::test]
async fn no_reboot_apply_changes_the_config_and_the_observed_digest_follows() {
    let node = Node::start().await;
    let before = node.observe().await;
    let (artifact, dispatched) = node.apply("applied").await;
    assert!(
        matches!(dispatched.response, ApplyResponse::Accepted { .. }),
        "{dispatched:?}"
    );
    assert_eq!(dispatched.operation_id, "op-1");
    assert_eq!(dispatched.artifact_digest, artifact.digest());
    assert_eq!(node.sim.config(), artifact.bytes());

    let after = node.observe().await;
    assert_eq!(after.config_digest, Read::Ok(artifact.digest()));
    assert_eq!(
        after.config_digest,
        Read::Ok(config_digest(&node.sim.config()))
    );
    assert_ne!(after.config_version, before.config_version);
    assert_eq!(after.config_version, Read::Ok("2".to_owned()));

    let applies = node.sim.apply_requests();
    assert_eq!(applies.len(), 1);
    assert_eq!(
        applies[0].call,
        RecordedCall::ApplyConfiguration {
            mode: ApplyMode::NoReboot,
            dry_run: false,
            data_digest: artifact.digest().to_hex(),
        }
    );
    node.shutdown().await;
}

#[tokio::test]
async fn a_dry_run_changes_nothing() {
    let node = Node::start().await;
    let before = node.observe().await;
    let artifact = artifact("dry");
    let dispatched = node
        .dispatcher
        .send(committed(&artifact, DEADLINE), &artifact, Delivery::DryRun)
        .await
        .expect("sent");
    assert!(
        matches!(&dispatched.response, ApplyResponse::Accepted { mode_details, .. } if mode_details.starts_with("Dry run")),
        "{dispatched:?}"
    );
    let after = node.observe().await;
    assert_eq!(after.config_digest, before.config_digest);
    assert_eq!(after.config_version, before.config_version);
    assert!(matches!(
        node.sim.apply_requests()[0].call,
        RecordedCall::ApplyConfiguration {
            dry_run: true,
            mode: ApplyMode::NoReboot,
            ..
        }
    ));
    node.shutdown().await;
}

#[tokio::test]
async fn a_held_apply_lands_after_the_client_gave_up() {
    let node = Node::start().await;
    node.sim
        .fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let before = node.observe().await;
    let artifact = artifact("held");
    let dispatched = node
        .dispatcher
        .send(
            committed(&artifact, Duration::from_millis(300)),
            &artifact,
            Delivery::Apply,
        )
        .await
        .expect("sent");
    assert_eq!(
        dispatched.response,
        ApplyResponse::Unknown {
            outcome: TransportOutcome::DeadlineExceeded
        }
    );
    // The client has returned; only now does the node land the request.
    assert_eq!(node.observe().await.config_digest, before.config_digest);
    assert_eq!(node.sim.release_held(), 1);

    let after = node.observe().await;
    assert_eq!(after.config_digest, Read::Ok(artifact.digest()));
    assert_eq!(after.config_version, Read::Ok("2".to_owned()));
    assert_ne!(after.config_version, before.config_version);
    node.shutdown().await;
}

#[tokio::test]
async fn a_held_apply_can_land_after_a_delay() {
    let node = Node::start().await;
    node.sim
        .fail_next_apply(ApplyFault::Hold(Landing::After(Duration::from_millis(150))));
    let (artifact, dispatched) = node.apply("late").await;
    // The node answers when it lands, within this deadline.
    assert!(
        matches!(dispatched.response, ApplyResponse::Accepted { .. }),
        "{dispatched:?}"
    );
    assert_eq!(node.sim.config(), artifact.bytes());
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_response_is_unknown_while_the_config_changed() {
    let node = Node::start().await;
    node.sim.fail_next_apply(ApplyFault::LoseResponse);
    let (artifact, dispatched) = node.apply("lost").await;
    // The connection broke before the deadline: the request may have landed.
    assert_eq!(
        dispatched.response,
        ApplyResponse::Unknown {
            outcome: TransportOutcome::ConnectionLost
        }
    );
    assert_eq!(node.sim.config(), artifact.bytes());
    // The first read after a broken connection may itself find the connection
    // broken (missing, Unreachable); the channel reconnects for the next one.
    let mut observed = node.observe().await.config_digest;
    for _ in 0..3 {
        if observed.is_read() {
            break;
        }
        assert_eq!(observed.reason(), Some(&MissingReason::Unreachable));
        observed = node.observe().await.config_digest;
    }
    assert_eq!(observed, Read::Ok(artifact.digest()));
    node.shutdown().await;
}

#[tokio::test]
async fn invalid_argument_is_a_rejection_and_nothing_changes() {
    let node = Node::start().await;
    node.sim.fail_next_apply(ApplyFault::InvalidArgument(
        "1 error occurred:\n\t* machine.token \"s3cr3t-value\" is invalid".to_owned(),
    ));
    let before = node.observe().await;
    let (_, dispatched) = node.apply("rejected").await;
    let ApplyResponse::Rejected { message } = &dispatched.response else {
        panic!("expected a rejection: {dispatched:?}");
    };
    assert!(message.starts_with("1 error occurred"), "{message}");
    assert!(!format!("{dispatched:?}").contains("s3cr3t"));
    let after = node.observe().await;
    assert_eq!(after.config_digest, before.config_digest);
    assert_eq!(after.config_version, before.config_version);
    node.shutdown().await;
}

#[tokio::test]
async fn a_no_reboot_refusal_is_not_a_validation_rejection() {
    let node = Node::start().await;
    node.sim.fail_next_apply(ApplyFault::Status(
        Code::InvalidArgument,
        "this config change can't be applied in immediate mode\ndiff: +  token: s3cr3t".to_owned(),
    ));
    let (_, dispatched) = node.apply("needs-reboot").await;
    assert!(
        matches!(
            &dispatched.response,
            ApplyResponse::Refused {
                code: Code::InvalidArgument,
                ..
            }
        ),
        "{dispatched:?}"
    );
    assert!(!format!("{dispatched:?}").contains("s3cr3t"));
    node.shutdown().await;
}

#[tokio::test]
async fn unavailable_is_an_unknown_outcome() {
    let node = Node::start().await;
    node.sim.fail_next_apply(ApplyFault::Unavailable);
    let before = node.observe().await;
    let (_, dispatched) = node.apply("unavailable").await;
    assert_eq!(
        dispatched.response,
        ApplyResponse::Unknown {
            outcome: TransportOutcome::Unavailable
        }
    );
    assert_eq!(node.observe().await.config_digest, before.config_digest);
    node.shutdown().await;
}

#[tokio::test]
async fn other_codes_are_returned_as_refusals() {
    let node = Node::start().await;
    node.sim.fail_next_apply(ApplyFault::Status(
        Code::FailedPrecondition,
        "busy".to_owned(),
    ));
    let (_, dispatched) = node.apply("refused").await;
    assert_eq!(
        dispatched.response,
        ApplyResponse::Refused {
            code: Code::FailedPrecondition,
            message: "busy".to_owned()
        }
    );
    node.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_node_is_an_unknown_outcome() {
    let node = Node::start().await;
    let dispatcher = node.dispatcher.clone();
    node.shutdown().await;
    let artifact = artifact("nobody");
    let dispatched = dispatcher
        .send(committed(&artifact, DEADLINE), &artifact, Delivery::Apply)
        .await
        .expect("sent");
    assert!(
        matches!(dispatched.response, ApplyResponse::Unknown { .. }),
        "{dispatched:?}"
    );
}

#[tokio::test]
async fn an_artifact_other_than_the_committed_one_is_not_sent() {
    let node = Node::start().await;
    let committed_for = artifact("committed");
    let other = artifact("other");
    let refused = node
        .dispatcher
        .send(committed(&committed_for, DEADLINE), &other, Delivery::Apply)
        .await;
    assert!(matches!(
        refused,
        Err(DispatchError::ArtifactMismatch { .. })
    ));
    assert!(node.sim.apply_requests().is_empty());
    node.shutdown().await;
}

#[tokio::test]
async fn the_observation_client_never_sends_an_apply() {
    let node = Node::start().await;
    for _ in 0..3 {
        let _ = node.observe().await;
    }
    let _ = node
        .observer
        .list("config", "MachineConfigs.config.talos.dev")
        .await;
    let requests = node.sim.requests();
    assert!(!requests.is_empty());
    assert!(node.sim.apply_requests().is_empty());
    for request in requests {
        assert!(
            [
                "/machine.MachineService/Version",
                "/cosi.resource.State/Get",
                "/cosi.resource.State/List"
            ]
            .contains(&request.call.method()),
            "{request:?}"
        );
    }
    node.shutdown().await;
}
