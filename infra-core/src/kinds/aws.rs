//! Kinds only AWS realises.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

#[cfg(any(test, feature = "testing"))]
use infra_derive::Sample;
use infra_derive::Spec;

use super::{InstanceType, Tags, portable::bucket_name};
use crate::{Expr, Key, Partial};

/// An S3 bucket with S3's own settings. Its region is the fleet's placement: the spec
/// has no region field that could disagree with it.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "s3Bucket", observed = S3BucketObserved, name_rule = bucket_name)]
pub struct S3Bucket {
    /// Keep every version of every object.
    pub versioning: Partial<Expr<bool>>,
    /// Object Lock (write once, read many). Only settable when the bucket is created.
    #[spec(replace)]
    pub object_lock: Partial<Expr<bool>>,
    /// Block every form of public access.
    pub block_public_access: Partial<Expr<bool>>,
    /// Tags.
    pub tags: Partial<Expr<Tags>>,
}

/// What AWS reports about an [`S3Bucket`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct S3BucketObserved {
    /// The bucket's ARN.
    pub arn: String,
    /// The region S3 says the bucket is in.
    pub region: String,
}

/// A transport protocol of a security-group rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[non_exhaustive]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// ICMP (ports are the ICMP type and code range).
    Icmp,
    /// Every protocol (`-1`); ports are ignored.
    All,
}

/// One rule of a security group: a protocol, a port range and an IPv4 CIDR block.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
pub struct Rule {
    /// The protocol.
    pub protocol: Protocol,
    /// First port of the range.
    pub from_port: u16,
    /// Last port of the range.
    pub to_port: u16,
    /// The peer, as an IPv4 CIDR block (`10.0.0.0/16`).
    pub cidr: String,
}

impl Rule {
    /// A TCP rule for one port.
    pub fn tcp(port: u16, cidr: impl Into<String>) -> Rule {
        Rule {
            protocol: Protocol::Tcp,
            from_port: port,
            to_port: port,
            cidr: cidr.into(),
        }
    }

    /// A rule for every protocol and every port from one IPv4 block.
    pub fn all(cidr: impl Into<String>) -> Rule {
        Rule {
            protocol: Protocol::All,
            from_port: 0,
            to_port: 65535,
            cidr: cidr.into(),
        }
    }

    fn problems(&self, field: &str, out: &mut Vec<String>) {
        if self.protocol == Protocol::All && (self.from_port, self.to_port) != (0, 65535) {
            out.push(format!(
                "`{field}` has an all-protocols rule for ports {}-{}: such a rule covers every \
                 port, so declare it with `Rule::all` (ports 0 to 65535)",
                self.from_port, self.to_port
            ));
        }
        if self.from_port > self.to_port {
            out.push(format!(
                "`{field}` has a rule from port {} down to {}: the range is empty",
                self.from_port, self.to_port
            ));
        }
        if let Err(why) = check_cidr(&self.cidr) {
            out.push(format!(
                "`{field}` has a rule with CIDR {:?}: {why}",
                self.cidr
            ));
        }
    }
}

fn check_cidr(cidr: &str) -> Result<(), String> {
    let (addr, len) = cidr.split_once('/').ok_or("expected `address/length`")?;
    let addr: Ipv4Addr = addr.parse().map_err(|_| "the address is not IPv4")?;
    let len: u8 = len
        .parse()
        .map_err(|_| "the prefix length is not a number")?;
    if len > 32 {
        return Err("the prefix length exceeds 32".into());
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    if u32::from(addr) & !mask != 0 {
        return Err(format!("host bits are set below the /{len} prefix"));
    }
    Ok(())
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} {}-{} {}",
            self.protocol, self.from_port, self.to_port, self.cidr
        )
    }
}

/// An EC2 security group.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "securityGroup", observed = SecurityGroupObserved, check = SecurityGroup::check_rules)]
pub struct SecurityGroup {
    /// The group's description. EC2 cannot change it after creation.
    #[spec(replace)]
    pub description: Expr<String>,
    /// The VPC; unsaid means the account's default VPC, which is then not compared.
    #[spec(replace, if_set)]
    pub vpc_id: Partial<Expr<String>>,
    /// Inbound rules. A set.
    pub ingress: Expr<BTreeSet<Rule>>,
    /// Outbound rules; unsaid leaves EC2's default (all traffic) alone. A set.
    pub egress: Partial<Expr<BTreeSet<Rule>>>,
    /// Tags.
    pub tags: Partial<Expr<Tags>>,
}

impl SecurityGroup {
    fn check_rules(&self, problems: &mut Vec<String>) {
        if let Some(rules) = self.ingress.as_lit() {
            rules.iter().for_each(|r| r.problems("ingress", problems));
        }
        if let Some(rules) = self.egress.known().and_then(|e| e.as_lit()) {
            rules.iter().for_each(|r| r.problems("egress", problems));
        }
    }
}

/// What AWS reports about a [`SecurityGroup`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecurityGroupObserved {
    /// The group's id (`sg-…`).
    pub group_id: String,
    /// The VPC it lives in.
    pub vpc_id: String,
}

/// Which machine image an instance boots.
///
/// `Latest` is an instruction, not a value: it is resolved on create to the newest
/// Amazon Linux in the instance's region, and matches whatever image the instance then
/// reports, so it does not replace a healthy instance when a newer image appears ("latest
/// at create time", not "track latest").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[non_exhaustive]
pub enum Image {
    /// The newest Amazon Linux at create time.
    Latest,
    /// This AMI (`ami-…`).
    Ami(String),
}

impl Serialize for Image {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Image::Latest => s.serialize_str("latest"),
            Image::Ami(id) => s.serialize_str(id),
        }
    }
}

/// An EC2 instance.
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(any(test, feature = "testing"), derive(Sample))]
#[spec(kind = "awsInstance", observed = AwsInstanceObserved)]
pub struct AwsInstance {
    /// The machine image. `Image::Latest` is resolved on create and then matches the
    /// image the instance reports.
    #[spec(replace, instruction = "latest")]
    pub image: Expr<Image>,
    /// The instance type: a family and a size it comes in.
    #[spec(replace)]
    pub instance_type: Expr<InstanceType>,
    /// The security group. Required: an instance that names none is not a value.
    pub security_group: Key<SecurityGroup>,
    /// The subnet; unsaid lets EC2 choose, and is then not compared.
    #[spec(replace, if_set)]
    pub subnet_id: Partial<Expr<String>>,
    /// The key pair for SSH; unsaid means none was chosen, and is not compared.
    #[spec(replace, if_set)]
    pub key_name: Partial<Expr<String>>,
    /// The boot script.
    #[spec(replace)]
    pub user_data: Partial<Expr<String>>,
    /// Tags.
    pub tags: Partial<Expr<Tags>>,
}

impl AwsInstance {
    /// An instance with only its required fields said.
    pub fn new(
        image: Image,
        instance_type: InstanceType,
        security_group: Key<SecurityGroup>,
    ) -> Self {
        AwsInstance {
            image: Expr::lit(image),
            instance_type: Expr::lit(instance_type),
            security_group,
            subnet_id: Partial::Unknown,
            key_name: Partial::Unknown,
            user_data: Partial::Unknown,
            tags: Partial::Unknown,
        }
    }
}

/// What AWS reports about an [`AwsInstance`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AwsInstanceObserved {
    /// The instance id (`i-…`).
    pub instance_id: String,
    /// The image it booted.
    pub image_id: String,
    /// Its private IPv4 address, once assigned.
    pub private_ip: Partial<String>,
    /// Its public IPv4 address, if it has one.
    pub public_ip: Partial<String>,
}
