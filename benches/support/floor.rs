//! The floor: the writes a Poolboy-compatible bind cannot do without, made by this
//! process with no broker running, with bodies shaped like the broker's. No broker binds
//! faster, or sooner, on the same API server: where this floor is short of a target, the
//! control plane is the limit, whatever the broker does.
//!
//! A warm bind (§7.2, Δ§3.2) is five requests: the claim's create; its finalizer, init
//! timestamp and providers (one PATCH); the handle's binding (one PATCH); the claim's status
//! naming the handle and its resource's state (one status PATCH); the claim annotations on the
//! ConfigMap (one PATCH). A cold bind (§7.1) creates the handle and its ConfigMap instead of
//! patching them. A pool's refill is the handle, its ConfigMap and the handle's ready status.
//! Left out, so that the floor stays below any broker: events, the handle's own status after
//! a bind, and the claim's second status write once its resource changed. Asked to
//! ([`Floor::with_broker_writes`]), it makes the writes every broker adds: the broker's Events
//! (`Bound` on each claim it binds, `ClaimDeleted` on each handle it deletes for a deleted
//! claim), and on a cold bind the new handle's status naming its ConfigMap, which a
//! Poolboy-compatible broker cannot leave out (Δ§8 B11: a handle's resources are referenced
//! only from its status, and its deletion reads them there).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use poolboy::api::kinds::Kinds;
use serde_json::{Value, json};

use crate::arrivals::poisson;
use crate::machine::lock;
use crate::support::TestEnv;

const DOMAIN: &str = "poolboy.gpte.redhat.com";
/// Every object the floor makes carries it, for the clean-up.
const LABEL: &str = "bench/floor";

/// How long [`Floor::clean`] waits for the API server to have deleted the floor's objects.
const GONE_WITHIN: Duration = Duration::from_secs(180);
/// The provider and pool the floor's objects name (neither exists unless the client floor
/// makes the pool: no broker reads them).
pub const SOURCE: &str = "floor";

/// Claim `index` of the floor's `scenario`.
pub fn claim_name(scenario: &str, index: usize) -> String {
    format!("floor-{scenario}-{index:05}")
}

/// Handle `index` of the floor's `scenario` (handles' names start with `guid-`: their CRD's
/// pattern).
pub fn handle_name(scenario: &str, index: usize) -> String {
    format!("guid-floor-{scenario}-{index:05}")
}

/// The label selector of every object the floor makes.
pub fn selector() -> String {
    format!("{LABEL}=yes")
}

/// The labels [`selector`] selects.
pub fn labels() -> Value {
    json!({LABEL: "yes"})
}

/// Whether claim `name` is one of the floor's, bound by this process rather than a broker.
pub fn is_floor_claim(name: &str) -> bool {
    name.starts_with("floor-")
}

/// The APIs the floor writes through, in the bench's namespace.
pub struct Floor {
    namespace: String,
    claims: Api<DynamicObject>,
    handles: Api<DynamicObject>,
    configmaps: Api<ConfigMap>,
    params: PatchParams,
    /// When asked to make the writes every broker adds ([`Floor::with_broker_writes`]): what
    /// publishes the broker's Events.
    broker_writes: Option<Recorder>,
}

/// A pool handle made by [`Floor::stage`]: its name and its ConfigMap as a claim's status
/// shows it.
#[derive(Clone)]
pub struct Staged {
    handle: String,
    configmap: String,
    state: Value,
}

impl Staged {
    /// The handle's name.
    #[allow(dead_code)] // the client floor's (benches/scale.rs, benches/soak.rs)
    pub fn handle(&self) -> &str {
        &self.handle
    }
}

impl Floor {
    pub fn new(env: &TestEnv, kinds: &Kinds) -> Self {
        Self::in_namespace(&env.client, &env.namespace, kinds)
    }

    /// The floor writing through `client` in `namespace`.
    pub fn in_namespace(client: &Client, namespace: &str, kinds: &Kinds) -> Self {
        let namespaced =
            |resource| Api::<DynamicObject>::namespaced_with(client.clone(), namespace, resource);
        Self {
            namespace: namespace.to_owned(),
            claims: namespaced(&kinds.claim),
            handles: namespaced(&kinds.handle),
            configmaps: Api::namespaced(client.clone(), namespace),
            params: PatchParams {
                field_manager: Some("poolboy".to_owned()),
                ..PatchParams::default()
            },
            broker_writes: None,
        }
    }

    /// The floor that makes the writes every broker adds: it publishes the broker's Events
    /// (`Bound` on each claim it binds, `ClaimDeleted` on each handle it deletes for a deleted
    /// claim) and writes the status of each handle a cold bind creates.
    pub fn with_broker_writes(mut self, client: &Client) -> Self {
        let reporter = Reporter {
            controller: "poolboy".into(),
            instance: None,
        };
        self.broker_writes = Some(Recorder::new(client.clone(), reporter));
        self
    }

    /// `count` pool handles of `scenario`, `parallel` at once, each with its ConfigMap and
    /// ready status, as a pool fill leaves them.
    pub async fn stage(&self, scenario: &str, count: usize, parallel: usize) -> Vec<Staged> {
        let names: Vec<String> = (0..count).map(|i| handle_name(scenario, i)).collect();
        futures::stream::iter(&names)
            .map(|name| self.refill(name))
            .buffered(parallel)
            .collect()
            .await
    }

    /// One pool handle, made as a broker refills its pool: three requests.
    pub async fn refill(&self, name: &str) -> Staged {
        let configmap = format!("{name}-cm");
        let handle = self.create(&self.handles, self.pool_handle(name)).await;
        let uid = handle["metadata"]["uid"].as_str().unwrap_or_default();
        let created = self
            .configmaps
            .create(
                &PostParams::default(),
                &serde_json::from_value(self.configmap(&configmap, name, uid, None))
                    .expect("a ConfigMap"),
            )
            .await
            .expect("create a ConfigMap");
        self.write_handle_status(name, &configmap).await;
        Staged {
            handle: name.to_owned(),
            configmap,
            state: state_of(&created),
        }
    }

    /// Binds each claim of `claims` (this bench's claim bodies) to the staged handle beside
    /// it, `parallel` at once: milliseconds from each create to its status naming the handle.
    pub async fn warm(&self, claims: Vec<(Value, Staged)>, parallel: usize) -> Vec<f64> {
        futures::stream::iter(claims)
            .map(|(claim, staged)| self.bind_warm(claim, staged))
            .buffer_unordered(parallel)
            .collect()
            .await
    }

    /// Serves each claim of `claims` with a handle and ConfigMap of its own, `parallel` at
    /// once: milliseconds from each create to its status naming the handle.
    pub async fn cold(&self, claims: Vec<Value>, parallel: usize) -> Vec<f64> {
        futures::stream::iter(claims)
            .map(|claim| self.bind_cold(claim))
            .buffer_unordered(parallel)
            .collect()
            .await
    }

    /// Claims of `scenario` made by `claim_of` (given their name) arriving at `rate` a second
    /// (Poisson) for `window`, each bound to a handle of the pool `staged` (staged for
    /// `scenario`) that one refill per bind keeps full: milliseconds from each create to its
    /// status naming the handle.
    pub async fn sustained(
        self: Arc<Self>,
        scenario: &str,
        staged: Vec<Staged>,
        claim_of: impl Fn(&str) -> Value,
        rate: f64,
        window: Duration,
    ) -> Vec<f64> {
        let pool = staged.len();
        let free = Arc::new(Mutex::new(VecDeque::from(staged)));
        let started = tokio::time::Instant::now();
        let mut arrivals = Vec::new();
        for (index, at) in poisson(rate, window).into_iter().enumerate() {
            let claim = claim_of(&claim_name(scenario, index));
            let refill_name = handle_name(scenario, pool + index);
            let (floor, free) = (self.clone(), free.clone());
            arrivals.push(tokio::spawn(async move {
                tokio::time::sleep_until(started + at).await;
                let created = Instant::now();
                let staged = loop {
                    if let Some(staged) = lock(&free).pop_front() {
                        break staged;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                };
                let bound = floor.bind_warm_from(claim, staged, created).await;
                let refill = floor.refill(&refill_name).await;
                lock(&free).push_back(refill);
                bound
            }));
        }
        let mut bound = Vec::new();
        for arrival in arrivals {
            bound.push(arrival.await.expect("an arrival"));
        }
        bound
    }

    async fn bind_warm(&self, claim: Value, staged: Staged) -> f64 {
        self.bind_warm_from(claim, staged, Instant::now()).await
    }

    /// The warm bind of `claim` to `staged`, timed from `created`.
    async fn bind_warm_from(&self, claim: Value, staged: Staged, created: Instant) -> f64 {
        let claim = self.create_claim(&claim).await;
        self.bind_initialised(&claim, staged, created).await
    }

    /// The warm bind of `claim`, created by someone else, to `staged`: the four requests after
    /// the create.
    #[allow(dead_code)] // the client floor's (benches/scale.rs)
    pub async fn serve_warm(&self, claim: &Value, staged: &Staged) {
        self.initialise_claim(name_of(claim), claim).await;
        self.bind_initialised(claim, staged.clone(), Instant::now())
            .await;
    }

    /// Carries the edit of claim `claim` (bound to `staged`) to its handle: one request. The
    /// ConfigMap stays as it is: a provider without `updateFilters`, as the benchmarks' is,
    /// changes no existing resource (§12.2).
    #[allow(dead_code)] // the client floor's (benches/soak.rs)
    pub async fn serve_edit(&self, claim: &Value, staged: &Staged) {
        self.handles
            .patch(
                &staged.handle,
                &self.params,
                &Patch::Merge(json!({"spec": {"resources": claimed_resources(claim)}})),
            )
            .await
            .expect("update a handle");
    }

    /// Deletes claim `name`'s handle and ConfigMap (`staged`), and lets the handle and then the
    /// claim go: four requests (and the `ClaimDeleted` Event, when this floor publishes them).
    #[allow(dead_code)] // the client floor's (benches/soak.rs)
    pub async fn serve_delete(&self, name: &str, staged: &Staged) {
        let deleted = self
            .handles
            .delete(&staged.handle, &DeleteParams::default())
            .await
            .expect("delete a handle");
        if let Some(handle) = deleted.left() {
            self.publish_claim_deleted(name, &handle).await;
        }
        self.configmaps
            .delete(&staged.configmap, &DeleteParams::default())
            .await
            .expect("delete a ConfigMap");
        for (api, name) in [
            (&self.handles, staged.handle.as_str()),
            (&self.claims, name),
        ] {
            api.patch(name, &self.params, &unfinalize())
                .await
                .expect("remove a finalizer");
        }
    }

    /// Binds the initialised `claim` (as the API server has it) to `staged`: milliseconds from
    /// `created` to its status naming the handle.
    async fn bind_initialised(&self, claim: &Value, staged: Staged, created: Instant) -> f64 {
        let name = name_of(claim);
        self.handles
            .patch(
                &staged.handle,
                &self.params,
                &Patch::Merge(json!({
                    "metadata": {"labels": claim_labels(&self.namespace, name)},
                    "spec": {
                        "resourceClaim": reference("ResourceClaim", name, &self.namespace),
                        "resources": claimed_resources(claim),
                    },
                })),
            )
            .await
            .expect("bind a handle");
        self.write_claim_status(name, &staged.handle, &staged.configmap, Some(&staged.state))
            .await;
        let bound = created.elapsed().as_secs_f64() * 1000.0;
        self.publish_bound(claim, &staged.handle, true).await;
        self.configmaps
            .patch(
                &staged.configmap,
                &self.params,
                &Patch::Merge(json!({"metadata": {"annotations": {
                    format!("{DOMAIN}/resource-claim-name"): name,
                    format!("{DOMAIN}/resource-claim-namespace"): self.namespace,
                }}})),
            )
            .await
            .expect("annotate a ConfigMap");
        bound
    }

    /// The cold bind of `claim`: a handle and a ConfigMap of its own.
    async fn bind_cold(&self, claim: Value) -> f64 {
        let created = Instant::now();
        let claim = self.create_claim(&claim).await;
        let name = name_of(&claim);
        let handle_name = format!("guid-{name}");
        let configmap = format!("{name}-cm");
        let mut handle = self.pool_handle(&handle_name);
        handle["metadata"]["labels"] = claim_labels(&self.namespace, name);
        handle["spec"] = json!({
            "resourceClaim": reference("ResourceClaim", name, &self.namespace),
            "resources": claimed_resources(&claim),
        });
        let handle = self.create(&self.handles, handle).await;
        self.write_claim_status(name, &handle_name, &configmap, None)
            .await;
        let bound = created.elapsed().as_secs_f64() * 1000.0;
        self.publish_bound(&claim, &handle_name, false).await;
        let uid = handle["metadata"]["uid"].as_str().unwrap_or_default();
        self.configmaps
            .create(
                &PostParams::default(),
                &serde_json::from_value(self.configmap(&configmap, &handle_name, uid, Some(name)))
                    .expect("a ConfigMap"),
            )
            .await
            .expect("create a ConfigMap");
        if self.broker_writes.is_some() {
            self.write_handle_status(&handle_name, &configmap).await;
        }
        bound
    }

    /// Creates `claim`, then gives it its finalizer, init timestamp and providers: the claim
    /// as its create answered.
    async fn create_claim(&self, claim: &Value) -> Value {
        let created = self.create_labelled(claim).await;
        self.initialise_claim(name_of(&created), claim).await;
        created
    }

    /// Creates `claim` as one of the floor's, for someone else to serve: its name.
    #[allow(dead_code)] // the client floor's (benches/scale.rs, benches/soak.rs)
    pub async fn create_unserved(&self, claim: &Value) -> String {
        name_of(&self.create_labelled(claim).await).to_owned()
    }

    /// Creates `claim` with the floor's labels: the claim as its create answered.
    async fn create_labelled(&self, claim: &Value) -> Value {
        let mut claim = claim.clone();
        claim["metadata"]["labels"] = labels();
        self.create(&self.claims, claim).await
    }

    /// The broker's `Bound` Event on `claim` (as the API server has it), bound to `handle`
    /// (of the pool when `warm`, else made for it), when this floor publishes them.
    async fn publish_bound(&self, claim: &Value, handle: &str, warm: bool) {
        let Some(recorder) = &self.broker_writes else {
            return;
        };
        let event = Event {
            type_: EventType::Normal,
            reason: "Bound".to_owned(),
            note: Some(match warm {
                true => format!(
                    "bound to ResourceHandle {handle} of ResourcePool {SOURCE}; the resources \
                     of ResourceHandle {handle} are ready"
                ),
                false => format!("bound to ResourceHandle {handle}, created for the claim"),
            }),
            action: "Bind".to_owned(),
            secondary: None,
        };
        recorder
            .publish(&event, &regarding(claim))
            .await
            .expect("publish an Event");
    }

    /// The broker's `ClaimDeleted` Event on `handle` (as its deletion left it), deleted for
    /// claim `name`, when this floor publishes them.
    async fn publish_claim_deleted(&self, name: &str, handle: &DynamicObject) {
        let Some(recorder) = &self.broker_writes else {
            return;
        };
        let event = Event {
            type_: EventType::Normal,
            reason: "ClaimDeleted".to_owned(),
            note: Some(format!(
                "ResourceClaim {}/{name} was deleted: deleting the handle and its resources",
                self.namespace
            )),
            action: "ClaimDeleted".to_owned(),
            secondary: None,
        };
        let handle = serde_json::to_value(handle).expect("a handle as JSON");
        recorder
            .publish(&event, &regarding(&handle))
            .await
            .expect("publish an Event");
    }

    /// Gives claim `name` its finalizer, init timestamp and providers.
    async fn initialise_claim(&self, name: &str, claim: &Value) {
        self.claims
            .patch(
                name,
                &self.params,
                &Patch::Merge(json!({
                    "metadata": {
                        "finalizers": [DOMAIN],
                        "annotations": {format!("{DOMAIN}/resource-claim-init-timestamp"): now()},
                    },
                    "spec": {"resources": claimed_resources(claim)},
                })),
            )
            .await
            .expect("initialise a claim");
    }

    /// The status a broker writes when it binds claim `name` to `handle`, as the claim
    /// controller's bind pass writes it: conditions, lifespan, the handle and the resource.
    async fn write_claim_status(
        &self,
        name: &str,
        handle: &str,
        configmap: &str,
        state: Option<&Value>,
    ) {
        let condition = |kind: &str, status: &str, reason: &str, message: &str| {
            json!({"type": kind, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": now(), "observedGeneration": 2})
        };
        let mut resource = json!({
            "name": "config",
            "provider": reference("ResourceProvider", SOURCE, &self.namespace),
            "ready": state.is_some(),
            "reference": {"apiVersion": "v1", "kind": "ConfigMap", "name": configmap,
                "namespace": self.namespace},
        });
        if let Some(state) = state {
            resource["state"] = state.clone();
        }
        let bound = format!("bound to ResourceHandle {handle}");
        let status = json!({"status": {
            "conditions": [
                condition("LifespanEnding", "False", "NoEnd", "the lifespan has no end"),
                condition("Valid", "True", "Valid",
                    "the claim's providers resolve and its values pass validation"),
                condition("Bound", "True", "Bound", &bound),
                condition("Ready", "True", "Ready",
                    &format!("the resources of ResourceHandle {handle} are ready")),
            ],
            "lifespan": {"firstReady": now(), "start": now()},
            "ready": state.is_some(),
            "resourceHandle": reference("ResourceHandle", handle, &self.namespace),
            "resources": [resource],
        }});
        self.claims
            .patch_status(name, &self.params, &Patch::Merge(status))
            .await
            .expect("write a claim's status");
    }

    /// Handle `name`'s status: ready, naming its ConfigMap `configmap`.
    async fn write_handle_status(&self, name: &str, configmap: &str) {
        self.handles
            .patch_status(
                name,
                &self.params,
                &Patch::Merge(handle_status(&self.namespace, configmap)),
            )
            .await
            .expect("write a handle's status");
    }

    async fn create(&self, api: &Api<DynamicObject>, object: Value) -> Value {
        let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
        let created = api
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create: {e}"));
        serde_json::to_value(created).expect("an object as JSON")
    }

    /// A pool's unbound handle `name`, as a broker creates it.
    fn pool_handle(&self, name: &str) -> Value {
        json!({
            "apiVersion": format!("{DOMAIN}/v1"),
            "kind": "ResourceHandle",
            "metadata": {
                "name": name,
                "annotations": {format!("{DOMAIN}/resource-pool-version"): "ad5a1bd0d8c1f6ca"},
                "finalizers": [DOMAIN],
                "labels": {
                    LABEL: "yes",
                    format!("{DOMAIN}/resource-pool-name"): SOURCE,
                    format!("{DOMAIN}/resource-pool-namespace"): self.namespace,
                },
            },
            "spec": {
                "resourcePool": reference("ResourcePool", SOURCE, &self.namespace),
                "resources": [{
                    "provider": reference("ResourceProvider", SOURCE, &self.namespace),
                    "template": {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"labels": {"bench/kind": SOURCE}}},
                }],
            },
        })
    }

    /// The ConfigMap `name` of `handle` (uid `uid`), with its claim's annotations when it has
    /// one.
    fn configmap(&self, name: &str, handle: &str, uid: &str, claim: Option<&str>) -> Value {
        let annotation = |key: &str| format!("{DOMAIN}/{key}");
        let mut annotations = json!({
            annotation("resource-handle-name"): handle,
            annotation("resource-handle-namespace"): self.namespace,
            annotation("resource-handle-uid"): uid,
            annotation("resource-index"): "0",
            annotation("resource-pool-name"): SOURCE,
            annotation("resource-pool-namespace"): self.namespace,
            annotation("resource-provider-name"): SOURCE,
            annotation("resource-provider-namespace"): self.namespace,
        });
        if let Some(claim) = claim {
            annotations[annotation("resource-claim-name")] = json!(claim);
            annotations[annotation("resource-claim-namespace")] = json!(self.namespace);
        }
        json!({
            "metadata": {"name": name, "annotations": annotations,
                "labels": {LABEL: "yes", "bench/kind": SOURCE}},
        })
    }

    /// Deletes everything the floor made, its finalizers first (no broker removes them), and
    /// returns once the API server has none of it left: a collection delete that outlasts the
    /// client's timeout goes on in the API server, and a broker started meanwhile would be
    /// measured while it deletes (and while the broker's watches hear of each deletion).
    pub async fn clean(&self) {
        let labelled = ListParams::default().labels(&selector());
        self.delete_everything(&labelled).await;
        let start = Instant::now();
        loop {
            let left = self.left(&labelled).await;
            if left == 0 {
                return;
            }
            if start.elapsed() > GONE_WITHIN {
                eprintln!("the floor's objects: {left} left after {GONE_WITHIN:?}");
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// How many of the floor's claims, handles and ConfigMaps the API server still has (a list
    /// that fails counts as some).
    async fn left(&self, labelled: &ListParams) -> usize {
        [
            count(&self.claims, labelled).await,
            count(&self.handles, labelled).await,
            count(&self.configmaps, labelled).await,
        ]
        .into_iter()
        .fold(0, usize::saturating_add)
    }

    /// Deletes everything the floor made (`labelled` selects it), its finalizers first.
    async fn delete_everything(&self, labelled: &ListParams) {
        let unfinalize = unfinalize();
        for api in [&self.claims, &self.handles] {
            let names: Vec<String> = api
                .list_metadata(labelled)
                .await
                .expect("list the floor's objects")
                .items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect();
            futures::stream::iter(names)
                .map(|name| {
                    let unfinalize = &unfinalize;
                    async move {
                        // Gone already is as good.
                        let _ = api.patch(&name, &PatchParams::default(), unfinalize).await;
                    }
                })
                .buffer_unordered(16)
                .collect::<Vec<()>>()
                .await;
            delete_all(api, labelled, "the floor's claims and handles").await;
        }
        delete_all(&self.configmaps, labelled, "the floor's ConfigMaps").await;
    }
}

/// How many objects of `api` `selected` selects; `usize::MAX` when the list fails.
async fn count<K>(api: &Api<K>, selected: &ListParams) -> usize
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list_metadata(selected)
        .await
        .map_or(usize::MAX, |list| list.items.len())
}

/// Deletes the objects of `api` that `selected` selects. A collection of thousands can outlast
/// the client's timeout on a busy API server, which deletes on meanwhile: asked again, it
/// deletes what is left.
async fn delete_all<K>(api: &Api<K>, selected: &ListParams, what: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    const ATTEMPTS: usize = 3;
    for attempt in 1..=ATTEMPTS {
        match api
            .delete_collection(&DeleteParams::default(), selected)
            .await
        {
            Ok(_) => return,
            Err(error) if attempt < ATTEMPTS => {
                eprintln!("delete {what}: {error}; asking again");
            }
            Err(error) => panic!("delete {what}: {error}"),
        }
    }
}

/// The patch that releases every finalizer of an object (no broker runs to release them).
fn unfinalize() -> Patch<Value> {
    Patch::Merge(json!({"metadata": {"finalizers": null}}))
}

/// The labels a bound handle carries.
fn claim_labels(namespace: &str, claim: &str) -> Value {
    json!({
        LABEL: "yes",
        format!("{DOMAIN}/resource-claim-name"): claim,
        format!("{DOMAIN}/resource-claim-namespace"): namespace,
        format!("{DOMAIN}/resource-pool-name"): SOURCE,
        format!("{DOMAIN}/resource-pool-namespace"): namespace,
    })
}

/// `claim`'s resources, each naming the floor's provider.
fn claimed_resources(claim: &Value) -> Value {
    let namespace = claim["metadata"]["namespace"].as_str().unwrap_or_default();
    let mut resources = claim["spec"]["resources"].clone();
    for resource in resources.as_array_mut().into_iter().flatten() {
        resource["provider"] = reference("ResourceProvider", SOURCE, namespace);
    }
    resources
}

/// The ready status of a pool handle whose ConfigMap is `configmap`.
fn handle_status(namespace: &str, configmap: &str) -> Value {
    let condition = |kind: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": now(), "observedGeneration": 1})
    };
    json!({"status": {
        "conditions": [
            condition("Ready", "ResourcesReady", "every resource is ready"),
            condition("Valid", "Rendered", "every resource definition renders"),
        ],
        "ready": true,
        "resources": [{"ready": true, "reference": {"apiVersion": "v1", "kind": "ConfigMap",
            "name": configmap, "namespace": namespace}}],
    }})
}

/// A reference to Poolboy object `kind` `name`.
fn reference(kind: &str, name: &str, namespace: &str) -> Value {
    json!({"apiVersion": format!("{DOMAIN}/v1"), "kind": kind, "name": name,
        "namespace": namespace})
}

/// A created ConfigMap as a claim's status shows it: without managedFields and Poolboy's
/// annotations.
fn state_of(configmap: &ConfigMap) -> Value {
    let mut state = serde_json::to_value(configmap).expect("a ConfigMap as JSON");
    if let Some(metadata) = state["metadata"].as_object_mut() {
        metadata.remove("managedFields");
        metadata.remove("annotations");
    }
    state["apiVersion"] = json!("v1");
    state["kind"] = json!("ConfigMap");
    state
}

/// What an Event about `object` (as the API server has it) is regarding.
fn regarding(object: &Value) -> ObjectReference {
    let text = |key: &str| object[key].as_str().map(str::to_owned);
    let metadata = |key: &str| object["metadata"][key].as_str().map(str::to_owned);
    ObjectReference {
        api_version: text("apiVersion"),
        kind: text("kind"),
        name: metadata("name"),
        namespace: metadata("namespace"),
        uid: metadata("uid"),
        ..ObjectReference::default()
    }
}

/// The name of object `object`.
fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
