//! Dead letters that work: the roles the Pub/Sub service agent needs.
//!
//! Pub/Sub moves an undeliverable message to the dead-letter topic as the project's
//! Pub/Sub service agent, `service-{project number}@gcp-sa-pubsub.iam.gserviceaccount.com`,
//! which must hold `roles/pubsub.publisher` on the dead-letter topic (to publish the
//! message there) and `roles/pubsub.subscriber` on the subscription (to acknowledge it
//! where it failed). Without them Pub/Sub accepts the policy and never dead-letters
//! anything. The project number comes from Resource Manager (`projects.get`), asked
//! once.
//!
//! Each grant is a read-modify-write of the resource's IAM policy with its etag
//! (`policy.rs`), writing nothing when the agent already holds the role, so that every
//! apply may make it again. A grant that cannot be made is the queue's refusal, with
//! the reason and what to grant by hand.
//!
//! Google's Pub/Sub emulator serves no IAM policy (every `getIamPolicy` answers 501
//! `UNIMPLEMENTED`) and dead-letters without them: on an endpoint on this machine, an
//! `UNIMPLEMENTED` answer means there is nothing to grant, and is logged as such.
//! Anywhere else it is an error like any other.

use infra_core::sdk::BackendError;

use crate::clients::Clients;
use crate::config::Service;
use crate::error::{NOT_FOUND, classify};
use crate::policy;

/// The role that lets the agent publish a failed message to the dead-letter topic.
pub(crate) const PUBLISHER: &str = "roles/pubsub.publisher";
/// The role that lets the agent acknowledge it on the subscription.
pub(crate) const SUBSCRIBER: &str = "roles/pubsub.subscriber";

/// The member naming the Pub/Sub service agent of the project numbered `number`.
pub(crate) fn service_agent(number: &str) -> String {
    format!("serviceAccount:service-{number}@gcp-sa-pubsub.iam.gserviceaccount.com")
}

/// What a grant came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Granted {
    /// The agent holds the role (it did already, or now does).
    Held,
    /// The endpoint (an emulator on this machine) has no IAM policies: nothing to grant.
    NoPolicies,
}

/// Grants `role` on `resource` (a topic's or a subscription's name) to the project's
/// Pub/Sub service agent. The error says what was being granted to whom, and what to
/// grant by hand.
pub(crate) async fn grant(
    clients: &Clients,
    resource: &str,
    role: &str,
) -> Result<Granted, BackendError> {
    let agent = match clients.project_number().await {
        Ok(number) => service_agent(number),
        Err(e) => {
            return Err(BackendError {
                message: format!(
                    "a dead letter needs the project's Pub/Sub service agent to hold {role} on \
                     {resource}, and the project number that names the agent could not be \
                     read: {}",
                    e.message
                ),
                ..e
            });
        }
    };
    let client = clients.pubsub_policies().await?;
    let made = policy::modify(
        clients.clock(),
        resource,
        || async {
            client
                .get_iam_policy()
                .set_resource(resource)
                .set_options(
                    google_cloud_iam_v1::model::GetPolicyOptions::new()
                        .set_requested_policy_version(policy::VERSION),
                )
                .send()
                .await
                .map_err(|e| classify("pubsub:GetIamPolicy", e, NOT_FOUND))
        },
        |p| async move {
            client
                .set_iam_policy()
                .set_resource(resource)
                .set_policy(p)
                .send()
                .await
                .map_err(|e| classify("pubsub:SetIamPolicy", e, NOT_FOUND))
        },
        |p| policy::grant(p, role, &agent),
    )
    .await;
    match made {
        Ok(_) => Ok(Granted::Held),
        Err(e)
            if e.code.as_deref() == Some("UNIMPLEMENTED") && clients.is_local(Service::PubSub) =>
        {
            tracing::warn!(
                "{resource}: the Pub/Sub endpoint on this machine serves no IAM policies (the \
                 emulator); {role} is not granted to {agent}"
            );
            Ok(Granted::NoPolicies)
        }
        Err(e) => Err(BackendError {
            message: format!(
                "a dead letter needs the project's Pub/Sub service agent {agent} to hold {role} \
                 on {resource} (grant it by hand, or give this tool \
                 pubsub.topics.setIamPolicy and pubsub.subscriptions.setIamPolicy): {}",
                e.message
            ),
            ..e
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_is_named_by_the_project_number() {
        assert_eq!(
            service_agent("123456789012"),
            "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"
        );
    }
}
