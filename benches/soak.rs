//! `make soak`: the broker over a long run of claims that come and go, against a fresh local
//! control plane, with the release binary as its own process (as the chart runs it). Does its
//! memory follow the live objects, or every object it has ever seen?
//!
//! 1. a pool of [`POOL_SIZE`] ConfigMap handles; once it is full and the broker settled, the
//!    broker's RSS with the pool alone (the baseline);
//! 2. churn for `SOAK_MINUTES` (default 12): claims created at `SOAK_RATE` a second (default 6),
//!    one in five edited once it is bound, each deleted once `SOAK_LIVE` newer ones exist
//!    (default 100); with `SOAK_KILL=1` the broker is killed with SIGKILL half way and started
//!    again. Each minute prints the broker's RSS, its CPU, kube-apiserver's CPU (a wave in both
//!    is the host's) and the binds' p50 and p99;
//! 3. every claim deleted: the time until only the pool's handles and ConfigMaps are left, the
//!    leftovers, the double binds (a handle seen bound to two claims), the broker's CPU per claim
//!    lifecycle, the API requests per lifecycle (the API server's count, the churn's own
//!    included), the broker's passes per lifecycle by kind (its reconcile counters) and its RSS
//!    once settled again, against the baseline;
//! 4. the curves (RSS, CPU, bind latency by minute) as `soak.svg` and `soak.csv` in
//!    `SOAK_OUT` (`make soak`: `soak` in the target directory; default target/soak);
//! 5. the client floor: 200 claim lifecycles like the churn's, one at a time, served by a
//!    minimal kube-rs client with the broker stopped (`support/client_floor.rs`): the CPU per
//!    lifecycle no broker on the same client goes below, and the requests the contract needs;
//!    then again with the writes the broker adds (its two Events a lifecycle, the pool's status
//!    as often as under the churn) and the pool's watch; then both again, coming as the churn's
//!    claims come, for [`FLOOR_CHURN_SECONDS`] each: the client beside the broker under the
//!    same load. For each, and for the broker under the churn, how often it slept and woke, and
//!    was preempted, per lifecycle.
//!
//! A broker built with `--features heap-profile` (`make soak PROFILE=1`) is stopped with
//! SIGTERM at the end and writes its heap profile to `POOLBOY_HEAP_PROFILE`.

#[path = "support/arrivals.rs"]
mod arrivals;
#[allow(dead_code)] // the Lease holder and its kill serve benches/claims.rs
#[path = "support/brokers.rs"]
mod brokers;
#[path = "support/client_floor.rs"]
mod client_floor;
// Only what the client floor serves claims with is used here.
#[allow(dead_code)]
#[path = "support/floor.rs"]
mod floor;
#[path = "support/machine.rs"]
mod machine;
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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use machine::{
    context_switches, control_plane_cpu, load_average, lock, percentile, process_memory_to_the_kib,
};
use objects::{claim, claim_edit, pool, provider};
use plotters::prelude::*;
use poolboy::api::OperatorDomain;
use poolboy::api::kinds::{ClaimObject, HandleObject, Kinds};
use requests::Requests;
use serde_json::Value;
use support::TestEnv;

const POOL_SIZE: usize = 20;
/// The claim lifecycles the client floor serves one at a time (`support/client_floor.rs`).
const FLOOR_CLAIMS: usize = 200;
/// How long the client floor serves claims coming as the churn's come.
const FLOOR_CHURN_SECONDS: f64 = 120.0;
/// The provider and pool every claim binds from.
const KIND: &str = "soak";
/// How long the broker must be quiet (no CPU tick) to count as settled.
const SETTLE: Duration = Duration::from_secs(20);
/// How long the end may take to delete everything.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(600);

/// What the environment asks for.
struct Settings {
    minutes: u64,
    rate: f64,
    live: usize,
    kill: bool,
}

impl Settings {
    fn from_env() -> Self {
        fn var<T: std::str::FromStr>(name: &str, default: T) -> T {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        }
        Self {
            minutes: var("SOAK_MINUTES", 12),
            rate: var("SOAK_RATE", 6.0),
            live: var("SOAK_LIVE", 100),
            kill: var("SOAK_KILL", 0) == 1,
        }
    }
}

/// What the claim watch saw.
#[derive(Default)]
struct Record {
    /// When each claim was created (just before the request).
    created: HashMap<String, Instant>,
    /// Each claim's first handle.
    bound: HashMap<String, String>,
    /// The claim each handle was first seen bound to.
    owner: HashMap<String, String>,
    /// (seconds since the churn began, create → bound seconds) per bind, in the order seen.
    binds: Vec<(f64, f64)>,
    double_binds: Vec<String>,
}

/// The broker's memory in MiB: its RSS, and the anonymous part of it (heap and stacks; RSS
/// also counts the binary's pages as code runs for the first time).
#[derive(Clone, Copy, Debug, Default)]
struct Memory {
    rss: f64,
    heap: f64,
}

/// One of [`Memory`]'s figures.
type MemoryFigure = fn(Memory) -> f64;

/// One of a [`Minute`]'s figures.
type MinuteFigure = fn(&Minute) -> f64;

/// One minute of the churn.
struct Minute {
    minute: u64,
    memory: Memory,
    cpu: f64,
    /// kube-apiserver's CPU in the same minute: a wave in both is the host's, not the broker's.
    apiserver_cpu: f64,
    claims: usize,
    binds: usize,
    p50: f64,
    p99: f64,
}

/// The decimals of each of a [`Minute`]'s figures, in [`Minute::figures`]' order, in the
/// printed table and in the CSV.
const TABLE_DIGITS: [usize; 9] = [0, 1, 1, 2, 2, 0, 0, 0, 0];
const CSV_DIGITS: [usize; 9] = [0, 2, 2, 3, 3, 0, 0, 1, 1];

impl Minute {
    /// Its figures, in the table's and the CSV's column order, each with `digits` decimals.
    fn figures(&self, digits: &[usize; 9]) -> Vec<String> {
        [
            self.minute as f64,
            self.memory.rss,
            self.memory.heap,
            self.cpu,
            self.apiserver_cpu,
            self.claims as f64,
            self.binds as f64,
            self.p50,
            self.p99,
        ]
        .iter()
        .zip(digits)
        .map(|(figure, digits)| format!("{figure:.digits$}"))
        .collect()
    }
}

#[tokio::main]
async fn main() {
    let kinds = Kinds::new(&OperatorDomain::default());
    client_floor::serve_if_asked(&kinds);
    let settings = Settings::from_env();
    let env = TestEnv::new().await;
    let load_before = load_average();
    println!(
        "soak: {} min at {}/s, {} live claims, pool of {POOL_SIZE}{}; load {load_before}",
        settings.minutes,
        settings.rate,
        settings.live,
        if settings.kill {
            ", the broker killed half way"
        } else {
            ""
        }
    );

    let logs = out_dir().join("logs");
    let kubeconfig = support::kubeconfig_path();
    let mut broker = brokers::Brokers::start(1, &env.namespace, &kubeconfig, &logs);
    create(&env, &kinds.provider, provider(&env, KIND)).await;
    create(&env, &kinds.pool, pool(&env, KIND, POOL_SIZE)).await;
    assert!(
        wait_until("the pool is full", || async {
            ready_unbound(&env, &kinds).await == POOL_SIZE
        })
        .await
    );
    settle(&broker).await;
    let baseline = memory(&broker);
    println!(
        "baseline: RSS {:.1} MiB, heap {:.1} MiB with the pool alone",
        baseline.rss, baseline.heap
    );

    let record = Arc::new(Mutex::new(Record::default()));
    let churn_start = Instant::now();
    let watch = tokio::spawn(watch_binds(
        Api::namespaced_with(recording::client(&env), &env.namespace, &kinds.claim),
        record.clone(),
        churn_start,
    ));
    let cpu_start = broker.cpu_seconds();
    let switches_start = switches(&broker);
    let control_plane_start = control_plane_cpu();
    let requests_start = Requests::read(&env.client).await;
    let passes_start = broker.passes().await;
    let (minutes, failures) = churn(&env, &kinds, &settings, &mut broker, &record).await;

    println!();
    println!("deleting the last {} claims", settings.live);
    let drain_start = Instant::now();
    let claims: Api<DynamicObject> = api(&env, &kinds.claim);
    let _ = claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let drained = wait_until("only the pool is left", || async {
        leftovers(&env, &kinds).await == [0, 0, 0]
    })
    .await;
    let drain_time = drain_start.elapsed().as_secs_f64();
    let cpu = broker.cpu_seconds() - cpu_start;
    let broker_switches = switches(&broker);
    let requests = Requests::read(&env.client).await.since(&requests_start);
    let passes = broker.passes().await;
    let lifecycles = lock(&record).created.len().max(1) as f64;
    let per_lifecycle = |seconds: f64| seconds * 1000.0 / lifecycles;
    let broker_per_claim = per_lifecycle(cpu);
    let [apiserver, etcd] = control_plane_cpu();
    let control_plane = [
        apiserver - control_plane_start[0],
        etcd - control_plane_start[1],
    ];
    settle(&broker).await;
    let after = memory(&broker);
    watch.abort();
    let [claims_left, handles_left, configmaps_left] = leftovers(&env, &kinds).await;

    {
        let record = lock(&record);
        let created = record.created.len();
        let all: Vec<f64> = sorted(record.binds.iter().map(|(_, latency)| *latency));
        println!();
        println!("load before: {load_before}; after: {}", load_average());
        print_minutes(&minutes);
        println!();
        println!(
            "claims created {created}, bound {}, failed requests {failures}; bind p50 {:.0} ms, p99 \
             {:.0} ms",
            record.binds.len(),
            percentile(&all, 0.5) * 1000.0,
            percentile(&all, 0.99) * 1000.0,
        );
        println!(
            "{} in {drain_time:.1} s; leftovers: {claims_left} claims, {handles_left} handles, \
             {configmaps_left} ConfigMaps; double binds: {}",
            if drained { "drained" } else { "NOT drained" },
            record.double_binds.len()
        );
        for double in &record.double_binds {
            println!("  double bind: {double}");
        }
        println!(
            "CPU per claim lifecycle: broker {:.1} ms ({cpu:.1} s for {created} claims), \
             kube-apiserver {:.1} ms, etcd {:.1} ms",
            broker_per_claim,
            per_lifecycle(control_plane[0]),
            per_lifecycle(control_plane[1]),
        );
        println!(
            "API requests per claim lifecycle (the churn's own included): {:.1} ({})",
            requests.total() / lifecycles,
            requests.per(lifecycles)
        );
        println!(
            "broker passes per claim lifecycle: {}",
            passes.since(&passes_start, lifecycles)
        );
        // A killed broker's threads take their counts with them.
        if !settings.kill {
            let per = |i: usize| broker_switches[i].saturating_sub(switches_start[i]) as f64;
            println!(
                "broker context switches per claim lifecycle: {}",
                wakes([per(0) / lifecycles, per(1) / lifecycles], broker_per_claim)
            );
        }
        // The reference: minute 10, or the last of a shorter run.
        let reference = minutes.get(minutes.len().min(10).wrapping_sub(1));
        let (reference_minute, at_reference) =
            reference.map_or((0, Memory::default()), |m| (m.minute, m.memory));
        let at_end = minutes.last().map_or(Memory::default(), |m| m.memory);
        let fields: [(&str, MemoryFigure); 2] = [("RSS", |m| m.rss), ("heap", |m| m.heap)];
        for (what, of) in fields {
            println!(
                "{what}: baseline {:.1} MiB, minute {reference_minute} {:.1} MiB, end {:.1} MiB \
                 ({:+.1} %), after everything was deleted {:.1} MiB ({:+.1} % of the baseline)",
                of(baseline),
                of(at_reference),
                of(at_end),
                change(of(at_end), of(at_reference)),
                of(after),
                change(of(after), of(baseline)),
            );
        }
    }

    let out = out_dir();
    write_csv(&out.join("soak.csv"), &minutes);
    let svg = out.join("soak.svg");
    match draw(&svg, &minutes, baseline, after, &settings) {
        Ok(()) => println!("curves: {}", svg.display()),
        Err(e) => println!("curves not drawn: {e}"),
    }
    broker.stop(Duration::from_secs(120));
    if let Some(profile) = std::env::var_os("POOLBOY_HEAP_PROFILE") {
        println!("heap profile: {}", PathBuf::from(profile).display());
    }

    let whole = client_floor::Serving {
        edit_every: Some(5),
        ..client_floor::Serving::default()
    };
    let requests_start = Requests::read(&env.client).await;
    let floor = client_floor::measure(&env, &kinds, FLOOR_CLAIMS, whole).await;
    let floor_requests = Requests::read(&env.client).await.since(&requests_start);
    println!(
        "client floor: {FLOOR_CLAIMS} claim lifecycles one at a time (a warm bind with its \
         refill, one in five edited, the deletion), no broker running: CPU {:.1} ms each (the \
         broker's {broker_per_claim:.1} ms under the churn), bind p50 {:.0} ms",
        floor.cpu_per_claim, floor.p50
    );
    println!(
        "client floor's API requests per claim lifecycle: {:.1} ({})",
        floor_requests.total() / FLOOR_CLAIMS as f64,
        floor_requests.per(FLOOR_CLAIMS as f64)
    );
    // The broker's two Events a lifecycle, and its pool status as often as under the churn.
    let with_additions = client_floor::Serving {
        broker_additions: Some(client_floor::Additions {
            pool_status_every: 5,
        }),
        ..whole
    };
    let requests_start = Requests::read(&env.client).await;
    let added = client_floor::measure(&env, &kinds, FLOOR_CLAIMS, with_additions).await;
    let added_requests = Requests::read(&env.client).await.since(&requests_start);
    println!(
        "client floor with the broker's additions (its Bound and ClaimDeleted Events, the \
         pool's status on one bind in five, the pool's watch): CPU {:.1} ms a lifecycle (the \
         broker's {broker_per_claim:.1} ms), {:.1} API requests, bind p50 {:.0} ms",
        added.cpu_per_claim,
        added_requests.total() / FLOOR_CLAIMS as f64,
        added.p50
    );
    for (what, measured) in [("", &floor), (" with the broker's additions", &added)] {
        println!(
            "client floor{what}, context switches per lifecycle: {}",
            wakes(measured.switches_per_claim, measured.cpu_per_claim)
        );
    }
    // The same client and requests, beside the broker's figures under the same load.
    let churned = (settings.rate * FLOOR_CHURN_SECONDS).round() as usize;
    let churn = client_floor::Churn {
        rate: settings.rate,
        live: settings.live.min(churned),
    };
    for (what, serving) in [
        ("", whole),
        (" with the broker's additions", with_additions),
    ] {
        let load = load_average();
        let requests_start = Requests::read(&env.client).await;
        let control_plane_start = control_plane_cpu();
        let measured = client_floor::measure_churn(&env, &kinds, churned, churn, serving).await;
        let control_plane = control_plane_cpu();
        let requests = Requests::read(&env.client).await.since(&requests_start);
        let per_claim = |seconds: f64| seconds * 1000.0 / churned as f64;
        println!(
            "client floor{what}, under the churn ({churned} claims at {}/s, {} live; load \
             {load}): CPU {:.1} ms a lifecycle (the broker's {broker_per_claim:.1} ms), {:.1} \
             API requests, bind p50 {:.0} ms, p99 {:.0} ms; kube-apiserver {:.1} ms, etcd {:.1} \
             ms a lifecycle; context switches: {}",
            churn.rate,
            churn.live,
            measured.cpu_per_claim,
            requests.total() / churned as f64,
            measured.p50,
            measured.p99,
            per_claim(control_plane[0] - control_plane_start[0]),
            per_claim(control_plane[1] - control_plane_start[1]),
            wakes(measured.switches_per_claim, measured.cpu_per_claim)
        );
    }
    env.cleanup().await;
}

/// The churn, minute by minute; the number of requests that failed.
async fn churn(
    env: &TestEnv,
    kinds: &Kinds,
    settings: &Settings,
    broker: &mut brokers::Brokers,
    record: &Arc<Mutex<Record>>,
) -> (Vec<Minute>, usize) {
    let total = (settings.minutes as f64 * 60.0 * settings.rate).round() as usize;
    let schedule = client_floor::Churn {
        rate: settings.rate,
        live: settings.live,
    };
    let failures = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / settings.rate));
    let start = Instant::now();
    let mut minutes = Vec::new();
    let mut cpu_before = broker.cpu_seconds();
    let [mut apiserver_before, _] = control_plane_cpu();
    let mut created_before = 0;
    let mut binds_before = 0;
    let mut killed = !settings.kill;
    let mut in_flight = tokio::task::JoinSet::new();
    print_header();
    for i in 0..total {
        ticker.tick().await;
        let (new, edited, deleted) = schedule.at(i);
        let requests = [
            Some(Request::Create(new)),
            edited.map(Request::Edit),
            deleted.map(Request::Delete),
        ];
        for request in requests.into_iter().flatten() {
            if let Request::Create(i) = request {
                lock(record).created.insert(claim_name(i), Instant::now());
            }
            let (client, namespace, kinds) =
                (env.client.clone(), env.namespace.clone(), kinds.clone());
            let failures = failures.clone();
            in_flight.spawn(async move {
                if let Err(e) = request.send(client, &namespace, &kinds).await {
                    eprintln!("{request:?}: {e}");
                    failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
        while in_flight.try_join_next().is_some() {}
        if !killed && i >= total / 2 {
            killed = true;
            println!(
                "(minute {}: the broker killed with SIGKILL and started again)",
                start.elapsed().as_secs() / 60
            );
            broker
                .kill_and_restart(
                    &env.namespace,
                    &support::kubeconfig_path(),
                    &out_dir().join("logs"),
                )
                .await;
        }
        let minute = start.elapsed().as_secs() / 60;
        if minute > minutes.len() as u64 || i + 1 == total {
            let cpu = broker.cpu_seconds();
            let [apiserver, _] = control_plane_cpu();
            let record = lock(record);
            let latencies = sorted(record.binds[binds_before..].iter().map(|(_, l)| *l));
            let row = Minute {
                minute: minutes.len() as u64 + 1,
                memory: memory(broker),
                cpu: cpu - cpu_before,
                apiserver_cpu: apiserver - apiserver_before,
                claims: record.created.len() - created_before,
                binds: latencies.len(),
                p50: percentile(&latencies, 0.5) * 1000.0,
                p99: percentile(&latencies, 0.99) * 1000.0,
            };
            print_minute(&row);
            (cpu_before, apiserver_before, created_before, binds_before) =
                (cpu, apiserver, record.created.len(), record.binds.len());
            minutes.push(row);
        }
    }
    // Every request lands before the caller deletes all claims: a create still in flight
    // would make a claim that deletion does not list, and the drain would wait for it.
    while in_flight.join_next().await.is_some() {}
    (minutes, failures.load(std::sync::atomic::Ordering::Relaxed))
}

/// One request of the churn, on claim number `n`.
#[derive(Clone, Copy, Debug)]
enum Request {
    Create(usize),
    Edit(usize),
    Delete(usize),
}

impl Request {
    async fn send(
        self,
        client: kube::Client,
        namespace: &str,
        kinds: &Kinds,
    ) -> Result<(), kube::Error> {
        let claims = Api::<DynamicObject>::namespaced_with(client, namespace, &kinds.claim);
        match self {
            Self::Create(n) => {
                let object: DynamicObject =
                    serde_json::from_value(claim(namespace, &claim_name(n), KIND))
                        .map_err(kube::Error::SerdeError)?;
                claims.create(&PostParams::default(), &object).await?;
            }
            Self::Edit(n) => {
                claims
                    .patch(
                        &claim_name(n),
                        &PatchParams::default(),
                        &Patch::<()>::Json(claim_edit()),
                    )
                    .await?;
            }
            Self::Delete(n) => {
                match claims
                    .delete(&claim_name(n), &DeleteParams::default())
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

fn claim_name(n: usize) -> String {
    format!("soak-{n:06}")
}

/// Records each claim's first bind, and every handle bound to a second claim while the first
/// exists (a handle's name may come back once it is gone: names are drawn at random).
async fn watch_binds(claims: Api<ClaimObject>, record: Arc<Mutex<Record>>, start: Instant) {
    watcher(claims, watcher::Config::default())
        .backoff(recording::Promptly)
        .for_each(|event| {
            recording::report("claims", &event);
            match event {
                Ok(watcher::Event::Apply(claim) | watcher::Event::InitApply(claim)) => {
                    bound(&mut lock(&record), &claim, start);
                }
                Ok(watcher::Event::Delete(claim)) => {
                    let mut record = lock(&record);
                    let name = claim.metadata.name.unwrap_or_default();
                    if let Some(handle) = record.bound.get(&name).cloned()
                        && record.owner.get(&handle) == Some(&name)
                    {
                        record.owner.remove(&handle);
                    }
                }
                _ => {}
            }
            async {}
        })
        .await;
}

/// Notes `claim`'s first bind, if its status shows one.
fn bound(record: &mut Record, claim: &ClaimObject, start: Instant) {
    let handle = claim
        .status
        .as_ref()
        .and_then(|s| s.resource_handle.as_ref());
    let (Some(name), Some(handle)) = (&claim.metadata.name, handle.map(|h| h.name.clone())) else {
        return;
    };
    if record.bound.contains_key(name) {
        return;
    }
    let now = Instant::now();
    if let Some(created) = record.created.get(name) {
        let latency = now.duration_since(*created).as_secs_f64();
        record
            .binds
            .push((now.duration_since(start).as_secs_f64(), latency));
    }
    record.bound.insert(name.clone(), handle.clone());
    match record.owner.get(&handle) {
        Some(owner) if owner != name => {
            let double = format!("{handle}: {owner} and {name}");
            record.double_binds.push(double);
        }
        Some(_) => {}
        None => {
            record.owner.insert(handle, name.clone());
        }
    }
}

/// Claims, handles that are not the pool's unbound ones, and ConfigMaps beyond those handles'.
async fn leftovers(env: &TestEnv, kinds: &Kinds) -> [usize; 3] {
    let list = ListParams::default();
    let claims = api::<DynamicObject>(env, &kinds.claim)
        .list_metadata(&list)
        .await
        .map_or(usize::MAX, |l| l.items.len());
    let handles = api::<HandleObject>(env, &kinds.handle)
        .list(&list)
        .await
        // The pool keeps its POOL_SIZE unbound handles: any other is left over.
        .map_or(usize::MAX, |l| l.items.len().saturating_sub(POOL_SIZE));
    let configmaps = env
        .api::<ConfigMap>()
        .list_metadata(&ListParams::default().labels(&format!("bench/kind={KIND}")))
        .await
        .map_or(usize::MAX, |l| l.items.len().saturating_sub(POOL_SIZE));
    [claims, handles, configmaps]
}

/// The pool's ready unbound handles.
async fn ready_unbound(env: &TestEnv, kinds: &Kinds) -> usize {
    api::<HandleObject>(env, &kinds.handle)
        .list(&ListParams::default())
        .await
        .map_or(0, |l| {
            l.items
                .iter()
                .filter(|h| {
                    h.spec.resource_claim.is_none()
                        && h.status.as_ref().and_then(|s| s.ready) == Some(true)
                })
                .count()
        })
}

/// Waits until the broker has spent no CPU for [`SETTLE`] (its periodic looks aside: a tick
/// or two of CPU in a window counts as quiet).
async fn settle(broker: &brokers::Brokers) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let before = broker.cpu_seconds();
        tokio::time::sleep(SETTLE).await;
        if broker.cpu_seconds() - before <= 0.05 || Instant::now() > deadline {
            return;
        }
    }
}

/// Whether `done` held within [`DRAIN_TIMEOUT`].
async fn wait_until<F, Fut>(what: &str, done: F) -> bool
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while !done().await {
        if Instant::now() > deadline {
            println!("{what}: not within {DRAIN_TIMEOUT:?}");
            return false;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    true
}

/// The broker's memory.
fn memory(broker: &brokers::Brokers) -> Memory {
    let pids: Vec<String> = broker.pids().iter().map(u32::to_string).collect();
    let each: Vec<(f64, f64)> = pids
        .iter()
        .map(|pid| process_memory_to_the_kib(pid))
        .collect();
    Memory {
        rss: each.iter().map(|(rss, _)| rss).sum(),
        heap: each.iter().map(|(_, heap)| heap).sum(),
    }
}

/// The context switches of the broker's processes so far ([`context_switches`]).
fn switches(broker: &brokers::Brokers) -> [u64; 2] {
    broker
        .pids()
        .iter()
        .map(|pid| context_switches(&pid.to_string()))
        .fold([0, 0], |sum, each| [sum[0] + each[0], sum[1] + each[1]])
}

/// `switches` per lifecycle (voluntary, involuntary) and the CPU each sleep and wake comes with,
/// for a process that spent `cpu_ms` a lifecycle.
fn wakes(switches: [f64; 2], cpu_ms: f64) -> String {
    format!(
        "{:.1} voluntary (sleep and wake), {:.1} involuntary (preempted); {:.0} µs of CPU a wake",
        switches[0],
        switches[1],
        cpu_ms * 1000.0 / switches[0].max(1.0)
    )
}

fn sorted(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values
}

fn change(now: f64, then: f64) -> f64 {
    (now - then) * 100.0 / then.max(1.0)
}

fn print_minutes(minutes: &[Minute]) {
    print_header();
    minutes.iter().for_each(print_minute);
}

fn print_header() {
    println!(
        "| minute | RSS (MiB) | heap (MiB) | CPU (s) | kube-apiserver CPU (s) | claims | binds | bind p50 (ms) | p99 (ms) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
}

fn print_minute(m: &Minute) {
    println!("| {} |", m.figures(&TABLE_DIGITS).join(" | "));
}

fn out_dir() -> PathBuf {
    let dir = std::env::var_os("SOAK_OUT").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/soak"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&dir).expect("the soak's output directory");
    dir
}

fn write_csv(path: &Path, minutes: &[Minute]) {
    let mut text = String::from(
        "minute,rss_mib,heap_mib,cpu_s,apiserver_cpu_s,claims,binds,bind_p50_ms,bind_p99_ms\n",
    );
    for m in minutes {
        text.push_str(&m.figures(&CSV_DIGITS).join(","));
        text.push('\n');
    }
    std::fs::write(path, text).expect("writing the soak's CSV");
}

/// Three charts, one above the other: memory, CPU per claim, bind latency, by minute.
fn draw(
    path: &Path,
    minutes: &[Minute],
    baseline: Memory,
    after: Memory,
    settings: &Settings,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!(
            "poolboy soak: {} min at {}/s, {} live claims, pool of {POOL_SIZE}",
            settings.minutes, settings.rate, settings.live
        ),
        ("sans-serif", 20),
    )?;
    let panels = root.split_evenly((3, 1));
    let last = minutes.last().map_or(1, |m| m.minute).max(1);
    let top = |values: &mut dyn Iterator<Item = f64>| values.fold(1.0_f64, f64::max) * 1.2;

    let memory_top = top(&mut minutes
        .iter()
        .map(|m| m.memory.rss)
        .chain([baseline.rss, after.rss]));
    let mut chart = panel(&panels[0], "broker memory (MiB)", last, memory_top)?;
    let fields: [(&str, MemoryFigure, RGBColor); 2] = [
        ("RSS", |m| m.rss, BLUE),
        ("heap (RssAnon)", |m| m.heap, MAGENTA),
    ];
    for (name, of, color) in fields {
        let points = minutes.iter().map(|m| (m.minute, of(m.memory)));
        line(&mut chart, points, color, name.to_owned())?;
    }
    for (memory, label, color) in [
        (baseline, "fresh, pool alone", GREEN),
        (after, "after deleting everything", RED),
    ] {
        let label = format!(
            "{label}: RSS {:.1} MiB, heap {:.1} MiB",
            memory.rss, memory.heap
        );
        line(
            &mut chart,
            [(0, memory.rss), (last, memory.rss)],
            color,
            label,
        )?;
        chart.draw_series(LineSeries::new(
            [(0, memory.heap), (last, memory.heap)],
            color,
        ))?;
    }
    legend(&mut chart)?;

    let per_claim = |m: &Minute| m.cpu * 1000.0 / (m.claims.max(1) as f64);
    let cpu_top = top(&mut minutes.iter().map(per_claim));
    let mut chart = panel(
        &panels[1],
        "broker CPU per claim created (ms)",
        last,
        cpu_top,
    )?;
    chart.draw_series(LineSeries::new(
        minutes.iter().map(|m| (m.minute, per_claim(m))),
        &BLACK,
    ))?;

    let latency_top = top(&mut minutes.iter().map(|m| m.p99).filter(|v| v.is_finite()));
    let caption = "bind latency, created → bound (ms)";
    let mut chart = panel(&panels[2], caption, last, latency_top)?;
    let quantiles: [(&str, MinuteFigure, RGBColor); 2] =
        [("p50", |m| m.p50, BLUE), ("p99", |m| m.p99, RED)];
    for (name, of, color) in quantiles {
        let points = minutes
            .iter()
            .map(|m| (m.minute, of(m)))
            .filter(|(_, v)| v.is_finite());
        line(&mut chart, points, color, name.to_owned())?;
    }
    legend(&mut chart)?;
    root.present()?;
    Ok(())
}

/// A chart of the soak: minutes across, 0 to `top` up.
type Panel<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordu64, plotters::coord::types::RangedCoordf64>,
>;

fn panel<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    caption: &str,
    last: u64,
    top: f64,
) -> Result<Panel<'a, 'b>, Box<dyn std::error::Error>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0..last, 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("minute")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    Ok(chart)
}

/// A labelled line of `points`.
fn line(
    chart: &mut Panel<'_, '_>,
    points: impl IntoIterator<Item = (u64, f64)>,
    color: RGBColor,
    label: String,
) -> Result<(), Box<dyn std::error::Error>> {
    chart
        .draw_series(LineSeries::new(points, color))?
        .label(label)
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color));
    Ok(())
}

fn legend<'a, 'b: 'a>(chart: &mut Panel<'a, 'b>) -> Result<(), Box<dyn std::error::Error>> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    Ok(())
}

fn api<K>(env: &TestEnv, resource: &kube::core::ApiResource) -> Api<K>
where
    K: kube::Resource<
            DynamicType = kube::core::ApiResource,
            Scope = kube::core::DynamicResourceScope,
        >,
{
    Api::namespaced_with(env.client.clone(), &env.namespace, resource)
}

async fn create(env: &TestEnv, resource: &kube::core::ApiResource, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
    api::<DynamicObject>(env, resource)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));
}
