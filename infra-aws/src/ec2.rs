//! EC2: the `securityGroup` and `awsInstance` kinds.
//!
//! What read reports when EC2 does not say:
//!
//! `securityGroup` (handle: the group id `sg-…`; name: the group name):
//! - `description`, `vpcId`: EC2 always answers both; an answer without one leaves the
//!   field `Unknown`. An unset `vpcId` is created in the region's default VPC, and that
//!   VPC is reported (the divergence table does not compare an unset target).
//! - `ingress`, `egress`: the group's IPv4 CIDR rules, as the set of [`Rule`]s the spec
//!   uses. Rules of other peers (IPv6 ranges, other groups, prefix lists) are outside
//!   what the field says and are neither reported nor touched. An all-protocols rule
//!   (`-1`) covers every port, and is reported with the whole range 0–65535 whatever
//!   ports EC2 echoes (it answers none); a declaration must say so. A rule the type
//!   cannot hold (an ICMP rule for every type or code, `-1`, or a protocol other than
//!   tcp, udp, icmp and all) makes the whole field `Unknown`, never a partial set.
//! - `tags`: EC2 answers no tags as an empty list, which is the truth, an empty map.
//!   The marker is included; the engine strips it.
//!
//! `awsInstance` (handle: the instance id; name: its `Name` tag):
//! - `image`: the AMI the instance runs (`Image::Latest` is resolved on create).
//! - `instanceType`: as EC2 says it; a type this crate has no variant for is `Unknown`.
//! - `securityGroup`: the instance's group when it is in exactly one; an instance in
//!   several cannot be told as one handle and is `Unknown`.
//! - `subnetId`, `keyName`: what EC2 says, or `Unknown` when it says nothing (an
//!   instance without a key pair has no key name to report; `Partial` cannot say "none").
//! - `userData`: from `DescribeInstanceAttribute`, decoded from base64; `Unknown` when
//!   EC2 answers no value, or one that is not base64 of UTF-8 text.
//! - `tags`: every tag but `Name`, which is the resource's name, not a declared tag
//!   (a declaration may not say a `Name` tag). The marker is included.
//! - A terminated or shutting-down instance is absent: it can never run again.
//!
//! The marker is written in the creating call itself: in the `TagSpecifications` of
//! `CreateSecurityGroup` and of `RunInstances`. Updates rewrite declared tags with
//! `CreateTags` and remove undeclared ones with `DeleteTags`, never touching the
//! marker (nor an instance's `Name`). `mark` writes the marker alone with `CreateTags`.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    Filter, Image as Ec2Image, ImageState, Instance, InstanceAttributeName, InstanceStateName,
    InstanceType as Ec2InstanceType, IpPermission, IpRange, ResourceType,
    SecurityGroup as Ec2Group, Tag, TagSpecification,
};
use infra_core::kinds::{
    AwsInstance, AwsInstanceObserved, AwsInstanceReported, AwsInstanceSettled, Image, InstanceType,
    Protocol, Rule, SecurityGroup, SecurityGroupObserved, SecurityGroupReported,
    SecurityGroupSettled,
};
use infra_core::sdk::{
    CreateArgs, DeleteArgs, KindBackend, ListArgs, MarkArgs, OwnershipArgs, ReadArgs, Reading,
    UpdateArgs, Written,
};
use infra_core::{
    prelude::{Handle, Partial},
    sdk::{BackendError, ErrorKind, Listed, MARKER_KEY, RawTags},
};

use crate::clients::{Clients, RegionClients};
use crate::error::classify;
use crate::tags::{TagChanges, keep_marker, marking, tag_changes, with_marker};

/// Codes that mean the security group does not exist.
const NO_GROUP: &[&str] = &["InvalidGroup.NotFound", "InvalidGroupId.Malformed"];
/// Codes that mean the instance does not exist.
const NO_INSTANCE: &[&str] = &["InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"];
/// The tag that names an instance.
const NAME_TAG: &str = "Name";
/// The states of an instance that still exists (listed and read as present).
const LIVE_STATES: &[&str] = &["pending", "running", "stopping", "stopped"];
/// The names `Image::Latest` looks for, best first: Amazon Linux 2023, then older
/// Amazon Linux generations for regions (or stand-ins) that lack it.
const LATEST_IMAGE_NAMES: &[&str] = &[
    "al2023-ami-2023*-x86_64",
    "amzn2-ami-kernel-*-hvm-*-x86_64-gp2",
    "amzn2-ami-hvm-*-x86_64-gp2",
    "amzn-ami-hvm-*-x86_64-gp2",
];

fn tag_list(tags: &RawTags) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

fn tags_of(tags: &[Tag]) -> RawTags {
    tags.iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_owned(),
                t.value().unwrap_or_default().to_owned(),
            ))
        })
        .collect()
}

fn tag_spec(kind: ResourceType, tags: &RawTags) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .set_tags(Some(tag_list(tags)))
        .build()
}

/// Brings the tags of `resource` from `current` to `wanted` (which already carries
/// whatever must be kept): writes what differs, deletes what is no longer wanted, and
/// never deletes a key in `keep`.
async fn sync_tags(
    c: &RegionClients,
    resource: &str,
    current: &RawTags,
    wanted: &RawTags,
    keep: &[&str],
) -> Result<(), BackendError> {
    let TagChanges { remove, write } = tag_changes(current, wanted, keep);
    if !write.is_empty() {
        c.ec2()
            .create_tags()
            .resources(resource)
            .set_tags(Some(tag_list(&write)))
            .send()
            .await
            .map_err(|e| classify("ec2:CreateTags", e, &[]))?;
    }
    let remove: Vec<Tag> = remove
        .iter()
        .map(|k| Tag::builder().key(k).build())
        .collect();
    if !remove.is_empty() {
        c.ec2()
            .delete_tags()
            .resources(resource)
            .set_tags(Some(remove))
            .send()
            .await
            .map_err(|e| classify("ec2:DeleteTags", e, &[]))?;
    }
    Ok(())
}

/// Adds `tags` to `resource`, whose not-found codes are `not_found`: `CreateTags`
/// writes the keys it names and leaves every other tag as it was.
async fn add_tags(
    c: &RegionClients,
    resource: &str,
    tags: &RawTags,
    not_found: &[&str],
) -> Result<(), BackendError> {
    c.ec2()
        .create_tags()
        .resources(resource)
        .set_tags(Some(tag_list(tags)))
        .send()
        .await
        .map_err(|e| classify("ec2:CreateTags", e, not_found))?;
    Ok(())
}

// ---------------------------------------------------------------------------------
// Security groups
// ---------------------------------------------------------------------------------

/// One IPv4 CIDR rule as EC2 holds it, kept raw so that a revoke names it exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RawRule {
    protocol: String,
    from: Option<i32>,
    to: Option<i32>,
    cidr: String,
}

impl RawRule {
    /// The rule as the spec types it, or `None` when the type cannot hold it.
    fn typed(&self) -> Option<Rule> {
        let port = |p: Option<i32>| p.and_then(|p| u16::try_from(p).ok());
        let (protocol, from_port, to_port) = match self.protocol.as_str() {
            // Every protocol, so every port: EC2 ignores (and does not echo) ports here.
            "-1" | "all" => (Protocol::All, 0, u16::MAX),
            "tcp" | "6" => (Protocol::Tcp, port(self.from)?, port(self.to)?),
            "udp" | "17" => (Protocol::Udp, port(self.from)?, port(self.to)?),
            "icmp" | "1" => (Protocol::Icmp, port(self.from)?, port(self.to)?),
            _ => return None,
        };
        Some(Rule {
            protocol,
            from_port,
            to_port,
            cidr: self.cidr.clone(),
        })
    }

    fn permission(&self) -> IpPermission {
        IpPermission::builder()
            .ip_protocol(&self.protocol)
            .set_from_port(self.from)
            .set_to_port(self.to)
            .ip_ranges(IpRange::builder().cidr_ip(&self.cidr).build())
            .build()
    }
}

fn raw_rules(permissions: &[IpPermission]) -> Vec<RawRule> {
    let mut out = Vec::new();
    for p in permissions {
        let protocol = p.ip_protocol().unwrap_or("-1").to_ascii_lowercase();
        for range in p.ip_ranges() {
            let Some(cidr) = range.cidr_ip() else {
                continue;
            };
            out.push(RawRule {
                protocol: protocol.clone(),
                from: p.from_port(),
                to: p.to_port(),
                cidr: cidr.to_owned(),
            });
        }
    }
    out
}

/// The rules as a set, or `Unknown` when one of them cannot be typed.
fn typed_rules(raw: &[RawRule]) -> Partial<BTreeSet<Rule>> {
    raw.iter()
        .map(RawRule::typed)
        .collect::<Option<BTreeSet<Rule>>>()
        .map_or(Partial::Unknown, Partial::Known)
}

fn permission_of(rule: &Rule) -> Result<IpPermission, BackendError> {
    let range = IpRange::builder().cidr_ip(&rule.cidr).build();
    let builder = IpPermission::builder().ip_ranges(range);
    let ported = |protocol: &str| {
        builder
            .clone()
            .ip_protocol(protocol)
            .from_port(i32::from(rule.from_port))
            .to_port(i32::from(rule.to_port))
    };
    Ok(match rule.protocol {
        Protocol::All => builder.clone().ip_protocol("-1"),
        Protocol::Tcp => ported("tcp"),
        Protocol::Udp => ported("udp"),
        Protocol::Icmp => ported("icmp"),
        other => {
            return Err(BackendError::invalid(format!(
                "this build of infra-aws does not know the protocol {other:?}"
            )));
        }
    }
    .build())
}

/// Refuses a rule EC2 would hold differently from how it is declared, so that a
/// declaration always reads back as itself.
fn check_rules(field: &str, rules: &BTreeSet<Rule>) -> Result<(), BackendError> {
    match rules
        .iter()
        .find(|r| r.protocol == Protocol::All && (r.from_port, r.to_port) != (0, u16::MAX))
    {
        Some(r) => Err(BackendError::invalid(format!(
            "`{field}` has the rule {r}: an all-protocols rule covers every port; declare it \
             from port 0 to 65535"
        ))),
        None => Ok(()),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Ingress,
    Egress,
}

/// Brings one direction of a group's IPv4 rules to `wanted`: authorises what is
/// missing first, then revokes what is no longer declared.
async fn sync_rules(
    c: &RegionClients,
    group_id: &str,
    direction: Direction,
    current: &[RawRule],
    wanted: &BTreeSet<Rule>,
) -> Result<(), BackendError> {
    let have: BTreeSet<Rule> = current.iter().filter_map(RawRule::typed).collect();
    let add: Vec<IpPermission> = wanted
        .difference(&have)
        .map(permission_of)
        .collect::<Result<_, _>>()?;
    let revoke: Vec<IpPermission> = current
        .iter()
        .filter(|r| !r.typed().is_some_and(|t| wanted.contains(&t)))
        .map(RawRule::permission)
        .collect();
    let ec2 = c.ec2();
    if !add.is_empty() {
        match direction {
            Direction::Ingress => {
                ec2.authorize_security_group_ingress()
                    .group_id(group_id)
                    .set_ip_permissions(Some(add))
                    .send()
                    .await
                    .map_err(|e| classify("ec2:AuthorizeSecurityGroupIngress", e, NO_GROUP))?;
            }
            Direction::Egress => {
                ec2.authorize_security_group_egress()
                    .group_id(group_id)
                    .set_ip_permissions(Some(add))
                    .send()
                    .await
                    .map_err(|e| classify("ec2:AuthorizeSecurityGroupEgress", e, NO_GROUP))?;
            }
        }
    }
    if !revoke.is_empty() {
        match direction {
            Direction::Ingress => {
                ec2.revoke_security_group_ingress()
                    .group_id(group_id)
                    .set_ip_permissions(Some(revoke))
                    .send()
                    .await
                    .map_err(|e| classify("ec2:RevokeSecurityGroupIngress", e, NO_GROUP))?;
            }
            Direction::Egress => {
                ec2.revoke_security_group_egress()
                    .group_id(group_id)
                    .set_ip_permissions(Some(revoke))
                    .send()
                    .await
                    .map_err(|e| classify("ec2:RevokeSecurityGroupEgress", e, NO_GROUP))?;
            }
        }
    }
    Ok(())
}

async fn describe_group(c: &RegionClients, group_id: &str) -> Result<Ec2Group, BackendError> {
    let out = c
        .ec2()
        .describe_security_groups()
        .group_ids(group_id)
        .send()
        .await
        .map_err(|e| classify("ec2:DescribeSecurityGroups", e, NO_GROUP))?;
    out.security_groups()
        .iter()
        .find(|g| g.group_id() == Some(group_id))
        .cloned()
        .ok_or_else(|| {
            BackendError::not_found(format!(
                "security group {group_id} does not exist in {}",
                c.region
            ))
            .with_code("InvalidGroup.NotFound")
        })
}

/// The group's read, raw tags included: the one conversion a `read` and a `list` share
/// (`DescribeSecurityGroups` answers the same object to both).
fn group_reading(group_id: &str, g: &Ec2Group) -> Result<Reading<SecurityGroup>, BackendError> {
    let vpc_id = g.vpc_id().ok_or_else(|| {
        BackendError::new(
            ErrorKind::Other,
            format!("ec2:DescribeSecurityGroups answered group {group_id} without a VPC"),
        )
    })?;
    Ok(Reading::new(
        group_id,
        SecurityGroupObserved {
            group_id: group_id.to_owned(),
            vpc_id: vpc_id.to_owned(),
        },
        SecurityGroupReported {
            description: g
                .description()
                .map_or(Partial::Unknown, |d| Partial::Known(d.to_owned())),
            vpc_id: Partial::Known(vpc_id.to_owned()),
            ingress: typed_rules(&raw_rules(g.ip_permissions())),
            egress: typed_rules(&raw_rules(g.ip_permissions_egress())),
            tags: Partial::Known(tags_of(g.tags())),
        },
    )
    .with_raw_tags(tags_of(g.tags())))
}

/// Applies the declared rules of a group whose current rules are `g`'s.
async fn apply_group_rules(
    c: &RegionClients,
    group_id: &str,
    g: &Ec2Group,
    spec: &SecurityGroupSettled,
) -> Result<(), BackendError> {
    sync_rules(
        c,
        group_id,
        Direction::Ingress,
        &raw_rules(g.ip_permissions()),
        &spec.ingress,
    )
    .await?;
    if let Some(egress) = spec.egress.known() {
        sync_rules(
            c,
            group_id,
            Direction::Egress,
            &raw_rules(g.ip_permissions_egress()),
            egress,
        )
        .await?;
    }
    Ok(())
}

fn check_group(spec: &SecurityGroupSettled) -> Result<(), BackendError> {
    check_rules("ingress", &spec.ingress)?;
    if let Some(egress) = spec.egress.known() {
        check_rules("egress", egress)?;
    }
    Ok(())
}

/// `securityGroup`: an EC2 security group, in whichever region a call names.
pub(crate) struct Ec2SecurityGroups {
    clients: Arc<Clients>,
}

impl Ec2SecurityGroups {
    /// The kind, reaching AWS through `clients` (one set per region, made on first use).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        Ec2SecurityGroups { clients }
    }
}

#[async_trait]
impl KindBackend<SecurityGroup> for Ec2SecurityGroups {
    /// `DescribeSecurityGroups` answers each group whole, rules and tags included.
    fn lists_complete(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let c = &self.clients.region(region);
        let mut pages = c.ec2().describe_security_groups().into_paginator().send();
        let mut listed = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify("ec2:DescribeSecurityGroups", e, &[]))?;
            for g in page.security_groups() {
                let (Some(name), Some(id)) = (g.group_name(), g.group_id()) else {
                    continue;
                };
                // Every VPC's own group, which EC2 makes and no fleet can declare.
                if name == "default" {
                    continue;
                }
                let found = Listed::new(name.to_owned(), id.to_owned());
                // A group the conversion refuses is handed over bare: its read says why.
                listed.push(match group_reading(id, g) {
                    Ok(reading) => found.with_reading(reading),
                    Err(_) => found,
                });
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<SecurityGroup>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        group_reading(handle, &describe_group(c, handle).await?)
    }

    async fn create(
        &self,
        args: CreateArgs<'_, SecurityGroup>,
    ) -> Result<Written<Reading<SecurityGroup>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        check_group(spec)?;
        let tags = with_marker(spec.tags.known(), marker);
        let out = c
            .ec2()
            .create_security_group()
            .group_name(name)
            .description(&spec.description)
            .set_vpc_id(spec.vpc_id.known().cloned())
            .tag_specifications(tag_spec(ResourceType::SecurityGroup, &tags))
            .send()
            .await
            .map_err(|e| classify("ec2:CreateSecurityGroup", e, &[]))?;
        let group_id = out.group_id().ok_or_else(|| {
            BackendError::new(
                ErrorKind::Other,
                "ec2:CreateSecurityGroup answered no group id",
            )
            .maybe_sent()
        })?;
        let g = describe_group(c, group_id).await?;
        apply_group_rules(c, group_id, &g, spec).await?;
        let read = self.read(ReadArgs::new(region, group_id)).await?;
        Ok(Written::Done(read))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, SecurityGroup>,
    ) -> Result<Written<Reading<SecurityGroup>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let c = &self.clients.region(region);
        check_group(spec)?;
        let g = describe_group(c, handle).await?;
        if let Some(declared) = spec.tags.known() {
            let current = tags_of(g.tags());
            sync_tags(
                c,
                handle,
                &current,
                &keep_marker(Some(declared), &current),
                &[MARKER_KEY],
            )
            .await?;
        }
        apply_group_rules(c, handle, &g, spec).await?;
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        c.ec2()
            .delete_security_group()
            .group_id(handle)
            .send()
            .await
            .map_err(|e| classify("ec2:DeleteSecurityGroup", e, NO_GROUP))?;
        Ok(())
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        Ok(tags_of(describe_group(c, handle).await?.tags()))
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        let current = tags_of(describe_group(c, handle).await?.tags());
        if let Some(pair) = marking(&current, marker, &format!("security group {handle}"))? {
            add_tags(c, handle, &pair, NO_GROUP).await?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------
// Instances
// ---------------------------------------------------------------------------------

/// The newest Amazon Linux image for x86-64 in the region: Amazon Linux 2023 when the
/// region has it, else the newest of the older generations.
async fn latest_image(c: &RegionClients) -> Result<String, BackendError> {
    for pattern in LATEST_IMAGE_NAMES {
        let out = c
            .ec2()
            .describe_images()
            .owners("amazon")
            .filters(Filter::builder().name("name").values(*pattern).build())
            .filters(
                Filter::builder()
                    .name("architecture")
                    .values("x86_64")
                    .build(),
            )
            .send()
            .await
            .map_err(|e| classify("ec2:DescribeImages", e, &[]))?;
        let newest = out
            .images()
            .iter()
            .filter(|i| i.image_id().is_some())
            .filter(|i| i.state().is_none_or(|s| *s == ImageState::Available))
            .max_by(|a, b| newest_first_key(a).cmp(&newest_first_key(b)));
        if let Some(id) = newest.and_then(Ec2Image::image_id) {
            return Ok(id.to_owned());
        }
    }
    Err(BackendError::invalid(format!(
        "image `latest`: ec2:DescribeImages finds no Amazon Linux image for x86_64 owned by \
         amazon in {} (looked for {})",
        c.region,
        LATEST_IMAGE_NAMES.join(", ")
    )))
}

/// Orders images by creation date (ISO 8601, so text order is time order), then by
/// name (which carries the release date).
fn newest_first_key(i: &Ec2Image) -> (&str, &str) {
    (
        i.creation_date().unwrap_or_default(),
        i.name().unwrap_or_default(),
    )
}

fn is_live(i: &Instance) -> bool {
    i.state()
        .and_then(|s| s.name())
        .is_none_or(|n| LIVE_STATES.contains(&n.as_str()))
}

/// The instance, if it exists and is not terminated nor shutting down.
async fn describe_instance(c: &RegionClients, id: &str) -> Result<Instance, BackendError> {
    let out = c
        .ec2()
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .map_err(|e| classify("ec2:DescribeInstances", e, NO_INSTANCE))?;
    let found = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find(|i| i.instance_id() == Some(id));
    match found {
        Some(i) if is_live(i) => Ok(i.clone()),
        Some(i) => Err(BackendError::not_found(format!(
            "instance {id} is {}",
            i.state()
                .and_then(|s| s.name())
                .map_or("gone", InstanceStateName::as_str)
        ))
        .with_code("InvalidInstanceID.NotFound")),
        None => Err(BackendError::not_found(format!(
            "instance {id} does not exist in {}",
            c.region
        ))
        .with_code("InvalidInstanceID.NotFound")),
    }
}

/// The boot script EC2 holds for the instance, or `Unknown` when it answers none.
async fn user_data(c: &RegionClients, id: &str) -> Result<Partial<String>, BackendError> {
    let out = c
        .ec2()
        .describe_instance_attribute()
        .instance_id(id)
        .attribute(InstanceAttributeName::UserData)
        .send()
        .await
        .map_err(|e| classify("ec2:DescribeInstanceAttribute", e, NO_INSTANCE))?;
    let text = out
        .user_data()
        .and_then(|v| v.value())
        .and_then(|b64| aws_smithy_types::base64::decode(b64).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok());
    Ok(text.map_or(Partial::Unknown, Partial::Known))
}

async fn instance_reading(
    c: &RegionClients,
    id: &str,
    i: &Instance,
) -> Result<Reading<AwsInstance>, BackendError> {
    let image_id = i.image_id().ok_or_else(|| {
        BackendError::new(
            ErrorKind::Other,
            format!("ec2:DescribeInstances answered instance {id} without an image id"),
        )
    })?;
    let groups = i.security_groups();
    let security_group = match groups {
        [only] => only
            .group_id()
            .map_or(Partial::Unknown, |g| Partial::Known(Handle::new(g))),
        _ => Partial::Unknown,
    };
    let instance_type = i
        .instance_type()
        .and_then(|t| t.as_str().parse::<InstanceType>().ok())
        .map_or(Partial::Unknown, Partial::Known);
    let known = |v: Option<&str>| v.map_or(Partial::Unknown, |v| Partial::Known(v.to_owned()));
    let raw = tags_of(i.tags());
    let mut tags = raw.clone();
    tags.remove(NAME_TAG);
    Ok(Reading::new(
        id,
        AwsInstanceObserved {
            instance_id: id.to_owned(),
            image_id: image_id.to_owned(),
            private_ip: known(i.private_ip_address()),
            public_ip: known(i.public_ip_address()),
        },
        AwsInstanceReported {
            image: Partial::Known(Image::Ami(image_id.to_owned())),
            instance_type,
            security_group,
            subnet_id: known(i.subnet_id()),
            key_name: known(i.key_name()),
            user_data: user_data(c, id).await?,
            tags: Partial::Known(tags),
        },
    )
    .with_raw_tags(raw))
}

fn check_instance_tags(spec: &AwsInstanceSettled) -> Result<(), BackendError> {
    if spec.tags.known().is_some_and(|t| t.contains_key(NAME_TAG)) {
        return Err(BackendError::invalid(
            "`tags` says a `Name` tag: an instance's `Name` tag is the resource's name, and \
             is not declared among its tags",
        ));
    }
    Ok(())
}

/// `awsInstance`: an EC2 instance, in whichever region a call names. Names may
/// repeat, so a replace creates the new instance before terminating the old one.
pub(crate) struct Ec2Instances {
    clients: Arc<Clients>,
}

impl Ec2Instances {
    /// The kind, reaching AWS through `clients` (one set per region, made on first use).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        Ec2Instances { clients }
    }
}

#[async_trait]
impl KindBackend<AwsInstance> for Ec2Instances {
    fn duplicate_names(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let c = &self.clients.region(region);
        let state = Filter::builder()
            .name("instance-state-name")
            .set_values(Some(LIVE_STATES.iter().map(|s| (*s).to_owned()).collect()))
            .build();
        let mut pages = c
            .ec2()
            .describe_instances()
            .filters(state)
            .into_paginator()
            .send();
        let mut listed = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify("ec2:DescribeInstances", e, &[]))?;
            for i in page.reservations().iter().flat_map(|r| r.instances()) {
                let Some(id) = i.instance_id() else { continue };
                if !is_live(i) {
                    continue;
                }
                // An instance without a `Name` tag has no name a fleet could declare.
                let Some(name) = i
                    .tags()
                    .iter()
                    .find(|t| t.key() == Some(NAME_TAG))
                    .and_then(Tag::value)
                else {
                    continue;
                };
                // Raw tags only: the boot script (`userData`) is answered by
                // `DescribeInstanceAttribute` alone, one call per instance, so the list
                // is not a complete read.
                listed.push(
                    Listed::new(name.to_owned(), id.to_owned()).with_raw_tags(tags_of(i.tags())),
                );
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<AwsInstance>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        let i = describe_instance(c, handle).await?;
        instance_reading(c, handle, &i).await
    }

    async fn create(
        &self,
        args: CreateArgs<'_, AwsInstance>,
    ) -> Result<Written<Reading<AwsInstance>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        check_instance_tags(spec)?;
        let image_id = match &spec.image {
            Image::Latest => latest_image(c).await?,
            Image::Ami(id) => id.clone(),
            other => {
                return Err(BackendError::invalid(format!(
                    "this build of infra-aws does not know the image {other:?}"
                )));
            }
        };
        let mut tags = with_marker(spec.tags.known(), marker);
        tags.insert(NAME_TAG.to_owned(), name.to_owned());
        let out = c
            .ec2()
            .run_instances()
            .image_id(image_id)
            .instance_type(Ec2InstanceType::from(
                spec.instance_type.to_string().as_str(),
            ))
            .min_count(1)
            .max_count(1)
            .security_group_ids(spec.security_group.as_str())
            .set_subnet_id(spec.subnet_id.known().cloned())
            .set_key_name(spec.key_name.known().cloned())
            .set_user_data(spec.user_data.known().map(aws_smithy_types::base64::encode))
            .tag_specifications(tag_spec(ResourceType::Instance, &tags))
            .send()
            .await
            .map_err(|e| classify("ec2:RunInstances", e, &[]))?;
        let id = out
            .instances()
            .first()
            .and_then(Instance::instance_id)
            .ok_or_else(|| {
                BackendError::new(ErrorKind::Other, "ec2:RunInstances answered no instance id")
                    .maybe_sent()
            })?;
        let read = self.read(ReadArgs::new(region, id)).await?;
        Ok(Written::Done(read))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, AwsInstance>,
    ) -> Result<Written<Reading<AwsInstance>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let c = &self.clients.region(region);
        check_instance_tags(spec)?;
        let i = describe_instance(c, handle).await?;
        let wanted_group = spec.security_group.as_str();
        let groups: Vec<&str> = i
            .security_groups()
            .iter()
            .filter_map(|g| g.group_id())
            .collect();
        if groups != [wanted_group] {
            c.ec2()
                .modify_instance_attribute()
                .instance_id(handle)
                .groups(wanted_group)
                .send()
                .await
                .map_err(|e| classify("ec2:ModifyInstanceAttribute", e, NO_INSTANCE))?;
        }
        if let Some(declared) = spec.tags.known() {
            let current = tags_of(i.tags());
            let mut wanted = keep_marker(Some(declared), &current);
            if let Some(name) = current.get(NAME_TAG) {
                wanted.insert(NAME_TAG.to_owned(), name.clone());
            }
            sync_tags(c, handle, &current, &wanted, &[MARKER_KEY, NAME_TAG]).await?;
        }
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        // EC2 accepts terminating an instance that is already terminated: ask first, so
        // that deleting what is gone answers NotFound.
        describe_instance(c, handle).await?;
        c.ec2()
            .terminate_instances()
            .instance_ids(handle)
            .send()
            .await
            .map_err(|e| classify("ec2:TerminateInstances", e, NO_INSTANCE))?;
        Ok(())
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        Ok(tags_of(describe_instance(c, handle).await?.tags()))
    }

    /// A terminated or shutting-down instance is absent here too (`NotFound`).
    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        let current = tags_of(describe_instance(c, handle).await?.tags());
        if let Some(pair) = marking(&current, marker, &format!("instance {handle}"))? {
            add_tags(c, handle, &pair, NO_INSTANCE).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(protocol: &str, from: Option<i32>, to: Option<i32>) -> RawRule {
        RawRule {
            protocol: protocol.to_owned(),
            from,
            to,
            cidr: "10.0.0.0/8".to_owned(),
        }
    }

    #[test]
    fn rules_read_back_as_declared() {
        let declared = BTreeSet::from([
            Rule::tcp(443, "10.0.0.0/8"),
            Rule {
                protocol: Protocol::All,
                from_port: 0,
                to_port: u16::MAX,
                cidr: "10.0.0.0/8".to_owned(),
            },
        ]);
        let echoed = [raw("tcp", Some(443), Some(443)), raw("-1", None, None)];
        assert_eq!(typed_rules(&echoed), Partial::Known(declared.clone()));
        assert!(check_rules("ingress", &declared).is_ok());
    }

    #[test]
    fn a_rule_the_type_cannot_hold_makes_the_set_unknown() {
        let echoed = [
            raw("tcp", Some(22), Some(22)),
            raw("icmp", Some(-1), Some(-1)),
        ];
        assert_eq!(typed_rules(&echoed), Partial::Unknown);
        assert_eq!(typed_rules(&[raw("50", None, None)]), Partial::Unknown);
    }

    #[test]
    fn an_all_protocols_rule_must_cover_every_port() {
        let rules = BTreeSet::from([Rule {
            protocol: Protocol::All,
            from_port: 0,
            to_port: 0,
            cidr: "0.0.0.0/0".to_owned(),
        }]);
        assert_eq!(
            check_rules("egress", &rules).unwrap_err().kind,
            ErrorKind::Invalid
        );
    }

    #[test]
    fn tags_without_a_value_read_as_empty_and_without_a_key_are_skipped() {
        let tags = [
            Tag::builder().key("a").build(),
            Tag::builder().value("x").build(),
        ];
        assert_eq!(
            tags_of(&tags),
            RawTags::from([("a".to_owned(), String::new())])
        );
    }

    #[test]
    fn only_live_states_are_present() {
        use aws_sdk_ec2::types::InstanceState;
        let with = |s: InstanceStateName| {
            Instance::builder()
                .state(InstanceState::builder().name(s).build())
                .build()
        };
        assert!(is_live(&with(InstanceStateName::Running)));
        assert!(is_live(&with(InstanceStateName::Stopped)));
        assert!(!is_live(&with(InstanceStateName::Terminated)));
        assert!(!is_live(&with(InstanceStateName::ShuttingDown)));
    }
}
