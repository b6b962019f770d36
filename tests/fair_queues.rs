//! Fair queues on the real control plane: the claims waiting for a capped
//! pool are served first come, first served (round-robin across namespaces is decided by the
//! same line, `core::binding::fair_queue`, whose unit tests cover several namespaces: the test
//! operator serves one namespace), and a provider's `maxClaimsPerNamespace` holds back the
//! claims beyond it, saying so, until one of the others goes.

mod support;

use std::time::Duration;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use poolboy::api::{ResourceClaim, ResourceProvider};
use serde_json::{Value, json};

use support::apis::bound;
use support::config::{create_config_claim, create_config_provider, template};
use support::fixtures::create_pool;
use support::objects::{self, condition};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually};

/// The reason of claim `name`'s `Bound` condition, and its message.
async fn bound_condition(claims: &Api<ResourceClaim>, name: &str) -> Option<(String, String)> {
    let claim = claims.get(name).await.ok()?;
    let bound = condition(&claim, "Bound")?;
    Some((bound.reason.clone(), bound.message.clone()))
}

/// A pool `pool` of one handle, capped there, served by a broker, and claim `holder` bound to
/// its handle: the broker, and the metadata of a claim that names the pool.
async fn a_pool_of_one_held(env: &TestEnv, pool: &str) -> (TestOperator, Value) {
    let ns = env.namespace.clone();
    create_config_provider(env, false).await;
    create_pool(
        env,
        pool,
        json!({
            "minAvailable": 1, "maxSize": 1,
            "resources": objects::resources(&ns, &[("config", "config", template(json!({})))]),
        }),
    )
    .await;
    let operator = TestOperator::start(env.kube_config(), &ns);
    // The first claim may come before the broker's pool store has listed: it must wait for
    // the capped pool all the same.
    let naming_the_pool = json!({"annotations": {objects::key("resource-pool-name"): pool}});
    let holder = naming_the_pool.clone();
    create_config_claim(env, "holder", holder, json!({}), json!({})).await;
    bound(env, "holder").await;
    (operator, naming_the_pool)
}

#[tokio::test]
async fn claims_waiting_for_a_capped_pool_are_served_in_the_order_they_came() {
    let env = TestEnv::new().await;
    let (operator, naming_the_pool) = a_pool_of_one_held(&env, "one").await;

    // Three claims wait, created in the reverse order of their names, a second apart (the
    // creation timestamps count seconds): "c" came first.
    let claims: Api<ResourceClaim> = env.api();
    for name in ["c", "b", "a"] {
        create_config_claim(&env, name, naming_the_pool.clone(), json!({}), json!({})).await;
        eventually(
            &format!("claim {name} waiting for the pool"),
            TIMEOUT,
            || async {
                let (reason, _) = bound_condition(&claims, name).await?;
                (reason == "WaitingForPool").then_some(())
            },
        )
        .await;
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    for (leaving, next, still_waiting) in [("holder", "c", ["b", "a"]), ("c", "b", ["a", "a"])] {
        claims
            .delete(leaving, &DeleteParams::default())
            .await
            .expect("deleting a claim");
        bound(&env, next).await;
        for name in still_waiting {
            let (reason, message) = bound_condition(&claims, name).await.expect("condition");
            assert!(
                reason == "WaitingInLine" || reason == "WaitingForPool",
                "{name}: {reason}: {message}"
            );
        }
    }
    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_provider_limit_per_namespace_holds_back_the_claims_beyond_it() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    env.api::<ResourceProvider>()
        .patch(
            "config",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"maxClaimsPerNamespace": 2}})),
        )
        .await
        .expect("limit the provider");
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    // Three at once: two get handles, exactly, the third waits.
    for name in ["l1", "l2", "l3"] {
        create_config_claim(&env, name, json!({}), json!({}), json!({})).await;
    }
    let claims: Api<ResourceClaim> = env.api();
    let waiting = eventually("two bound, one waiting for the limit", TIMEOUT, || async {
        let mut bound_ones = Vec::new();
        let mut waiting = Vec::new();
        for name in ["l1", "l2", "l3"] {
            let claim = claims.get(name).await.ok()?;
            let handle = claim
                .status
                .as_ref()
                .and_then(|s| s.resource_handle.as_ref());
            match handle {
                Some(_) => bound_ones.push(name),
                None => {
                    let (reason, message) = bound_condition(&claims, name).await?;
                    (reason == "WaitingForLimit").then(|| waiting.push((name, message)));
                }
            }
        }
        (bound_ones.len() == 2 && waiting.len() == 1).then(|| waiting.remove(0))
    })
    .await;
    let (name, message) = waiting;
    assert!(
        message.contains("has 2 active claims of ResourceProvider config")
            && message.contains("maxClaimsPerNamespace"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (reason, _) = bound_condition(&claims, name).await.expect("condition");
    assert_eq!(reason, "WaitingForLimit", "it stays held back");

    // One of the two goes: the third gets its place.
    let gone = ["l1", "l2", "l3"]
        .into_iter()
        .find(|n| *n != name)
        .expect("a bound claim");
    claims
        .delete(gone, &DeleteParams::default())
        .await
        .expect("deleting a claim");
    bound(&env, name).await;
    env.teardown([operator]).await;
}

/// A claim waiting for a capped pool says, in its `Ready` message and `status.waitEstimate`,
/// what a handle of the pool takes to be ready; once it is bound and ready, the estimate goes.
#[tokio::test]
async fn a_waiting_claim_says_what_a_handle_of_its_pool_takes_until_it_is_ready() {
    let env = TestEnv::new().await;
    let (operator, naming_the_pool) = a_pool_of_one_held(&env, "capped").await;

    create_config_claim(&env, "next", naming_the_pool, json!({}), json!({})).await;
    let claims: Api<ResourceClaim> = env.api();
    let (estimate, message) = eventually("the waiting claim's estimate", TIMEOUT, || async {
        let claim = claims.get("next").await.ok()?;
        let estimate = claim.status.as_ref()?.wait_estimate.clone()?;
        Some((estimate, condition(&claim, "Ready")?.message.clone()))
    })
    .await;
    assert_eq!(estimate.pool, "capped");
    assert_eq!((estimate.position, estimate.expected_ready), (None, None));
    assert!(
        message.contains("waiting for a handle of pool capped to be freed; a handle takes"),
        "{message}"
    );

    claims
        .delete("holder", &DeleteParams::default())
        .await
        .expect("the holder goes");
    eventually(
        "the claim bound and ready, its estimate gone",
        TIMEOUT,
        || async {
            let claim = claims.get("next").await.ok()?;
            let status = claim.status.as_ref()?;
            let ready = condition(&claim, "Ready")?.status == "True";
            (ready && status.resource_handle.is_some() && status.wait_estimate.is_none())
                .then_some(())
        },
    )
    .await;
    env.teardown([operator]).await;
}
