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
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use poolboy::api::kinds::{ClaimObject, HandleObject, Kinds, PoolObject};
use serde_json::{Value, json};

use crate::floor::{self, Floor, Staged, handle_name};
use crate::machine::{percentile, process_cpu_seconds};
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

/// What the client floor measured: CPU milliseconds per claim, and bind p50 in milliseconds.
pub struct Measured {
    pub cpu_per_claim: f64,
    pub p50: f64,
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
        Some(_) => Floor::in_namespace(client, namespace, kinds).with_events(client),
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
/// namespace, as `serving` says: its CPU per claim, and the bind p50.
pub async fn measure(env: &TestEnv, kinds: &Kinds, claims: usize, serving: Serving) -> Measured {
    let mut command = Command::new(std::env::current_exe().expect("this bench's binary"));
    command.env(SERVE, &env.namespace).stdout(Stdio::piped());
    if let Some(additions) = serving.broker_additions {
        command.env(ADDITIONS, additions.pool_status_every.to_string());
    }
    let mut child = command.spawn().expect("spawn the client floor");
    let lines = lines_of(&mut child);
    let pid = child.id().to_string();
    let expect = |line: &str| tokio::task::block_in_place(|| expect_line(&lines, line));
    expect("ready");
    let floor = Floor::in_namespace(&env.client, &env.namespace, kinds);
    let api =
        Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.namespace, &kinds.claim);
    // Settles the start's CPU before the first claim.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu_before = process_cpu_seconds(&pid);
    let mut latencies = Vec::new();
    for i in 0..claims {
        let name = format!("client-floor-{i:03}");
        let created = Instant::now();
        floor
            .create_unserved(&claim(&env.namespace, &name, "floor"))
            .await;
        expect(&format!("bound {name}"));
        latencies.push(created.elapsed().as_secs_f64() * 1000.0);
        let Some(edit_every) = serving.edit_every else {
            continue;
        };
        if i % edit_every == 0 {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::<()>::Json(claim_edit()),
            )
            .await
            .expect("edit a claim");
            expect(&format!("edited {name}"));
        }
        api.delete(&name, &DeleteParams::default())
            .await
            .expect("delete a claim");
        expect(&format!("deleted {name}"));
    }
    // The last claim's watch events come after its requests.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cpu = process_cpu_seconds(&pid) - cpu_before;
    let _ = child.kill();
    let _ = child.wait();
    floor.clean().await;
    if serving.broker_additions.is_some() {
        let pools =
            Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.namespace, &kinds.pool);
        pools
            .delete(floor::SOURCE, &DeleteParams::default())
            .await
            .expect("delete the floor's pool");
    }
    latencies.sort_by(f64::total_cmp);
    Measured {
        cpu_per_claim: cpu * 1000.0 / claims as f64,
        p50: percentile(&latencies, 0.50),
    }
}

/// The lines `child` prints, as they come.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("the client floor's stdout");
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                return;
            }
        }
    });
    lines
}

/// Waits for the child to print `wanted`.
fn expect_line(lines: &mpsc::Receiver<String>, wanted: &str) {
    let deadline = Instant::now() + BIND_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line == wanted => return,
            Ok(_) => {}
            Err(error) => panic!("the client floor did not print {wanted:?}: {error}"),
        }
    }
}
