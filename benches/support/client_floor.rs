//! The client floor: the CPU a minimal kube-rs client spends on what the broker does for a
//! claim, what no broker built on the same client can go below. A process of its own (this
//! bench's binary again, [`serve_if_asked`]) watches the claims, handles and ConfigMaps the
//! floor makes, decoded as the broker decodes them, and serves each claim with the floor's
//! requests (`support/floor.rs`): a new claim with its initialisation, the handle's binding,
//! the claim's status and the ConfigMap's annotations, then the refill (the handle, its
//! ConfigMap, its status); an edit with the handle's update (the provider has no
//! `updateFilters`, so the ConfigMap stays as it is); a deletion with the handle's and the
//! ConfigMap's, then both finalizers. Nothing else: no Events, no pool status, no screening,
//! no stores, no rendering, no logs. Eight watch events come back per bind, as the broker gets
//! them. Asked to ([`Serving::broker_additions`]), it also makes the writes the broker adds
//! beyond the contract's: what they cost a client on their own.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use poolboy::api::kinds::{ClaimObject, HandleObject, Kinds, PoolObject};
use serde_json::{Value, json};

use crate::floor::{self, Floor, Staged, handle_name};
use crate::machine::{context_switches, percentile, process_cpu_seconds};
use crate::objects::{claim, claim_edit};
use crate::support::{TestEnv, admin_config};

/// The environment variable that makes this bench's binary the client floor, serving the
/// floor's claims of the namespace it names.
const SERVE: &str = "POOLBOY_CLIENT_FLOOR_NAMESPACE";

/// The environment variable that makes the client floor add the broker's own writes
/// ([`Serving::broker_additions`]): its value is [`Additions::pool_status_every`].
const ADDITIONS: &str = "POOLBOY_CLIENT_FLOOR_ADDITIONS";

/// The names of the client floor's handles.
const SCENARIO: &str = "client";

/// The pool handles staged before the first claim; each bind's refill adds one.
const STAGED: usize = 2;

/// How long a bind may take before the measurement gives up.
const BIND_TIMEOUT: Duration = Duration::from_secs(120);

/// What the client floor does for each claim.
#[derive(Clone, Copy, Default)]
pub struct Serving {
    /// One claim in `edit_every` edited (its ConfigMap's data, as `make soak` edits), and every
    /// claim deleted until it is gone: a whole lifecycle. `None`: warm binds only.
    pub edit_every: Option<usize>,
    /// The writes the broker adds beyond the contract's, with the watch events they bring.
    pub broker_additions: Option<Additions>,
}

/// The writes the broker adds beyond the contract's: its Events (`Bound` on each claim it
/// binds, `ClaimDeleted` on the handle of each claim deleted), and the pool's status, written
/// whole and guarded by its resourceVersion, reserving the refill's name; the pool is watched,
/// as the broker watches it.
#[derive(Clone, Copy)]
pub struct Additions {
    /// The pool's status is written on one bind in this many: every bind when they come one at
    /// a time (`make bench-scale`), one in five under `make soak`'s churn, which the broker's
    /// passes coalesce (0.2 a lifecycle).
    pub pool_status_every: usize,
}

/// What the client floor measured: CPU milliseconds per claim, bind p50 and p99 in
/// milliseconds, and its context switches per claim (voluntary, involuntary).
pub struct Measured {
    pub cpu_per_claim: f64,
    pub p50: f64,
    #[allow(dead_code)] // only benches/soak.rs prints them
    pub p99: f64,
    #[allow(dead_code)] // only benches/soak.rs prints them
    pub switches_per_claim: [f64; 2],
}

/// In the child (the environment names a namespace): serves the floor's claims there until
/// killed, and never returns. Otherwise returns at once. It serves on a runtime of one thread,
/// as the broker's (`cli.rs`): on two, every response moved between threads.
pub fn serve_if_asked(kinds: &Kinds) {
    let Ok(namespace) = std::env::var(SERVE) else {
        return;
    };
    let kinds = kinds.clone();
    // A thread of its own: this one may already run the bench's runtime.
    let served = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let client = Client::try_from(admin_config().await).expect("a kube client");
            serve(&client, &namespace, &kinds).await;
        });
    });
    let _ = served.join();
    std::process::exit(0);
}

async fn serve(client: &Client, namespace: &str, kinds: &Kinds) {
    let pool_status_every = std::env::var(ADDITIONS)
        .ok()
        .map(|every| every.parse::<usize>().expect("a number of binds").max(1));
    let floor = match pool_status_every {
        Some(_) => Floor::in_namespace(client, namespace, kinds).with_broker_writes(client),
        None => Floor::in_namespace(client, namespace, kinds),
    };
    let mut free = floor.stage(SCENARIO, STAGED, STAGED).await;
    let selector = floor::selector();
    let config = || watcher::Config::default().labels(&selector);
    let handles = Api::<HandleObject>::namespaced_with(client.clone(), namespace, &kinds.handle);
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let claims = Api::<ClaimObject>::namespaced_with(client.clone(), namespace, &kinds.claim);
    let mut watches = vec![
        watcher(handles, config()).map(|e| e.map(drop)).boxed(),
        watcher(configmaps, config()).map(|e| e.map(drop)).boxed(),
    ];
    let mut pool_status = match pool_status_every {
        Some(every) => {
            let status = PoolStatus::new(client, namespace, kinds, every).await;
            watches.push(
                watcher(status.pools.clone(), config())
                    .map(|e| e.map(drop))
                    .boxed(),
            );
            Some(status)
        }
        None => None,
    };
    // Decoded and dropped: what the broker's watches of them cost, without a store.
    for watch in watches {
        tokio::spawn(watch.for_each(|_| async {}));
    }
    let mut claims = watcher(claims, config()).boxed();
    let mut listed = false;
    let mut refills = 0;
    // What each bound claim was served: its handle and ConfigMap, and its resources then.
    let mut served: HashMap<String, (Staged, Value)> = HashMap::new();
    while let Some(event) = claims.next().await {
        let claim = match event {
            Ok(watcher::Event::InitDone) if !listed => {
                listed = true;
                println!("ready");
                continue;
            }
            Ok(watcher::Event::Apply(claim)) => claim,
            _ => continue,
        };
        let name = claim.name_any();
        if claim.metadata.deletion_timestamp.is_some() {
            if let Some((staged, _)) = served.remove(&name) {
                floor.serve_delete(&name, &staged).await;
                println!("deleted {name}");
            }
            continue;
        }
        let body: Value = serde_json::to_value(&claim).expect("a claim as JSON");
        let resources = body["spec"]["resources"].clone();
        if let Some((staged, before)) = served.get_mut(&name) {
            // The floor's own writes keep the template; the user's edit changes it.
            if template_of(before) != template_of(&resources) {
                floor.serve_edit(&body, staged).await;
                *before = resources;
                println!("edited {name}");
            }
            continue;
        }
        if !claim.finalizers().is_empty() {
            continue;
        }
        let Some(staged) = free.pop() else {
            eprintln!("client floor: no free handle for {name}");
            continue;
        };
        floor.serve_warm(&body, &staged).await;
        let refill = handle_name(SCENARIO, STAGED + refills);
        if let Some(status) = &mut pool_status
            && refills % status.every == 0
        {
            status.reserve(&free, &refill).await;
        }
        served.insert(name.clone(), (staged, resources));
        free.push(floor.refill(&refill).await);
        refills += 1;
        println!("bound {name}");
    }
}

/// The template of the first resource of `resources` (the floor's claims have one).
fn template_of(resources: &Value) -> &Value {
    &resources[0]["template"]
}

/// The broker's pool status writes ([`Additions`]), to the pool the floor's handles name, made
/// for them; the floor publishes the broker's Events.
struct PoolStatus {
    pools: Api<PoolObject>,
    /// The pool's resourceVersion, as the last write left it.
    version: String,
    params: PatchParams,
    /// [`Additions::pool_status_every`].
    every: usize,
}

impl PoolStatus {
    async fn new(client: &Client, namespace: &str, kinds: &Kinds, every: usize) -> Self {
        let pools = Api::<PoolObject>::namespaced_with(client.clone(), namespace, &kinds.pool);
        let pool: PoolObject = serde_json::from_value(json!({
            "apiVersion": kinds.pool.api_version,
            "kind": kinds.pool.kind,
            "metadata": {"name": floor::SOURCE, "labels": floor::labels()},
            "spec": {
                "minAvailable": STAGED,
                "resources": [{
                    "provider": {"apiVersion": kinds.provider.api_version,
                        "kind": kinds.provider.kind, "name": floor::SOURCE, "namespace": namespace},
                    "template": {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"labels": {"bench/kind": floor::SOURCE}}},
                }],
            },
        }))
        .expect("a pool");
        let created = pools
            .create(&PostParams::default(), &pool)
            .await
            .expect("create the floor's pool");
        Self {
            pools,
            version: created.metadata.resource_version.unwrap_or_default(),
            params: PatchParams {
                field_manager: Some("poolboy".to_owned()),
                ..PatchParams::default()
            },
            every,
        }
    }

    /// The pool's status listing the `free` handles, ready, and reserving `new`.
    async fn reserve(&mut self, free: &[Staged], new: &str) {
        let mut entries: Vec<Value> = free
            .iter()
            .map(|s| json!({"name": s.handle(), "healthy": true, "ready": true}))
            .collect();
        entries.push(json!({"name": new}));
        let patch = json!({
            "metadata": {"resourceVersion": self.version},
            "status": {
                "resourceHandleCount": {"available": entries.len(), "ready": free.len()},
                "resourceHandles": entries,
            },
        });
        let written = self
            .pools
            .patch_status(floor::SOURCE, &self.params, &Patch::Merge(&patch))
            .await
            .expect("write the pool's status");
        self.version = written.metadata.resource_version.unwrap_or_default();
    }
}

/// `claims` claims, one at a time, served by the client floor in its own process, in `env`'s
/// namespace, as `serving` says: its CPU per claim, and the bind latencies.
pub async fn measure(env: &TestEnv, kinds: &Kinds, claims: usize, serving: Serving) -> Measured {
    let server = Server::start(env, serving);
    let floor = Floor::in_namespace(&env.client, &env.namespace, kinds);
    let api =
        Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.namespace, &kinds.claim);
    let before = server.usage().await;
    let mut latencies = Vec::new();
    for i in 0..claims {
        let name = format!("client-floor-{i:03}");
        let created = Instant::now();
        floor
            .create_unserved(&claim(&env.namespace, &name, "floor"))
            .await;
        server.expect(&format!("bound {name}"));
        latencies.push(created.elapsed().as_secs_f64() * 1000.0);
        let Some(edit_every) = serving.edit_every else {
            continue;
        };
        if i % edit_every == 0 {
            edit(&api, &name).await.expect("edit a claim");
            server.expect(&format!("edited {name}"));
        }
        api.delete(&name, &DeleteParams::default())
            .await
            .expect("delete a claim");
        server.expect(&format!("deleted {name}"));
    }
    server.stop(env, kinds, before, claims, latencies).await
}

/// How `make soak`'s churn comes: claims created at `rate` a second, one in five edited once
/// half of `live` newer ones exist, each deleted once `live` newer ones exist.
#[derive(Clone, Copy)]
#[allow(dead_code)] // only benches/soak.rs churns
pub struct Churn {
    pub rate: f64,
    pub live: usize,
}

#[allow(dead_code)] // only benches/soak.rs churns
impl Churn {
    /// What comes at the churn's tick `i`, by claim number: claim `i` created, the claim
    /// edited then if one is, and the claim deleted then if one is.
    pub fn at(&self, i: usize) -> (usize, Option<usize>, Option<usize>) {
        let edit_lag = self.live / 2;
        let edited = i
            .checked_sub(edit_lag)
            .filter(|edited| edited.is_multiple_of(5));
        (i, edited, i.checked_sub(self.live))
    }
}

/// `claims` claims coming as `churn` says, the last `live` deleted together at the end,
/// served by the client floor in its own process as `serving` says (every claim edited is
/// edited once): what a client making the broker's requests spends under the load a broker
/// serves.
#[allow(dead_code)] // only benches/soak.rs churns
pub async fn measure_churn(
    env: &TestEnv,
    kinds: &Kinds,
    claims: usize,
    churn: Churn,
    serving: Serving,
) -> Measured {
    let server = Server::start(env, serving);
    let floor = Arc::new(Floor::in_namespace(&env.client, &env.namespace, kinds));
    let api =
        Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.namespace, &kinds.claim);
    let name = |i: usize| format!("client-churn-{i:05}");
    let before = server.usage().await;
    let mut created = HashMap::new();
    let mut in_flight = tokio::task::JoinSet::new();
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / churn.rate));
    for i in 0..claims {
        ticker.tick().await;
        let (new, edited, deleted) = churn.at(i);
        created.insert(name(new), Instant::now());
        let (floor, body) = (floor.clone(), claim(&env.namespace, &name(new), "floor"));
        in_flight.spawn(async move {
            floor.create_unserved(&body).await;
        });
        if let Some(edited) = edited {
            let (api, name) = (api.clone(), name(edited));
            in_flight.spawn(async move {
                edit(&api, &name).await.expect("edit a claim");
            });
        }
        if let Some(deleted) = deleted {
            let (api, name) = (api.clone(), name(deleted));
            in_flight.spawn(async move {
                api.delete(&name, &DeleteParams::default())
                    .await
                    .expect("delete a claim");
            });
        }
        while in_flight.try_join_next().is_some() {}
    }
    while in_flight.join_next().await.is_some() {}
    for i in claims.saturating_sub(churn.live)..claims {
        api.delete(&name(i), &DeleteParams::default())
            .await
            .expect("delete a claim");
    }
    // Every claim's bind, and its deletion served.
    let lines = server.await_deleted(claims);
    let latencies = lines
        .iter()
        .filter_map(|(at, line)| {
            let bound = created.get(line.strip_prefix("bound ")?)?;
            Some(at.duration_since(*bound).as_secs_f64() * 1000.0)
        })
        .collect();
    server.stop(env, kinds, before, claims, latencies).await
}

/// The edit `make soak` makes to a claim.
async fn edit(api: &Api<DynamicObject>, name: &str) -> kube::Result<DynamicObject> {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::<()>::Json(claim_edit()),
    )
    .await
}

/// The client floor's process, serving the floor's claims of a namespace.
struct Server {
    child: Child,
    /// The lines it prints, with when they came.
    lines: mpsc::Receiver<(Instant, String)>,
    pid: String,
    serving: Serving,
}

/// What the client floor's process has used so far: CPU seconds, and its context switches
/// ([`context_switches`]).
struct Usage {
    cpu: f64,
    switches: [u64; 2],
}

impl Server {
    /// The client floor, started to serve `env`'s namespace as `serving` says, and ready (its
    /// watches listed).
    fn start(env: &TestEnv, serving: Serving) -> Self {
        let mut command = Command::new(std::env::current_exe().expect("this bench's binary"));
        command.env(SERVE, &env.namespace).stdout(Stdio::piped());
        if let Some(additions) = serving.broker_additions {
            command.env(ADDITIONS, additions.pool_status_every.to_string());
        }
        let mut child = command.spawn().expect("spawn the client floor");
        let lines = lines_of(&mut child);
        let server = Self {
            pid: child.id().to_string(),
            child,
            lines,
            serving,
        };
        server.expect("ready");
        server
    }

    /// Waits for it to print `wanted`.
    fn expect(&self, wanted: &str) {
        tokio::task::block_in_place(|| {
            let deadline = Instant::now() + BIND_TIMEOUT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.lines.recv_timeout(left) {
                    Ok((_, line)) if line == wanted => return,
                    Ok(_) => {}
                    Err(error) => panic!("the client floor did not print {wanted:?}: {error}"),
                }
            }
        })
    }

    /// Every line it prints until it has served the deletion of `claims` claims.
    fn await_deleted(&self, claims: usize) -> Vec<(Instant, String)> {
        tokio::task::block_in_place(|| {
            let mut lines = Vec::new();
            let mut deleted = 0;
            while deleted < claims {
                match self.lines.recv_timeout(BIND_TIMEOUT) {
                    Ok(line) => {
                        deleted += usize::from(line.1.starts_with("deleted "));
                        lines.push(line);
                    }
                    Err(error) => {
                        panic!("the client floor served {deleted} of {claims} deletions: {error}")
                    }
                }
            }
            lines
        })
    }

    /// What it has used, once the start's CPU has settled.
    async fn usage(&self) -> Usage {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Usage {
            cpu: process_cpu_seconds(&self.pid),
            switches: context_switches(&self.pid),
        }
    }

    /// Stops it once the last claim's watch events have come (after its requests), cleans up
    /// what it made, and measures what it used since `before` for `claims` claims bound with
    /// `latencies` (milliseconds).
    async fn stop(
        mut self,
        env: &TestEnv,
        kinds: &Kinds,
        before: Usage,
        claims: usize,
        mut latencies: Vec<f64>,
    ) -> Measured {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let cpu = process_cpu_seconds(&self.pid) - before.cpu;
        let switches = context_switches(&self.pid);
        let _ = self.child.kill();
        let _ = self.child.wait();
        Floor::in_namespace(&env.client, &env.namespace, kinds)
            .clean()
            .await;
        if self.serving.broker_additions.is_some() {
            let pools = Api::<DynamicObject>::namespaced_with(
                env.client.clone(),
                &env.namespace,
                &kinds.pool,
            );
            pools
                .delete(floor::SOURCE, &DeleteParams::default())
                .await
                .expect("delete the floor's pool");
        }
        latencies.sort_by(f64::total_cmp);
        let per_claim = |count: u64, since: u64| count.saturating_sub(since) as f64 / claims as f64;
        Measured {
            cpu_per_claim: cpu * 1000.0 / claims as f64,
            p50: percentile(&latencies, 0.50),
            p99: percentile(&latencies, 0.99),
            switches_per_claim: [
                per_claim(switches[0], before.switches[0]),
                per_claim(switches[1], before.switches[1]),
            ],
        }
    }
}

/// The lines `child` prints, as they come, with when they came.
fn lines_of(child: &mut Child) -> mpsc::Receiver<(Instant, String)> {
    let stdout = child.stdout.take().expect("the client floor's stdout");
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send((Instant::now(), line)).is_err() {
                return;
            }
        }
    });
    lines
}
