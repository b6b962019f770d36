//! A claim's `Ready` condition when its provider has no `readinessCheck`: it follows the
//! resource's own status as Kubernetes tooling reads it (kstatus), so that
//! `kubectl wait --for=condition=Ready` works for every claim, while Poolboy's `status.ready`
//! stays unset as Poolboy leaves it.

mod support;

use kube::api::DeleteParams;
use poolboy::api::{ResourceClaim, ResourceHandle};
use serde_json::{Value, json};
use support::fixtures::{create_kind_provider, json_of};
use support::objects::claim;
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually, gone};

/// The claim's `Ready` condition as (status, message), once it has one.
async fn ready_condition(env: &TestEnv, name: &str) -> Option<(String, String)> {
    let claim = json_of(&env.api::<ResourceClaim>(), name).await?;
    let ready = claim["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?
        .clone();
    Some((
        ready["status"].as_str()?.to_owned(),
        ready["message"].as_str()?.to_owned(),
    ))
}

fn claim_of(name: &str, provider: &str, template: Value) -> ResourceClaim {
    claim(
        name,
        json!({"resources": [{"provider": {"name": provider}, "template": template}]}),
    )
}

#[tokio::test]
async fn a_claim_without_a_readiness_check_is_ready_by_its_resources_own_status() {
    let env = TestEnv::new().await;
    create_kind_provider(&env, "plain", "v1", "ConfigMap", json!({})).await;
    create_kind_provider(&env, "deployment", "apps/v1", "Deployment", json!({})).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let claims = env.api::<ResourceClaim>();

    // A ConfigMap has no status: it is ready once it exists.
    env.create(&claim_of("config", "plain", json!({"data": {"k": "v"}})))
        .await;
    let (status, message) = eventually("the ConfigMap claim to be Ready", TIMEOUT, || async {
        ready_condition(&env, "config")
            .await
            .filter(|(status, _)| status == "True")
    })
    .await;
    assert_eq!(status, "True", "{message}");
    let claim = json_of(&claims, "config").await.expect("the claim");
    let handle = claim["status"]["resourceHandle"]["name"]
        .as_str()
        .expect("bound")
        .to_owned();
    let handle = json_of(&env.api::<ResourceHandle>(), &handle)
        .await
        .expect("the handle");
    assert_eq!(
        handle["status"].get("ready"),
        None,
        "Poolboy's ready stays the provider's alone"
    );

    // A Deployment whose image cannot be pulled never has its replica available.
    let deployment = json!({"spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "never"}},
        "template": {
            "metadata": {"labels": {"app": "never"}},
            "spec": {"containers": [{"name": "c", "image": "localhost/poolboy-test/absent:never"}]},
        },
    }});
    env.create(&claim_of("rollout", "deployment", deployment))
        .await;
    let (_, message) = eventually(
        "the Deployment claim to say why it is not ready",
        TIMEOUT,
        || async {
            ready_condition(&env, "rollout")
                .await
                .filter(|(status, message)| status == "False" && message.contains("replicas"))
        },
    )
    .await;
    assert!(message.contains("0 of 1 replicas"), "{message}");

    for name in ["config", "rollout"] {
        claims
            .delete(name, &DeleteParams::default())
            .await
            .expect("deleting a claim");
        gone(&claims, name, TIMEOUT).await;
    }
    env.teardown([operator]).await;
}
