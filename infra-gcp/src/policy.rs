//! IAM policies of single resources (a Cloud Run service, a Pub/Sub topic or
//! subscription): the read–modify–write with the policy's etag, and the edits the
//! kinds make to them.
//!
//! A policy is changed by reading it (version 3, so that conditional bindings come
//! back whole), editing what was read, and writing it back with the etag read. When
//! someone else changed it in between, Google refuses the write (409 `ABORTED`): the
//! change starts again from a fresh read, up to [`ATTEMPTS`] times, waiting on the
//! configuration's clock in between. An edit that changes nothing writes nothing, so
//! the whole is idempotent.

use std::future::Future;
use std::time::Duration;

use google_cloud_iam_v1::model::{Binding, Policy};
use infra_core::sdk::{BackendError, Clock};

/// The policy version asked for and written back when a binding has a condition.
pub(crate) const VERSION: i32 = 3;
/// How many times a read-modify-write is tried when the policy's etag went stale.
pub(crate) const ATTEMPTS: u32 = 5;

/// Whether `member` holds `role` in any binding of `policy` (conditional ones too).
pub(crate) fn holds(policy: &Policy, role: &str, member: &str) -> bool {
    policy
        .bindings
        .iter()
        .any(|b| b.role == role && b.members.iter().any(|m| m == member))
}

/// Grants `role` to `member` without a condition; answers whether anything changed.
pub(crate) fn grant(policy: &mut Policy, role: &str, member: &str) -> bool {
    let unconditional = policy
        .bindings
        .iter_mut()
        .find(|b| b.role == role && b.condition.is_none());
    match unconditional {
        Some(binding) if binding.members.iter().any(|m| m == member) => false,
        Some(binding) => {
            binding.members.push(member.to_owned());
            true
        }
        None => {
            policy.bindings.push(
                Binding::new()
                    .set_role(role)
                    .set_members([member.to_owned()]),
            );
            true
        }
    }
}

/// Removes `member` from every binding of `role` (conditional ones too), dropping
/// bindings left empty; answers whether anything changed.
pub(crate) fn revoke(policy: &mut Policy, role: &str, member: &str) -> bool {
    let mut changed = false;
    for binding in policy.bindings.iter_mut().filter(|b| b.role == role) {
        let before = binding.members.len();
        binding.members.retain(|m| m != member);
        changed |= binding.members.len() != before;
    }
    policy.bindings.retain(|b| !b.members.is_empty());
    changed
}

/// Reads a policy with `get`, lets `edit` change it (answering whether it did), and
/// writes it back with `set`, carrying the etag read; a stale etag starts again (see
/// the module documentation). Answers whether a change was written. `what` names the
/// resource in errors.
pub(crate) async fn modify<G, GF, S, SF>(
    clock: &dyn Clock,
    what: &str,
    get: G,
    set: S,
    edit: impl Fn(&mut Policy) -> bool,
) -> Result<bool, BackendError>
where
    G: Fn() -> GF,
    GF: Future<Output = Result<Policy, BackendError>>,
    S: Fn(Policy) -> SF,
    SF: Future<Output = Result<Policy, BackendError>>,
{
    let mut wait = Duration::from_millis(500);
    let mut attempt = 1;
    loop {
        let mut policy = get().await?;
        if !edit(&mut policy) {
            return Ok(false);
        }
        if policy.bindings.iter().any(|b| b.condition.is_some()) {
            policy.version = policy.version.max(VERSION);
        }
        match set(policy).await {
            Ok(_) => return Ok(true),
            Err(e) if e.code.as_deref() == Some("ABORTED") => {
                if attempt >= ATTEMPTS {
                    return Err(BackendError {
                        message: format!(
                            "{} (the IAM policy of {what} changed under every one of \
                             {ATTEMPTS} read-modify-writes)",
                            e.message
                        ),
                        ..e
                    });
                }
                tracing::debug!("{what}: attempt {attempt}: the policy's etag went stale: {e}");
            }
            Err(e) => return Err(e),
        }
        attempt += 1;
        clock.sleep(wait).await;
        wait *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infra_core::sdk::{ErrorKind, ManualClock};
    use std::sync::Mutex;

    fn policy(bindings: &[(&str, &[&str])]) -> Policy {
        Policy::new().set_bindings(bindings.iter().map(|(role, members)| {
            Binding::new()
                .set_role(*role)
                .set_members(members.iter().map(|m| (*m).to_owned()))
        }))
    }

    #[test]
    fn grants_and_revokes_change_only_what_they_must() {
        let mut p = policy(&[("roles/run.invoker", &["user:a@example.com"])]);
        assert!(grant(&mut p, "roles/run.invoker", "allUsers"));
        assert!(!grant(&mut p, "roles/run.invoker", "allUsers"));
        assert!(holds(&p, "roles/run.invoker", "allUsers"));
        assert_eq!(p.bindings.len(), 1);
        assert!(grant(
            &mut p,
            "roles/pubsub.publisher",
            "serviceAccount:x@y.z"
        ));
        assert_eq!(p.bindings.len(), 2);
        assert!(revoke(&mut p, "roles/run.invoker", "allUsers"));
        assert!(!revoke(&mut p, "roles/run.invoker", "allUsers"));
        assert!(holds(&p, "roles/run.invoker", "user:a@example.com"));
        assert!(revoke(&mut p, "roles/run.invoker", "user:a@example.com"));
        assert_eq!(p.bindings.len(), 1, "an emptied binding is dropped");
    }

    #[tokio::test]
    async fn a_stale_etag_starts_again_from_a_fresh_read_and_no_change_writes_nothing() {
        let clock = ManualClock::new();
        let stored = Mutex::new(policy(&[]).set_etag(b"1".to_vec()));
        let stale_writes = Mutex::new(2);
        let writes = Mutex::new(0);
        let get = || async { Ok(stored.lock().unwrap().clone()) };
        let set = |p: Policy| {
            let mut stale = stale_writes.lock().unwrap();
            let out = if *stale > 0 {
                *stale -= 1;
                Err(BackendError::new(ErrorKind::Conflict, "concurrent change")
                    .with_code("ABORTED"))
            } else {
                *writes.lock().unwrap() += 1;
                *stored.lock().unwrap() = p.clone();
                Ok(p)
            };
            async move { out }
        };
        let edit = |p: &mut Policy| grant(p, "roles/run.invoker", "allUsers");
        assert!(modify(&clock, "service s", get, set, edit).await.unwrap());
        assert_eq!(*writes.lock().unwrap(), 1);
        assert!(holds(
            &stored.lock().unwrap(),
            "roles/run.invoker",
            "allUsers"
        ));
        // Again: nothing to change, nothing written.
        assert!(!modify(&clock, "service s", get, set, edit).await.unwrap());
        assert_eq!(*writes.lock().unwrap(), 1);
        // Stale every time: refused, saying so.
        *stale_writes.lock().unwrap() = 99;
        let revoke_all = |p: &mut Policy| revoke(p, "roles/run.invoker", "allUsers");
        let err = modify(&clock, "service s", get, set, revoke_all)
            .await
            .unwrap_err();
        assert!(
            err.message.contains("changed under every one of 5"),
            "{}",
            err.message
        );
    }
}
