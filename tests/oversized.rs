//! A claim near the API server's object size limit, on the real control plane: its
//! status, which copies the state of its ~900 KB ConfigMap, cannot be stored. The claim says
//! so (`Valid` False, reason `StatusTooLarge`, and a Warning Event) instead of showing an empty
//! status forever, and the broker keeps serving the other claims.

mod support;

use poolboy::api::ResourceClaim;
use serde_json::{Value, json};
use support::apis::bound;
use support::config::{create_config_claim, create_config_provider};
use support::fixtures::json_of;
use support::operator::TestOperator;
use support::{SETTLE_TIMEOUT, TIMEOUT, TestEnv, eventually};

#[tokio::test]
async fn a_claim_whose_status_is_too_large_to_write_says_so() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let big = "x".repeat(900_000);
    create_config_claim(&env, "big", json!({}), json!({}), json!({ "big": big })).await;

    let event = env
        .event("big", "Warning", "StatusTooLarge", SETTLE_TIMEOUT)
        .await;
    let note = event.note.unwrap_or_default();
    assert!(note.contains("too large"), "{note}");
    let claims = env.api::<ResourceClaim>();
    let valid: Value = eventually("the claim's Valid condition", TIMEOUT, || async {
        let claim = json_of(&claims, "big").await?;
        let conditions = claim["status"]["conditions"].as_array()?.clone();
        conditions
            .into_iter()
            .find(|c| c["type"] == "Valid" && c["reason"] == "StatusTooLarge")
    })
    .await;
    assert_eq!(
        (valid["status"].as_str(), valid["reason"].as_str()),
        (Some("False"), Some("StatusTooLarge")),
        "{valid}"
    );

    // The broker goes on serving the others.
    create_config_claim(&env, "small", json!({}), json!({}), json!({})).await;
    bound(&env, "small").await;

    env.teardown([operator]).await;
}
