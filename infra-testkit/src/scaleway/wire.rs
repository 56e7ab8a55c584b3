//! What every Scaleway stand-in product shares: requests as parsed, answers and errors
//! in Scaleway's shapes, ids, timestamps, and statuses that take time to settle.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::Clock;

use serde_json::{Value, json};

/// A request as the products see it.
#[derive(Debug)]
pub(crate) struct Req<'a> {
    /// `GET`, `POST`, `PATCH`, `PUT`, `DELETE`.
    pub(crate) method: &'a str,
    /// The path, percent-decoded (`/secret-manager/v1beta1/regions/fr-par/secrets`).
    pub(crate) path: &'a str,
    /// The query parameters, decoded.
    pub(crate) query: &'a BTreeMap<String, String>,
    /// The body as JSON (`Null` when empty).
    pub(crate) body: &'a Value,
}

impl Req<'_> {
    /// The query parameter `name`, if given and not empty.
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The path's segments after `prefix` (which must match whole segments), or `None`:
    /// `under("/registry/v1/regions")` of `/registry/v1/regions/fr-par/namespaces/x` is
    /// `["fr-par", "namespaces", "x"]`.
    pub(crate) fn under<'p>(&'p self, prefix: &str) -> Option<Vec<&'p str>> {
        let rest = self.path.strip_prefix(prefix)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        Some(rest.split('/').filter(|s| !s.is_empty()).collect())
    }

    /// The body's string field `name`.
    pub(crate) fn str(&self, name: &str) -> Option<&str> {
        self.body.get(name).and_then(Value::as_str)
    }

    /// The `page` and `page_size` of a listing (1 and 20 when not given, as Scaleway).
    pub(crate) fn page(&self) -> (usize, usize) {
        let n = |name: &str, default: usize| {
            self.param(name)
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        (n("page", 1), n("page_size", 20))
    }
}

/// An answer: a status and a JSON body.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    /// The HTTP status.
    pub(crate) status: u16,
    /// The body.
    pub(crate) body: Value,
}

impl Reply {
    /// 200 with `body`.
    pub(crate) fn ok(body: Value) -> Reply {
        Reply { status: 200, body }
    }

    /// 204 with no body (a `DELETE` of a product that answers nothing).
    pub(crate) fn no_content() -> Reply {
        Reply {
            status: 204,
            body: Value::Null,
        }
    }

    /// A listing page: `{ "<field>": items[page], "total_count": n }`.
    pub(crate) fn page(req: &Req<'_>, field: &str, items: Vec<Value>) -> Reply {
        let (page, size) = req.page();
        let total = items.len();
        let shown: Vec<Value> = items
            .into_iter()
            .skip((page - 1) * size)
            .take(size)
            .collect();
        Reply::ok(json!({ field: shown, "total_count": total }))
    }

    /// An error of Scaleway's shape: `{"type", "message", …extra}`.
    pub(crate) fn error(
        status: u16,
        kind: &str,
        message: impl Into<String>,
        extra: Value,
    ) -> Reply {
        let mut body = json!({ "type": kind, "message": message.into() });
        if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
            body.extend(extra);
        }
        Reply { status, body }
    }

    /// 404 `not_found` of `resource` `id`.
    pub(crate) fn not_found(resource: &str, id: &str) -> Reply {
        Reply::error(
            404,
            "not_found",
            "resource is not found",
            json!({ "resource": resource, "resource_id": id }),
        )
    }

    /// 404 with the bare message Container Registry and the serverless APIs answer for
    /// a missing `resource` (`namespace` → `{"message": "Namespace was not found"}`):
    /// no `type`, no `resource`, as Scaleway was recorded answering.
    pub(crate) fn missing(resource: &str) -> Reply {
        let mut title = resource.to_owned();
        if let Some(first) = title.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        Reply {
            status: 404,
            body: json!({ "message": format!("{title} was not found") }),
        }
    }

    /// 400 `invalid_arguments` naming `argument`.
    pub(crate) fn invalid(argument: &str, help: impl Into<String>) -> Reply {
        let help = help.into();
        Reply::error(
            400,
            "invalid_arguments",
            "invalid argument(s)",
            json!({ "details": [{ "argument_name": argument, "reason": "constraint", "help_message": help }] }),
        )
    }

    /// 403 `permissions_denied`.
    pub(crate) fn denied(why: impl Into<String>) -> Reply {
        Reply::error(
            403,
            "permissions_denied",
            format!("insufficient permissions: {}", why.into()),
            json!({}),
        )
    }

    /// 409 `already_exists` of `resource`.
    pub(crate) fn exists(resource: &str, name: &str) -> Reply {
        Reply::error(
            409,
            "already_exists",
            format!("resource already exists: {resource} {name}"),
            json!({ "resource": resource }),
        )
    }

    /// 409 `transient_state`: `resource` `id` is busy (`state`).
    pub(crate) fn transient(resource: &str, id: &str, state: &str) -> Reply {
        Reply::error(
            409,
            "transient_state",
            "resource is in a transient state",
            json!({ "resource": resource, "resource_id": id, "current_state": state }),
        )
    }

    /// 412 `precondition_failed` with `precondition` (`resource_still_in_use`, …).
    pub(crate) fn precondition(precondition: &str, help: impl Into<String>) -> Reply {
        Reply::error(
            412,
            "precondition_failed",
            "precondition is not respected",
            json!({ "precondition": precondition, "help_message": help.into() }),
        )
    }

    /// 403 `quotas_exceeded` of `resource`.
    pub(crate) fn quota(resource: &str, quota: u64) -> Reply {
        Reply::error(
            403,
            "quotas_exceeded",
            "quota(s) exceeded for this resource",
            json!({ "details": [{ "resource": resource, "quota": quota, "current": quota }] }),
        )
    }
}

/// A resource whose status moves from a transient one (`creating`, `pending`,
/// `deploying`, `provisioning`) to its settled one once enough time has passed on the
/// stand-in's clock since the change: whether the resource is read, listed or never
/// looked at in between makes no difference, as on Scaleway.
#[derive(Clone)]
pub(crate) struct Settling {
    /// The status shown until the change is done.
    pub(crate) transient: &'static str,
    /// The status after.
    pub(crate) settled: &'static str,
    /// The clock, and the time on it at which the change is done; `None`: done.
    until: Option<(Arc<dyn Clock>, Duration)>,
}

impl std::fmt::Debug for Settling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settling")
            .field("status", &self.status())
            .field("settled", &self.settled)
            .field("until", &self.until.as_ref().map(|(_, t)| *t))
            .finish()
    }
}

impl Settling {
    /// Settled from the start.
    pub(crate) fn settled(status: &'static str) -> Self {
        Settling {
            transient: status,
            settled: status,
            until: None,
        }
    }

    /// The status now.
    pub(crate) fn status(&self) -> &'static str {
        if self.busy() {
            self.transient
        } else {
            self.settled
        }
    }

    /// Whether the change is still under way (a write now answers `transient_state`).
    pub(crate) fn busy(&self) -> bool {
        self.until
            .as_ref()
            .is_some_and(|(clock, until)| clock.now() < *until)
    }
}

/// How long a change takes on the stand-in, on its clock: what makes a [`Settling`].
#[derive(Clone)]
pub(crate) struct Settle {
    clock: Arc<dyn Clock>,
    lasts: Duration,
}

impl std::fmt::Debug for Settle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settle")
            .field("lasts", &self.lasts)
            .finish_non_exhaustive()
    }
}

impl Settle {
    /// Changes that take `lasts` on `clock`.
    pub(crate) fn new(clock: Arc<dyn Clock>, lasts: Duration) -> Self {
        Settle { clock, lasts }
    }

    /// A change starting now: `transient` until it is done, then `settled`.
    pub(crate) fn after(&self, transient: &'static str, settled: &'static str) -> Settling {
        Settling {
            transient,
            settled,
            until: Some((Arc::clone(&self.clock), self.clock.now() + self.lasts)),
        }
    }

    /// The clock.
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }
}

/// The regions Scaleway serves these products in.
pub(crate) const REGIONS: [&str; 3] = ["fr-par", "nl-ams", "pl-waw"];

/// The refusal of a region Scaleway does not have, or `None` when `region` is one.
pub(crate) fn unknown_region(region: &str) -> Option<Reply> {
    (!REGIONS.contains(&region)).then(|| {
        Reply::invalid(
            "region",
            format!("unknown region {region:?} (one of fr-par, nl-ams, pl-waw)"),
        )
    })
}
