//! `make bench`: how fast claims are served, against the local control plane, with the whole
//! operator running in this process (release build).
//!
//! (a) warm: 200 claims bind handles a pool already made ready;
//! (b) cold: 200 claims that no pool serves: a handle and a ConfigMap are created for each.
//!
//! Instants come from watches on claims and ConfigMaps: claim created → bound (status names a
//! handle) and → resource created (the ConfigMap exists). Printed as a table.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use poolboy::api::OperatorDomain;
use poolboy::controller::kinds::{ClaimObject, HandleObject, Kinds};
use serde_json::{Value, json};
use support::TestEnv;
use support::operator::TestOperator;

const CLAIMS: usize = 200;
const PARALLEL_CREATES: usize = 50;
const TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Default)]
struct Instants {
    created: HashMap<String, Instant>,
    bound: HashMap<String, Instant>,
    resource: HashMap<String, Instant>,
}

#[tokio::main]
async fn main() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.client.clone(), &env.namespace);
    let kinds = Kinds::new(&OperatorDomain::default());
    let instants = Arc::new(Mutex::new(Instants::default()));
    let watches = tokio::spawn(record(
        env.client.clone(),
        env.namespace.clone(),
        instants.clone(),
    ));

    for name in ["warm", "cold"] {
        create(&env, &kinds.provider, provider(&env, name)).await;
    }
    create(&env, &kinds.pool, pool(&env)).await;
    let started = Instant::now();
    wait_for_ready_pool(&env, &kinds).await;
    println!(
        "pool of {CLAIMS} ready handles filled in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let stop_refills = json!({"spec": {"minAvailable": 0}});
    Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.namespace, &kinds.pool)
        .patch(
            "bench",
            &PatchParams::default(),
            &Patch::Merge(&stop_refills),
        )
        .await
        .expect("stop refills");

    let mut rows = Vec::new();
    for scenario in ["warm", "cold"] {
        let names: Vec<String> = (0..CLAIMS).map(|i| format!("{scenario}-{i:03}")).collect();
        let first_create = Instant::now();
        futures::stream::iter(names.clone())
            .map(|name| {
                let env = &env;
                let kinds = &kinds;
                let instants = instants.clone();
                async move {
                    let object = claim(env, &name, scenario);
                    instants
                        .lock()
                        .expect("lock")
                        .created
                        .insert(name.clone(), Instant::now());
                    create(env, &kinds.claim, object).await;
                }
            })
            .buffer_unordered(PARALLEL_CREATES)
            .collect::<Vec<()>>()
            .await;
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let done = {
                let instants = instants.lock().expect("lock");
                names
                    .iter()
                    .all(|n| instants.bound.contains_key(n) && instants.resource.contains_key(n))
            };
            if done {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{scenario}: not every claim was served within {TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let instants = instants.lock().expect("lock");
        let latencies = |of: &HashMap<String, Instant>| {
            let mut all: Vec<f64> = names
                .iter()
                .map(|n| (of[n] - instants.created[n]).as_secs_f64() * 1000.0)
                .collect();
            all.sort_by(f64::total_cmp);
            all
        };
        let bound = latencies(&instants.bound);
        let resource = latencies(&instants.resource);
        let last = names
            .iter()
            .map(|n| instants.bound[n])
            .max()
            .expect("claims");
        let rate = CLAIMS as f64 / (last - first_create).as_secs_f64();
        rows.push((scenario, bound, resource, rate));
    }

    println!();
    println!(
        "| scenario | claims | bound p50 | bound p99 | resource p50 | resource p99 | claims/s |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (scenario, bound, resource, rate) in rows {
        println!(
            "| {scenario} | {CLAIMS} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms | {rate:.1} |",
            percentile(&bound, 0.50),
            percentile(&bound, 0.99),
            percentile(&resource, 0.50),
            percentile(&resource, 0.99),
        );
    }
    watches.abort();
    operator.stop().await;
    env.cleanup().await;
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// Records when each claim is first bound and when its ConfigMap first exists.
async fn record(client: kube::Client, namespace: String, instants: Arc<Mutex<Instants>>) {
    let kinds = Kinds::new(&OperatorDomain::default());
    let claims = Api::<ClaimObject>::namespaced_with(client.clone(), &namespace, &kinds.claim);
    let configmaps = Api::<ConfigMap>::namespaced(client, &namespace);
    let claim_instants = instants.clone();
    let claims = watcher(claims, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .for_each(move |claim| {
            if let Ok(claim) = claim
                && let (Some(name), Some(_)) = (
                    claim.metadata.name.clone(),
                    claim
                        .status
                        .as_ref()
                        .and_then(|s| s.resource_handle.as_ref()),
                )
            {
                claim_instants
                    .lock()
                    .expect("lock")
                    .bound
                    .entry(name)
                    .or_insert_with(Instant::now);
            }
            async {}
        });
    let configmaps = watcher(configmaps, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .for_each(move |configmap| {
            let claim = configmap.ok().and_then(|c| {
                c.metadata
                    .annotations?
                    .get("poolboy.gpte.redhat.com/resource-claim-name")
                    .cloned()
            });
            if let Some(claim) = claim {
                instants
                    .lock()
                    .expect("lock")
                    .resource
                    .entry(claim)
                    .or_insert_with(Instant::now);
            }
            async {}
        });
    futures::future::join(claims, configmaps).await;
}

async fn wait_for_ready_pool(env: &TestEnv, kinds: &Kinds) {
    let handles =
        Api::<HandleObject>::namespaced_with(env.client.clone(), &env.namespace, &kinds.handle);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let list = handles
            .list(&ListParams::default())
            .await
            .expect("list handles");
        let ready = list
            .items
            .iter()
            .filter(|h| h.spec.resource_claim.is_none())
            .filter(|h| h.status.as_ref().and_then(|s| s.ready) == Some(true))
            .count();
        if ready >= CLAIMS {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the pool did not fill within {TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn create(env: &TestEnv, resource: &kube::core::ApiResource, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
    Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.namespace, resource)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));
}

fn provider(env: &TestEnv, name: &str) -> Value {
    json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceProvider",
        "metadata": {"name": name, "namespace": env.namespace},
        "spec": {
            "match": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"bench/kind": name}}},
            "matchIgnore": ["/data(/.*)?"],
            "override": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": env.namespace}},
            "readinessCheck": "metadata.uid is defined",
        },
    })
}

fn pool(env: &TestEnv) -> Value {
    json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourcePool",
        "metadata": {"name": "bench", "namespace": env.namespace},
        "spec": {
            "minAvailable": CLAIMS,
            "resources": [{
                "provider": {
                    "apiVersion": "poolboy.gpte.redhat.com/v1",
                    "kind": "ResourceProvider",
                    "name": "warm",
                    "namespace": env.namespace,
                },
                "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"bench/kind": "warm"}}},
            }],
        },
    })
}

fn claim(env: &TestEnv, name: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": env.namespace},
        "spec": {"resources": [{
            "name": "config",
            "template": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"labels": {"bench/kind": kind}},
                "data": {"claim": name},
            },
        }]},
    })
}
