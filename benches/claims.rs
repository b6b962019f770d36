//! `make bench`: how fast claims are served, against the local control plane, with the whole
//! operator running in this process (release build).
//!
//! (a) warm: 200 claims bind handles a pool already made ready;
//! (b) cold: 200 claims that no pool serves: a handle and a ConfigMap are created for each.
//!
//! Instants come from watches on claims and ConfigMaps: claim created → bound (status names a
//! handle) and → resource created (the ConfigMap exists). Printed as a table.
//!
//! (c) quiet: more cold claims up to 1,000 bound in all, none of whose templates reads the
//! clock; then, for a minute, the writes to claims, handles and ConfigMaps (watch events) and
//! the CPU time of this process (the operator's, and the watches'). Issue 15: nothing is
//! re-rendered by time unless a template reads the clock.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
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
/// Bound claims during the quiet minute.
const QUIET_CLAIMS: usize = 1000;
const QUIET_WINDOW: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Instants {
    created: HashMap<String, Instant>,
    bound: HashMap<String, Instant>,
    resource: HashMap<String, Instant>,
}

#[tokio::main]
async fn main() {
    let env = TestEnv::new().await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
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
        create_claims(&env, &kinds, &instants, &names, scenario).await;
        wait_served(&instants, &names, scenario).await;
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

    let quiet: Vec<String> = (0..QUIET_CLAIMS - 2 * CLAIMS)
        .map(|i| format!("quiet-{i:03}"))
        .collect();
    create_claims(&env, &kinds, &instants, &quiet, "cold").await;
    wait_served(&instants, &quiet, "quiet").await;
    // Let the last statuses and resources settle before the quiet minute.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let writes = Arc::new(AtomicUsize::new(0));
    let counting = tokio::spawn(count_writes(
        env.client.clone(),
        env.namespace.clone(),
        writes.clone(),
    ));
    // The watches list first; writes count from then on.
    tokio::time::sleep(Duration::from_secs(2)).await;
    writes.store(0, Ordering::SeqCst);
    let cpu_before = cpu_seconds();
    tokio::time::sleep(QUIET_WINDOW).await;
    let cpu = cpu_seconds() - cpu_before;
    counting.abort();
    println!();
    println!(
        "quiet: {QUIET_CLAIMS} bound claims, {} writes (claims, handles, ConfigMaps) and {cpu:.2} s CPU in {} s",
        writes.load(Ordering::SeqCst),
        QUIET_WINDOW.as_secs()
    );

    watches.abort();
    operator.stop().await;
    env.cleanup().await;
}

/// Creates the claims `names` of `kind`, at most PARALLEL_CREATES at once, recording when
/// each was created.
async fn create_claims(
    env: &TestEnv,
    kinds: &Kinds,
    instants: &Arc<Mutex<Instants>>,
    names: &[String],
    kind: &str,
) {
    futures::stream::iter(names.to_vec())
        .map(|name| {
            let instants = instants.clone();
            async move {
                let object = claim(env, &name, kind);
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
}

/// Waits until every claim of `names` is bound and its ConfigMap exists.
async fn wait_served(instants: &Arc<Mutex<Instants>>, names: &[String], scenario: &str) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let done = {
            let instants = instants.lock().expect("lock");
            names
                .iter()
                .all(|n| instants.bound.contains_key(n) && instants.resource.contains_key(n))
        };
        if done {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{scenario}: not every claim was served within {TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Counts every change (a new version, or a delete) of a claim, handle or ConfigMap in
/// `namespace` after the watches' first lists.
async fn count_writes(client: kube::Client, namespace: String, writes: Arc<AtomicUsize>) {
    let kinds = Kinds::new(&OperatorDomain::default());
    let count = |writes: Arc<AtomicUsize>| {
        move |event: Result<watcher::Event<DynamicObject>, watcher::Error>| {
            if let Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) = event {
                writes.fetch_add(1, Ordering::SeqCst);
            }
            async {}
        }
    };
    let watch = |resource: &kube::core::ApiResource| {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, resource);
        watcher(api, watcher::Config::default()).for_each(count(writes.clone()))
    };
    let configmap = kube::core::ApiResource::erase::<ConfigMap>(&());
    futures::future::join3(watch(&kinds.claim), watch(&kinds.handle), watch(&configmap)).await;
}

/// User plus system CPU time of this process: /proc/self/stat fields 14 and 15, in Linux's
/// fixed USER_HZ of 100 ticks a second.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
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
