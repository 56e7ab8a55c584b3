//! One set of SDK clients per region in play, made on first use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use aws_types::SdkConfig;
use aws_types::region::Region;

/// The clients of one region. Each service's client is built the first time it is
/// needed, so a fleet pays only for the services it uses.
pub(crate) struct RegionClients {
    /// The region's code.
    #[cfg_attr(not(any(feature = "s3", feature = "ec2")), allow(dead_code))]
    pub(crate) region: String,
    config: SdkConfig,
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
    sts: OnceLock<aws_sdk_sts::Client>,
}

macro_rules! client {
    ($feature:literal, $field:ident, $krate:ident) => {
        #[cfg(feature = $feature)]
        pub(crate) fn $field(&self) -> &$krate::Client {
            self.$field
                .get_or_init(|| $krate::Client::new(&self.config))
        }
    };
}

impl RegionClients {
    fn new(region: &str, base: &SdkConfig) -> Self {
        let config = base
            .to_builder()
            .region(Region::new(region.to_owned()))
            .build();
        RegionClients {
            region: region.to_owned(),
            endpoint_overridden: config.endpoint_url().is_some(),
            config,
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
            sts: OnceLock::new(),
        }
    }

    /// S3, path-style when the endpoint is overridden (a stand-in on an IP address has
    /// no bucket subdomains).
    #[cfg(feature = "s3")]
    pub(crate) fn s3(&self) -> &aws_sdk_s3::Client {
        self.s3.get_or_init(|| {
            let config = aws_sdk_s3::config::Builder::from(&self.config)
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

    pub(crate) fn sts(&self) -> &aws_sdk_sts::Client {
        self.sts
            .get_or_init(|| aws_sdk_sts::Client::new(&self.config))
    }
}

/// Every region's clients, made on first use.
pub(crate) struct Clients {
    base: SdkConfig,
    regions: Mutex<HashMap<String, Arc<RegionClients>>>,
}

impl Clients {
    pub(crate) fn new(base: SdkConfig) -> Self {
        Clients {
            base,
            regions: Mutex::new(HashMap::new()),
        }
    }

    /// The clients of `region`.
    pub(crate) fn region(&self, region: &str) -> Arc<RegionClients> {
        let mut regions = self.regions.lock().expect("clients lock");
        Arc::clone(
            regions
                .entry(region.to_owned())
                .or_insert_with(|| Arc::new(RegionClients::new(region, &self.base))),
        )
    }

    /// The configuration every client starts from.
    pub(crate) fn base(&self) -> &SdkConfig {
        &self.base
    }
}
