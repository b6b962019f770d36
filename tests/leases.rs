//! Replicas that take turns (`poolboy run --lease`), on the real control plane: only
//! the holder of the Lease works; when it stops, the replica standing by takes the Lease and
//! serves the next claim.

mod support;

use std::time::Duration;

use serde_json::json;
use support::apis::Apis;
use support::config::{create_config_claim, create_config_provider};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually};

const LEASE: &str = "poolboy";

/// The holder the Lease names now.
async fn holder(env: &TestEnv) -> Option<String> {
    let holding = support::lease::holding(&env.client, &env.namespace, LEASE).await?;
    Some(holding.holder)
}

/// Waits up to `timeout` until the replica named `instance` holds the Lease; its identity.
async fn holds(env: &TestEnv, instance: &str, timeout: Duration) -> String {
    let prefix = format!("{instance}-");
    let what = format!("{instance} to hold the Lease");
    eventually(&what, timeout, || async {
        holder(env).await.filter(|h| h.starts_with(&prefix))
    })
    .await
}

/// Stops `first`, the holder, gracefully: it gives the Lease up, and `second`, which watches
/// the Lease, holds it at once, not after the Lease's 15 s, and serves the next claim. Ends
/// the test.
async fn hands_over(env: TestEnv, apis: &Apis, first: TestOperator, second: TestOperator) {
    first.stop().await;
    holds(&env, "second", Duration::from_secs(8)).await;
    create_config_claim(&env, "after", json!({}), json!({}), json!({})).await;
    apis.bound("after").await;
    env.teardown([second]).await;
}

#[tokio::test]
async fn a_standby_replica_takes_over_when_the_holder_stops() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env);
    create_config_provider(&env, false).await;
    // The first serves metrics, as the chart's replicas do: its HTTP endpoint stops with it,
    // which must not cut its graceful stop (and the Lease's release) short.
    let first = TestOperator::start_leased(
        env.kube_config(),
        &env.namespace,
        "first",
        LEASE,
        Some(support::http::free_address()),
    );
    let held = holds(&env, "first", TIMEOUT).await;
    let second =
        TestOperator::start_leased(env.kube_config(), &env.namespace, "second", LEASE, None);
    create_config_claim(&env, "before", json!({}), json!({}), json!({})).await;
    apis.bound("before").await;
    // The second waits while the first renews.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(holder(&env).await.as_deref(), Some(held.as_str()));

    hands_over(env, &apis, first, second).await;
}

/// A standby that may not watch the Lease would take over only when the Lease expires, not
/// when the holder gives it up: its `/readyz` says so, naming the watch. Once allowed, it is
/// ready again, and it takes over at a graceful stop at once.
#[tokio::test]
async fn a_standby_that_cannot_watch_the_lease_is_not_ready_until_it_can() {
    let env = TestEnv::new().await;
    let apis = Apis::new(&env);
    create_config_provider(&env, false).await;
    let first = TestOperator::start_leased(env.kube_config(), &env.namespace, "first", LEASE, None);
    holds(&env, "first", TIMEOUT).await;
    // The second may do all a holder does, and hold the Lease, but not list or watch Leases.
    let rules = json!([
        {"apiGroups": [support::objects::D], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "verbs": ["get", "create", "update", "patch", "delete"]},
    ]);
    env.grant("standby", "standby", rules).await;
    let address = support::http::free_address();
    let second = TestOperator::start_leased(
        env.config_as_service_account("standby").await,
        &env.namespace,
        "second",
        LEASE,
        Some(address),
    );
    support::http::readyz_forbidden(address, &format!("Lease {LEASE}")).await;

    let watch_leases = json!([
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list", "watch"]},
    ]);
    env.grant("standby-watch", "standby", watch_leases).await;
    // The watch retries within seconds of its first failures (kube's backoff doubles from 0.8 s).
    support::http::readyz_ready(address, Duration::from_secs(30)).await;
    hands_over(env, &apis, first, second).await;
}
