//! `make bench-scale`: the broker at 10,000 and 100,000 bound claims: the
//! release binary as its own process, against the local control plane. For each size of
//! `POOLBOY_SCALE_SIZES` (default `10000,100000`; the sizes grow cumulatively):
//!
//! 1. population (not the broker's work): that many bound claims, each with its handle and one
//!    ConfigMap, cloned from one claim the broker bound itself, in exactly the shape the broker
//!    leaves them, so that a broker starting on them finds nothing to do;
//! 2. start: the time from spawning the broker to `/readyz` answering 200, and to a warm claim
//!    created right after the spawn being bound (from a pool of [`POOL`] ready handles); beside
//!    it, the API server's part of any start: the broker's three first lists, at once, as its
//!    client asks them (the most recent state, one answer each, which the broker hands its
//!    watches in pages), by a client that only counts the items;
//! 3. memory: the broker's VmRSS and VmHWM once ready and after the warm binds;
//! 4. one more warm bind: [`WARM_BINDS`] claims, one at a time, each once the pool is full
//!    again: created → bound from a watch, and the API requests per bind by verb (the API
//!    server's own `apiserver_request_total`, the pool's refill included);
//! 5. idle: a quiet minute once everything settled: the writes to claims, handles and
//!    ConfigMaps, and the broker's CPU seconds.
//! 6. the client floor: the same warm binds served by a minimal kube-rs client in a process of
//!    its own, with the floor's requests and the broker's watches, no broker running
//!    (`support/client_floor.rs`): the CPU per bind no broker on the same client goes below;
//!    then again with the writes the broker adds (its `Bound` Event, the pool's status).
//!
//! The writes the broker makes to the clones while it starts are counted too: they must be 0,
//! and the first one of each kind is saved (with the fields the broker's write touched) to see
//! what differs.
//!
//! `POOLBOY_SCALE_KEEP=1` leaves the population in its namespace at the end (to start a broker
//! on it by hand, under a profiler); the control plane stays up only when the benchmark runs
//! against one of your own (`POOLBOY_TEST_KUBECONFIG`), not under `make bench-scale`.
//!
//! Each broker logs to `target/tmp/bench-scale/broker-<size>.log` at the `RUST_LOG` of
//! `POOLBOY_BENCH_BROKER_LOG`, as for the other benchmarks (here `poolboy=info` by default, which
//! logs each watch's first list; `poolboy=debug,kube_runtime=info` names each reconcile and why
//! kube-runtime ran it).

#[path = "support/arrivals.rs"]
mod arrivals;
#[path = "support/client_floor.rs"]
mod client_floor;
// Only the warm binds the client floor serves are used here.
#[allow(dead_code)]
#[path = "support/floor.rs"]
mod floor;
#[path = "support/machine.rs"]
mod machine;
#[allow(dead_code)] // `plus` serves the replicas of support/brokers.rs
#[path = "support/metrics.rs"]
mod metrics;
#[path = "support/objects.rs"]
mod objects;
#[path = "support/recording.rs"]
mod recording;
#[path = "support/requests.rs"]
mod requests;
#[path = "../tests/support/mod.rs"]
mod support;
#[path = "support/watches.rs"]
mod watches;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::runtime::watcher;
use machine::{
    control_plane_cpu, etcd_db_size, load_average, lock, percentile, pid_of, process_cpu_seconds,
    process_memory,
};
use metrics::Passes;
use objects::{pool, provider};
use poolboy::api::OperatorDomain;
use poolboy::api::kinds::{ClaimObject, HandleObject, Kinds};
use requests::Requests;
use serde_json::{Value, json};
use support::TestEnv;
use watches::HandleStates;

/// Clients creating clones at once.
const POPULATION_CLIENTS: usize = 32;
/// Ready handles of the pool the warm claims bind.
const POOL: usize = 10;
/// Warm claims bound one at a time at each size.
const WARM_BINDS: usize = 20;
/// The client floor's warm binds: more than the broker's, each costs a few milliseconds and
/// the CPU clock ticks in tens of them.
const FLOOR_BINDS: usize = 50;
const IDLE_WINDOW: Duration = Duration::from_secs(60);
/// How long the broker may take to start, settle or bind at 100,000 claims.
const TIMEOUT: Duration = Duration::from_secs(3600);
/// Settled: the broker's reconcile counters have not moved for this long.
const SETTLE_QUIET: Duration = Duration::from_secs(5);
/// The sample claim every clone is made from.
const SAMPLE: &str = "scale-sample";
/// The characters the broker draws handle names from (core::naming::NAME_ALPHABET).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const FIELD_MANAGER: &str = "poolboy-bench-scale";

/// The figures of one size.
#[derive(Default)]
struct Row {
    size: usize,
    population_rate: f64,
    /// The three lists of a start alone (claims, handles, ConfigMaps at once), seconds.
    lists_alone: f64,
    ready: f64,
    first_bind: f64,
    settled: Option<f64>,
    start_writes: usize,
    rss: u64,
    peak: u64,
    p50: f64,
    p99: f64,
    requests: f64,
    /// CPU milliseconds per warm bind, the refill included: the broker, kube-apiserver, etcd.
    cpu_per_bind: [f64; 3],
    /// The same for the client floor (`support/client_floor.rs`), its process alone: the
    /// contract's requests, and those with the broker's Event and pool status writes.
    floor_cpu_per_bind: [f64; 2],
    /// Reconciles per warm bind, the refill included, by kind.
    passes: Passes,
    idle_writes: usize,
    idle_cpu: f64,
}

#[tokio::main]
async fn main() {
    let kinds = Kinds::new(&OperatorDomain::default());
    client_floor::serve_if_asked(&kinds);
    let sizes = sizes();
    let env = TestEnv::new().await;
    let load_before = load_average();
    println!("load before: {load_before}; sizes {sizes:?}");

    let sample = sample(&env, &kinds).await;
    let mut rows = Vec::new();
    let mut populated = 0;
    for size in sizes {
        let mut row = Row {
            size,
            ..Row::default()
        };
        println!();
        println!("== {size} bound claims");
        row.population_rate = populate(&env, &kinds, &sample, populated, size).await;
        populated = size;
        measure(&env, &kinds, &mut row).await;
        rows.push(row);
    }

    println!();
    println!("load before: {load_before}; after: {}", load_average());
    println!(
        "| size | population (claims/s) | lists alone | start→ready | start→first bind | start→settled | \
         writes at start | RSS (MiB) | peak RSS (MiB) | warm bind p50 | p99 | requests per bind \
         | CPU ms per bind (broker / kube-apiserver / etcd) | the client floor's CPU ms per bind \
         (contract / + Event and pool status) | passes per bind | idle writes | idle CPU s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {:.0} | {:.2} s | {:.2} s | {:.2} s | {} | {} | {} | {} | {:.0} ms | {:.0} ms | \
             {:.1} | {:.1} / {:.1} / {:.1} | {:.1} / {:.1} | {} | {} | {:.2} |",
            row.size,
            row.population_rate,
            row.lists_alone,
            row.ready,
            row.first_bind,
            row.settled
                .map_or("not settled".to_owned(), |s| format!("{s:.1} s")),
            row.start_writes,
            row.rss,
            row.peak,
            row.p50,
            row.p99,
            row.requests,
            row.cpu_per_bind[0],
            row.cpu_per_bind[1],
            row.cpu_per_bind[2],
            row.floor_cpu_per_bind[0],
            row.floor_cpu_per_bind[1],
            row.passes,
            row.idle_writes,
            row.idle_cpu,
        );
    }
    for pair in rows.windows(2) {
        println!(
            "RSS grew {:.1} KiB per claim from {} to {} claims",
            (pair[1].rss as f64 - pair[0].rss as f64) * 1024.0
                / (pair[1].size - pair[0].size) as f64,
            pair[0].size,
            pair[1].size
        );
    }
    if std::env::var_os("POOLBOY_SCALE_KEEP").is_some() {
        let namespace = env.keep();
        println!(
            "kept namespace {namespace} and its population (POOLBOY_SCALE_KEEP); a broker on it: \
             poolboy run --namespaced --operator-namespace {namespace}"
        );
    } else {
        env.cleanup().await;
    }
}

/// `POOLBOY_SCALE_SIZES`, ascending.
fn sizes() -> Vec<usize> {
    let text = std::env::var("POOLBOY_SCALE_SIZES").unwrap_or_else(|_| "10000,100000".to_owned());
    let mut sizes: Vec<usize> = text
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("POOLBOY_SCALE_SIZES: {s:?} is not a number"))
        })
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

// ---------------------------------------------------------------------------------------------
// The sample: one claim the broker bound, its handle and its ConfigMap.

/// A bound claim, its handle and its ConfigMap as the broker left them.
struct Sample {
    claim: Value,
    handle: Value,
    configmap: Value,
}

impl Sample {
    fn name(object: &Value) -> &str {
        object["metadata"]["name"].as_str().expect("a name")
    }

    fn uid(object: &Value) -> &str {
        object["metadata"]["uid"].as_str().expect("a uid")
    }

    /// The handle's guid: its name without `guid-`.
    fn guid(&self) -> &str {
        Self::name(&self.handle)
            .strip_prefix("guid-")
            .expect("the broker names handles guid-…")
    }
}

/// Starts the broker, lets it bind one claim of provider `scale` and fill pool `warm` with
/// [`POOL`] ready handles, waits until all of it settled, stops the broker, and returns the
/// claim, its handle and its ConfigMap.
async fn sample(env: &TestEnv, kinds: &Kinds) -> Sample {
    for name in ["scale", "warm"] {
        create(env, &kinds.provider, provider(env, name)).await;
    }
    create(env, &kinds.pool, pool(env, "warm", POOL)).await;
    create(env, &kinds.claim, claim(env, SAMPLE, "scale", false)).await;
    let broker = Broker::spawn(env, "sample");
    let claims = dynamic(env, &kinds.claim);
    let handles = dynamic(env, &kinds.handle);
    let configmaps = dynamic(env, &ApiResource::erase::<ConfigMap>(&()));

    let read = || async {
        let claim = value(claims.get(SAMPLE).await.expect("read the sample claim"));
        if claim["status"]["ready"] != json!(true) {
            return None;
        }
        let handle = claim["status"]["resourceHandle"]["name"]
            .as_str()?
            .to_owned();
        let handle = value(
            handles
                .get(&handle)
                .await
                .expect("read the sample's handle"),
        );
        if handle["status"]["ready"] != json!(true) {
            return None;
        }
        let configmap = handle["status"]["resources"][0]["reference"]["name"].as_str()?;
        let configmap = value(configmaps.get_opt(configmap).await.ok()??);
        let pool = handles
            .list(&ListParams::default().labels("poolboy.gpte.redhat.com/resource-pool-name=warm"))
            .await
            .expect("list the pool's handles");
        let ready = pool
            .items
            .iter()
            .filter(|h| h.data["status"]["ready"] == json!(true))
            .count();
        (ready >= POOL).then_some(Sample {
            claim,
            handle,
            configmap,
        })
    };
    // Settled: bound, ready, the pool full, and nothing changed for 3 s.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last: Option<(Vec<Value>, Instant)> = None;
    let sample = loop {
        assert!(
            Instant::now() < deadline,
            "the sample claim did not settle within 120 s; broker log: {}",
            broker.log.display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Some(sample) = read().await else {
            continue;
        };
        let versions: Vec<Value> = [&sample.claim, &sample.handle, &sample.configmap]
            .iter()
            .map(|o| o["metadata"]["resourceVersion"].clone())
            .collect();
        match &last {
            Some((seen, since)) if *seen == versions => {
                if since.elapsed() >= Duration::from_secs(3) {
                    break sample;
                }
            }
            _ => last = Some((versions, Instant::now())),
        }
    };
    broker.stop().await;
    let bytes = |object: &Value| object.to_string().len();
    println!(
        "sample: claim {SAMPLE} ({} bytes of JSON), handle {} ({} bytes), ConfigMap {} ({} \
         bytes); pool warm of {POOL} ready handles",
        bytes(&sample.claim),
        Sample::name(&sample.handle),
        bytes(&sample.handle),
        Sample::name(&sample.configmap),
        bytes(&sample.configmap),
    );
    sample
}

// ---------------------------------------------------------------------------------------------
// Population: clones of the sample.

/// Creates clones `from..to` of the sample, [`POPULATION_CLIENTS`] at once; clones per second.
async fn populate(env: &TestEnv, kinds: &Kinds, sample: &Sample, from: usize, to: usize) -> f64 {
    let apis = Apis {
        claims: dynamic(env, &kinds.claim),
        handles: dynamic(env, &kinds.handle),
        configmaps: dynamic(env, &ApiResource::erase::<ConfigMap>(&())),
    };
    let count = to - from;
    let cpu_before = control_plane_cpu();
    let started = Instant::now();
    let mut done = 0;
    let mut clones = futures::stream::iter(from..to)
        .map(|i| clone_sample(&apis, sample, i))
        .buffer_unordered(POPULATION_CLIENTS);
    while clones.next().await.is_some() {
        done += 1;
        if done % (count / 10).max(1) == 0 && done < count {
            println!(
                "population: {done}/{count} in {:.0} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let rate = count as f64 / seconds;
    let cpu = control_plane_cpu();
    println!(
        "population: {count} claims with their handles and ConfigMaps in {seconds:.1} s: \
         {rate:.0} claims/s, {:.1} s per 1,000 ({:.0} objects/s, 5 writes each claim); CPU \
         seconds kube-apiserver {:.0}, etcd {:.0}",
        seconds * 1000.0 / count.max(1) as f64,
        3.0 * rate,
        cpu[0] - cpu_before[0],
        cpu[1] - cpu_before[1],
    );
    println!(
        "control plane now: kube-apiserver RSS {} MiB, etcd RSS {} MiB{}",
        process_memory(&pid_of("kube-apiserver")).0,
        process_memory(&pid_of("etcd")).0,
        etcd_db_size()
            .map(|mib| format!(", etcd db {mib} MiB"))
            .unwrap_or_default()
    );
    rate
}

struct Apis {
    claims: Api<DynamicObject>,
    handles: Api<DynamicObject>,
    configmaps: Api<DynamicObject>,
}

/// Clone `i` of the sample: claim `scale-NNNNNN`, handle `guid-` and six characters (the
/// broker's are five: no clash), ConfigMap named as the broker names it from the handle.
/// Created claim, handle, ConfigMap (each uid known before anything names it), then the
/// handle's and the claim's status through the status subresource.
async fn clone_sample(apis: &Apis, sample: &Sample, i: usize) {
    let guid = clone_guid(i);
    let mut rewrite = Rewrite::new(sample, &guid, &format!("scale-{i:06}"));

    let claim = rewrite.object(&sample.claim);
    let claim = create_retrying(&apis.claims, claim).await;
    rewrite.created(&sample.claim, &claim);
    let handle = rewrite.object(&sample.handle);
    let handle = create_retrying(&apis.handles, handle).await;
    rewrite.created(&sample.handle, &handle);
    let configmap = rewrite.object(&sample.configmap);
    let configmap = create_retrying(&apis.configmaps, configmap).await;
    rewrite.created(&sample.configmap, &configmap);

    let status = rewrite.status(&sample.handle, &handle);
    patch_status_retrying(&apis.handles, &handle, status).await;
    let status = rewrite.status(&sample.claim, &claim);
    patch_status_retrying(&apis.claims, &claim, status).await;
}

/// Six characters of [`NAME_ALPHABET`] numbering clone `i`.
fn clone_guid(mut i: usize) -> String {
    let base = NAME_ALPHABET.len();
    let mut guid = vec![0u8; 6];
    for slot in guid.iter_mut().rev() {
        *slot = NAME_ALPHABET[i % base];
        i /= base;
    }
    String::from_utf8(guid).expect("ASCII")
}

/// The sample's names and uids and what they become in one clone.
struct Rewrite {
    /// Sample string → clone string; the longest first, so a name goes before its guid.
    strings: Vec<(String, String)>,
    /// Every sample name and uid: none may be left in a clone.
    sample_tokens: Vec<String>,
    /// Sample uid → the clone's object as created.
    created: HashMap<String, Value>,
}

impl Rewrite {
    fn new(sample: &Sample, guid: &str, claim: &str) -> Self {
        let sample_guid = sample.guid();
        let configmap = Sample::name(&sample.configmap);
        assert!(
            configmap.contains(sample_guid),
            "the ConfigMap's name {configmap} holds its handle's guid {sample_guid}"
        );
        let mut strings = vec![
            (SAMPLE.to_owned(), claim.to_owned()),
            (
                Sample::name(&sample.handle).to_owned(),
                format!("guid-{guid}"),
            ),
            (configmap.to_owned(), configmap.replace(sample_guid, guid)),
            (sample_guid.to_owned(), guid.to_owned()),
        ];
        strings.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        let mut sample_tokens: Vec<String> = strings.iter().map(|(from, _)| from.clone()).collect();
        for object in [&sample.claim, &sample.handle, &sample.configmap] {
            sample_tokens.push(Sample::uid(object).to_owned());
        }
        Self {
            strings,
            sample_tokens,
            created: HashMap::new(),
        }
    }

    /// The clone of `sample_object` was created as `clone`: its uid replaces the sample's.
    fn created(&mut self, sample_object: &Value, clone: &Value) {
        let uid = Sample::uid(sample_object).to_owned();
        self.strings
            .push((uid.clone(), Sample::uid(clone).to_owned()));
        self.created.insert(uid, clone.clone());
    }

    /// The body that creates the clone of `object`: its metadata without what the API server
    /// sets, no status.
    fn object(&self, object: &Value) -> Value {
        let mut body = object.clone();
        let body_map = body.as_object_mut().expect("an object");
        body_map.remove("status");
        let metadata = body_map["metadata"].as_object_mut().expect("metadata");
        for server_set in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "selfLink",
        ] {
            metadata.remove(server_set);
        }
        let body = self.value(&body, None);
        self.check(&body, object);
        body
    }

    /// The status of `clone` (created from `sample_object`): the sample's, with the names and
    /// uids rewritten, `observedGeneration` the clone's generation, and a copy of a resource
    /// (a claim's `status.resources[].state`) taken from the clone's resource.
    fn status(&self, sample_object: &Value, clone: &Value) -> Value {
        let generations = (
            sample_object["metadata"]["generation"].clone(),
            clone["metadata"]["generation"].clone(),
        );
        let status = self.value(&sample_object["status"], Some(&generations));
        self.check(&status, sample_object);
        status
    }

    fn value(&self, value: &Value, generations: Option<&(Value, Value)>) -> Value {
        match value {
            Value::String(s) => Value::String(self.string(s)),
            Value::Array(items) => items.iter().map(|v| self.value(v, generations)).collect(),
            Value::Object(map) => {
                // A copy of an object the sample names by uid: the same keys, the clone's values.
                if let Some(clone) = value["metadata"]["uid"]
                    .as_str()
                    .and_then(|uid| self.created.get(uid))
                {
                    return self.project(value, clone);
                }
                map.iter()
                    .map(|(key, v)| {
                        let v = match generations {
                            Some((sample, clone)) if key == "observedGeneration" && v == sample => {
                                clone.clone()
                            }
                            _ => self.value(v, generations),
                        };
                        (self.string(key), v)
                    })
                    .collect()
            }
            other => other.clone(),
        }
    }

    /// `copy`'s keys with `of`'s values (recursively through objects), what `of` lacks
    /// rewritten.
    fn project(&self, copy: &Value, of: &Value) -> Value {
        match (copy, of) {
            (Value::Object(copy), Value::Object(of)) => copy
                .iter()
                .map(|(key, v)| {
                    let v = match of.get(key) {
                        Some(theirs) => self.project(v, theirs),
                        None => self.value(v, None),
                    };
                    (key.clone(), v)
                })
                .collect(),
            (_, of) => of.clone(),
        }
    }

    fn string(&self, s: &str) -> String {
        let mut s = s.to_owned();
        for (from, to) in &self.strings {
            if s.contains(from.as_str()) {
                s = s.replace(from.as_str(), to);
            }
        }
        s
    }

    /// Panics when `rewritten` still names the sample (a reference the rewrite missed, or one
    /// to an object not created yet).
    fn check(&self, rewritten: &Value, sample_object: &Value) {
        let text = rewritten.to_string();
        if let Some(token) = self.sample_tokens.iter().find(|t| names(&text, t)) {
            panic!(
                "a clone of {} {} still names {token} of the sample: {text}",
                sample_object["kind"],
                Sample::name(sample_object)
            );
        }
    }
}

/// Whether `text` holds `token` as a name of its own, not inside a longer run of letters and
/// digits: a clone's uid, random hex, held the sample's five-character guid once in 100,000
/// clones (`…-ff8d666d5a81` for guid `8d666`).
fn names(text: &str, token: &str) -> bool {
    text.match_indices(token).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + token.len()..].chars().next();
        !before
            .into_iter()
            .chain(after)
            .any(|c| c.is_ascii_alphanumeric())
    })
}

/// Creates `body` (retrying what the API server may refuse for a moment) and returns the object
/// as created. A create whose answer was lost and that is retried reads the object instead.
async fn create_retrying(api: &Api<DynamicObject>, body: Value) -> Value {
    let object: DynamicObject = serde_json::from_value(body).expect("a valid object");
    let name = object.metadata.name.clone().unwrap_or_default();
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        match api.create(&params, &object).await {
            Ok(created) => return value(created),
            Err(kube::Error::Api(status)) if status.is_already_exists() && attempt > 1 => {
                return value(api.get(&name).await.expect("read a clone created before"));
            }
            Err(e) if attempt < 5 && transient(&e) => {
                tokio::time::sleep(Duration::from_millis(500 * attempt)).await;
            }
            Err(e) => panic!("creating {name}: {e}"),
        }
    }
}

async fn patch_status_retrying(api: &Api<DynamicObject>, object: &Value, status: Value) {
    let name = Sample::name(object);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let patch = Patch::Merge(json!({"status": status}));
    let mut attempt = 0;
    loop {
        attempt += 1;
        match api.patch_status(name, &params, &patch).await {
            Ok(_) => return,
            Err(e) if attempt < 5 && transient(&e) => {
                tokio::time::sleep(Duration::from_millis(500 * attempt)).await;
            }
            Err(e) => panic!("writing the status of {name}: {e}"),
        }
    }
}

/// An error worth a retry: the API server busy or unreachable for a moment.
fn transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => matches!(status.code, 429 | 500 | 502 | 503 | 504),
        _ => true,
    }
}

// ---------------------------------------------------------------------------------------------
// Measurement of one size.

async fn measure(env: &TestEnv, kinds: &Kinds, row: &mut Row) {
    let size = row.size;
    row.lists_alone = lists_alone(env, kinds).await;
    let writes = Writes::start(env, kinds).await;
    let probes = Probes::start(env, kinds);
    let requests = Requests::read(&env.client).await;

    // 2. Start: ready, and a warm claim created right after the spawn bound.
    let broker = Broker::spawn(env, &format!("{size}"));
    let spawned = broker.spawned;
    let first = format!("first-{size}");
    probes.create(env, kinds, &first).await;
    let deadline = Instant::now() + TIMEOUT;
    while broker.get("/readyz").await.0 != 200 {
        assert!(Instant::now() < deadline, "not ready within {TIMEOUT:?}");
        broker.check_alive();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    row.ready = spawned.elapsed().as_secs_f64();
    let (rss, hwm) = broker.memory();
    println!(
        "start: ready in {:.2} s; RSS {rss} MiB, peak {hwm} MiB",
        row.ready
    );
    probes.wait_bound(&first, &broker).await;
    row.first_bind = (probes.bound(&first) - spawned).as_secs_f64();
    println!(
        "start: the warm claim created at the spawn bound {:.2} s after it",
        row.first_bind
    );

    // Settled: the reconcile counters stand still.
    row.settled = broker.settle().await;
    let start_writes = writes.snapshot();
    row.start_writes = start_writes.clones;
    let (rss, hwm) = broker.memory();
    println!(
        "start: settled {}; writes since the spawn: {} to the {size} clones, {} to the rest \
         (pool, warm claims); RSS {rss} MiB, peak {hwm} MiB; broker CPU {:.1} s",
        row.settled
            .map_or("not within the timeout".to_owned(), |s| format!(
                "in {s:.1} s"
            )),
        start_writes.clones,
        start_writes.others,
        broker.cpu_seconds()
    );
    writes.report_first_clone_writes(&broker);
    let spent = Requests::read(&env.client).await.since(&requests);
    println!(
        "start: {:.0} API requests until settled, {:.2} per claim ({})",
        spent.total(),
        spent.total() / size as f64,
        spent.per(size as f64)
    );

    // 4. Warm binds, one at a time, each once the pool is full again. Where the time goes as
    // the cluster grows: the CPU each process spends per bind.
    let requests = Requests::read(&env.client).await;
    let broker_cpu = broker.cpu_seconds();
    let [apiserver_cpu, etcd_cpu] = control_plane_cpu();
    let passes = broker.passes().await;
    let mut latencies = Vec::new();
    for i in 0..WARM_BINDS {
        probes.wait_pool_full(&broker).await;
        let name = format!("warm-{size}-{i:02}");
        let created = probes.create(env, kinds, &name).await;
        probes.wait_bound(&name, &broker).await;
        latencies.push((probes.bound(&name) - created).as_secs_f64() * 1000.0);
    }
    probes.wait_pool_full(&broker).await;
    let [apiserver_after, etcd_after] = control_plane_cpu();
    let per_bind = |seconds: f64| seconds * 1000.0 / WARM_BINDS as f64;
    row.cpu_per_bind = [
        per_bind(broker.cpu_seconds() - broker_cpu),
        per_bind(apiserver_after - apiserver_cpu),
        per_bind(etcd_after - etcd_cpu),
    ];
    let spent = Requests::read(&env.client).await.since(&requests);
    row.passes = broker.passes().await.since(&passes, WARM_BINDS as f64);
    latencies.sort_by(f64::total_cmp);
    row.p50 = percentile(&latencies, 0.50);
    row.p99 = percentile(&latencies, 0.99);
    row.requests = spent.total() / WARM_BINDS as f64;
    (row.rss, row.peak) = broker.memory();
    println!(
        "warm binds: {WARM_BINDS}, bound p50 {:.0} ms, p99 {:.0} ms; {:.1} API requests each, \
         the refill included ({}); CPU ms each: broker {:.1}, kube-apiserver {:.1}, etcd {:.1}; \
         passes each: {}; RSS {} MiB, peak {} MiB",
        row.p50,
        row.p99,
        row.requests,
        spent.per(WARM_BINDS as f64),
        row.cpu_per_bind[0],
        row.cpu_per_bind[1],
        row.cpu_per_bind[2],
        row.passes,
        row.rss,
        row.peak
    );

    // 5. Idle.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let before = writes.snapshot();
    let cpu_before = broker.cpu_seconds();
    tokio::time::sleep(IDLE_WINDOW).await;
    row.idle_cpu = broker.cpu_seconds() - cpu_before;
    let after = writes.snapshot();
    row.idle_writes = after.total() - before.total();
    println!(
        "idle: {} writes (claims, handles, ConfigMaps) and {:.2} s broker CPU in {} s",
        row.idle_writes,
        row.idle_cpu,
        IDLE_WINDOW.as_secs()
    );
    broker.stop().await;
    probes.stop();
    writes.stop();

    // 6. The client floor: the same warm binds served by a minimal client, no broker running;
    // then again with the broker's own writes added.
    let contract = client_floor::Serving::default();
    let floor = client_floor::measure(env, kinds, FLOOR_BINDS, contract).await;
    // The broker writes the pool's status on every bind when they come one at a time.
    let added = client_floor::Serving {
        broker_additions: Some(client_floor::Additions {
            pool_status_every: 1,
        }),
        ..contract
    };
    let with_additions = client_floor::measure(env, kinds, FLOOR_BINDS, added).await;
    row.floor_cpu_per_bind = [floor.cpu_per_claim, with_additions.cpu_per_claim];
    println!(
        "client floor: {FLOOR_BINDS} warm binds, bound p50 {:.0} ms; CPU ms each {:.1}, with \
         the broker's Event and pool status writes {:.1} (p50 {:.0} ms); the broker's {:.1}",
        floor.p50,
        floor.cpu_per_claim,
        with_additions.cpu_per_claim,
        with_additions.p50,
        row.cpu_per_bind[0]
    );
}

/// The API server's part of a start: the first lists a broker's client asks, at once and as
/// it asks them: the claims, handles and ConfigMaps of the namespace at their most recent, one
/// answer each (`runtime::paged_answers`); by a client that decodes nothing but the items'
/// count. Returns the seconds until the last list ended.
async fn lists_alone(env: &TestEnv, kinds: &Kinds) -> f64 {
    let configmap = ApiResource::erase::<ConfigMap>(&());
    let cpu_before = control_plane_cpu();
    let started = Instant::now();
    let lists = [&kinds.claim, &kinds.handle, &configmap].map(|r| list_counting(env, r));
    let listed = futures::future::join_all(lists).await;
    let seconds = started.elapsed().as_secs_f64();
    let cpu = control_plane_cpu();
    let each: Vec<String> = listed
        .iter()
        .map(|(kind, count, megabytes, seconds)| {
            format!("{count} {kind} ({megabytes:.0} MB) {seconds:.1} s")
        })
        .collect();
    println!(
        "lists alone, at once (one answer each): {seconds:.2} s ({}); CPU seconds \
         kube-apiserver {:.1}, etcd {:.1}",
        each.join(", "),
        cpu[0] - cpu_before[0],
        cpu[1] - cpu_before[1],
    );
    seconds
}

/// Lists every object of `resource` in the test namespace as the broker's client asks it;
/// returns its plural, the items, the megabytes of JSON and the seconds it took.
async fn list_counting(env: &TestEnv, resource: &ApiResource) -> (String, usize, f64, f64) {
    #[derive(serde::Deserialize)]
    struct List {
        items: Vec<serde::de::IgnoredAny>,
    }
    let started = Instant::now();
    let path = <DynamicObject as kube::Resource>::url_path(resource, Some(&env.namespace));
    let request = kube::core::Request::new(&path)
        .list(&ListParams::default())
        .expect("a list request");
    let text = env
        .client
        .request_text(request)
        .await
        .unwrap_or_else(|e| panic!("listing {}: {e}", resource.plural));
    let list: List = serde_json::from_str(&text).expect("a list");
    (
        resource.plural.clone(),
        list.items.len(),
        text.len() as f64 / 1e6,
        started.elapsed().as_secs_f64(),
    )
}

/// The broker binary (release build) as its own process.
struct Broker {
    child: Option<Child>,
    pid: u32,
    address: SocketAddr,
    spawned: Instant,
    log: PathBuf,
}

impl Broker {
    fn spawn(env: &TestEnv, label: &str) -> Self {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-scale");
        std::fs::create_dir_all(&dir).expect("the log directory");
        let log = dir.join(format!("broker-{label}.log"));
        let file = std::fs::File::create(&log).expect("a log file");
        let err = file.try_clone().expect("the log file again");
        let address = support::http::free_address();
        let spawned = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_poolboy"))
            .args([
                "run",
                "--namespaced",
                "--operator-namespace",
                &env.namespace,
            ])
            .args(["--metrics-address", &address.to_string()])
            .env("KUBECONFIG", support::kubeconfig_path())
            .env("HOSTNAME", format!("bench-scale-{label}"))
            .env(
                "RUST_LOG",
                std::env::var("POOLBOY_BENCH_BROKER_LOG").unwrap_or_else(|_| "poolboy=info".into()),
            )
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .expect("starting the broker binary");
        Self {
            pid: child.id(),
            child: Some(child),
            address,
            spawned,
            log,
        }
    }

    async fn get(&self, path: &str) -> (u16, String) {
        support::http::get(self.address, path).await
    }

    /// Panics when the broker exited on its own.
    fn check_alive(&self) {
        let exited = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .map_or(true, |stat| stat.contains(") Z "));
        assert!(
            !exited,
            "the broker exited; its log: {}",
            self.log.display()
        );
    }

    fn cpu_seconds(&self) -> f64 {
        process_cpu_seconds(&self.pid.to_string())
    }

    /// VmRSS and VmHWM in MiB.
    fn memory(&self) -> (u64, u64) {
        process_memory(&self.pid.to_string())
    }

    /// The broker's reconciles so far, by kind.
    async fn passes(&self) -> Passes {
        let (_, metrics) = self.get("/metrics").await;
        Passes::of(&metrics)
    }

    /// Waits until the sum of the broker's reconcile counters has not moved for
    /// [`SETTLE_QUIET`] and no reconcile is in flight: the seconds from the spawn to the last
    /// move, `None` when that did not happen within [`TIMEOUT`].
    async fn settle(&self) -> Option<f64> {
        let deadline = Instant::now() + TIMEOUT;
        let mut last: Option<(f64, Instant)> = None;
        while Instant::now() < deadline {
            self.check_alive();
            let (_, metrics) = self.get("/metrics").await;
            let reconciles = metric_sum(&metrics, "poolboy_reconcile_duration_seconds_count");
            let in_flight = metric_sum(&metrics, "poolboy_reconciles_in_flight");
            match last {
                Some((seen, since)) if seen == reconciles && in_flight == 0.0 => {
                    if since.elapsed() >= SETTLE_QUIET {
                        println!(
                            "start: {reconciles:.0} reconciles ({})",
                            metric_lines(&metrics, "poolboy_reconcile_duration_seconds_count")
                        );
                        return Some((since - self.spawned).as_secs_f64());
                    }
                }
                _ => last = Some((reconciles, Instant::now())),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        None
    }

    /// SIGTERM, and waits for the process to end (SIGKILL after 60 s).
    async fn stop(mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if Instant::now() >= deadline => {
                    eprintln!("the broker ignored SIGTERM for 60 s; killing it");
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
                Ok(None) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The warm claims of one size: when each was created and bound, and the pool's ready handles.
struct Probes {
    created: Arc<Mutex<HashMap<String, Instant>>>,
    bound: Arc<Mutex<HashMap<String, Instant>>>,
    /// The pool's handles.
    pool: Arc<Mutex<HandleStates>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Probes {
    fn start(env: &TestEnv, kinds: &Kinds) -> Self {
        let created = Arc::new(Mutex::new(HashMap::new()));
        let bound = Arc::new(Mutex::new(HashMap::new()));
        let pool = Arc::new(Mutex::new(HandleStates::default()));
        let client = recording::client(env);
        let claims =
            Api::<ClaimObject>::namespaced_with(client.clone(), &env.namespace, &kinds.claim);
        let handles = Api::<HandleObject>::namespaced_with(client, &env.namespace, &kinds.handle);
        let claim_bound = bound.clone();
        let claims = watches::record_binds(
            claims,
            watcher::Config::default().labels("bench/probe=yes"),
            move |name| {
                lock(&claim_bound).entry(name).or_insert_with(Instant::now);
            },
        );
        let handles = watches::follow_handles(
            handles,
            watcher::Config::default().labels("poolboy.gpte.redhat.com/resource-pool-name=warm"),
            pool.clone(),
        );
        Self {
            created,
            bound,
            pool,
            tasks: vec![tokio::spawn(claims), tokio::spawn(handles)],
        }
    }

    /// Creates warm claim `name`; when it was created.
    async fn create(&self, env: &TestEnv, kinds: &Kinds, name: &str) -> Instant {
        let object = claim(env, name, "warm", true);
        let created = Instant::now();
        lock(&self.created).insert(name.to_owned(), created);
        create(env, &kinds.claim, object).await;
        created
    }

    fn bound(&self, name: &str) -> Instant {
        lock(&self.bound)[name]
    }

    async fn wait_bound(&self, name: &str, broker: &Broker) {
        wait_until(&format!("claim {name} bound"), broker, || {
            lock(&self.bound).contains_key(name)
        })
        .await;
    }

    async fn wait_pool_full(&self, broker: &Broker) {
        wait_until(&format!("{POOL} ready handles in the pool"), broker, || {
            lock(&self.pool).ready_unbound("warm") >= POOL
        })
        .await;
    }

    fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

/// Every change (create, update, delete) of a claim, handle or ConfigMap from the moment
/// [`Writes::start`] returns: raw watches from the current resourceVersion, so nothing is
/// listed.
struct Writes {
    log: Arc<Mutex<WriteLog>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

#[derive(Default)]
struct WriteLog {
    clones: usize,
    others: usize,
    /// The first written clone of each kind, as the write left it.
    first: BTreeMap<String, Value>,
}

#[derive(Clone, Copy)]
struct WriteCounts {
    clones: usize,
    others: usize,
}

impl WriteCounts {
    fn total(self) -> usize {
        self.clones + self.others
    }
}

impl Writes {
    async fn start(env: &TestEnv, kinds: &Kinds) -> Self {
        let log = Arc::new(Mutex::new(WriteLog::default()));
        let mut tasks = Vec::new();
        for resource in [
            kinds.claim.clone(),
            kinds.handle.clone(),
            ApiResource::erase::<ConfigMap>(&()),
        ] {
            let api = dynamic(env, &resource);
            let version = api
                .list_metadata(&ListParams::default().limit(1))
                .await
                .expect("a list for the current resourceVersion")
                .metadata
                .resource_version
                .expect("a list's resourceVersion");
            tasks.push(tokio::spawn(count_writes(
                api,
                resource.kind,
                version,
                log.clone(),
            )));
        }
        Self { log, tasks }
    }

    fn snapshot(&self) -> WriteCounts {
        let log = lock(&self.log);
        WriteCounts {
            clones: log.clones,
            others: log.others,
        }
    }

    /// Prints which fields the broker's write changed in the first written clone of each
    /// kind, and saves the object next to the broker's log.
    fn report_first_clone_writes(&self, broker: &Broker) {
        let log = lock(&self.log);
        for (kind, object) in &log.first {
            let path = broker.log.with_extension(format!("{kind}.json"));
            let text = serde_json::to_string_pretty(object).unwrap_or_default();
            let _ = std::fs::write(&path, text);
            let touched: Vec<String> = object["metadata"]["managedFields"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|entry| entry["manager"] != json!(FIELD_MANAGER))
                .map(|entry| {
                    format!(
                        "{} {}{}: {}",
                        entry["manager"],
                        entry["operation"],
                        entry["subresource"]
                            .as_str()
                            .map(|s| format!(" ({s})"))
                            .unwrap_or_default(),
                        entry["fieldsV1"]
                    )
                })
                .collect();
            println!(
                "start: the broker wrote {kind} {} (saved in {}): {}",
                object["metadata"]["name"],
                path.display(),
                touched.join("; ")
            );
        }
    }

    fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

/// Counts the writes to objects of `api` from resourceVersion `version` on, watching again
/// from the last version seen whenever a watch ends.
async fn count_writes(
    api: Api<DynamicObject>,
    kind: String,
    mut version: String,
    log: Arc<Mutex<WriteLog>>,
) {
    let params = WatchParams::default().timeout(290);
    loop {
        let stream = match api.watch(&params, &version).await {
            Ok(stream) => stream,
            Err(e) => {
                eprintln!("watching {kind} writes: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut stream = std::pin::pin!(stream);
        while let Ok(Some(event)) = stream.try_next().await {
            let object = match event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => o,
                WatchEvent::Bookmark(bookmark) => {
                    version = bookmark.metadata.resource_version;
                    continue;
                }
                WatchEvent::Error(status) => {
                    // 410 Gone: the version was compacted away; what happened in between is
                    // lost, so say so.
                    eprintln!("watching {kind} writes: {status:?}; some writes may be missed");
                    version = api
                        .list_metadata(&ListParams::default().limit(1))
                        .await
                        .ok()
                        .and_then(|l| l.metadata.resource_version)
                        .unwrap_or(version);
                    break;
                }
            };
            if let Some(v) = &object.metadata.resource_version {
                version.clone_from(v);
            }
            let name = object.metadata.name.clone().unwrap_or_default();
            let mut log = lock(&log);
            if is_clone(&kind, &name) {
                log.clones += 1;
                if !log.first.contains_key(&kind) {
                    log.first.insert(kind.clone(), value(object));
                }
            } else {
                log.others += 1;
            }
        }
    }
}

/// Whether object `name` of `kind` is one of the clones (`scale-NNNNNN`, `guid-` and six
/// characters, `guid0-` and six), not the sample, the pool's or a warm claim's.
fn is_clone(kind: &str, name: &str) -> bool {
    match kind {
        "ResourceClaim" => name.starts_with("scale-") && name != SAMPLE,
        "ResourceHandle" => name.strip_prefix("guid-").is_some_and(|g| g.len() == 6),
        _ => name.strip_prefix("guid0-").is_some_and(|g| g.len() == 6),
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

async fn wait_until(what: &str, broker: &Broker, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {TIMEOUT:?}");
        broker.check_alive();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn dynamic(env: &TestEnv, resource: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(env.client.clone(), &env.namespace, resource)
}

fn value(object: DynamicObject) -> Value {
    serde_json::to_value(object).expect("an object as JSON")
}

async fn create(env: &TestEnv, resource: &ApiResource, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
    dynamic(env, resource)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));
}

/// The sum of every sample of `metric` in a Prometheus text exposition.
fn metric_sum(text: &str, metric: &str) -> f64 {
    metrics::samples(text, metric).map(|(_, v)| v).sum()
}

/// "labels value" of every sample of `metric`, on one line.
fn metric_lines(text: &str, metric: &str) -> String {
    metrics::samples(text, metric)
        .map(|(labels, v)| format!("{labels} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Claim `name` of provider `kind`; a probe (a warm claim whose binding is timed) carries the
/// label `bench/probe`.
fn claim(env: &TestEnv, name: &str, kind: &str, probe: bool) -> Value {
    let mut claim = objects::claim(&env.namespace, name, kind);
    if probe {
        claim["metadata"]["labels"] = json!({"bench/probe": "yes"});
    }
    claim
}
