//! Chaos: the broker binary runs as two separate processes, without leader election,
//! against a pool on the real control plane; bursts of claims arrive while one process or the
//! other is killed with SIGKILL at random moments and started again. Once quiet, every claim
//! is bound to exactly one handle that names it back, every handle has exactly one ConfigMap,
//! no ConfigMap outlives its handle, and the pool is back at `minAvailable` unbound handles;
//! after every claim and the pool are deleted, no handle and no ConfigMap is left.
//!
//! The short run is part of `make test`; `make chaos` runs the long one (more claims, more
//! kills, and kube-apiserver stopped and started again mid-burst, after which no process is
//! killed: the running ones must converge without a restart of their own, and a change to a
//! ConfigMap made after the restart must still reach its claim's status), three times with
//! different seeds. `CHAOS_SEED` replays a run; the seed is printed either way.
//!
//! The same processes, taking turns through a Lease, show what a paused holder does: stopped
//! (SIGSTOP) for longer than its Lease lasts while the other takes over, then let go again
//! with its stores, timers and requests of before the pause, it stops without undoing any of
//! the new holder's work; paused for less than its Lease lasts, it renews it and serves on.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use poolboy::api::{ResourceClaim, ResourceHandle, ResourcePool};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::json;
use support::config::{create_config_provider, template};
use support::objects::{self, D};
use support::{TestEnv, from_json, kubeconfig_path};

/// How hard one run shakes the broker.
struct Plan {
    seed: u64,
    claims: usize,
    bursts: usize,
    pool_size: usize,
    /// A process is killed every so many milliseconds (uniformly in the range).
    kill_every_ms: (u64, u64),
    restart_api_server: bool,
    /// How long the claims may take to settle once the last one is created.
    settle: Duration,
}

impl Plan {
    fn new(claims: usize, bursts: usize, pool_size: usize, restart_api_server: bool) -> Self {
        let seed = match std::env::var("CHAOS_SEED") {
            Ok(seed) => seed.parse().expect("CHAOS_SEED is a number"),
            Err(_) => rand::rng().random(),
        };
        let claims = std::env::var("CHAOS_CLAIMS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(claims);
        Self {
            seed,
            claims,
            bursts,
            pool_size,
            kill_every_ms: (2_000, 6_000),
            restart_api_server,
            settle: Duration::from_secs(240),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_settle_while_broker_processes_are_killed() {
    shake(Plan::new(40, 4, 10, false)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "`make chaos`: minutes long, and restarts the API server every other test shares"]
async fn claims_settle_while_broker_processes_are_killed_and_the_api_server_restarts() {
    let mut plan = Plan::new(160, 8, 30, true);
    // More kills in the bursts before the API server goes.
    plan.kill_every_ms = (1_000, 3_000);
    shake(plan).await;
}

/// The Lease of the paused-holder test.
const LEASE: &str = "poolboy-chaos";

/// Two processes taking turns through [`LEASE`], a pool of `plan.pool_size` and claims
/// `claim-0` to `claim-3` bound: the processes and the slot of the one holding the Lease.
async fn leased_pair(env: &TestEnv, plan: &Plan) -> (Arc<Brokers>, usize) {
    create_config_provider(env, false).await;
    env.create(&pool(&env.namespace, plan.pool_size)).await;
    let brokers = Brokers::start(&env.namespace, 2, Some(LEASE));
    let claims = env.api::<ResourceClaim>();
    for i in 0..4 {
        create_claim(&claims, &format!("claim-{i}")).await;
    }
    settle(env, plan, "the first claims bound", || {
        check_bound(env, 4, plan.pool_size)
    })
    .await;
    let (first_holder, _) = holder(env).await.expect("a holder of the Lease");
    let slot = (0..2)
        .find(|&slot| brokers.identity(slot).as_deref() == Some(first_holder.as_str()))
        .expect("the holder is one of the processes");
    (brokers, slot)
}

/// A holder paused for less than its Lease lasts, but past the 13 s its writes may go after a
/// renewal: woken, it renews first thing and serves on; the standby stays standing by.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_paused_within_its_lease_renews_it_and_serves_on() {
    let plan = Plan::new(6, 1, 3, false);
    let env = TestEnv::new().await;
    let (brokers, paused) = leased_pair(&env, &plan).await;
    let identity = brokers.identity(paused).expect("the holder runs");
    // From 6.1 s after a renewal to 13.1 s: its writes are shut from 13 s, its Lease holds
    // 1.9 s more.
    let wait = support::eventually(
        "a renewal less than 6.1 s old (the holder renews every 8 s)",
        Duration::from_secs(30),
        || async {
            let (_, renewed) = holder(&env).await?;
            let pause_at = renewed + Duration::from_millis(6_100);
            pause_at.duration_since(std::time::SystemTime::now()).ok()
        },
    )
    .await;
    tokio::time::sleep(wait).await;
    brokers.signal(paused, "STOP");
    tokio::time::sleep(Duration::from_secs(7)).await;
    brokers.signal(paused, "CONT");
    let claims = env.api::<ResourceClaim>();
    for i in 4..6 {
        create_claim(&claims, &format!("claim-{i}")).await;
    }
    settle(&env, &plan, "the claims made after the pause bound", || {
        check_bound(&env, 6, plan.pool_size)
    })
    .await;
    let (holder_now, _) = holder(&env).await.expect("a holder of the Lease");
    assert_eq!(holder_now, identity, "the paused holder kept the Lease");
    brokers.check_alive();
    delete_everything(&env, &plan).await;
    brokers.kill_all();
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_woken_after_losing_the_lease_undoes_nothing() {
    let plan = Plan::new(6, 1, 3, false);
    let env = TestEnv::new().await;
    let (brokers, paused) = leased_pair(&env, &plan).await;
    let claims = env.api::<ResourceClaim>();
    let standby = 1 - paused;

    brokers.signal(paused, "STOP");
    let taken_over = Instant::now();
    let new_holder = brokers.identity(standby).expect("the standby runs");
    support::eventually(
        "the standby holds the Lease",
        Duration::from_secs(60),
        || async { holder(&env).await.filter(|(h, _)| *h == new_holder) },
    )
    .await;
    let taken_over = taken_over.elapsed();
    // The new holder's work while the old one sleeps: two claims go (their handles and
    // ConfigMaps with them), four come, the pool is refilled.
    for name in ["claim-0", "claim-1"] {
        delete_with_retries(&claims, name).await;
    }
    for i in 4..8 {
        create_claim(&claims, &format!("claim-{i}")).await;
    }
    settle(&env, &plan, "the new holder's claims bound", || {
        check_bound(&env, 6, plan.pool_size)
    })
    .await;
    let before = quiet_layout(&env).await;

    brokers.signal(paused, "CONT");
    let exit = brokers
        .exit_of(paused, Duration::from_secs(60))
        .await
        .expect("the woken holder stops once it finds the Lease lost");
    assert!(!exit.success(), "it stops as having lost the Lease: {exit}");
    // Its stale passes ran for the moment before it found out: every write they tried was
    // refused, or the new holder would have set the object back, which takes a write too.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        layout(&env).await,
        before,
        "no claim, handle or ConfigMap written, deleted or made again"
    );
    check_bound(&env, 6, plan.pool_size)
        .await
        .expect("every claim bound once, one ConfigMap per handle, the pool full");
    let standby_exit = brokers.exit_of(standby, Duration::ZERO).await;
    assert!(
        standby_exit.is_none(),
        "the new holder runs on: {standby_exit:?}"
    );

    delete_everything(&env, &plan).await;
    brokers.kill_all();
    println!(
        "chaos: the standby held the Lease {:.1} s after the holder was paused; the woken \
         holder exited with {exit}",
        taken_over.as_secs_f64()
    );
    env.cleanup().await;
}

/// Who holds the Lease of the paused-holder tests, and when it last renewed it.
async fn holder(env: &TestEnv) -> Option<(String, std::time::SystemTime)> {
    let holding = support::lease::holding(&env.client, &env.namespace, LEASE).await?;
    Some((holding.holder, holding.renewed))
}

/// Every claim, handle and managed ConfigMap by kind and name, with its uid and
/// resourceVersion: any write to one of them, or one deleted or made again, changes it.
async fn layout(env: &TestEnv) -> BTreeMap<(&'static str, String), (String, String)> {
    fn versions<K: kube::Resource>(
        kind: &'static str,
        objects: &[K],
    ) -> impl Iterator<Item = ((&'static str, String), (String, String))> {
        objects.iter().map(move |object| {
            let meta = object.meta();
            let uid = meta.uid.clone().unwrap_or_default();
            let version = meta.resource_version.clone().unwrap_or_default();
            (
                (kind, meta.name.clone().unwrap_or_default()),
                (uid, version),
            )
        })
    }
    let claims = list(&env.api::<ResourceClaim>())
        .await
        .expect("listing claims");
    let handles = list(&env.api::<ResourceHandle>())
        .await
        .expect("listing handles");
    let configmaps = list(&env.api::<ConfigMap>())
        .await
        .expect("listing ConfigMaps");
    let managed: Vec<ConfigMap> = managed_by_handle(&configmaps)
        .into_values()
        .flatten()
        .cloned()
        .collect();
    versions("ResourceClaim", &claims)
        .chain(versions("ResourceHandle", &handles))
        .chain(versions("ConfigMap", &managed))
        .collect()
}

/// The layout once it has stayed the same for three seconds.
async fn quiet_layout(env: &TestEnv) -> BTreeMap<(&'static str, String), (String, String)> {
    let mut last = layout(env).await;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = layout(env).await;
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the new holder kept writing for a minute: {last:?}");
}

/// The pool every claim of these tests binds from: `size` spare `config` handles.
fn pool(namespace: &str, size: usize) -> ResourcePool {
    from_json(json!({
        "apiVersion": format!("{D}/v1"), "kind": "ResourcePool",
        "metadata": {"name": "chaos"},
        "spec": {
            "minAvailable": size,
            "resources": objects::resources(namespace, &[("config", "config", template(json!({})))]),
        },
    }))
}

/// The broker processes; a killed one is started again by [`Brokers::restart`].
struct Brokers {
    namespace: String,
    /// The Lease they take turns through; without one, every process works at once.
    lease: Option<String>,
    logs: PathBuf,
    children: Mutex<Vec<Option<Child>>>,
    starts: AtomicUsize,
}

impl Brokers {
    fn start(namespace: &str, count: usize, lease: Option<&str>) -> Arc<Self> {
        let logs = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("chaos");
        std::fs::create_dir_all(&logs).expect("a log directory");
        let brokers = Arc::new(Self {
            namespace: namespace.to_owned(),
            lease: lease.map(str::to_owned),
            logs,
            children: Mutex::new((0..count).map(|_| None).collect()),
            starts: AtomicUsize::new(0),
        });
        for slot in 0..count {
            brokers.restart(slot);
        }
        brokers
    }

    fn spawn(&self, slot: usize) -> Child {
        let start = self.starts.fetch_add(1, Ordering::SeqCst);
        let log = self
            .logs
            .join(format!("{}-{slot}-{start}.log", self.namespace));
        let log = std::fs::File::create(&log).expect("a log file");
        let err = log.try_clone().expect("the log file again");
        let lease = self.lease.iter().flat_map(|lease| ["--lease", lease]);
        Command::new(env!("CARGO_BIN_EXE_poolboy"))
            .args([
                "run",
                "--namespaced",
                "--operator-namespace",
                &self.namespace,
            ])
            .args(["--metrics-address", "127.0.0.1:0"])
            .args(lease)
            .env("KUBECONFIG", kubeconfig_path())
            .env("HOSTNAME", format!("chaos-{slot}"))
            // CHAOS_LOG (a RUST_LOG filter) for a closer look at a failed run.
            .env(
                "RUST_LOG",
                std::env::var("CHAOS_LOG").unwrap_or_else(|_| "poolboy=info".to_owned()),
            )
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .expect("starting the broker binary")
    }

    /// Kills process `slot` with SIGKILL (if it runs) and starts it again.
    fn restart(&self, slot: usize) {
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut child) = children[slot].take() {
            // std's kill is SIGKILL on Unix: no shutdown, no grace.
            let _ = child.kill();
            let _ = child.wait();
        }
        children[slot] = Some(self.spawn(slot));
    }

    /// Process `slot` is still running (not exited on its own).
    fn check_alive(&self) {
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        for (slot, child) in children.iter_mut().enumerate() {
            if let Some(child) = child
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!(
                    "broker process {slot} exited on its own: {status}; logs in {:?}",
                    self.logs
                );
            }
        }
    }

    /// The Lease identity of process `slot` (its `HOSTNAME`, a dash, its process id), if it runs.
    fn identity(&self, slot: usize) -> Option<String> {
        let children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        let pid = children[slot].as_ref()?.id();
        Some(format!("chaos-{slot}-{pid}"))
    }

    /// Sends process `slot` the signal `signal` (`STOP`, `CONT`).
    fn signal(&self, slot: usize, signal: &str) {
        let children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        let pid = children[slot].as_ref().expect("a running process").id();
        let status = Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill -{signal} {pid}: {status}");
    }

    /// How process `slot` exited, once it has, within `timeout`; `None` if it still runs.
    async fn exit_of(&self, slot: usize, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
                let child = children[slot].as_mut()?;
                if let Ok(Some(status)) = child.try_wait() {
                    children[slot] = None;
                    return Some(status);
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn kill_all(&self) {
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        for child in children.iter_mut().filter_map(Option::take) {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A failed run must not leave its processes behind.
impl Drop for Brokers {
    fn drop(&mut self) {
        self.kill_all();
    }
}

async fn shake(plan: Plan) {
    println!(
        "chaos: seed {} ({} claims in {} bursts, pool of {}, API-server restart: {})",
        plan.seed, plan.claims, plan.bursts, plan.pool_size, plan.restart_api_server
    );
    let env = TestEnv::new().await;
    let namespace = env.namespace.clone();
    create_config_provider(&env, false).await;
    env.create(&pool(&namespace, plan.pool_size)).await;
    let brokers = Brokers::start(&namespace, 2, None);

    // The killer: one process or the other, at random moments, until the bursts are over.
    let bursting = Arc::new(AtomicBool::new(true));
    let kills = Arc::new(AtomicUsize::new(0));
    let killer = {
        let (brokers, bursting, kills) = (brokers.clone(), bursting.clone(), kills.clone());
        let mut rng = StdRng::seed_from_u64(plan.seed.wrapping_add(1));
        let (low, high) = plan.kill_every_ms;
        tokio::spawn(async move {
            while bursting.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(rng.random_range(low..high))).await;
                if !bursting.load(Ordering::SeqCst) {
                    break;
                }
                let slot = rng.random_range(0..2);
                tokio::task::block_in_place(|| brokers.restart(slot));
                kills.fetch_add(1, Ordering::SeqCst);
            }
        })
    };

    let mut rng = StdRng::seed_from_u64(plan.seed);
    let claims = env.api::<ResourceClaim>();
    let started = Instant::now();
    let per_burst = plan.claims.div_ceil(plan.bursts);
    let mut created = 0;
    let mut restarts = Vec::new();
    for burst in 0..plan.bursts {
        if plan.restart_api_server && burst == plan.bursts * 3 / 4 {
            // From here on no process is killed: the ones running must get over the API
            // server's restart on their own.
            bursting.store(false, Ordering::SeqCst);
            restarts.push(restart_api_server_in_background());
        }
        let names: Vec<String> = (created..plan.claims.min(created + per_burst))
            .map(|i| format!("claim-{i:04}"))
            .collect();
        created += names.len();
        futures::future::join_all(names.iter().map(|name| create_claim(&claims, name))).await;
        tokio::time::sleep(Duration::from_millis(rng.random_range(500..3_000))).await;
    }
    bursting.store(false, Ordering::SeqCst);
    killer.await.expect("the killer task");
    for restart in restarts {
        restart.join().expect("the API-server restart");
    }
    brokers.check_alive();
    let bursts_took = started.elapsed();

    let settled = Instant::now();
    settle(
        &env,
        &plan,
        "every claim bound, one ConfigMap per handle, the pool full",
        || check_bound(&env, plan.claims, plan.pool_size),
    )
    .await;
    let settle_took = settled.elapsed();
    brokers.check_alive();

    // A managed-resource change after all that still reaches its claim's status.
    touch_and_watch(&env, "claim-0000").await;

    // Every claim, then the pool, deleted: nothing may be left.
    let cleaned = Instant::now();
    delete_everything(&env, &plan).await;
    let cleanup_took = cleaned.elapsed();
    brokers.check_alive();
    brokers.kill_all();

    println!(
        "chaos: seed {}: {} claims, {} kills, bursts {:.1} s, settled {:.1} s after the last \
         claim, cleaned up in {:.1} s, leftovers 0",
        plan.seed,
        plan.claims,
        kills.load(Ordering::SeqCst),
        bursts_took.as_secs_f64(),
        settle_took.as_secs_f64(),
        cleanup_took.as_secs_f64(),
    );
    env.cleanup().await;
}

/// Stops kube-apiserver and starts it again with the same flags (`hack/cluster/cluster.sh
/// restart-apiserver`), while the bursts go on.
fn restart_api_server_in_background() -> std::thread::JoinHandle<()> {
    let cluster_dir = kubeconfig_path()
        .parent()
        .map(PathBuf::from)
        .expect("the kubeconfig's directory is the cluster's");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("hack/cluster/cluster.sh");
    std::thread::spawn(move || {
        let status = Command::new("bash")
            .arg(script)
            .args(["restart-apiserver", "3"])
            .env("POOLBOY_CLUSTER_DIR", cluster_dir)
            .env("POOLBOY_CLUSTER_NODE", "0")
            .status()
            .expect("running cluster.sh");
        assert!(
            status.success(),
            "restarting kube-apiserver failed: {status}"
        );
        println!("chaos: kube-apiserver restarted");
    })
}

/// Creates a `config` claim, retrying while the API server is away (restarting).
async fn create_claim(claims: &Api<ResourceClaim>, name: &str) {
    let claim: ResourceClaim = from_json(json!({
        "apiVersion": format!("{D}/v1"), "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"resources": [{"name": "config", "template": template(json!({}))}]},
    }));
    retry(&format!("creating claim {name}"), || async {
        match claims.create(&Default::default(), &claim).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(error) => Err(error),
        }
    })
    .await;
}

/// Deletes every claim, then the pool, and waits until no handle and no managed ConfigMap is
/// left.
async fn delete_everything(env: &TestEnv, plan: &Plan) {
    let claims = env.api::<ResourceClaim>();
    let names: Vec<String> = claims
        .list(&ListParams::default())
        .await
        .expect("listing claims")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    for name in &names {
        delete_with_retries(&claims, name).await;
    }
    delete_with_retries(&env.api::<ResourcePool>(), "chaos").await;
    settle(env, plan, "no handle and no managed ConfigMap left", || {
        check_empty(env)
    })
    .await;
}

async fn delete_with_retries<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    retry(&format!("deleting {name}"), || async {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error),
        }
    })
    .await;
}

/// `attempt` until it succeeds, for up to a minute (an API-server restart takes ~25 s).
async fn retry<F, Fut>(what: &str, mut attempt: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), kube::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match attempt().await {
            Ok(()) => return,
            Err(error) if Instant::now() < deadline => {
                tracing::debug!(%error, "{what}: retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => panic!("{what}: {error}"),
        }
    }
}

/// Waits until `check` passes; on timeout, panics with what it found last.
async fn settle<F, Fut>(env: &TestEnv, plan: &Plan, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    let deadline = started + plan.settle;
    let mut reported = Duration::ZERO;
    loop {
        let found = check().await;
        match found {
            Ok(()) => return,
            // What it waits for, every 10 s: a slow run says why.
            Err(problem) if started.elapsed() >= reported + Duration::from_secs(10) => {
                reported = started.elapsed();
                println!(
                    "chaos: after {:.0} s still waiting: {problem}",
                    reported.as_secs_f64()
                );
            }
            Err(problem) if Instant::now() >= deadline => panic!(
                "chaos (seed {}): not settled after {:?}: {what}: {problem} (namespace {})",
                plan.seed, plan.settle, env.namespace
            ),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

async fn list<K>(api: &Api<K>) -> Result<Vec<K>, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .map(|list| list.items)
        .map_err(|e| format!("listing: {e}"))
}

/// The ConfigMaps the broker manages, by the handle their annotations name.
fn managed_by_handle(configmaps: &[ConfigMap]) -> BTreeMap<String, Vec<&ConfigMap>> {
    let key = objects::key("resource-handle-name");
    let mut managed: BTreeMap<String, Vec<&ConfigMap>> = BTreeMap::new();
    for configmap in configmaps {
        if let Some(handle) = configmap.annotations().get(&key) {
            managed.entry(handle.clone()).or_default().push(configmap);
        }
    }
    managed
}

async fn check_bound(env: &TestEnv, claim_count: usize, pool_size: usize) -> Result<(), String> {
    let claims = list(&env.api::<ResourceClaim>()).await?;
    let handles = list(&env.api::<ResourceHandle>()).await?;
    let configmaps = list(&env.api::<ConfigMap>()).await?;
    if claims.len() != claim_count {
        return Err(format!("{} claims, not {claim_count}", claims.len()));
    }
    let live: BTreeMap<String, &ResourceHandle> = handles
        .iter()
        .filter(|h| h.metadata.deletion_timestamp.is_none())
        .map(|h| (h.name_any(), h))
        .collect();
    let mut recorded = BTreeSet::new();
    for claim in &claims {
        let name = claim.name_any();
        let Some(handle) = claim
            .status
            .as_ref()
            .and_then(|s| s.resource_handle.as_ref())
        else {
            return Err(format!("claim {name} is not bound"));
        };
        let Some(bound) = live.get(&handle.name) else {
            return Err(format!(
                "claim {name} records handle {}, which is gone",
                handle.name
            ));
        };
        if bound.spec.resource_claim.as_ref().map(|r| r.name.as_str()) != Some(name.as_str()) {
            return Err(format!(
                "handle {} does not name claim {name} back",
                handle.name
            ));
        }
        if !recorded.insert(handle.name.clone()) {
            return Err(format!("handle {} is recorded by two claims", handle.name));
        }
    }
    let mut unbound = 0;
    for (name, handle) in &live {
        match &handle.spec.resource_claim {
            Some(claim) if !recorded.contains(name) => {
                return Err(format!(
                    "handle {name} is bound to {} but not recorded",
                    claim.name
                ));
            }
            Some(_) => {}
            None => unbound += 1,
        }
    }
    if unbound != pool_size {
        return Err(format!("{unbound} unbound handles, not {pool_size}"));
    }
    if handles.len() != live.len() {
        return Err(format!(
            "{} handles still being deleted",
            handles.len() - live.len()
        ));
    }
    let managed = managed_by_handle(&configmaps);
    let uid_key = objects::key("resource-handle-uid");
    for (handle, configmaps) in &managed {
        let Some(live_handle) = live.get(handle) else {
            return Err(format!("ConfigMap of handle {handle}, which is gone"));
        };
        if configmaps.len() != 1 {
            return Err(format!(
                "handle {handle} has {} ConfigMaps",
                configmaps.len()
            ));
        }
        let uid = configmaps[0].annotations().get(&uid_key);
        if uid.is_some() && uid != live_handle.metadata.uid.as_ref() {
            return Err(format!("ConfigMap of an older handle named {handle}"));
        }
    }
    if let Some(without) = live.keys().find(|h| !managed.contains_key(*h)) {
        return Err(format!("handle {without} has no ConfigMap"));
    }
    Ok(())
}

async fn check_empty(env: &TestEnv) -> Result<(), String> {
    let handles = list(&env.api::<ResourceHandle>()).await?;
    let configmaps = list(&env.api::<ConfigMap>()).await?;
    let claims = list(&env.api::<ResourceClaim>()).await?;
    let managed = managed_by_handle(&configmaps);
    match (
        claims.len(),
        handles.len(),
        managed.values().map(Vec::len).sum::<usize>(),
    ) {
        (0, 0, 0) => Ok(()),
        (claims, handles, managed) => Err(format!(
            "{claims} claims, {handles} handles, {managed} managed ConfigMaps left"
        )),
    }
}

/// Labels the ConfigMap of `claim`'s handle and waits until the claim's status shows the label.
async fn touch_and_watch(env: &TestEnv, claim: &str) {
    let claims = env.api::<ResourceClaim>();
    let bound = claims.get(claim).await.expect("the claim");
    let handle = bound
        .status
        .and_then(|s| s.resource_handle)
        .map(|h| h.name)
        .expect("a bound claim");
    let configmap = env
        .configmaps_of_handle(&handle)
        .await
        .first()
        .map(ResourceExt::name_any)
        .expect("the handle's ConfigMap");
    env.api::<ConfigMap>()
        .patch(
            &configmap,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"chaos/touched": "yes"}}})),
        )
        .await
        .expect("labelling the ConfigMap");
    support::eventually(
        "the claim's status shows the ConfigMap's new label",
        Duration::from_secs(60),
        || async {
            let claim = claims.get(claim).await.ok()?;
            let status = serde_json::to_value(claim.status).ok()?;
            (status["resources"][0]["state"]["metadata"]["labels"]["chaos/touched"] == "yes")
                .then_some(())
        },
    )
    .await;
}
