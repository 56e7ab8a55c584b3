//! One set of SDK clients per region in play, made on first use, every one of them
//! retrying by the one policy (`infra_aws_compat`): the SDK's own retry settings are
//! replaced, and nothing else retries on top.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use aws_types::SdkConfig;
use aws_types::region::Region;
use infra_aws_compat::{ClientSetup, Operations};

/// The clients of one region. Each service's client is built the first time it is
/// needed, so a fleet pays only for the services it uses.
pub(crate) struct RegionClients {
    /// The region's code.
    #[cfg_attr(not(any(feature = "s3", feature = "ec2")), allow(dead_code))]
    pub(crate) region: String,
    config: SdkConfig,
    setup: Arc<ClientSetup>,
    #[cfg_attr(not(feature = "s3"), allow(dead_code))]
    endpoint_overridden: bool,
    #[cfg(feature = "s3")]
    s3: OnceLock<aws_sdk_s3::Client>,
    #[cfg(feature = "ec2")]
    ec2: OnceLock<aws_sdk_ec2::Client>,
    #[cfg(feature = "iam")]
    iam: OnceLock<aws_sdk_iam::Client>,
    #[cfg(feature = "sqs")]
    sqs: OnceLock<aws_sdk_sqs::Client>,
    #[cfg(feature = "secretsmanager")]
    secrets: OnceLock<aws_sdk_secretsmanager::Client>,
    #[cfg(feature = "ecr")]
    ecr: OnceLock<aws_sdk_ecr::Client>,
    #[cfg(feature = "rds")]
    rds: OnceLock<aws_sdk_rds::Client>,
    #[cfg(feature = "lambda")]
    lambda: OnceLock<aws_sdk_lambda::Client>,
    #[cfg(feature = "tagging")]
    tagging: OnceLock<aws_sdk_resourcegroupstagging::Client>,
    sts: OnceLock<aws_sdk_sts::Client>,
}

/// A service's client on the region's configuration, under the policy.
macro_rules! client {
    ($feature:literal, $field:ident, $krate:ident) => {
        #[cfg(feature = $feature)]
        pub(crate) fn $field(&self) -> &$krate::Client {
            self.$field.get_or_init(|| {
                let builder = $krate::config::Builder::from(&self.config);
                $krate::Client::from_conf(
                    infra_aws_compat::configure!(builder, &self.setup).build(),
                )
            })
        }
    };
}

impl RegionClients {
    fn new(region: &str, base: &SdkConfig, setup: &Arc<ClientSetup>) -> Self {
        let config = base
            .to_builder()
            .region(Region::new(region.to_owned()))
            .build();
        RegionClients {
            region: region.to_owned(),
            endpoint_overridden: config.endpoint_url().is_some(),
            config,
            setup: Arc::clone(setup),
            #[cfg(feature = "s3")]
            s3: OnceLock::new(),
            #[cfg(feature = "ec2")]
            ec2: OnceLock::new(),
            #[cfg(feature = "iam")]
            iam: OnceLock::new(),
            #[cfg(feature = "sqs")]
            sqs: OnceLock::new(),
            #[cfg(feature = "secretsmanager")]
            secrets: OnceLock::new(),
            #[cfg(feature = "ecr")]
            ecr: OnceLock::new(),
            #[cfg(feature = "rds")]
            rds: OnceLock::new(),
            #[cfg(feature = "lambda")]
            lambda: OnceLock::new(),
            #[cfg(feature = "tagging")]
            tagging: OnceLock::new(),
            sts: OnceLock::new(),
        }
    }

    /// S3, path-style when the endpoint is overridden (a stand-in on an IP address has
    /// no bucket subdomains).
    #[cfg(feature = "s3")]
    pub(crate) fn s3(&self) -> &aws_sdk_s3::Client {
        self.s3.get_or_init(|| {
            let builder = aws_sdk_s3::config::Builder::from(&self.config);
            let config = infra_aws_compat::configure!(builder, &self.setup)
                .force_path_style(self.endpoint_overridden)
                .build();
            aws_sdk_s3::Client::from_conf(config)
        })
    }

    client!("ec2", ec2, aws_sdk_ec2);
    client!("iam", iam, aws_sdk_iam);
    client!("sqs", sqs, aws_sdk_sqs);
    client!("secretsmanager", secrets, aws_sdk_secretsmanager);
    client!("ecr", ecr, aws_sdk_ecr);
    client!("rds", rds, aws_sdk_rds);
    client!("lambda", lambda, aws_sdk_lambda);
    client!("tagging", tagging, aws_sdk_resourcegroupstagging);

    pub(crate) fn sts(&self) -> &aws_sdk_sts::Client {
        self.sts.get_or_init(|| {
            let builder = aws_sdk_sts::config::Builder::from(&self.config);
            aws_sdk_sts::Client::from_conf(
                infra_aws_compat::configure!(builder, &self.setup).build(),
            )
        })
    }
}

/// The operations of this build's services that are not repeated once they may have
/// been acted on: the creates, and the security-group rule grants (a repeat of one
/// that landed fails as a duplicate, hiding that it did). Every other call the backend
/// makes (reads, lists, deletes, tag and attribute writes, updates to a state) may be.
pub(crate) fn operations() -> Operations {
    #[allow(unused_mut)] // with no service feature on, nothing is listed
    let mut operations = Operations::new();
    #[cfg(feature = "s3")]
    {
        operations =
            operations.not_idempotent(&aws_sdk_s3::operation::create_bucket::CreateBucket::new());
    }
    #[cfg(feature = "ec2")]
    {
        use aws_sdk_ec2::operation::{
            authorize_security_group_egress::AuthorizeSecurityGroupEgress,
            authorize_security_group_ingress::AuthorizeSecurityGroupIngress,
            create_security_group::CreateSecurityGroup, run_instances::RunInstances,
        };
        operations = operations
            .not_idempotent(&RunInstances::new())
            .not_idempotent(&CreateSecurityGroup::new())
            .not_idempotent(&AuthorizeSecurityGroupIngress::new())
            .not_idempotent(&AuthorizeSecurityGroupEgress::new());
    }
    #[cfg(feature = "iam")]
    {
        operations =
            operations.not_idempotent(&aws_sdk_iam::operation::create_role::CreateRole::new());
    }
    #[cfg(feature = "sqs")]
    {
        operations =
            operations.not_idempotent(&aws_sdk_sqs::operation::create_queue::CreateQueue::new());
    }
    #[cfg(feature = "secretsmanager")]
    {
        operations = operations
            .not_idempotent(&aws_sdk_secretsmanager::operation::create_secret::CreateSecret::new());
    }
    #[cfg(feature = "ecr")]
    {
        operations = operations
            .not_idempotent(&aws_sdk_ecr::operation::create_repository::CreateRepository::new());
    }
    #[cfg(feature = "rds")]
    {
        use aws_sdk_rds::operation::{
            create_db_cluster::CreateDBCluster, create_db_instance::CreateDBInstance,
        };
        operations = operations
            .not_idempotent(&CreateDBInstance::new())
            .not_idempotent(&CreateDBCluster::new());
    }
    #[cfg(feature = "lambda")]
    {
        operations = operations
            .not_idempotent(&aws_sdk_lambda::operation::create_function::CreateFunction::new());
    }
    operations
}

/// Every region's clients, made on first use.
pub(crate) struct Clients {
    base: SdkConfig,
    setup: Arc<ClientSetup>,
    regions: Mutex<HashMap<String, Arc<RegionClients>>>,
    /// Whether the tag index has been found refused or unavailable, and said so.
    #[cfg(feature = "tagging")]
    pub(crate) tag_index: crate::tag_index::Fallback,
}

impl Clients {
    pub(crate) fn new(base: SdkConfig, setup: ClientSetup) -> Self {
        Clients {
            base,
            setup: Arc::new(setup),
            regions: Mutex::new(HashMap::new()),
            #[cfg(feature = "tagging")]
            tag_index: crate::tag_index::Fallback::default(),
        }
    }

    /// The clients of `region`.
    pub(crate) fn region(&self, region: &str) -> Arc<RegionClients> {
        let mut regions = self.regions.lock().expect("clients lock");
        Arc::clone(
            regions
                .entry(region.to_owned())
                .or_insert_with(|| Arc::new(RegionClients::new(region, &self.base, &self.setup))),
        )
    }

    /// The configuration every client starts from.
    pub(crate) fn base(&self) -> &SdkConfig {
        &self.base
    }
}

#[cfg(all(test, feature = "s3", feature = "sqs", feature = "ec2"))]
mod tests {
    use infra_core::sdk::Idempotence;

    use super::*;

    #[test]
    fn creates_are_not_repeated_and_everything_else_may_be() {
        let operations = operations();
        for (service, name) in [
            ("S3", "CreateBucket"),
            ("SQS", "CreateQueue"),
            ("EC2", "RunInstances"),
            ("EC2", "AuthorizeSecurityGroupIngress"),
        ] {
            assert_eq!(
                operations.idempotence(service, name),
                Idempotence::NotIdempotent,
                "{service} {name}"
            );
        }
        for (service, name) in [
            ("S3", "PutBucketTagging"),
            ("S3", "DeleteBucket"),
            ("SQS", "SetQueueAttributes"),
            ("EC2", "TerminateInstances"),
        ] {
            assert_eq!(
                operations.idempotence(service, name),
                Idempotence::Idempotent,
                "{service} {name}"
            );
        }
    }
}
