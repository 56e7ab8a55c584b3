//! Who may call a Cloud Run service: the `access` field, as the service's own IAM
//! policy.
//!
//! Cloud Run lets a call through when its caller holds `roles/run.invoker` on the
//! service. **Private** (what a fleet gets unless it says otherwise): no binding of
//! `roles/run.invoker` holds `allUsers` or `allAuthenticatedUsers`, so that every call
//! needs an identity granted the role; ingress is left as Cloud Run sets it.
//! **Public**: `allUsers` holds `roles/run.invoker` (an unconditional binding), so
//! that anyone may call it without credentials.
//!
//! Read: `Public` when `allUsers` or `allAuthenticatedUsers` holds the role in any
//! binding (a condition on it is not weighed: a service that some anonymous callers
//! may reach is not private), `Private` otherwise. Written: making a service private
//! removes both members from every binding of the role; making it public adds `allUsers`
//! alone. Other members of the role (the fleet's own callers) are never touched. The
//! write is a read-modify-write with the policy's etag (`policy.rs`), and writes
//! nothing when the policy already says what is declared.

use google_cloud_iam_v1::model::{GetPolicyOptions, Policy};
use infra_core::kinds::Access;
use infra_core::sdk::BackendError;

use crate::clients::Clients;
use crate::error::{NOT_FOUND, classify};
use crate::policy;

/// The role that lets a caller invoke a service.
pub(crate) const INVOKER: &str = "roles/run.invoker";
/// Everyone on the internet, without credentials.
const ALL_USERS: &str = "allUsers";
/// Anyone with a Google account.
const ALL_AUTHENTICATED: &str = "allAuthenticatedUsers";

/// What `policy` says of who may call the service.
pub(crate) fn access_of(policy: &Policy) -> Access {
    if [ALL_USERS, ALL_AUTHENTICATED]
        .iter()
        .any(|m| policy::holds(policy, INVOKER, m))
    {
        Access::Public
    } else {
        Access::Private
    }
}

/// Brings `policy` to `access`; answers whether anything changed.
pub(crate) fn make(policy: &mut Policy, access: Access) -> bool {
    match access {
        Access::Public => policy::grant(policy, INVOKER, ALL_USERS),
        Access::Private => {
            let anyone = policy::revoke(policy, INVOKER, ALL_USERS);
            let any_account = policy::revoke(policy, INVOKER, ALL_AUTHENTICATED);
            anyone || any_account
        }
    }
}

/// The IAM policy of the service `name` (version 3: conditional bindings whole).
pub(crate) async fn get(clients: &Clients, name: &str) -> Result<Policy, BackendError> {
    clients
        .run_services()
        .await?
        .get_iam_policy()
        .set_resource(name)
        .set_options(GetPolicyOptions::new().set_requested_policy_version(policy::VERSION))
        .send()
        .await
        .map_err(|e| classify("run:GetIamPolicy", e, NOT_FOUND))
}

/// Brings the service `name` to `access`; answers what it now is.
pub(crate) async fn set(
    clients: &Clients,
    name: &str,
    access: Access,
) -> Result<Access, BackendError> {
    policy::modify(
        clients.clock(),
        &format!("Cloud Run service {name}"),
        || get(clients, name),
        |p| async move {
            clients
                .run_services()
                .await?
                .set_iam_policy()
                .set_resource(name)
                .set_policy(p)
                .send()
                .await
                .map_err(|e| classify("run:SetIamPolicy", e, NOT_FOUND))
        },
        |p| make(p, access),
    )
    .await?;
    Ok(access)
}

#[cfg(test)]
mod tests {
    use super::*;
    use google_cloud_iam_v1::model::Binding;

    fn policy(members: &[&str]) -> Policy {
        Policy::new().set_bindings([
            Binding::new()
                .set_role(INVOKER)
                .set_members(members.iter().map(|m| (*m).to_owned())),
            Binding::new()
                .set_role("roles/run.developer")
                .set_members(["allUsers".to_owned()]),
        ])
    }

    #[test]
    fn a_service_anyone_may_call_is_public_and_private_means_no_one_unnamed() {
        assert_eq!(access_of(&policy(&["allUsers"])), Access::Public);
        assert_eq!(
            access_of(&policy(&["allAuthenticatedUsers"])),
            Access::Public
        );
        assert_eq!(
            access_of(&policy(&[
                "serviceAccount:caller@p.iam.gserviceaccount.com"
            ])),
            Access::Private
        );
        // Another role of allUsers is not the invoker role.
        assert_eq!(access_of(&Policy::new()), Access::Private);
    }

    #[test]
    fn making_a_service_private_removes_anyone_and_keeps_the_fleet_s_callers() {
        let caller = "serviceAccount:caller@p.iam.gserviceaccount.com";
        let mut p = policy(&["allUsers", caller, "allAuthenticatedUsers"]);
        assert!(make(&mut p, Access::Private));
        assert_eq!(access_of(&p), Access::Private);
        assert!(policy::holds(&p, INVOKER, caller));
        assert!(policy::holds(&p, "roles/run.developer", "allUsers"));
        assert!(!make(&mut p, Access::Private), "nothing left to change");
        assert!(make(&mut p, Access::Public));
        assert_eq!(access_of(&p), Access::Public);
        assert!(!make(&mut p, Access::Public));
    }
}
