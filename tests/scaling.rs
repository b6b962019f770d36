//! ResourcePoolScaling on the real control plane (Δ§2.1, Δ§3.3): a scaling adds exactly its
//! count of labelled handles on top of minAvailable, now or at `at`; its count and state
//! follow; unhealthy scaling handles are replaced (the count going down and back up);
//! `maxUnready` throttles it; deleting the pool garbage-collects it; a scaling whose pool is
//! missing says so and goes on once the pool exists.
//!
//! The whole operator runs, handle controller included: the pools' handles really create
//! ConfigMaps, whose labels drive the providers' health and readiness checks.

mod support;

use std::sync::{Arc, Mutex};

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use futures::StreamExt;
use kube::api::{DeleteParams, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use poolboy::api::{ResourceHandle, ResourcePool, ResourcePoolScaling};
use serde_json::{Value, json};

use support::fixtures::{create_pool, unbound_of};
use support::objects::{self, merged};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually};

const SCALING_LABEL: &str = "poolboy.gpte.redhat.com/resource-pool-scaling-name";

/// A provider of ConfigMaps whose health and readiness follow the ConfigMap's labels
/// `broken` and `ready`.
async fn create_checked_provider(env: &TestEnv, checks: Value) {
    env.create(&objects::configmap_provider(
        &env.namespace,
        "configmap",
        checks,
    ))
    .await;
}

/// Pool `name` of the `configmap` provider, with `spec`.
async fn create_configmap_pool(env: &TestEnv, name: &str, spec: Value) -> ResourcePool {
    create_pool(
        env,
        name,
        merged(spec, json!({"provider": {"name": "configmap"}})),
    )
    .await
}

async fn create_scaling(env: &TestEnv, name: &str, pool: &str, spec: Value) {
    let spec = merged(json!({"resourcePool": {"name": pool}}), spec);
    env.create(&objects::scaling(name, spec)).await;
}

async fn scaling(env: &TestEnv, name: &str) -> Option<ResourcePoolScaling> {
    env.api::<ResourcePoolScaling>().get_opt(name).await.ok()?
}

/// The `Valid` condition of scaling `name`, when it has one.
async fn valid_condition(env: &TestEnv, name: &str) -> Option<Value> {
    let status = scaling_status(env, name).await;
    let conditions = status["conditions"].as_array()?;
    conditions.iter().find(|c| c["type"] == "Valid").cloned()
}

/// `status` of scaling `name` as JSON (null when it has none or is gone).
async fn scaling_status(env: &TestEnv, name: &str) -> Value {
    scaling(env, name)
        .await
        .and_then(|s| serde_json::to_value(s.status).ok())
        .unwrap_or(Value::Null)
}

fn scaling_of(handle: &ResourceHandle) -> Option<&str> {
    handle.labels().get(SCALING_LABEL).map(String::as_str)
}

/// Waits until pool `pool` has `total` unbound handles, `labelled` of them labelled with
/// scaling `name`, and the scaling shows `count` and `state`; returns the handles.
async fn await_scaled(
    env: &TestEnv,
    pool: &str,
    name: &str,
    total: usize,
    labelled: usize,
    count: i64,
    state: &str,
) -> Vec<ResourceHandle> {
    eventually(
        &format!("pool {pool}: {total} unbound, {labelled} of scaling {name} ({count}, {state})"),
        TIMEOUT,
        || async {
            let handles = unbound_of(env, pool).await;
            let of_scaling = handles
                .iter()
                .filter(|h| scaling_of(h) == Some(name))
                .count();
            let status = scaling_status(env, name).await;
            (handles.len() == total
                && of_scaling == labelled
                && status["count"] == json!(count)
                && status["state"] == json!(state))
            .then_some(handles)
        },
    )
    .await
}

/// Every `status.count` scaling `name` shows, in order, from now on.
fn record_counts(env: &TestEnv, name: &str) -> Arc<Mutex<Vec<i64>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let api: Api<ResourcePoolScaling> = env.api();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let record = seen.clone();
    tokio::spawn(async move {
        let mut stream = watcher(api, config)
            .default_backoff()
            .touched_objects()
            .boxed();
        while let Some(Ok(scaling)) = stream.next().await {
            let count = scaling.status.and_then(|s| s.count).unwrap_or(0);
            if let Ok(mut seen) = record.lock()
                && seen.last() != Some(&count)
            {
                seen.push(count);
            }
        }
    });
    seen
}

#[tokio::test]
async fn a_scaling_adds_exactly_its_count_on_top_of_min_available() {
    let env = TestEnv::new().await;
    create_checked_provider(&env, json!({})).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let pool = create_configmap_pool(&env, "burst", json!({"minAvailable": 2})).await;
    eventually("the pool at minAvailable", TIMEOUT, || async {
        (unbound_of(&env, "burst").await.len() == 2).then_some(())
    })
    .await;

    create_scaling(&env, "morning", "burst", json!({"count": 3})).await;
    let handles = await_scaled(&env, "burst", "morning", 5, 3, 3, "done").await;
    let labelled: Vec<&ResourceHandle> = handles
        .iter()
        .filter(|h| scaling_of(h) == Some("morning"))
        .collect();
    assert_eq!(labelled.len(), 3);
    // The pool owns its scaling: written by the scaling controller, which the pool's
    // consumption of the scaling does not wait for.
    let owners = eventually("the scaling's owner references", TIMEOUT, || async {
        scaling(&env, "morning").await?.metadata.owner_references
    })
    .await;
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].kind, "ResourcePool");
    assert_eq!(owners[0].name, "burst");
    assert_eq!(owners[0].uid, pool.metadata.uid.clone().expect("uid"));
    assert_eq!(owners[0].controller, Some(true));

    // Every handle getting its ConfigMap and status wakes the pool; it stays at five.
    for handle in &handles {
        env.configmap_of(&handle.name_any(), TIMEOUT).await;
    }
    eventually("the pool status lists five", TIMEOUT, || async {
        let pool = env.api::<ResourcePool>().get("burst").await.ok()?;
        let status = serde_json::to_value(pool.status?).ok()?;
        (status["resourceHandleCount"]["available"] == json!(5)).then_some(())
    })
    .await;
    assert_eq!(unbound_of(&env, "burst").await.len(), 5, "no overfill");
    assert_eq!(scaling_status(&env, "morning").await["count"], json!(3));
    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_scaling_with_at_waits_then_scales_at_that_instant() {
    let env = TestEnv::new().await;
    create_checked_provider(&env, json!({})).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_configmap_pool(&env, "later", json!({"minAvailable": 0})).await;
    let at: DateTime<Utc> = Utc::now() + TimeDelta::seconds(8);
    let at_text = at.to_rfc3339_opts(SecondsFormat::Secs, true);
    let at: DateTime<Utc> = at_text.parse().expect("RFC 3339");
    create_scaling(&env, "evening", "later", json!({"count": 2, "at": at_text})).await;

    eventually("the scaling waiting", TIMEOUT, || async {
        (scaling_status(&env, "evening").await["state"] == json!("waiting")).then_some(())
    })
    .await;
    assert!(
        Utc::now() < at,
        "the test machine is too slow for this test"
    );
    assert!(
        unbound_of(&env, "later").await.is_empty(),
        "nothing before at"
    );

    let handles = await_scaled(&env, "later", "evening", 2, 2, 2, "done").await;
    for handle in &handles {
        let created = handle
            .metadata
            .creation_timestamp
            .as_ref()
            .expect("created")
            .0;
        let created: DateTime<Utc> = created.to_string().parse().expect("timestamp");
        assert!(created >= at, "{created} is before {at}");
        assert!(created < at + TimeDelta::seconds(5), "{created} is late");
    }
    env.teardown([operator]).await;
}

#[tokio::test]
async fn an_unhealthy_scaling_handle_is_replaced_with_the_count_going_down_and_up() {
    let env = TestEnv::new().await;
    create_checked_provider(
        &env,
        json!({"healthCheck": "metadata.labels.broken | default('no') != 'yes'"}),
    )
    .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_configmap_pool(
        &env,
        "healing",
        json!({"minAvailable": 0, "deleteUnhealthyResourceHandles": true}),
    )
    .await;
    let counts = record_counts(&env, "repair");
    create_scaling(&env, "repair", "healing", json!({"count": 2})).await;
    let handles = await_scaled(&env, "healing", "repair", 2, 2, 2, "done").await;
    let sick = handles[0].name_any();
    let configmap = env.configmap_of(&sick, TIMEOUT).await;
    eventually("the handle healthy", TIMEOUT, || async {
        let handle = env.api::<ResourceHandle>().get_opt(&sick).await.ok()??;
        (handle.status?.healthy == Some(true)).then_some(())
    })
    .await;

    env.label_configmap(&configmap, "broken", "yes").await;
    let replaced = eventually("the unhealthy handle replaced", TIMEOUT, || async {
        let handles = unbound_of(&env, "healing").await;
        let names: Vec<String> = handles.iter().map(ResourceHandle::name_any).collect();
        let labelled = handles
            .iter()
            .filter(|h| scaling_of(h) == Some("repair"))
            .count();
        let status = scaling_status(&env, "repair").await;
        (names.len() == 2
            && labelled == 2
            && !names.contains(&sick)
            && status["count"] == json!(2)
            && status["state"] == json!("done"))
        .then_some(names)
    })
    .await;
    assert!(
        replaced.contains(&handles[1].name_any()),
        "the healthy one stays"
    );
    let seen = counts.lock().expect("counts").clone();
    let went_down = seen.windows(2).any(|w| w == [2, 1]);
    assert!(went_down, "count went 2 → 1 → 2: {seen:?}");
    assert_eq!(seen.last(), Some(&2), "{seen:?}");
    env.teardown([operator]).await;
}

#[tokio::test]
async fn max_unready_throttles_a_scaling() {
    let env = TestEnv::new().await;
    create_checked_provider(
        &env,
        json!({"readinessCheck": "metadata.labels.ready | default('no') == 'yes'"}),
    )
    .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_configmap_pool(&env, "narrow", json!({"minAvailable": 0, "maxUnready": 1})).await;
    create_scaling(&env, "wave", "narrow", json!({"count": 3})).await;

    for step in 1..=3usize {
        let handles = await_scaled(
            &env,
            "narrow",
            "wave",
            step,
            step,
            i64::try_from(step).expect("small"),
            if step < 3 { "scaling" } else { "done" },
        )
        .await;
        // One unready handle at a time: make the new one ready.
        for handle in handles {
            let ready = handle.status.as_ref().and_then(|s| s.ready) == Some(true);
            if !ready {
                let configmap = env.configmap_of(&handle.name_any(), TIMEOUT).await;
                env.label_configmap(&configmap, "ready", "yes").await;
            }
        }
        if step < 3 {
            // While the new handle is unready, nothing more comes.
            assert!(unbound_of(&env, "narrow").await.len() <= step + 1);
        }
    }
    eventually("all three ready", TIMEOUT, || async {
        let handles = unbound_of(&env, "narrow").await;
        let ready = handles
            .iter()
            .filter(|h| h.status.as_ref().and_then(|s| s.ready) == Some(true))
            .count();
        (ready == 3).then_some(())
    })
    .await;
    assert_eq!(
        unbound_of(&env, "narrow").await.len(),
        3,
        "no more than the count"
    );
    env.teardown([operator]).await;
}

#[tokio::test]
async fn deleting_the_pool_garbage_collects_its_scalings() {
    let env = TestEnv::new().await;
    create_checked_provider(&env, json!({})).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_configmap_pool(&env, "doomed", json!({"minAvailable": 0})).await;
    create_scaling(&env, "first", "doomed", json!({"count": 1})).await;
    create_scaling(
        &env,
        "second",
        "doomed",
        json!({"count": 1, "at": "2099-01-01T00:00:00Z"}),
    )
    .await;
    for name in ["first", "second"] {
        eventually(&format!("{name} owned by the pool"), TIMEOUT, || async {
            let owners = scaling(&env, name).await?.metadata.owner_references?;
            (owners.len() == 1 && owners[0].name == "doomed").then_some(())
        })
        .await;
    }
    await_scaled(&env, "doomed", "first", 1, 1, 1, "done").await;
    // The scalings' passes are independent: the second's status may come after the first's.
    eventually("second waiting", TIMEOUT, || async {
        (scaling_status(&env, "second").await["state"] == "waiting").then_some(())
    })
    .await;

    env.api::<ResourcePool>()
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete pool");
    eventually("the scalings garbage-collected", TIMEOUT, || async {
        let left = env
            .api::<ResourcePoolScaling>()
            .list(&ListParams::default())
            .await
            .ok()?;
        left.items.is_empty().then_some(())
    })
    .await;
    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_scaling_for_a_missing_pool_reports_it_and_goes_on_once_the_pool_exists() {
    let env = TestEnv::new().await;
    create_checked_provider(&env, json!({})).await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    create_scaling(&env, "early", "not-yet", json!({"count": 2})).await;
    eventually("the Valid condition false", TIMEOUT, || async {
        let valid = valid_condition(&env, "early").await?;
        (valid["status"] == "False"
            && valid["message"]
                .as_str()
                .is_some_and(|m| m.contains("not-yet")))
        .then_some(())
    })
    .await;
    env.event("early", "Warning", "InvalidResourcePoolScaling", TIMEOUT)
        .await;

    create_configmap_pool(&env, "not-yet", json!({"minAvailable": 1})).await;
    await_scaled(&env, "not-yet", "early", 2, 2, 2, "done").await;
    // The pool writes the count and state, the scaling controller the condition: either
    // may land first.
    eventually("the Valid condition true", TIMEOUT, || async {
        (valid_condition(&env, "early").await?["status"] == "True").then_some(())
    })
    .await;
    env.teardown([operator]).await;
}

#[tokio::test]
async fn two_operator_processes_fill_a_scaling_exactly() {
    let env = TestEnv::new().await;
    create_checked_provider(&env, json!({})).await;
    // No leader election: both consume the scaling.
    let first = TestOperator::start_with(env.kube_config(), &env.namespace, None, "first");
    let second = TestOperator::start_with(env.kube_config(), &env.namespace, None, "second");
    create_configmap_pool(&env, "shared", json!({"minAvailable": 1})).await;
    eventually("the pool at minAvailable", TIMEOUT, || async {
        (unbound_of(&env, "shared").await.len() == 1).then_some(())
    })
    .await;
    create_scaling(&env, "rush", "shared", json!({"count": 4})).await;
    let handles = await_scaled(&env, "shared", "rush", 5, 4, 4, "done").await;
    // Every new handle getting its ConfigMap wakes the pool in both processes.
    for handle in &handles {
        env.configmap_of(&handle.name_any(), TIMEOUT).await;
    }
    eventually("the pool status lists five", TIMEOUT, || async {
        let pool = env.api::<ResourcePool>().get("shared").await.ok()?;
        let status = serde_json::to_value(pool.status?).ok()?;
        (status["resourceHandleCount"]["available"] == json!(5)).then_some(())
    })
    .await;
    assert_eq!(unbound_of(&env, "shared").await.len(), 5, "no overfill");
    assert_eq!(scaling_status(&env, "rush").await["count"], json!(4));
    env.teardown([first, second]).await;
}
