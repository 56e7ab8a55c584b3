//! The example fleet (a bucket on AWS, two records in the DNS service) from the command
//! line, with no credentials and no network: the bucket lives in the simulated cloud
//! (`.infra/simulated-cloud.json`, or the file `INFRA_SIM_WORLD` names) and the records
//! in the DNS service's file (`.infra/dns-service.json`, or `INFRA_DNS_SERVICE`), so that
//! `apply`, `plan` and `destroy` can follow one another across runs.
//!
//! ```sh
//! cargo run -p custom-provider --example dns_demo -- apply --yes
//! cargo run -p custom-provider --example dns_demo -- plan --detailed-exitcode
//! cargo run -p custom-provider --example dns_demo -- destroy --yes
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use custom_provider::{DnsBackend, DnsService, example_fleet};
use infra_core::{prelude::Provider, sdk::Unreachable};
use infra_testkit::sim::SimCloud;

/// The file `var` names, taken as given (a directory that does not exist there is an
/// error of the first write), or else `default`, its directory made here (should that
/// fail, the first write says why).
fn file(var: &str, default: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(var) {
        return PathBuf::from(path);
    }
    let path = PathBuf::from(default);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    path
}

fn main() -> ExitCode {
    infra_core::cli::run(example_fleet(), |_fleet| {
        let world = file("INFRA_SIM_WORLD", ".infra/simulated-cloud.json");
        let records = file("INFRA_DNS_SERVICE", ".infra/dns-service.json");
        // Each stand-in that cannot open its file is unreachable, and says why.
        let mut backends = SimCloud::backends_at(&world);
        match DnsService::open(&records) {
            Ok(service) => backends.insert(DnsBackend::new(service).into_backend()),
            Err(e) => backends.insert(Arc::new(Unreachable::new(
                custom_provider::Dns::ID,
                format!("the DNS service could not open its records: {e}"),
            ))),
        }
        backends
    })
}
