//! The ResourcePool controller on the real control plane (§11, Δ§3.3): a pool fills to exactly
//! `minAvailable` and stays there, refills after a bind, throttles by `maxUnready`, replaces
//! unhealthy handles when asked, never scales down, refreshes its unbound handles when its
//! templates or providers change, on deletion deletes its unbound handles only, and
//! passes its `resourceLabels`/`resourceAnnotations` on to handles and resources
//! (Δ§2.4–2.5).
//!
//! The whole operator runs: each handle gets a ConfigMap, and a test makes a handle ready or
//! unhealthy the way a user's resource would, by labelling its ConfigMap (the provider's
//! `readinessCheck` and `healthCheck` read the labels). A test binds a handle itself by patching
//! `spec.resourceClaim` onto it, pointing at a claim with an empty spec (the claim controller
//! reports that claim invalid and leaves the handle alone).

mod support;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use poolboy::api::{ResourceClaim, ResourceHandle, ResourcePool};
use serde_json::{Value, json};

use support::apis::bound;
use support::config::{
    KIND_LABEL, create_config_claim, create_config_provider, ready_handle, template,
};
use support::fixtures::{configmap, create_pool, handles, is_unbound, json_of, unbound_of};
use support::objects::{self, D, resource_name};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually, gone, wait_for};

/// A provider for ConfigMaps with a lifespan (the pools' handles take it when the pool has
/// none of its own), ready and healthy by the labels of the ConfigMap.
async fn create_provider_with_lifespan(env: &TestEnv) {
    let spec = json!({
        "readinessCheck": "metadata.labels['pool-test/ready'] | default('') == 'yes'",
        "healthCheck": "metadata.labels['pool-test/healthy'] | default('yes') != 'no'",
        "lifespan": {"default": "2h", "maximum": "1d", "relativeMaximum": "8h", "unclaimed": "1h"},
    });
    env.create(&objects::configmap_provider(
        &env.namespace,
        "configmap",
        spec,
    ))
    .await;
}

async fn pool_status(env: &TestEnv, pool: &str) -> Value {
    let pool = env.api::<ResourcePool>().get(pool).await.expect("get pool");
    serde_json::to_value(&pool.status).expect("serialises")
}

/// Waits until the pool has exactly `count` unbound handles and its status says
/// `{available, ready}` with `count` entries; returns the handles.
async fn await_pool(env: &TestEnv, pool: &str, count: usize, ready: i64) -> Vec<ResourceHandle> {
    eventually(
        &format!("pool {pool}: {count} unbound handles, {ready} ready, in status"),
        TIMEOUT,
        || async {
            let handles = unbound_of(env, pool).await;
            let status = pool_status(env, pool).await;
            let counted = status["resourceHandleCount"]
                == json!({"available": count, "ready": ready})
                && status["resourceHandles"].as_array().map(Vec::len) == Some(count);
            (handles.len() == count && counted).then_some(handles)
        },
    )
    .await
}

/// Labels the ConfigMap of `handle` (created by the handle controller), which the provider's
/// checks read: `pool-test/ready=yes` makes the handle ready, `pool-test/healthy=no` unhealthy.
async fn label_configmap(env: &TestEnv, handle: &str, label: &str, value: &str) {
    let name = resource_name(handle, 0);
    wait_for(&env.api::<ConfigMap>(), &name, "exists", TIMEOUT, |_| true).await;
    env.label_configmap(&name, label, value).await;
}

async fn make_ready(env: &TestEnv, handle: &str) {
    label_configmap(env, handle, "pool-test/ready", "yes").await;
}

/// Binds `handle` to claim `claim` (an empty one, which the claim controller leaves alone), as
/// the claim controller's bind patch would.
async fn bind(env: &TestEnv, handle: &str) {
    let claim = objects::claim("claim", json!({}));
    match env
        .api::<ResourceClaim>()
        .create(&PostParams::default(), &claim)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create claim: {e}"),
    }
    let patch = json!({
        "metadata": {"labels": {
            format!("{D}/resource-claim-name"): "claim",
            format!("{D}/resource-claim-namespace"): env.namespace,
        }},
        "spec": {"resourceClaim": objects::reference("ResourceClaim", "claim", &env.namespace)},
    });
    env.api::<ResourceHandle>()
        .patch(handle, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("bind handle");
}

fn lifespan_end(handle: &ResourceHandle) -> DateTime<Utc> {
    let end = handle
        .spec
        .lifespan
        .as_ref()
        .and_then(|l| l.end.as_deref())
        .expect("handle has a lifespan end");
    DateTime::parse_from_rfc3339(end)
        .expect("RFC 3339 end")
        .with_timezone(&Utc)
}

fn assert_near(actual: DateTime<Utc>, expected: DateTime<Utc>) {
    let slack = TimeDelta::seconds(60);
    assert!(
        actual > expected - slack && actual < expected + slack,
        "{actual} is not close to {expected}"
    );
}

#[tokio::test]
async fn a_pool_fills_to_exactly_min_available_and_stays_there() {
    let env = TestEnv::new().await;
    create_provider_with_lifespan(&env).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let created = Utc::now();
    create_pool(
        &env,
        "fill",
        json!({
            "minAvailable": 3,
            "provider": {"name": "configmap", "parameterValues": {"size": "small"}},
            "vars": {"team": "blue"},
            "preferenceScore": 0.5,
            "resourceLabels": {"example.com/pool": "fill"},
            "resourceAnnotations": {"example.com/note": "pooled"},
            "lifespan": {"default": "3h", "unclaimed": "30m"},
        }),
    )
    .await;

    let handles = await_pool(&env, "fill", 3, 0).await;
    for handle in &handles {
        let name = handle.name_any();
        assert!(name.starts_with("guid-") && name.len() == 10, "{name}");
        let labels = handle.labels();
        assert_eq!(
            labels
                .get(&format!("{D}/resource-pool-name"))
                .map(String::as_str),
            Some("fill")
        );
        assert_eq!(
            labels.get(&format!("{D}/resource-pool-namespace")),
            Some(&env.namespace)
        );
        assert_eq!(handle.finalizers(), [D.to_owned()]);
        let spec = serde_json::to_value(&handle.spec).expect("serialises");
        assert_eq!(
            spec["resourcePool"],
            json!({"apiVersion": format!("{D}/v1"), "kind": "ResourcePool",
                   "name": "fill", "namespace": env.namespace})
        );
        assert_eq!(
            spec["provider"],
            json!({"name": "configmap", "parameterValues": {"size": "small"}})
        );
        assert_eq!(spec["vars"], json!({"team": "blue"}));
        assert_eq!(spec["preferenceScore"], json!(0.5));
        assert_eq!(spec["resourceLabels"], json!({"example.com/pool": "fill"}));
        assert_eq!(
            spec["resourceAnnotations"],
            json!({"example.com/note": "pooled"})
        );
        // The pool's lifespan replaces the provider's entirely (§10.2).
        assert_eq!(spec["lifespan"]["default"], json!("3h"));
        assert!(spec["lifespan"].get("maximum").is_none());
        assert_near(lifespan_end(handle), created + TimeDelta::minutes(30));
    }
    let status = pool_status(&env, "fill").await;
    for entry in status["resourceHandles"].as_array().expect("a list") {
        assert_eq!(entry["healthy"], json!(true));
        assert!(
            entry.get("ready").is_none_or(Value::is_boolean),
            "no null ready (Δ B17): {entry}"
        );
    }

    // More reconciles (each handle turning ready wakes the pool, and the status shows it was
    // seen): the pool stays at exactly three handles.
    for (index, handle) in handles.iter().enumerate() {
        make_ready(&env, &handle.name_any()).await;
        let ready = i64::try_from(index + 1).expect("small");
        await_pool(&env, "fill", 3, ready).await;
        assert_eq!(env.handles_of_pool("fill").await.len(), 3, "no overfill");
    }
    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_bind_makes_the_pool_create_a_replacement_promptly() {
    let env = TestEnv::new().await;
    create_provider_with_lifespan(&env).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_pool(
        &env,
        "refill",
        json!({"minAvailable": 2, "provider": {"name": "configmap"}}),
    )
    .await;
    let handles = await_pool(&env, "refill", 2, 0).await;
    let bound = handles[0].name_any();
    bind(&env, &bound).await;
    // No 10-second tick: the bind itself wakes the pool.
    let refilled = eventually("a replacement handle", Duration::from_secs(5), || async {
        let unbound = unbound_of(&env, "refill").await;
        (unbound.len() == 2).then_some(unbound)
    })
    .await;
    assert!(refilled.iter().all(|h| h.name_any() != bound));
    await_pool(&env, "refill", 2, 0).await;
    assert_eq!(env.handles_of_pool("refill").await.len(), 3);
    env.teardown([operator]).await;
}

#[tokio::test]
async fn max_unready_caps_the_handles_in_flight() {
    let env = TestEnv::new().await;
    create_provider_with_lifespan(&env).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let created = Utc::now();
    create_pool(
        &env,
        "throttled",
        json!({"minAvailable": 5, "maxUnready": 2, "provider": {"name": "configmap"}}),
    )
    .await;
    let first = await_pool(&env, "throttled", 2, 0).await;
    assert_eq!(env.handles_of_pool("throttled").await.len(), 2);
    // Without a lifespan of its own, the pool gives its handles the provider's (§10.2), each
    // value in its own field.
    for handle in &first {
        let lifespan = serde_json::to_value(&handle.spec.lifespan).expect("serialises");
        assert_eq!(lifespan["default"], json!("2h"));
        assert_eq!(lifespan["maximum"], json!("1d"));
        assert_eq!(lifespan["relativeMaximum"], json!("8h"));
        assert_near(lifespan_end(handle), created + TimeDelta::hours(1));
    }

    // One ready: one more may be in flight.
    make_ready(&env, &first[0].name_any()).await;
    await_pool(&env, "throttled", 3, 1).await;
    // Both first ones ready: two unready in flight (the third and a fourth).
    make_ready(&env, &first[1].name_any()).await;
    let handles = await_pool(&env, "throttled", 4, 2).await;
    // All ready: the fifth and last is created.
    for handle in handles
        .iter()
        .filter(|h| h.status.as_ref().and_then(|s| s.ready) != Some(true))
    {
        make_ready(&env, &handle.name_any()).await;
    }
    await_pool(&env, "throttled", 5, 4).await;
    env.teardown([operator]).await;
}

/// `maxSize` caps the pool's handles, bound or not. A pool of 2 capped at 3 makes
/// a third handle only once one is bound; a fourth claim naming the pool waits, saying why,
/// instead of getting a handle of its own, and binds once a claim goes and the pool makes
/// room.
#[tokio::test]
async fn max_size_caps_the_pool_and_its_claims_wait_for_it() {
    let env = TestEnv::new().await;
    let ns = env.namespace.clone();
    create_config_provider(&env, false).await;
    create_pool(
        &env,
        "capped",
        json!({
            "minAvailable": 2, "maxSize": 3,
            "resources": objects::resources(&ns, &[("config", "config", template(json!({})))]),
        }),
    )
    .await;
    let operator = TestOperator::start(env.kube_config(), &ns);
    eventually("two unbound handles", TIMEOUT, || async {
        (unbound_of(&env, "capped").await.len() == 2).then_some(())
    })
    .await;
    let naming_the_pool = json!({"annotations": {objects::key("resource-pool-name"): "capped"}});
    for name in ["first", "second", "third"] {
        create_config_claim(&env, name, naming_the_pool.clone(), json!({}), json!({})).await;
        bound(&env, name).await;
    }
    // Three handles, all bound: the cap, though the pool wants two unbound.
    eventually("the pool at its cap", TIMEOUT, || async {
        let handles = env.handles_of_pool("capped").await;
        (handles.len() == 3 && handles.iter().all(|h| !is_unbound(h))).then_some(())
    })
    .await;
    create_config_claim(&env, "fourth", naming_the_pool, json!({}), json!({})).await;
    let claims: Api<ResourceClaim> = env.api();
    let waiting = eventually("the fourth claim waiting for the pool", TIMEOUT, || async {
        let claim = claims.get("fourth").await.ok()?;
        let conditions = claim.status?.conditions?;
        conditions
            .into_iter()
            .find(|c| c.type_ == "Bound" && c.reason == "WaitingForPool")
    })
    .await;
    assert!(waiting.message.contains("maxSize"), "{}", waiting.message);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let handles: Api<ResourceHandle> = env.api();
    assert_eq!(
        handles
            .list(&Default::default())
            .await
            .expect("handles")
            .items
            .len(),
        3,
        "no handle of its own for the waiting claim"
    );

    claims
        .delete("first", &DeleteParams::default())
        .await
        .expect("deleting a claim");
    let fourth = bound(&env, "fourth").await;
    assert!(
        env.handles_of_pool("capped")
            .await
            .iter()
            .any(|h| h.name_any() == fourth),
        "the fourth claim got a handle of the pool"
    );
    env.teardown([operator]).await;
}

#[tokio::test]
async fn unhealthy_unbound_handles_are_deleted_and_replaced() {
    let env = TestEnv::new().await;
    create_provider_with_lifespan(&env).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_pool(
        &env,
        "healing",
        json!({"minAvailable": 2, "deleteUnhealthyResourceHandles": true,
               "provider": {"name": "configmap"}}),
    )
    .await;
    let handles = await_pool(&env, "healing", 2, 0).await;
    let sick = handles[0].name_any();
    label_configmap(&env, &sick, "pool-test/healthy", "no").await;
    eventually(
        "the unhealthy handle deleted and replaced",
        TIMEOUT,
        || async {
            let all = env.handles_of_pool("healing").await;
            let deleted = all
                .iter()
                .all(|h| h.name_any() != sick || h.metadata.deletion_timestamp.is_some());
            let unbound: Vec<String> = all
                .iter()
                .filter(|h| is_unbound(h))
                .map(|h| h.name_any())
                .collect();
            (deleted && unbound.len() == 2 && !unbound.contains(&sick)).then_some(())
        },
    )
    .await;
    let status = pool_status(&env, "healing").await;
    let listed: Vec<&str> = status["resourceHandles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert!(!listed.contains(&sick.as_str()), "{listed:?}");
    env.teardown([operator]).await;
}

#[tokio::test]
async fn lowering_min_available_deletes_nothing() {
    let env = TestEnv::new().await;
    create_provider_with_lifespan(&env).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_pool(
        &env,
        "shrink",
        json!({"minAvailable": 3, "provider": {"name": "configmap"}}),
    )
    .await;
    let handles = await_pool(&env, "shrink", 3, 0).await;
    env.api::<ResourcePool>()
        .patch(
            "shrink",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minAvailable": 1}})),
        )
        .await
        .expect("lower minAvailable");
    // A later reconcile (the status shows the ready handle) still has all three.
    make_ready(&env, &handles[0].name_any()).await;
    await_pool(&env, "shrink", 3, 1).await;
    assert!(env.handles_of_pool("shrink").await.iter().all(is_unbound));
    env.teardown([operator]).await;
}

#[tokio::test]
async fn deleting_a_pool_deletes_its_unbound_handles_and_keeps_bound_ones() {
    let env = TestEnv::new().await;
    create_provider_with_lifespan(&env).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_pool(
        &env,
        "doomed",
        json!({"minAvailable": 2, "provider": {"name": "configmap"}}),
    )
    .await;
    let pool = wait_for(
        &env.api(),
        "doomed",
        "the pool finalizer",
        TIMEOUT,
        |p: &ResourcePool| p.finalizers().contains(&D.to_owned()),
    )
    .await;
    assert_eq!(pool.finalizers(), [D.to_owned()]);
    let handles = await_pool(&env, "doomed", 2, 0).await;
    let bound = handles[0].name_any();
    bind(&env, &bound).await;
    await_pool(&env, "doomed", 2, 0).await;

    env.api::<ResourcePool>()
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete pool");
    gone(&env.api::<ResourcePool>(), "doomed", TIMEOUT).await;
    // The unbound handles are deleted (the handle controller finishes that); the bound stays.
    eventually("the unbound handles gone", TIMEOUT, || async {
        let all = env.handles_of_pool("doomed").await;
        all.iter()
            .all(|h| h.name_any() == bound || h.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;
    let all = env.handles_of_pool("doomed").await;
    assert!(
        all.iter().any(|h| h.name_any() == bound),
        "the bound handle stays"
    );
    for handle in &all {
        if handle.name_any() == bound {
            assert!(
                handle.metadata.deletion_timestamp.is_none(),
                "the bound handle stays"
            );
            assert_eq!(
                handle
                    .labels()
                    .get(&format!("{D}/resource-pool-name"))
                    .map(String::as_str),
                Some("doomed")
            );
        } else {
            assert!(
                handle.metadata.deletion_timestamp.is_some(),
                "{}",
                handle.name_any()
            );
        }
    }
    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_pool_with_a_missing_provider_reports_it_and_fills_once_it_appears() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_pool(
        &env,
        "orphan",
        json!({"minAvailable": 1, "provider": {"name": "configmap"}}),
    )
    .await;
    eventually("a Valid=False condition", TIMEOUT, || async {
        let status = pool_status(&env, "orphan").await;
        let conditions = status["conditions"].as_array()?;
        conditions
            .iter()
            .any(|c| {
                c["type"] == "Valid"
                    && c["status"] == "False"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("configmap"))
            })
            .then_some(())
    })
    .await;
    assert!(env.handles_of_pool("orphan").await.is_empty());
    create_provider_with_lifespan(&env).await;
    await_pool(&env, "orphan", 1, 0).await;
    let status = pool_status(&env, "orphan").await;
    assert!(
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Valid" && c["status"] == "True"),
        "{status}"
    );
    env.teardown([operator]).await;
}

/// The pool's `Valid` condition, once it reports a problem that mentions `needle`.
async fn problem_condition(env: &TestEnv, pool: &str, needle: &str) -> Value {
    eventually(
        &format!("pool {pool}: Valid=False mentioning {needle}"),
        TIMEOUT,
        || async {
            let status = pool_status(env, pool).await;
            status["conditions"]
                .as_array()?
                .iter()
                .find(|c| {
                    c["type"] == "Valid"
                        && c["status"] == "False"
                        && c["message"].as_str().is_some_and(|m| m.contains(needle))
                })
                .cloned()
        },
    )
    .await
}

/// metav1.Condition: `lastTransitionTime` is when the status last flipped. A pool whose
/// problem changes (another missing provider) keeps it; only the message moves.
#[tokio::test]
async fn a_pool_problem_that_changes_keeps_its_transition_time() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_pool(
        &env,
        "misnamed",
        json!({"minAvailable": 1, "provider": {"name": "first-missing"}}),
    )
    .await;
    let first = problem_condition(&env, "misnamed", "first-missing").await;
    // Condition times are whole seconds: a second later, a moved time would show.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    env.api::<ResourcePool>()
        .patch(
            "misnamed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"provider": {"name": "second-missing"}}})),
        )
        .await
        .expect("rename the pool's provider");
    let second = problem_condition(&env, "misnamed", "second-missing").await;
    assert_eq!(
        second["lastTransitionTime"], first["lastTransitionTime"],
        "only the message changed: {first} then {second}"
    );
    env.teardown([operator]).await;
}

#[tokio::test]
async fn two_operator_processes_fill_a_pool_exactly() {
    let env = TestEnv::new().await;
    create_provider_with_lifespan(&env).await;
    // No leader election: both reconcile every pool.
    let first = TestOperator::start_with(env.kube_config(), &env.namespace, None, "first");
    let second = TestOperator::start_with(env.kube_config(), &env.namespace, None, "second");
    create_pool(
        &env,
        "shared",
        json!({"minAvailable": 6, "provider": {"name": "configmap"}}),
    )
    .await;
    let handles = await_pool(&env, "shared", 6, 0).await;
    // Every readiness change wakes the pool in both processes; the pool stays at six.
    for (index, handle) in handles.iter().enumerate() {
        make_ready(&env, &handle.name_any()).await;
        await_pool(&env, "shared", 6, i64::try_from(index + 1).expect("small")).await;
        assert_eq!(env.handles_of_pool("shared").await.len(), 6, "no overfill");
    }
    // Two binds at once: exactly two replacements.
    bind(&env, &handles[0].name_any()).await;
    bind(&env, &handles[1].name_any()).await;
    await_pool(&env, "shared", 6, 4).await;
    assert_eq!(
        env.handles_of_pool("shared").await.len(),
        8,
        "exactly two replacements"
    );
    env.teardown([first, second]).await;
}

/// Two processes without leader election: one of them runs the deleted pool's finalizer, the
/// other finds the pool gone. Neither goes on exporting the pool's gauges, which would show a
/// pool that no longer exists (to `PoolboyPoolExhausted`, for one).
#[tokio::test]
async fn a_pool_deleted_leaves_no_gauge_in_either_process() {
    let env = TestEnv::new().await;
    create_provider_with_lifespan(&env).await;
    let addresses = [support::http::free_address(), support::http::free_address()];
    let operators = ["first", "second"].map(|instance| {
        let address = Some(addresses[usize::from(instance == "second")]);
        TestOperator::start_with(env.kube_config(), &env.namespace, address, instance)
    });
    create_pool(
        &env,
        "counted",
        json!({"minAvailable": 1, "provider": {"name": "configmap"}}),
    )
    .await;
    let series = format!(
        "poolboy_resource_pool_min_available{{name=\"counted\",namespace=\"{}\"}}",
        env.namespace
    );
    let exported = |address| {
        let series = series.clone();
        async move {
            let (_, text) = support::http::get(address, "/metrics").await;
            text.lines().any(|line| line.starts_with(&series))
        }
    };
    for address in addresses {
        eventually("the pool's gauges in each process", TIMEOUT, || async {
            exported(address).await.then_some(())
        })
        .await;
    }
    env.api::<ResourcePool>()
        .delete("counted", &DeleteParams::default())
        .await
        .expect("delete pool");
    gone(&env.api::<ResourcePool>(), "counted", TIMEOUT).await;
    for address in addresses {
        eventually(
            "the pool's gauges gone from each process",
            TIMEOUT,
            || async { (!exported(address).await).then_some(()) },
        )
        .await;
    }
    env.teardown(operators).await;
}

/// Acceptance (c), Δ§2.4–2.5: a pool's `resourceLabels` and `resourceAnnotations` go to its
/// handles and from there onto every resource they make, and stay there once a claim binds.
/// (Providers have no such fields, Δ§2.6: pools and handles carry them.)
#[tokio::test]
async fn resource_labels_and_annotations_reach_handles_and_resources() {
    let env = TestEnv::new().await;
    create_config_provider(&env, false).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let pool = objects::pool(
        "labelled",
        json!({
            "minAvailable": 1,
            "resourceLabels": {"example.com/team": "blue"},
            "resourceAnnotations": {"example.com/note": "pooled"},
            // Some data of its own: with none, the claim's data would be an `add /data`,
            // which the provider's `/data/.*` update filter does not let through (§12.2).
            "resources": [{"name": "config", "provider": objects::provider_ref("config", &env.namespace),
                           "template": template(json!({"owner": "nobody"}))}],
        }),
    );
    env.create(&pool).await;
    let pooled = eventually("a pool handle", TIMEOUT, || async {
        handles(&env).await.first().map(|h| h.name_any())
    })
    .await;
    ready_handle(&env, &pooled).await;
    let carries = |cm: &ConfigMap| {
        cm.labels().get("example.com/team").map(String::as_str) == Some("blue")
            && cm.annotations().get("example.com/note").map(String::as_str) == Some("pooled")
            && cm.labels().get(KIND_LABEL).map(String::as_str) == Some("config")
    };
    let cm = configmap(&env, &resource_name(&pooled, 0))
        .await
        .expect("ConfigMap");
    assert!(carries(&cm), "{:?} {:?}", cm.labels(), cm.annotations());

    create_config_claim(&env, "user", json!({}), json!({}), json!({"owner": "user"})).await;
    assert_eq!(bound(&env, "user").await, pooled);
    let handle = json_of(&env.api::<ResourceHandle>(), &pooled)
        .await
        .expect("handle");
    assert_eq!(
        handle["spec"]["resourceLabels"],
        json!({"example.com/team": "blue"})
    );
    assert_eq!(
        handle["spec"]["resourceAnnotations"],
        json!({"example.com/note": "pooled"})
    );
    let cm = eventually(
        "the claim's data on the labelled ConfigMap",
        TIMEOUT,
        || async {
            let cm = configmap(&env, &resource_name(&pooled, 0)).await?;
            (cm.data.as_ref()?.get("owner")? == "user").then_some(cm)
        },
    )
    .await;
    assert!(carries(&cm), "{:?} {:?}", cm.labels(), cm.annotations());
    // The pool's replacement handle carries them too.
    let replacement = eventually("the pool's replacement", TIMEOUT, || async {
        handles(&env)
            .await
            .into_iter()
            .find(|h| h.name_any() != pooled)
            .map(|h| h.name_any())
    })
    .await;
    let replacement_cm = resource_name(&replacement, 0);
    let cm = eventually("the replacement's ConfigMap", TIMEOUT, || {
        configmap(&env, &replacement_cm)
    })
    .await;
    assert!(carries(&cm), "{:?} {:?}", cm.labels(), cm.annotations());

    env.teardown([operator]).await;
}

/// The pool version a handle was made from.
fn version_of(handle: &ResourceHandle) -> Option<String> {
    handle
        .annotations()
        .get(&format!("{D}/resource-pool-version"))
        .cloned()
}

/// Waits until every unbound handle of `pool` is of a version other than `old`, making each
/// new one ready as it comes (the way its resource would get ready), with at most
/// `max_unready` unbound handles unready at any look; returns the unbound handles.
async fn await_refreshed(
    env: &TestEnv,
    pool: &str,
    old: &str,
    count: usize,
    max_unready: usize,
) -> Vec<ResourceHandle> {
    eventually(
        &format!("pool {pool}: {count} unbound handles, none of version {old}"),
        TIMEOUT,
        || async {
            let unbound = unbound_of(env, pool).await;
            let unready: Vec<&ResourceHandle> = unbound
                .iter()
                .filter(|h| h.status.as_ref().and_then(|s| s.ready) != Some(true))
                .collect();
            assert!(
                unready.len() <= max_unready,
                "{} unbound handles unready at once, maxUnready is {max_unready}",
                unready.len()
            );
            for handle in unready {
                make_ready(env, &handle.name_any()).await;
            }
            let refreshed = unbound.len() == count
                && unbound.iter().all(|h| {
                    h.status.as_ref().and_then(|s| s.ready) == Some(true)
                        && version_of(h).is_some_and(|v| v != old)
                });
            refreshed.then_some(unbound)
        },
    )
    .await
}

#[tokio::test]
async fn a_pool_edit_or_a_provider_edit_refreshes_the_unbound_handles_and_leaves_the_bound_ones() {
    let env = TestEnv::new().await;
    create_provider_with_lifespan(&env).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_pool(
        &env,
        "fresh",
        json!({"minAvailable": 2, "maxUnready": 1, "vars": {"colour": "red"},
               "provider": {"name": "configmap"}}),
    )
    .await;
    let first = await_refreshed(&env, "fresh", "none", 2, 1).await;
    let v1 = version_of(&first[0]).expect("a pool handle carries the pool version");
    assert!(
        first
            .iter()
            .all(|h| version_of(h).as_deref() == Some(v1.as_str()))
    );
    let kept = first[0].name_any();
    bind(&env, &kept).await;
    let before = await_refreshed(&env, "fresh", "none", 2, 1).await;
    eventually("HandlesUpToDate True", TIMEOUT, || async {
        let condition = problem_or_condition(&env, "fresh", "HandlesUpToDate").await;
        (condition["status"] == "True").then_some(())
    })
    .await;

    // The pool's templates change: every unbound handle is replaced, one unready at a time;
    // the bound one stays as it is.
    env.api::<ResourcePool>()
        .patch(
            "fresh",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"vars": {"colour": "blue"}}})),
        )
        .await
        .expect("edit the pool");
    let after = await_refreshed(&env, "fresh", &v1, 2, 1).await;
    let v2 = version_of(&after[0]).expect("version");
    for old in &before {
        gone(&env.api::<ResourceHandle>(), &old.name_any(), TIMEOUT).await;
    }
    let bound_handle = env
        .api::<ResourceHandle>()
        .get(&kept)
        .await
        .expect("the bound handle is kept");
    assert!(bound_handle.metadata.deletion_timestamp.is_none());
    assert_eq!(version_of(&bound_handle).as_deref(), Some(v1.as_str()));
    env.event("fresh", "Normal", "RefreshingHandles", TIMEOUT)
        .await;
    env.event("fresh", "Normal", "RefreshedHandles", TIMEOUT)
        .await;
    eventually("HandlesUpToDate True again", TIMEOUT, || async {
        let condition = problem_or_condition(&env, "fresh", "HandlesUpToDate").await;
        (condition["status"] == "True"
            && condition["message"]
                .as_str()
                .is_some_and(|m| m.contains(&v2)))
        .then_some(())
    })
    .await;

    // The provider changes: a new version again.
    env.api::<poolboy::api::ResourceProvider>()
        .patch(
            "configmap",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"vars": {"size": "large"}}})),
        )
        .await
        .expect("edit the provider");
    let last = await_refreshed(&env, "fresh", &v2, 2, 1).await;
    assert!(last.iter().all(|h| version_of(h) != Some(v1.clone())));
    env.teardown([operator]).await;
}

/// Condition `type_` of the pool's status, or null.
async fn problem_or_condition(env: &TestEnv, pool: &str, type_: &str) -> Value {
    let status = pool_status(env, pool).await;
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Makes ready every handle of `pool` (bound or not) that is at least `age` old and not ready
/// yet: a resource that takes that long to get ready.
async fn ready_when_old(env: &TestEnv, pool: &str, age: TimeDelta) {
    for handle in env.handles_of_pool(pool).await {
        let old = handle
            .metadata
            .creation_timestamp
            .as_ref()
            .is_some_and(|t| t.0.as_second() + age.num_seconds() <= Utc::now().timestamp());
        let ready = handle.status.as_ref().and_then(|s| s.ready) == Some(true);
        if old && !ready && handle.metadata.deletion_timestamp.is_none() {
            make_ready(env, &handle.name_any()).await;
        }
    }
}

#[tokio::test]
async fn autoscale_follows_the_binds_up_and_rotates_the_oldest_out_when_they_stop() {
    let env = TestEnv::new().await;
    create_provider_with_lifespan(&env).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let provisioning = TimeDelta::seconds(4);
    create_pool(
        &env,
        "demand",
        json!({"autoscale": {"min": 1, "max": 5, "window": "30s"},
               "provider": {"name": "configmap"}}),
    )
    .await;
    eventually("the pool at its min, 1", TIMEOUT, || async {
        ready_when_old(&env, "demand", provisioning).await;
        let status = pool_status(&env, "demand").await;
        (status["autoscale"]["target"] == 1 && unbound_of(&env, "demand").await.len() == 1)
            .then_some(())
    })
    .await;

    // Six binds in a burst, each of a handle the pool made: 6 binds per 30 s, about 4 s to
    // provision, so n ≈ 0.8 claims expected per provisioning, n + 2√n ≈ 2.6: 3.
    for _ in 0..6 {
        let handle = eventually("an unbound handle", TIMEOUT, || async {
            unbound_of(&env, "demand").await.into_iter().next()
        })
        .await;
        bind(&env, &handle.name_any()).await;
    }
    let target = eventually("the target raised by demand", TIMEOUT, || async {
        ready_when_old(&env, "demand", provisioning).await;
        let status = pool_status(&env, "demand").await;
        let target = status["autoscale"]["target"].as_i64()?;
        let unbound = unbound_of(&env, "demand").await.len();
        (target >= 2 && unbound == usize::try_from(target).ok()?).then_some(target)
    })
    .await;
    let reason = pool_status(&env, "demand").await["autoscale"]["reason"].clone();
    assert!(
        reason
            .as_str()
            .is_some_and(|r| r.starts_with("6 binds in the last 30s")),
        "{reason}"
    );

    // No more binds: once they leave the window, the target falls back to 1 and the oldest
    // unbound handles go, with nothing else to wake the pool.
    let newest = unbound_of(&env, "demand")
        .await
        .into_iter()
        .max_by_key(|h| (h.metadata.creation_timestamp.clone(), h.name_any()))
        .map(|h| h.name_any())
        .expect("unbound handles");
    eventually(
        "the pool back at its min",
        Duration::from_secs(90),
        || async {
            ready_when_old(&env, "demand", provisioning).await;
            let status = pool_status(&env, "demand").await;
            let unbound = unbound_of(&env, "demand").await;
            (status["autoscale"]["target"] == 1 && unbound.len() == 1).then_some(())
        },
    )
    .await;
    let kept = unbound_of(&env, "demand").await;
    assert_eq!(
        kept[0].name_any(),
        newest,
        "of {target} handles, the newest stays"
    );
    env.teardown([operator]).await;
}
