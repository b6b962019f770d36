//! `make bench`: how fast claims are served, against the local control plane, with the whole
//! operator running in this process (release build), measured against what the same API server
//! can do at all. In order, on one API server:
//!
//! 1. ceiling: 1,000 ConfigMaps created by 8 clients at once (the broker's reconciles of one
//!    kind run 8 at once): the raw write rate every other figure is a ratio to;
//! 2. floor: the warm and cold bursts and the sustained arrivals below, made of only the writes
//!    a bind cannot do without, by this process with no broker (`support/floor.rs`): no
//!    broker does better on this API server; then the bursts again with what any broker adds
//!    on the API server beyond those writes (its own watches of claims, handles and ConfigMaps,
//!    a `Bound` Event a bind, and on a cold bind the new handle's status): the share of the
//!    gap that is the broker's own writes and CPU;
//! 3. pool fill: a pool of 1,000 from empty, until every handle is ready;
//! 4. burst, warm: 1,000 claims created at once against those 1,000 ready handles;
//! 5. burst, cold: 1,000 claims no pool serves (a handle and a ConfigMap made for each);
//! 6. sustained: claims arriving at 50/s (Poisson) for 60 s against a pool kept full; then
//!    ("holds") the highest such rate held for 60 s with bind p99 at most 1 s, searched in a
//!    few runs, for the floor and for the broker side by side;
//! 7. quiet: then a minute with every claim bound: the writes to claims, handles and ConfigMaps
//!    (none of their templates reads the clock), and the CPU time of this process;
//! 8. replicas: the warm burst with 2 broker processes, then with the Lease holder killed.
//!
//! Instants come from watches: claim created → bound (its status names a handle) and → its
//! ConfigMap exists. Each phase prints the API requests the API server counted (its own
//! `apiserver_request_total`, per claim, by verb and resource) and the CPU time spent by this
//! process, kube-apiserver and etcd: on a small machine the CPU is where a burst's limit is.

#[path = "support/arrivals.rs"]
mod arrivals;
#[path = "support/brokers.rs"]
mod brokers;
#[path = "support/floor.rs"]
mod floor;
#[path = "support/machine.rs"]
mod machine;
#[allow(dead_code)] // this bench prints no passes (`since`)
#[path = "support/metrics.rs"]
mod metrics;
#[path = "support/objects.rs"]
mod objects;
#[path = "support/recording.rs"]
mod recording;
#[path = "support/requests.rs"]
mod requests;
#[path = "support/search.rs"]
mod search;
#[path = "../tests/support/mod.rs"]
mod support;
#[path = "support/watches.rs"]
mod watches;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use machine::{
    control_plane_cpu, load_average, lock, percentile, process_cpu_seconds, process_memory,
};
use objects::{claim, pool, provider};
use poolboy::api::OperatorDomain;
use poolboy::api::kinds::{ClaimObject, HandleObject, Kinds};
use poolboy::runtime::client::with_read_timeout;
use requests::Requests;
use serde_json::{Value, json};
use support::TestEnv;
use support::operator::TestOperator;
use watches::HandleStates;

/// The in-process broker runs on the allocator `poolboy run` uses.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Claims of each burst, handles of the pool fill, ConfigMaps of the ceiling.
const BURST: usize = 1000;
/// Clients creating at once: the broker's reconciles of one kind run 8 at once.
const CEILING_CLIENTS: usize = 8;
/// Claims created at once in a burst.
const PARALLEL_CREATES: usize = 50;
const SUSTAINED_RATE: f64 = 50.0;
const SUSTAINED_WINDOW: Duration = Duration::from_secs(60);
/// Ready handles of the pool the sustained arrivals bind.
const SUSTAINED_POOL: usize = 200;
/// A rate is held when its binds' p99 stays within this many milliseconds.
const HELD_P99_MS: f64 = 1000.0;
/// The scenarios' prefix of the floor's rows.
const FLOOR: &str = "floor, no broker";
/// The prefix of the floor's rows with a broker's watches and writes added
/// (`floor::Floor::with_broker_writes`).
const FLOOR_WATCHED: &str = "floor with a broker's watches and writes";
/// The floor's names of the bursts with a broker's watches and writes.
const WATCHED_WARM: &str = "watched-warm";
const WATCHED_COLD: &str = "watched-cold";
/// The share of the floor's burst rate the broker is held to.
const BURST_SHARE_OF_FLOOR: f64 = 0.8;
/// The floor's search for the highest rate held starts at this share of its warm burst's
/// rate: a sustained bind with its refill takes 8 writes to the burst's 5.
const FLOOR_FIRST_GUESS: f64 = 0.5;
/// The broker's search starts at this share of the floor's highest rate held: its target.
const BROKER_FIRST_GUESS: f64 = 0.8;
const TIMEOUT: Duration = Duration::from_secs(900);
const QUIET_WINDOW: Duration = Duration::from_secs(60);
/// A burst is over once the API server counted no request for this long (the control plane's
/// own leases renew every 2 s).
const SETTLED_AFTER: Duration = Duration::from_secs(1);
const SETTLE_AT_MOST: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Instants {
    created: HashMap<String, Instant>,
    bound: HashMap<String, Instant>,
    resource: HashMap<String, Instant>,
}

/// What one phase cost: wall time, requests and CPU.
struct Phase {
    started: Instant,
    requests: Requests,
    cpu: [f64; 3],
}

/// What a phase spent, per claim (or handle, or ConfigMap).
struct Spent {
    requests_each: f64,
    /// CPU milliseconds kube-apiserver and etcd spent on each.
    control_plane_ms_each: f64,
    /// The share of the machine's CPU time that this process, kube-apiserver and etcd used.
    busy: f64,
}

impl Phase {
    async fn start(env: &TestEnv) -> Self {
        Self {
            started: Instant::now(),
            requests: Requests::read(&env.client).await,
            cpu: cpu_split(),
        }
    }

    /// Waits until the API server has counted no new request for [`SETTLED_AFTER`] (at most
    /// [`SETTLE_AT_MOST`]): what a burst caused after its last bind (the Events a broker
    /// publishes in the background) counts with it, in its requests and CPU.
    async fn settle(&self, env: &TestEnv) {
        let deadline = Instant::now() + SETTLE_AT_MOST;
        let mut counted = Requests::read(&env.client).await.total();
        let mut quiet_since = Instant::now();
        while Instant::now() < deadline && quiet_since.elapsed() < SETTLED_AFTER {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = Requests::read(&env.client).await.total();
            if now != counted {
                (counted, quiet_since) = (now, Instant::now());
            }
        }
    }

    /// Prints the requests per `per` (each claim, handle or ConfigMap) and the CPU seconds;
    /// `elsewhere` is CPU spent by broker processes of their own.
    async fn report(&self, env: &TestEnv, name: &str, per: usize, elsewhere: f64) -> Spent {
        let cpu = cpu_split();
        let wall = self.started.elapsed().as_secs_f64();
        let spent = Requests::read(&env.client).await.since(&self.requests);
        let [this, apiserver, etcd] = [0, 1, 2].map(|i| cpu[i] - self.cpu[i]);
        let extra = match elsewhere > 0.0 {
            true => format!(", broker processes {elsewhere:.1}"),
            false => String::new(),
        };
        println!(
            "{name}: {wall:.1} s; CPU seconds: this process {this:.1}{extra}, kube-apiserver \
             {apiserver:.1}, etcd {etcd:.1}"
        );
        println!(
            "{name}: {:.1} API requests each ({})",
            spent.total() / per as f64,
            spent.per(per as f64)
        );
        Spent {
            requests_each: spent.total() / per as f64,
            control_plane_ms_each: (apiserver + etcd) * 1000.0 / per as f64,
            busy: (this + elsewhere + apiserver + etcd) / (wall * cores()),
        }
    }
}

struct Row {
    scenario: String,
    count: usize,
    rate: f64,
    p50: Option<f64>,
    p99: Option<f64>,
    spent: Option<Spent>,
}

impl Row {
    fn new(scenario: String, count: usize, rate: f64, spent: Spent) -> Self {
        Self {
            scenario,
            count,
            rate,
            p50: None,
            p99: None,
            spent: Some(spent),
        }
    }

    fn latencies(mut self, sorted: &[f64]) -> Self {
        self.p50 = Some(percentile(sorted, 0.50));
        self.p99 = Some(percentile(sorted, 0.99));
        self
    }
}

/// The scenarios `POOLBOY_BENCH_SCENARIOS` (a comma list) names; all when it is unset. The
/// warm burst binds the pool the fill makes, so it needs "fill".
fn wanted(scenario: &str) -> bool {
    std::env::var("POOLBOY_BENCH_SCENARIOS")
        .map_or(true, |list| list.split(',').any(|s| s.trim() == scenario))
}

#[tokio::main]
async fn main() {
    let env = TestEnv::new().await;
    let kinds = Kinds::new(&OperatorDomain::default());
    let instants = Arc::new(Mutex::new(Instants::default()));
    let handles = Arc::new(Mutex::new(HandleStates::default()));
    let watches = tokio::spawn(record(
        recording::client(&env),
        env.namespace.clone(),
        instants.clone(),
        handles.clone(),
    ));
    let bench = Bench {
        env: &env,
        kinds: &kinds,
        instants: &instants,
        handles: &handles,
    };
    let mut rows = Vec::new();
    println!("load before: {}; {} cores", load_average(), cores());

    // 1. The ceilings, before the broker starts: ConfigMaps (what every figure is a ratio to)
    // and the claims' own kind (a custom resource: JSON, with its schema validated).
    let phase = Phase::start(&env).await;
    let ceiling = create_configmaps(&env, BURST).await;
    let spent = phase.report(&env, "ceiling", BURST, 0.0).await;
    delete_configmaps(&env).await;
    rows.push(Row::new(
        format!("ceiling: ConfigMap creates, {CEILING_CLIENTS} clients"),
        BURST,
        ceiling,
        spent,
    ));
    let phase = Phase::start(&env).await;
    let claim_ceiling = bench.create_bare_claims(BURST).await;
    let spent = phase.report(&env, "claim ceiling", BURST, 0.0).await;
    bench.delete_bare_claims().await;
    rows.push(Row::new(
        format!("ceiling: ResourceClaim creates, {CEILING_CLIENTS} clients, no broker"),
        BURST,
        claim_ceiling,
        spent,
    ));

    // 2. The floor: what a bind cannot do without, with no broker, each scenario's bound.
    if wanted("floor") {
        rows.extend(bench.floor().await);
    }
    let floor_held = match wanted("holds") {
        true => {
            let warm = rows
                .iter()
                .find(|r| r.scenario == format!("{FLOOR}: burst, warm"));
            let start = warm.map_or(SUSTAINED_RATE, |r| r.rate * FLOOR_FIRST_GUESS);
            Some(bench.floor_holds(start).await)
        }
        false => None,
    };

    // The broker reads the API server as `poolboy run` does, not with the tests' shorter
    // timeout, which would cut its watches that stay silent through a burst.
    let operator = TestOperator::start(with_read_timeout(env.kube_config()), &env.namespace);
    for name in ["warm", "cold", "steady", "replicas"] {
        create(&env, &kinds.provider, provider(&env, name)).await;
    }

    // 3. Pool fill.
    if wanted("fill") {
        rows.push(bench.fill("warm", "pool fill: ready handles", None).await);
    }

    // 4 and 5. Bursts.
    let mut warm_requests = None;
    for scenario in ["warm", "cold"] {
        if !wanted(scenario) {
            continue;
        }
        let row = bench
            .burst(
                scenario,
                scenario,
                &format!("burst, {scenario}"),
                None,
                false,
            )
            .await;
        if scenario == "warm" {
            warm_requests = row.spent.as_ref().map(|s| s.requests_each);
        }
        rows.push(row);
    }

    // 6. Sustained arrivals against a pool kept full, and the highest rate held.
    if wanted("sustained") {
        rows.push(bench.sustained().await);
    }
    let broker_held = match floor_held {
        Some(floor) => {
            let target = if floor > 0.0 { floor } else { SUSTAINED_RATE };
            Some(bench.broker_holds(target * BROKER_FIRST_GUESS).await)
        }
        None => None,
    };

    print_table(&rows, ceiling);
    print_targets(&rows, ceiling);
    if let (Some(floor), Some(broker)) = (floor_held, broker_held) {
        println!(
            "target: sustained, the highest rate held for {:.0} s with bind p99 at most \
             {HELD_P99_MS:.0} ms: at least 80 % of the floor's; the broker {broker:.1}/s, the \
             floor {floor:.1}/s ({:.0} %)",
            SUSTAINED_WINDOW.as_secs_f64(),
            broker / floor * 100.0,
        );
    }

    // 7. Quiet.
    if wanted("quiet") {
        bench.quiet().await;
    }
    operator.stop().await;

    // 8. Replicas: the same burst with 2 broker processes, then with the holder killed.
    if wanted("replicas") {
        let replica_rows = bench.replicas(warm_requests).await;
        rows.extend(replica_rows);
        print_table(&rows, ceiling);
    }

    watches.abort();
    env.cleanup().await;
}

fn print_table(rows: &[Row], ceiling: f64) {
    println!();
    println!("load now: {}", load_average());
    println!(
        "| scenario | count | per second | ratio to the ceiling | bound p50 | bound p99 | API \
         requests each | kube-apiserver + etcd CPU each | the rate that CPU allows on {} cores \
         | CPU busy |",
        cores()
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let ms = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.0} ms"));
    for row in rows {
        let (requests, control, allows, busy) = match &row.spent {
            Some(s) => (
                format!("{:.1}", s.requests_each),
                format!("{:.1} ms", s.control_plane_ms_each),
                format!("{:.0}/s", cores() * 1000.0 / s.control_plane_ms_each),
                format!("{:.0} %", s.busy * 100.0),
            ),
            None => Default::default(),
        };
        println!(
            "| {} | {} | {:.1} | {:.2} | {} | {} | {requests} | {control} | {allows} | {busy} |",
            row.scenario,
            row.count,
            row.rate,
            row.rate / ceiling,
            ms(row.p50),
            ms(row.p99),
        );
    }
}

/// The burst and sustained targets the broker is held to, each beside what the broker and the
/// floor reached (the floor: the most any broker can reach on this API server).
fn print_targets(rows: &[Row], ceiling: f64) {
    let find = |scenario: &str| rows.iter().find(|r| r.scenario == scenario);
    let ratio = |scenario: &str| {
        find(scenario).map_or("not run".to_owned(), |r| format!("{:.2}", r.rate / ceiling))
    };
    let latency = |scenario: &str| {
        find(scenario)
            .and_then(|r| Some(format!("p50 {:.0} ms / p99 {:.0} ms", r.p50?, r.p99?)))
            .unwrap_or_else(|| "not run".to_owned())
    };
    println!();
    for (target, at_least) in [("warm", 1.0 / 3.0), ("cold", 1.0 / 5.0)] {
        println!(
            "target: burst, {target}: at least {at_least:.2} of the ceiling; the broker {}, the \
             floor {}",
            ratio(&format!("burst, {target}")),
            ratio(&format!("{FLOOR}: burst, {target}")),
        );
    }
    let rate = |scenario: &str| find(scenario).map(|r| r.rate);
    for target in ["warm", "cold"] {
        let Some(broker) = rate(&format!("burst, {target}")) else {
            continue;
        };
        let share = |floor: &str| {
            rate(&format!("{floor}: burst, {target}")).map_or("not run".to_owned(), |floor| {
                format!("{floor:.1}/s ({:.0} %)", broker / floor * 100.0)
            })
        };
        // What the floor with a broker's watches and writes reaches of the plain floor: where
        // it is short of the target, so is every broker that watches and writes as one must.
        let limit = rate(&format!("{FLOOR_WATCHED}: burst, {target}"))
            .zip(rate(&format!("{FLOOR}: burst, {target}")))
            .map_or("not run".to_owned(), |(watched, floor)| {
                format!("{:.0} %", watched / floor * 100.0)
            });
        println!(
            "target: burst, {target}: at least {:.0} % of the floor's rate; the broker \
             {broker:.1}/s, the floor {}, the floor with a broker's watches and writes {} \
             (itself {limit} of the floor)",
            BURST_SHARE_OF_FLOOR * 100.0,
            share(FLOOR),
            share(FLOOR_WATCHED),
        );
    }
    println!(
        "target: sustained {SUSTAINED_RATE}/s: bound p50 at most 30 ms, p99 at most 100 ms; the \
         broker {}, the floor {}",
        latency(&format!("sustained {SUSTAINED_RATE}/s: claims bound")),
        latency(&format!("{FLOOR}: sustained {SUSTAINED_RATE}/s")),
    );
}

/// Whether a run at `rate` whose binds took `bound` (milliseconds, sorted) held, printed.
fn probe(who: &str, rate: f64, bound: &[f64]) -> bool {
    let p99 = percentile(bound, 0.99);
    let held = p99 <= HELD_P99_MS;
    println!(
        "holds: {who} at {rate:.1}/s for {:.0} s: {} claims, bind p50 {:.0} ms, p99 \
         {p99:.0} ms: {}",
        SUSTAINED_WINDOW.as_secs_f64(),
        bound.len(),
        percentile(bound, 0.50),
        if held { "held" } else { "not held" },
    );
    held
}

/// The machine's cores (what "CPU busy" is a share of).
fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// What every scenario shares: the API server, and what the watches recorded.
struct Bench<'a> {
    env: &'a TestEnv,
    kinds: &'a Kinds,
    instants: &'a Arc<Mutex<Instants>>,
    handles: &'a Arc<Mutex<HandleStates>>,
}

impl Bench<'_> {
    /// The warm and cold bursts and the sustained arrivals, each made of only the writes a
    /// bind cannot do without, by this process, before any broker runs (`floor.rs`).
    async fn floor(&self) -> Vec<Row> {
        let env = self.env;
        let floor = Arc::new(floor::Floor::new(env, self.kinds));
        let claims = |scenario: &str| -> Vec<Value> {
            (0..BURST)
                .map(|i| claim(&env.namespace, &floor::claim_name(scenario, i), "floor"))
                .collect()
        };
        let row_of = |floor: &'static str| {
            move |scenario: &str, rate: f64, spent: Spent, mut bound: Vec<f64>| {
                bound.sort_by(f64::total_cmp);
                Row::new(format!("{floor}: {scenario}"), bound.len(), rate, spent).latencies(&bound)
            }
        };
        let row = row_of(FLOOR);
        let row_watched = row_of(FLOOR_WATCHED);
        let mut rows = Vec::new();

        let staged = floor.stage("warm", BURST, PARALLEL_CREATES).await;
        let phase = Phase::start(env).await;
        let bound = floor
            .warm(
                claims("warm").into_iter().zip(staged).collect(),
                PARALLEL_CREATES,
            )
            .await;
        let rate = BURST as f64 / phase.started.elapsed().as_secs_f64();
        let spent = phase.report(env, "floor: burst, warm", BURST, 0.0).await;
        rows.push(row("burst, warm", rate, spent, bound));

        let phase = Phase::start(env).await;
        let bound = floor.cold(claims("cold"), PARALLEL_CREATES).await;
        let rate = BURST as f64 / phase.started.elapsed().as_secs_f64();
        let spent = phase.report(env, "floor: burst, cold", BURST, 0.0).await;
        rows.push(row("burst, cold", rate, spent, bound));

        // The same bursts with what any broker adds to them on the API server beyond the
        // writes: its own watches of the claims, handles and ConfigMaps (beside this bench's),
        // its `Bound` Event on each claim, and the status of each handle a cold bind creates.
        let watched = floor::Floor::new(env, self.kinds).with_broker_writes(&env.client);
        let broker_watches =
            watches::watch_as_a_broker(env.client.clone(), &env.namespace, self.kinds);
        let staged = watched.stage(WATCHED_WARM, BURST, PARALLEL_CREATES).await;
        let phase = Phase::start(env).await;
        let bound = watched
            .warm(
                claims(WATCHED_WARM).into_iter().zip(staged).collect(),
                PARALLEL_CREATES,
            )
            .await;
        let rate = BURST as f64 / phase.started.elapsed().as_secs_f64();
        let spent = phase
            .report(env, "floor, watched: burst, warm", BURST, 0.0)
            .await;
        rows.push(row_watched("burst, warm", rate, spent, bound));

        let phase = Phase::start(env).await;
        let bound = watched.cold(claims(WATCHED_COLD), PARALLEL_CREATES).await;
        let rate = BURST as f64 / phase.started.elapsed().as_secs_f64();
        let spent = phase
            .report(env, "floor, watched: burst, cold", BURST, 0.0)
            .await;
        rows.push(row_watched("burst, cold", rate, spent, bound));
        broker_watches.abort();

        let staged = floor
            .stage("steady", SUSTAINED_POOL, PARALLEL_CREATES)
            .await;
        let phase = Phase::start(env).await;
        let bound = floor
            .clone()
            .sustained(
                "steady",
                staged,
                |name| claim(&env.namespace, name, "floor"),
                SUSTAINED_RATE,
                SUSTAINED_WINDOW,
            )
            .await;
        let count = bound.len();
        let spent = phase.report(env, "floor: sustained", count, 0.0).await;
        let rate = count as f64 / SUSTAINED_WINDOW.as_secs_f64();
        rows.push(row(
            &format!("sustained {SUSTAINED_RATE}/s"),
            rate,
            spent,
            bound,
        ));

        floor.clean().await;
        rows
    }

    /// Fills pool `pool` (of the provider of the same name) to [`BURST`] ready handles and
    /// sets its `minAvailable` back to 0, so a burst empties it; `brokers`: the broker
    /// processes doing it, if it is not this process.
    ///
    /// Done when the pool has [`BURST`] ready unbound handles, as its `minAvailable` asks,
    /// however many it had: this bench's handle watch may not have seen the last burst's
    /// binds yet, and a target counted from it (what it showed unbound, plus [`BURST`]) was
    /// never reached (a run waited out its timeout).
    async fn fill(&self, pool: &str, scenario: &str, brokers: Option<&brokers::Brokers>) -> Row {
        let env = self.env;
        let before = brokers.map_or(0.0, brokers::Brokers::cpu_seconds);
        let phase = Phase::start(env).await;
        apply_pool(env, self.kinds, pool, BURST).await;
        wait_until(&format!("{BURST} ready handles of {pool}"), || {
            lock(self.handles).ready_unbound(pool) >= BURST
        })
        .await;
        let rate = BURST as f64 / phase.started.elapsed().as_secs_f64();
        let elsewhere = brokers.map_or(0.0, brokers::Brokers::cpu_seconds) - before;
        let spent = phase.report(env, scenario, BURST, elsewhere).await;
        set_min_available(env, self.kinds, pool, 0).await;
        Row::new(scenario.to_owned(), BURST, rate, spent)
    }

    /// [`BURST`] claims of provider `kind` named `prefix`-NNNN, created at once; the row of
    /// their binds. `brokers`: the broker processes serving them, if not this process; with
    /// `kill`, the one holding the Lease is killed once a third of the claims are bound.
    async fn burst(
        &self,
        kind: &str,
        prefix: &str,
        scenario: &str,
        mut brokers: Option<&mut brokers::Brokers>,
        kill: bool,
    ) -> Row {
        let env = self.env;
        let names: Vec<String> = (0..BURST).map(|i| format!("{prefix}-{i:04}")).collect();
        let before = brokers
            .as_deref()
            .map_or(0.0, brokers::Brokers::cpu_seconds);
        let phase = Phase::start(env).await;
        let creates = create_claims(env, self.kinds, self.instants, &names, kind);
        let killed = match brokers.as_deref_mut().filter(|_| kill) {
            Some(brokers) => {
                let (_, killed) = futures::join!(creates, self.kill_holder(brokers, &names));
                Some(killed)
            }
            None => {
                creates.await;
                None
            }
        };
        wait_served(self.instants, &names, scenario).await;
        let (bound, rate) = {
            let instants = lock(self.instants);
            let bound = latencies(&instants, &instants.bound, &names);
            let last = names.iter().map(|n| instants.bound[n]).max();
            let rate = last.map_or(0.0, |last| {
                BURST as f64 / (last - phase.started).as_secs_f64()
            });
            (bound, rate)
        };
        phase.settle(env).await;
        let elsewhere = brokers
            .as_deref()
            .map_or(0.0, brokers::Brokers::cpu_seconds)
            - before;
        let spent = phase.report(env, scenario, BURST, elsewhere.max(0.0)).await;
        if let Some(killed) = killed {
            let instants = lock(self.instants);
            // Binds already on their way when the holder died still land after the kill: the
            // failover shows as the longest pause between binds after it.
            let mut after: Vec<Instant> = names
                .iter()
                .filter_map(|n| instants.bound.get(n).copied())
                .filter(|bound| *bound > killed.at)
                .collect();
            after.sort();
            let pause = std::iter::once(killed.at)
                .chain(after.iter().copied())
                .zip(after.iter().copied())
                .map(|(before, next)| (next - before).as_secs_f64())
                .fold(0.0, f64::max);
            // No replica may take the Lease before it expires: what the failover itself costs
            // is the time from that expiry to the first bind after it.
            let resumed = after
                .iter()
                .find(|bound| **bound >= killed.expiry)
                .map_or(f64::NAN, |bound| (*bound - killed.expiry).as_secs_f64());
            let lost = names
                .iter()
                .filter(|n| !instants.bound.contains_key(*n))
                .count();
            println!(
                "{scenario}: killed {} (SIGKILL) with {} of {BURST} bound; binding paused \
                 {pause:.1} s at most after the kill (Lease duration {} s); the Lease expired \
                 {:.1} s after the kill, and binding resumed {resumed:.2} s after that; {lost} \
                 claims lost",
                killed.holder,
                BURST - after.len() - lost,
                poolboy::runtime::lease::LEASE_SECONDS,
                (killed.expiry - killed.at).as_secs_f64(),
            );
        }
        Row::new(scenario.to_owned(), BURST, rate, spent).latencies(&bound)
    }

    /// Once a third of `names` are bound, kills the replica holding the Lease.
    async fn kill_holder(&self, brokers: &mut brokers::Brokers, names: &[String]) -> Killed {
        wait_until("a third of the burst bound", || {
            let instants = lock(self.instants);
            names
                .iter()
                .filter(|n| instants.bound.contains_key(*n))
                .count()
                >= names.len() / 3
        })
        .await;
        let holding =
            support::lease::holding(&self.env.client, &self.env.namespace, brokers::LEASE)
                .await
                .expect("a replica holds the Lease");
        let expiry = holding.expiry();
        let holder = holding.holder;
        assert!(
            brokers.kill(&holder).await,
            "{holder} is none of the replicas"
        );
        let killed = Instant::now();
        // The API server's clock is this machine's: the Lease's expiry, as an instant.
        let valid_for = expiry
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        Killed {
            holder,
            at: killed,
            expiry: killed + valid_for,
        }
    }

    /// Claims arriving at [`SUSTAINED_RATE`] a second against a pool kept full.
    async fn sustained(&self) -> Row {
        let (env, kinds) = (self.env, self.kinds);
        apply_pool(env, kinds, "steady", SUSTAINED_POOL).await;
        wait_until(&format!("{SUSTAINED_POOL} ready steady handles"), || {
            lock(self.handles).ready_unbound("steady") >= SUSTAINED_POOL
        })
        .await;
        let handles_before = lock(self.handles).of_pool("steady");
        let phase = Phase::start(env).await;
        let names = arrive(env, kinds, self.instants, "steady", SUSTAINED_RATE).await;
        wait_served(self.instants, &names, "sustained").await;
        let window = phase.started.elapsed().as_secs_f64();
        let refilled = lock(self.handles).of_pool("steady") - handles_before;
        let warm = bound_to_pool(env, kinds, "steady", &names).await;
        let bound = {
            let instants = lock(self.instants);
            latencies(&instants, &instants.bound, &names)
        };
        let spent = phase.report(env, "sustained", names.len(), 0.0).await;
        println!(
            "sustained: {} claims in {:.0} s ({:.1}/s), {warm} bound to a pool handle; the pool \
             made {refilled} handles ({:.1}/s)",
            names.len(),
            SUSTAINED_WINDOW.as_secs_f64(),
            names.len() as f64 / SUSTAINED_WINDOW.as_secs_f64(),
            refilled as f64 / window,
        );
        Row::new(
            format!("sustained {SUSTAINED_RATE}/s: claims bound"),
            names.len(),
            names.len() as f64 / SUSTAINED_WINDOW.as_secs_f64(),
            spent,
        )
        .latencies(&bound)
    }

    /// The highest rate the floor holds (`search`), from `start` a second: a run of
    /// [`SUSTAINED_WINDOW`] per rate, each against a pool of [`SUSTAINED_POOL`] staged afresh
    /// and cleaned up after.
    async fn floor_holds(&self, start: f64) -> f64 {
        let env = self.env;
        let floor = Arc::new(floor::Floor::new(env, self.kinds));
        search::highest_rate(start, async |attempt, rate| {
            let scenario = format!("held{attempt}");
            let staged = floor
                .stage(&scenario, SUSTAINED_POOL, PARALLEL_CREATES)
                .await;
            let mut bound = floor
                .clone()
                .sustained(
                    &scenario,
                    staged,
                    |name| claim(&env.namespace, name, "floor"),
                    rate,
                    SUSTAINED_WINDOW,
                )
                .await;
            bound.sort_by(f64::total_cmp);
            let held = probe(FLOOR, rate, &bound);
            floor.clean().await;
            held
        })
        .await
    }

    /// The highest rate the broker holds (`search`), from `start` a second: a run of
    /// [`SUSTAINED_WINDOW`] per rate against the steady pool, full at the start of each.
    async fn broker_holds(&self, start: f64) -> f64 {
        let (env, kinds) = (self.env, self.kinds);
        apply_pool(env, kinds, "steady", SUSTAINED_POOL).await;
        search::highest_rate(start, async |attempt, rate| {
            wait_until(&format!("{SUSTAINED_POOL} ready steady handles"), || {
                lock(self.handles).ready_unbound("steady") >= SUSTAINED_POOL
            })
            .await;
            let prefix = format!("held{attempt}");
            let names = arrive(env, kinds, self.instants, &prefix, rate).await;
            wait_served(self.instants, &names, &prefix).await;
            let bound = {
                let instants = lock(self.instants);
                latencies(&instants, &instants.bound, &names)
            };
            probe("broker", rate, &bound)
        })
        .await
    }

    /// A minute with every claim bound: the writes, and this process's CPU and RSS.
    async fn quiet(&self) {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let claims = lock(self.instants).bound.len();
        let writes = Arc::new(AtomicUsize::new(0));
        let counting = tokio::spawn(count_writes(
            self.env.client.clone(),
            self.env.namespace.clone(),
            writes.clone(),
        ));
        // The watches list first; writes count from then on.
        tokio::time::sleep(Duration::from_secs(2)).await;
        writes.store(0, Ordering::SeqCst);
        let cpu_before = process_cpu_seconds("self");
        tokio::time::sleep(QUIET_WINDOW).await;
        let cpu = process_cpu_seconds("self") - cpu_before;
        counting.abort();
        println!();
        println!(
            "quiet: {claims} bound claims, {} writes (claims, handles, ConfigMaps) and {cpu:.2} s \
             CPU in {} s; this process's RSS {} MiB",
            writes.load(Ordering::SeqCst),
            QUIET_WINDOW.as_secs(),
            process_memory("self").0
        );
    }

    /// The warm burst again with 2 broker processes sharing one Lease (`warm_requests`: the
    /// requests per claim of one replica), then once more with the holder killed mid-burst.
    async fn replicas(&self, warm_requests: Option<f64>) -> Vec<Row> {
        let env = self.env;
        let logs = std::env::temp_dir().join(format!("poolboy-bench-{}", env.namespace));
        let mut brokers =
            brokers::Brokers::start(2, &env.namespace, &support::kubeconfig_path(), &logs);
        println!();
        println!(
            "replicas: 2 broker processes, Lease {}, logs in {}",
            brokers::LEASE,
            logs.display()
        );
        let mut rows = Vec::new();
        rows.push(
            self.fill("replicas", "2 replicas: pool fill", Some(&brokers))
                .await,
        );
        let row = self
            .burst(
                "replicas",
                "two",
                "2 replicas: burst, warm",
                Some(&mut brokers),
                false,
            )
            .await;
        if let (Some(one), Some(two)) = (warm_requests, row.spent.as_ref()) {
            println!(
                "2 replicas: {:.1} API requests per claim against {one:.1} with one replica \
                 ({:.2}x)",
                two.requests_each,
                two.requests_each / one
            );
        }
        rows.push(row);
        rows.push(
            self.fill("replicas", "2 replicas: pool fill again", Some(&brokers))
                .await,
        );
        rows.push(
            self.burst(
                "replicas",
                "killed",
                "2 replicas: burst, warm, holder killed",
                Some(&mut brokers),
                true,
            )
            .await,
        );
        drop(brokers);
        rows
    }
}

/// The replica the replicas scenario killed: its identity, when, and when its Lease expired
/// (no other replica can take it before).
struct Killed {
    holder: String,
    at: Instant,
    expiry: Instant,
}

/// Creates `count` ConfigMaps, [`CEILING_CLIENTS`] at once: creates per second.
async fn create_configmaps(env: &TestEnv, count: usize) -> f64 {
    let api = Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace);
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move {
                let configmap: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("ceiling-{i:04}"), "labels": {"bench/ceiling": "yes"}},
                    "data": {"index": i.to_string()},
                }))
                .expect("a ConfigMap");
                api.create(&PostParams::default(), &configmap)
                    .await
                    .expect("create a ConfigMap");
            }
        })
        .buffer_unordered(CEILING_CLIENTS)
        .collect::<Vec<()>>()
        .await;
    count as f64 / started.elapsed().as_secs_f64()
}

impl Bench<'_> {
    /// Creates `count` claims no broker serves, [`CEILING_CLIENTS`] at once: creates per
    /// second.
    async fn create_bare_claims(&self, count: usize) -> f64 {
        let started = Instant::now();
        futures::stream::iter(0..count)
            .map(|i| {
                let mut object = claim(&self.env.namespace, &format!("ceiling-{i:04}"), "none");
                object["metadata"]["labels"] = json!({"bench/ceiling": "yes"});
                create(self.env, &self.kinds.claim, object)
            })
            .buffer_unordered(CEILING_CLIENTS)
            .collect::<Vec<()>>()
            .await;
        count as f64 / started.elapsed().as_secs_f64()
    }

    async fn delete_bare_claims(&self) {
        Api::<DynamicObject>::namespaced_with(
            self.env.client.clone(),
            &self.env.namespace,
            &self.kinds.claim,
        )
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("bench/ceiling=yes"),
        )
        .await
        .expect("delete the ceiling's claims");
    }
}

/// Creates pool `name` of `min_available` handles, or sets its `minAvailable` if it exists.
async fn apply_pool(env: &TestEnv, kinds: &Kinds, name: &str, min_available: usize) {
    let pools =
        Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.namespace, &kinds.pool);
    match pools.get_opt(name).await.expect("read a pool") {
        Some(_) => set_min_available(env, kinds, name, min_available).await,
        None => create(env, &kinds.pool, pool(env, name, min_available)).await,
    }
}

async fn delete_configmaps(env: &TestEnv) {
    Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace)
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("bench/ceiling=yes"),
        )
        .await
        .expect("delete the ceiling's ConfigMaps");
}

/// Creates claims `prefix`-NNNNN of the steady provider at `rate` a second, each at its Poisson
/// arrival time, for [`SUSTAINED_WINDOW`]; their names.
async fn arrive(
    env: &TestEnv,
    kinds: &Kinds,
    instants: &Arc<Mutex<Instants>>,
    prefix: &str,
    rate: f64,
) -> Vec<String> {
    let started = tokio::time::Instant::now();
    let mut names = Vec::new();
    let mut creates = Vec::new();
    for at in arrivals::poisson(rate, SUSTAINED_WINDOW) {
        let name = format!("{prefix}-{:05}", names.len());
        names.push(name.clone());
        let object = claim(&env.namespace, &name, "steady");
        let instants = instants.clone();
        let client = env.client.clone();
        let namespace = env.namespace.clone();
        let resource = kinds.claim.clone();
        let when = started + at;
        creates.push(tokio::spawn(async move {
            tokio::time::sleep_until(when).await;
            lock(&instants).created.insert(name, Instant::now());
            create_in(&client, &namespace, &resource, object).await;
        }));
    }
    for create in creates {
        create.await.expect("a create");
    }
    names
}

/// How many of the claims `names` are bound to a handle of pool `pool`.
async fn bound_to_pool(env: &TestEnv, kinds: &Kinds, pool: &str, names: &[String]) -> usize {
    let handles =
        Api::<HandleObject>::namespaced_with(env.client.clone(), &env.namespace, &kinds.handle);
    let list = handles
        .list(&ListParams::default())
        .await
        .expect("list handles");
    let names: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    list.items
        .iter()
        .filter(|h| {
            h.spec
                .resource_pool
                .as_ref()
                .is_some_and(|p| p.name == pool)
        })
        .filter(|h| {
            h.spec
                .resource_claim
                .as_ref()
                .is_some_and(|c| names.contains(c.name.as_str()))
        })
        .count()
}

async fn set_min_available(env: &TestEnv, kinds: &Kinds, pool: &str, count: usize) {
    let patch = json!({"spec": {"minAvailable": count}});
    Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.namespace, &kinds.pool)
        .patch(pool, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("set minAvailable");
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
                let object = claim(&env.namespace, &name, kind);
                lock(&instants).created.insert(name.clone(), Instant::now());
                create(env, &kinds.claim, object).await;
            }
        })
        .buffer_unordered(PARALLEL_CREATES)
        .collect::<Vec<()>>()
        .await;
}

/// Waits until every claim of `names` is bound and its ConfigMap exists.
async fn wait_served(instants: &Arc<Mutex<Instants>>, names: &[String], scenario: &str) {
    wait_until(&format!("{scenario}: every claim served"), || {
        let instants = lock(instants);
        names
            .iter()
            .all(|n| instants.bound.contains_key(n) && instants.resource.contains_key(n))
    })
    .await;
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {TIMEOUT:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Milliseconds from creation to the instants of `of`, sorted.
fn latencies(instants: &Instants, of: &HashMap<String, Instant>, names: &[String]) -> Vec<f64> {
    let mut all: Vec<f64> = names
        .iter()
        .filter_map(|n| Some((*of.get(n)? - *instants.created.get(n)?).as_secs_f64() * 1000.0))
        .collect();
    all.sort_by(f64::total_cmp);
    all
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

/// Records when each claim is first bound and when its ConfigMap first exists, and the
/// handles' pools, bindings and readiness.
async fn record(
    client: kube::Client,
    namespace: String,
    instants: Arc<Mutex<Instants>>,
    handles: Arc<Mutex<HandleStates>>,
) {
    let kinds = Kinds::new(&OperatorDomain::default());
    let claims = Api::<ClaimObject>::namespaced_with(client.clone(), &namespace, &kinds.claim);
    let handle_api =
        Api::<HandleObject>::namespaced_with(client.clone(), &namespace, &kinds.handle);
    let configmaps = Api::<ConfigMap>::namespaced(client, &namespace);
    let claim_instants = instants.clone();
    let claims = watches::record_binds(claims, watcher::Config::default(), move |name| {
        if floor::is_floor_claim(&name) {
            return;
        }
        lock(&claim_instants)
            .bound
            .entry(name)
            .or_insert_with(Instant::now);
    });
    let handle_watch = watches::follow_handles(handle_api, watcher::Config::default(), handles);
    let configmaps = watcher(configmaps, watcher::Config::default())
        .backoff(recording::Promptly)
        .applied_objects()
        .for_each(move |configmap| {
            recording::report("ConfigMaps", &configmap);
            let claim = configmap.ok().and_then(|c| {
                c.metadata
                    .annotations?
                    .get("poolboy.gpte.redhat.com/resource-claim-name")
                    .cloned()
            });
            if let Some(claim) = claim {
                lock(&instants)
                    .resource
                    .entry(claim)
                    .or_insert_with(Instant::now);
            }
            async {}
        });
    futures::future::join3(claims, handle_watch, configmaps).await;
}

async fn create(env: &TestEnv, resource: &kube::core::ApiResource, object: Value) {
    create_in(&env.client, &env.namespace, resource, object).await;
}

async fn create_in(
    client: &kube::Client,
    namespace: &str,
    resource: &kube::core::ApiResource,
    object: Value,
) {
    let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
    Api::<DynamicObject>::namespaced_with(client.clone(), namespace, resource)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));
}

/// CPU seconds of this process, and of this control plane's kube-apiserver and etcd.
fn cpu_split() -> [f64; 3] {
    let [apiserver, etcd] = control_plane_cpu();
    [process_cpu_seconds("self"), apiserver, etcd]
}
