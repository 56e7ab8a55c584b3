//! Container Registry (v1): the `imageRegistry` kind, one registry namespace per
//! registry.
//!
//! The handle is the namespace's id (a UUID); the namespace lives in the resource's
//! region and the configured project, and is private (`is_public: false`: the kind has
//! no visibility; an update never changes it). Images are pushed to its `endpoint`,
//! `rg.{region}.scw.cloud/{name}`, the observed `uri`. Namespace names are unique in a
//! region across every Scaleway organization: a name taken, by anyone, is `Conflict`.
//! Names are lowercase letters, digits and `-`, neither starting nor ending with `-`
//! (image references are lowercase; Scaleway refuses `_`), at most 63 characters:
//! another name is refused as `Invalid` before any call.
//!
//! **Ownership cannot be proven, so nothing is pruned.** A registry namespace has no tags,
//! and nothing on it that only this fleet can write: its fields are `name`,
//! `description`, `is_public`, the project and organization, and what Scaleway fills in
//! (`id`, `endpoint`, `status`, sizes, dates), and anyone who may write registry
//! namespaces in the project may write every field that can be written. So the kind's
//! tags are not readable for ownership (`tags_readable` is `false`): the engine tells
//! this fleet's namespaces by its ledger alone, never deletes an orphan namespace (it is
//! reported *not prunable*: delete it by hand, or `forget` it), and `ownership` and
//! `mark` answer `Invalid` for a namespace that exists (a namespace cannot be taken over
//! by marking it). A create whose answer was lost stays uncertain (the ledger keeps its
//! row, and the next run finds the namespace by name).
//!
//! **Tags live in the description.** The kind's tags, and the fleet that made the
//! namespace, are written in its `description`, in one fixed encoding:
//!
//! ```text
//! managed-by-infra=<fleet>; <key>=<value>; <key>=<value>[ | <description a person wrote>]
//! ```
//!
//! The fleet pair comes first, then the tags in key order; keys and values are
//! percent-encoded (every byte but ASCII letters, digits and `-_.~/:@+,` is written
//! `%XX`), so that `; `, `=`, ` | ` and spaces never occur inside them. A description
//! is read as this encoding only when all of it before the first ` | ` parses so, the
//! fleet pair first: anything else (a description a person wrote) carries no tags, and
//! is kept whole. The fleet pair tells a person which fleet made the namespace; it is
//! never read as proof of ownership. The encoding is written by the creating call
//! itself (`POST …/namespaces`); an update keeps the fleet pair and a person's text
//! after ` | ` (an update of a namespace whose description is not the encoding cannot
//! write tags, and says so).
//!
//! **What Scaleway does not have.** Container Registry scans no image on push and has
//! no immutable tags. A declared `scanOnPush: true` or `immutableTags: true` is refused
//! as `Invalid`, naming the missing feature, before any call (rather than accepted and
//! silently not done); `false`, or saying nothing, is accepted, and is what Scaleway
//! does.
//!
//! A create answers the namespace `ready` at once; a namespace that ends in `error` is
//! an error naming Scaleway's `status_message`. A delete is asynchronous (the namespace
//! moves to `deleting`, then is gone, with every image in it): it is awaited by polling
//! on the configuration's clock, up to its deadline. A delete whose answer was lost is
//! awaited the same way when the namespace is found `deleting`.
//!
//! What read reports when Container Registry does not say:
//! - `scanOnPush`, `immutableTags`: Scaleway has neither setting, so nothing is ever
//!   read: `Unknown` (the engine compares what it last wrote, which can only be `false`).
//! - `tags`: the tags of the encoded description, the fleet pair included (the engine
//!   strips it); a description that is not the encoding has no tags, the truth `{}`.
//!   The read carries no raw tags: they prove nothing.

use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::{
    ImageRegistry, ImageRegistryObserved, ImageRegistryReported, ImageRegistrySettled,
};
use infra_core::prelude::Partial;
use infra_core::sdk::poll::{Waited, still_running, until_done};
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MARKER_KEY,
    MarkArgs, OwnershipArgs, RawTags, ReadArgs, Reading, Router, UpdateArgs, Written,
};
use serde::{Deserialize, Serialize};

use crate::api::Call;
use crate::clients::Clients;

/// The `not_found` resource types meaning "this namespace does not exist".
const NO_NAMESPACE: &[&str] = &["namespace"];

/// Between the encoded pairs and a description kept by `mark`.
const TRAILER: &str = " | ";

/// Between two encoded pairs.
const BETWEEN: &str = "; ";

/// Bytes written as they are in an encoded key or value; every other is `%XX`.
const PLAIN: &str = "-_.~/:@+,";

const GET: &str = "registry:GetNamespace";
const CREATE: &str = "registry:CreateNamespace";
const UPDATE: &str = "registry:UpdateNamespace";
const DELETE: &str = "registry:DeleteNamespace";

/// Adds this product's kind to `router`.
pub(crate) fn register(mut router: Router, clients: &Arc<Clients>) -> Router {
    router.add::<ImageRegistry>(RegistryNamespaces::new(Arc::clone(clients)));
    router
}

/// A namespace as Scaleway answers it (the fields read here).
#[derive(Debug, Clone, Deserialize)]
struct Namespace {
    id: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    endpoint: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    status_message: String,
}

/// The body of `POST …/namespaces`.
#[derive(Debug, Serialize)]
struct NewNamespace<'a> {
    name: &'a str,
    description: String,
    project_id: &'a str,
    is_public: bool,
}

/// The body of `PATCH …/namespaces/{id}`: the description alone.
#[derive(Debug, Serialize)]
struct DescriptionPatch {
    description: String,
}

/// What a namespace's description holds: the tags of its encoding (marker included)
/// and the text of a person, kept as it was.
#[derive(Debug, Clone, PartialEq, Default)]
struct Described {
    tags: RawTags,
    text: String,
}

/// Percent-encodes `text` (see the module documentation).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || PLAIN.as_bytes().contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The text `encode` made of `encoded`, or `None` when `encoded` is not its output.
fn decode(encoded: &str) -> Option<String> {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = encoded.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else if b.is_ascii_alphanumeric() || PLAIN.as_bytes().contains(&b) {
            out.push(b);
            i += 1;
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

/// The pairs of an encoded head, the marker's first; `None` when `head` is not one.
fn parse_pairs(head: &str) -> Option<RawTags> {
    let mut tags = RawTags::new();
    for (i, pair) in head.split(BETWEEN).enumerate() {
        let (key, value) = pair.split_once('=')?;
        let (key, value) = (decode(key)?, decode(value)?);
        let first_is_marker = i > 0 || (key == MARKER_KEY && !value.is_empty());
        if key.is_empty() || !first_is_marker || tags.insert(key, value).is_some() {
            return None;
        }
    }
    Some(tags)
}

/// What `description` holds (see the module documentation).
fn parse(description: &str) -> Described {
    let (head, text) = description.split_once(TRAILER).unwrap_or((description, ""));
    match parse_pairs(head) {
        Some(tags) => Described {
            tags,
            text: text.to_owned(),
        },
        None => Described {
            tags: RawTags::new(),
            text: description.to_owned(),
        },
    }
}

/// The description holding `described`, whose tags carry a marker.
fn render(described: &Described) -> String {
    let marker = described.tags.get(MARKER_KEY).map(String::as_str);
    let mut out = format!("{MARKER_KEY}={}", encode(marker.unwrap_or_default()));
    for (key, value) in described.tags.iter().filter(|(k, _)| *k != MARKER_KEY) {
        out.push_str(&format!("{BETWEEN}{}={}", encode(key), encode(value)));
    }
    if !described.text.is_empty() {
        out.push_str(TRAILER);
        out.push_str(&described.text);
    }
    out
}

/// The declared tags without a declared marker, refused when a key is empty (the
/// encoding would not read back).
fn declared_tags(spec: &ImageRegistrySettled) -> Result<RawTags, BackendError> {
    let mut declared = spec.tags.known().cloned().unwrap_or_default();
    declared.remove(MARKER_KEY);
    if declared.contains_key("") {
        return Err(BackendError::invalid(
            "a registry namespace's tag needs a key: an empty key cannot be written",
        ));
    }
    Ok(declared)
}

/// Refuses what Scaleway's Container Registry does not have: a declared `true` for
/// either setting.
fn check_settings(spec: &ImageRegistrySettled) -> Result<(), BackendError> {
    let missing = [
        (
            spec.scan_on_push.known(),
            "scanOnPush",
            "scans no image on push",
        ),
        (
            spec.immutable_tags.known(),
            "immutableTags",
            "has no immutable tags (a tag can always be pushed again)",
        ),
    ];
    for (declared, field, what) in missing {
        if declared == Some(&true) {
            return Err(BackendError::invalid(format!(
                "`{field}: true` cannot be had on Scaleway: Container Registry {what}; declare \
                 `false` or leave it out"
            )));
        }
    }
    Ok(())
}

/// Refuses a name Container Registry would refuse.
fn check_name(name: &str) -> Result<(), BackendError> {
    let ok = (1..=63).contains(&name.len())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "registry name {name:?}: a Container Registry namespace's name is 1 to 63 lowercase \
             letters, digits and `-`, neither starting nor ending with `-`"
        )))
    }
}

/// The new description of `current` for the declared tags; `None` when it stays.
fn description_for(
    declared: Option<RawTags>,
    current: &Namespace,
) -> Result<Option<String>, BackendError> {
    let Some(mut declared) = declared else {
        return Ok(None);
    };
    let now = parse(&current.description);
    let Some(marker) = now.tags.get(MARKER_KEY) else {
        if declared.is_empty() {
            return Ok(None);
        }
        return Err(BackendError::invalid(format!(
            "registry namespace {} has a description a person wrote, where its tags would \
             go: declare it without tags, or clear its description",
            current.id
        )));
    };
    declared.insert(MARKER_KEY.to_owned(), marker.clone());
    let wanted = Described {
        tags: declared,
        text: now.text.clone(),
    };
    Ok((wanted != now).then(|| render(&wanted)))
}

fn reading(namespace: &Namespace) -> Reading<ImageRegistry> {
    let raw = parse(&namespace.description).tags;
    Reading::new(
        &namespace.id,
        ImageRegistryObserved {
            id: namespace.id.clone(),
            uri: namespace.endpoint.clone(),
        },
        ImageRegistryReported {
            scan_on_push: Partial::Unknown,
            immutable_tags: Partial::Unknown,
            tags: Partial::Known(raw.clone()),
        },
    )
}

/// `imageRegistry`, realised as a Container Registry namespace.
pub(crate) struct RegistryNamespaces {
    clients: Arc<Clients>,
}

impl RegistryNamespaces {
    /// The kind, reaching Scaleway through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        RegistryNamespaces { clients }
    }

    fn base(region: &str) -> String {
        format!("/registry/v1/regions/{region}/namespaces")
    }

    fn path(region: &str, handle: &str) -> Result<String, BackendError> {
        // A namespace id is a UUID: anything else would name another path.
        let id_like =
            !handle.is_empty() && handle.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        if !id_like {
            return Err(BackendError::invalid(format!(
                "{handle:?} is not a Container Registry namespace's id (a UUID)"
            )));
        }
        Ok(format!("{}/{handle}", Self::base(region)))
    }

    /// The namespace, or `NotFound` when it does not exist in this region.
    async fn get(&self, region: &str, handle: &str) -> Result<Namespace, BackendError> {
        let call = Call::get(GET, Self::path(region, handle)?).not_found(NO_NAMESPACE);
        self.clients.api().call(call).await
    }

    /// The namespaces of the project in `region` (named `name`, when given).
    async fn all(&self, region: &str, name: Option<&str>) -> Result<Vec<Namespace>, BackendError> {
        let mut call = Call::get("registry:ListNamespaces", Self::base(region))
            .query("project_id", self.clients.project_id());
        if let Some(name) = name {
            call = call.query("name", name);
        }
        self.clients.api().list_all(call, "namespaces").await
    }

    /// `Invalid` for a namespace that exists (`NotFound` for one that does not): its
    /// ownership cannot be read, and so it cannot be taken over.
    async fn unprovable(&self, region: &str, handle: &str, asked: &str) -> BackendError {
        match self.get(region, handle).await {
            Err(e) => e,
            Ok(_) => BackendError::invalid(format!(
                "registry namespace {handle}: Container Registry namespaces carry no tags and \
                 nothing only this fleet can write, so {asked}"
            )),
        }
    }

    /// A namespace that ended in `error` is an error naming Scaleway's message.
    fn healthy(namespace: Namespace, what: &str) -> Result<Namespace, BackendError> {
        if namespace.status == "error" {
            return Err(BackendError::new(
                ErrorKind::Other,
                format!(
                    "{what}: registry namespace {} is in error: {}",
                    namespace.id, namespace.status_message
                ),
            ));
        }
        Ok(namespace)
    }

    async fn set_description(
        &self,
        region: &str,
        handle: &str,
        description: String,
    ) -> Result<Namespace, BackendError> {
        let call = Call::patch(UPDATE, Self::path(region, handle)?).not_found(NO_NAMESPACE);
        let body = DescriptionPatch { description };
        self.clients.api().send(call, Some(&body)).await
    }

    /// Awaits the end of a delete: `Ok` once the namespace is gone. A namespace found
    /// in another status than `deleting` ends the wait with `not_deleting`.
    async fn await_gone(
        &self,
        region: &str,
        handle: &str,
        not_deleting: BackendError,
    ) -> Result<(), BackendError> {
        let poll = || async {
            match self.get(region, handle).await {
                Err(e) if e.kind == ErrorKind::NotFound => Ok(Some(())),
                Err(e) => Err(e),
                Ok(n) if n.status == "deleting" => Ok(None),
                Ok(_) => Err(not_deleting.clone()),
            }
        };
        match until_done(self.clients.clock(), self.clients.polling(), DELETE, poll).await? {
            Waited::Done(()) => Ok(()),
            Waited::StillRunning => Err(still_running(DELETE, self.clients.polling())),
        }
    }
}

#[async_trait]
impl KindBackend<ImageRegistry> for RegistryNamespaces {
    /// Nothing on a namespace proves whose it is (see the module documentation).
    fn tags_readable(&self) -> bool {
        false
    }

    /// `ListNamespaces` answers each namespace whole, as `GetNamespace` does.
    fn lists_complete(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        Ok(self
            .all(region, None)
            .await?
            .into_iter()
            .map(|n| {
                let read = reading(&n);
                Listed::new(n.name, n.id).with_reading(read)
            })
            .collect())
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<ImageRegistry>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        Ok(reading(&self.get(region, handle).await?))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, ImageRegistry>,
    ) -> Result<Written<Reading<ImageRegistry>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        check_name(name)?;
        check_settings(spec)?;
        let mut tags = declared_tags(spec)?;
        tags.insert(MARKER_KEY.to_owned(), marker.value().to_owned());
        let body = NewNamespace {
            name,
            description: render(&Described {
                tags,
                text: String::new(),
            }),
            project_id: self.clients.project_id(),
            is_public: false,
        };
        let call = Call::create(CREATE, Self::base(region));
        // A lost answer stays uncertain: no namespace found afterwards can be proven to
        // be this create's.
        let created = self
            .clients
            .api()
            .send::<Namespace>(call, Some(&body))
            .await?;
        let created = Self::healthy(created, CREATE)?;
        match self.get(region, &created.id).await {
            Ok(now) => Ok(Written::Done(reading(&Self::healthy(now, CREATE)?))),
            // Not visible yet: the answer of the create stands for the read.
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Written::Done(reading(&created))),
            Err(e) => Err(e),
        }
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, ImageRegistry>,
    ) -> Result<Written<Reading<ImageRegistry>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        check_settings(spec)?;
        let declared = spec.tags.known().map(|_| declared_tags(spec)).transpose()?;
        let current = self.get(region, handle).await?;
        let Some(description) = description_for(declared, &current)? else {
            return Ok(Written::Done(reading(&current)));
        };
        let updated = self.set_description(region, handle, description).await?;
        match self.get(region, handle).await {
            Ok(now) => Ok(Written::Done(reading(&now))),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Written::Done(reading(&updated))),
            Err(e) => Err(e),
        }
    }

    /// Deletes the namespace and every image in it, awaiting its going (bounded by the
    /// polling deadline). A delete whose answer was lost is awaited too when the
    /// namespace is found `deleting`, and is done when it is gone.
    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let call = Call::delete(DELETE, Self::path(region, handle)?).not_found(NO_NAMESPACE);
        match self.clients.api().act(call, None::<&()>).await {
            Ok(()) => {
                let odd = BackendError::new(
                    ErrorKind::Other,
                    format!(
                        "{DELETE}: registry namespace {handle} was deleted, but reads show it \
                         neither deleting nor gone"
                    ),
                );
                self.await_gone(region, handle, odd).await
            }
            Err(e) if e.may_have_been_sent => self.await_gone(region, handle, e).await,
            Err(e) => Err(e),
        }
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let why = "whose it is cannot be read";
        Err(self.unprovable(region, handle, why).await)
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs { region, handle, .. } = args;
        let why = "it cannot be given an ownership marker; nothing was changed";
        Err(self.unprovable(region, handle, why).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(pairs: &[(&str, &str)]) -> RawTags {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn namespace(description: &str) -> Namespace {
        Namespace {
            id: "00000001-5ca1-4e00-8000-000000001eef".to_owned(),
            name: "app".to_owned(),
            description: description.to_owned(),
            endpoint: "rg.fr-par.scw.cloud/app".to_owned(),
            status: "ready".to_owned(),
            status_message: String::new(),
        }
    }

    #[test]
    fn tags_round_trip_through_the_description() {
        let tags = map(&[
            (MARKER_KEY, "shop"),
            ("team", "web"),
            ("odd key", "a; b=c | d %20 é"),
            ("empty", ""),
        ]);
        let described = Described {
            tags: tags.clone(),
            text: String::new(),
        };
        let text = render(&described);
        assert!(text.starts_with("managed-by-infra=shop; "), "{text}");
        assert!(!text.contains(TRAILER), "{text}");
        assert_eq!(parse(&text), described);
        let kept = Described {
            tags,
            text: "images of the web team | and more".to_owned(),
        };
        assert_eq!(parse(&render(&kept)), kept);
    }

    #[test]
    fn a_description_a_person_wrote_is_never_a_marker() {
        for human in [
            "",
            "images of the web team",
            "managed-by-infra",
            "managed by infra=shop",
            "team=web; managed-by-infra=shop",
            "managed-by-infra=; team=web",
            "managed-by-infra=shop; team",
            "managed-by-infra=shop;team=web",
            "managed-by-infra=shop; team=a b",
            "managed-by-infra=shop; team=%zz",
            "managed-by-infra=shop; team=1; team=2",
        ] {
            let read = parse(human);
            assert!(read.tags.is_empty(), "{human:?} read as {read:?}");
            assert_eq!(read.text, human);
        }
        assert_eq!(
            parse("managed-by-infra=shop; team=web").tags,
            map(&[(MARKER_KEY, "shop"), ("team", "web")])
        );
    }

    #[test]
    fn an_update_keeps_the_marker_and_a_persons_text() {
        let current = namespace("managed-by-infra=shop; team=web | pushed by CI");
        assert_eq!(
            description_for(Some(map(&[("team", "web")])), &current).unwrap(),
            None
        );
        assert_eq!(description_for(None, &current).unwrap(), None);
        assert_eq!(
            description_for(Some(map(&[("team", "ops")])), &current).unwrap(),
            Some("managed-by-infra=shop; team=ops | pushed by CI".to_owned())
        );
        let unmarked = namespace("images of the web team");
        assert_eq!(
            description_for(Some(RawTags::new()), &unmarked).unwrap(),
            None
        );
        let refused = description_for(Some(map(&[("team", "web")])), &unmarked).unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Invalid);
    }

    #[test]
    fn settings_scaleway_lacks_are_refused_when_true() {
        let spec = |scan: Partial<bool>, immutable: Partial<bool>| ImageRegistrySettled {
            scan_on_push: scan,
            immutable_tags: immutable,
            tags: Partial::Unknown,
        };
        assert!(check_settings(&spec(Partial::Known(false), Partial::Unknown)).is_ok());
        assert!(check_settings(&spec(Partial::Unknown, Partial::Known(false))).is_ok());
        let e = check_settings(&spec(Partial::Known(true), Partial::Known(false))).unwrap_err();
        assert!(e.kind == ErrorKind::Invalid && e.message.contains("scanOnPush"));
        let e = check_settings(&spec(Partial::Unknown, Partial::Known(true))).unwrap_err();
        assert!(e.message.contains("immutableTags"), "{}", e.message);
    }

    #[test]
    fn names_are_refused_where_container_registry_would_refuse_them() {
        for good in ["app", "web-images-2", "1app", &"a".repeat(63)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "App",
            "app_images",
            "app.images",
            "-app",
            "app-",
            &"a".repeat(64),
        ] {
            assert_eq!(
                check_name(bad).unwrap_err().kind,
                ErrorKind::Invalid,
                "{bad}"
            );
        }
    }

    #[test]
    fn reads_report_the_tags_and_leave_the_settings_unknown() {
        let read = reading(&namespace("managed-by-infra=shop; team=web"));
        assert_eq!(
            read.reported()["tags"],
            json!({"managed-by-infra": "shop", "team": "web"})
        );
        assert!(
            read.reported()
                .get("scanOnPush")
                .is_none_or(|v| v.is_null())
        );
        assert_eq!(read.observed().uri, "rg.fr-par.scw.cloud/app");
        let human = reading(&namespace("images"));
        assert_eq!(human.reported()["tags"], json!({}));
    }
}

#[cfg(test)]
#[path = "recorded/registry.rs"]
mod recorded;
