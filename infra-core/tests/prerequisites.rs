//! Prerequisites a provider reports — a product to activate, credentials to make — are
//! shown by the plan before they are done, through the command-line runner on the
//! simulated cloud: asked only where something will be created, shown in text and in
//! `--json`, and a provider that could not be asked is said so, never hidden.

mod support;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use infra_core::kinds::Queues;
use infra_core::prelude::{Backends, CheckReport, Expr, Fleet, Partial, ScalewayRegion};
use infra_core::sdk::layer::{Answer, Call, Layer, Layered, Next, Op};
use infra_core::sdk::{Backend, BackendError, ErrorKind, Prerequisite};
use infra_testkit::sim::SimCloud;
use support::console::{answering, json};

/// Queues need their product switched on in a region before the first one is made:
/// answered as a prerequisite until a queue exists there. Every question is counted.
#[derive(Clone, Default)]
struct Activation {
    asked: Arc<Mutex<Vec<(String, String)>>>,
    refuse: bool,
}

#[async_trait]
impl Layer for Activation {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let Call::Prerequisites { kind, region } = call else {
            return next.run(call).await;
        };
        self.asked
            .lock()
            .unwrap()
            .push((kind.to_owned(), region.to_owned()));
        if self.refuse {
            return Err(BackendError::new(
                ErrorKind::Denied,
                "the key may not read the Queues product's state",
            ));
        }
        let active = !next.backend().list(kind, region).await?.is_empty();
        Ok(Answer::Prerequisites(if kind == "queues" && !active {
            vec![Prerequisite::new(format!(
                "Queues will be activated for the project in {region}"
            ))]
        } else {
            Vec::new()
        }))
    }
}

fn fleet(names: &[&str]) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("jobs");
    for name in names {
        f.declare(
            ScalewayRegion::FrPar,
            *name,
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: Partial::Unknown,
                retention_seconds: Partial::Unknown,
                dead_letter: Partial::Known(None),
                max_receive_count: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
    }
    f.build()
}

fn backends(cloud: &SimCloud, activation: &Activation) -> Backends {
    let scaleway: Arc<dyn Backend> = Layered::wrap(cloud.backend("scaleway"), activation.clone());
    cloud.backends().with(scaleway)
}

#[tokio::test]
async fn a_plan_shows_what_a_provider_will_do_before_its_first_create() {
    let cloud = support::cloud(71);
    let activation = Activation::default();
    let mut s = answering(false, true);

    let (code, out, _) = s
        .run_on(
            fleet(&["orders", "mail"]),
            backends(&cloud, &activation),
            &["plan"],
        )
        .await;
    assert_eq!(code, 0, "{out}");
    insta::assert_snapshot!("prerequisites_plan", out);
    // One question for the one (provider, kind, region) that creates something.
    assert_eq!(
        *activation.asked.lock().unwrap(),
        [("queues".to_owned(), "fr-par".to_owned())]
    );

    let (code, out, _) = s
        .run_on(
            fleet(&["orders", "mail"]),
            backends(&cloud, &activation),
            &["plan", "--json"],
        )
        .await;
    assert_eq!(code, 0, "{out}");
    let plan = json(&out);
    assert_eq!(
        plan["prerequisites"],
        serde_json::json!([{
            "provider": "scaleway",
            "kind": "queues",
            "region": "fr-par",
            "what": "Queues will be activated for the project in fr-par",
        }])
    );

    // Once applied, nothing is left to do, and a plan with nothing to create asks
    // nothing at all.
    let (code, out, err) = s
        .run_on(
            fleet(&["orders", "mail"]),
            backends(&cloud, &activation),
            &["apply", "--yes"],
        )
        .await;
    assert_eq!(code, 0, "{out}{err}");
    activation.asked.lock().unwrap().clear();
    let (code, out, _) = s
        .run_on(
            fleet(&["orders", "mail"]),
            backends(&cloud, &activation),
            &["plan", "--json"],
        )
        .await;
    assert_eq!(code, 0, "{out}");
    assert!(json(&out).get("prerequisites").is_none(), "{out}");
    assert!(activation.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_provider_that_could_not_be_asked_is_said_so() {
    let cloud = support::cloud(72);
    let activation = Activation {
        refuse: true,
        ..Activation::default()
    };
    let mut s = answering(false, true);
    let (code, out, _) = s
        .run_on(fleet(&["orders"]), backends(&cloud, &activation), &["plan"])
        .await;
    // The plan itself looked at everything: it is complete, and says what it could
    // not check.
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("! scaleway/queues in fr-par: could not be checked (denied: the key may not read the Queues product's state); the apply will find out"),
        "{out}"
    );
    let (_, out, _) = s
        .run_on(
            fleet(&["orders"]),
            backends(&cloud, &activation),
            &["plan", "--json"],
        )
        .await;
    assert_eq!(json(&out)["prerequisites"][0]["unchecked"], true, "{out}");
    // No layer below saw the question as a write.
    assert!(!Op::Prerequisites.writes());
}
