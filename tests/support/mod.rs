//! The harness every integration test uses (`mod support;`): a client for the local control
//! plane (`make cluster`), a fresh namespace per test, the project's CRDs installed once per
//! test binary, and clients that act as a ServiceAccount.
//!
//! Each `#[tokio::test]` runs on its own runtime, and a `kube::Client` is bound to the runtime
//! that made it. So nothing here shares a client between tests; the only process-wide state is
//! the fact that the CRDs were installed.
//!
//! The fixtures more than one test file needs live in the submodules: [`objects`] (Poolboy
//! objects as the tests write them), [`apis`] (`Apis` and [`apis::bound`]), [`fixtures`]
//! (reads, waits and watches on handles, ConfigMaps and pools), [`config`] (the `config`
//! ConfigMap provider and its claims and handles) and [`operator`] (the operator in-process).

// Every test binary compiles its own copy of this module and uses a different part of it.
#![allow(dead_code)]

pub mod apis;
pub mod config;
pub mod fixtures;
pub mod http;
pub mod lease;
pub mod objects;
pub mod operator;
pub mod tools;

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::ListParams;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, Config, Resource, ResourceExt};
use poolboy::api::{ResourceClaim, ResourceHandle, ResourcePool};
use rand::RngExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use operator::TestOperator;

/// The field manager of everything the tests apply server-side.
pub const FIELD_MANAGER: &str = "poolboy-tests";
/// Every test namespace carries this label, so leftovers are easy to find and delete.
pub const NAMESPACE_LABEL: &str = "poolboy.test/owned";
/// How long the harness waits for the cluster to settle (CRDs established, and so on).
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a test waits for the operator to act (generous: a loaded machine runs many test
/// binaries at once).
pub const TIMEOUT: Duration = Duration::from_secs(40);

static PROJECT_CRDS: OnceCell<()> = OnceCell::const_new();

/// One test's view of the cluster: an admin client and a namespace of its own.
pub struct TestEnv {
    /// Cluster-admin client (the kubeconfig's identity, group `system:masters`).
    pub client: Client,
    /// The fresh namespace created for this test (`poolboy-test-<random>`).
    pub namespace: String,
    config: Config,
    cleaned_up: bool,
}

impl TestEnv {
    /// Connects to the local control plane, installs the project's CRDs (once per test binary)
    /// and creates a fresh namespace.
    ///
    /// Panics when the control plane is not reachable: integration tests never skip silently.
    pub async fn new() -> TestEnv {
        let config = admin_config().await;
        let client = Client::try_from(config.clone()).expect("building a kube client");
        if let Err(e) = tokio::time::timeout(Duration::from_secs(10), client.apiserver_version())
            .await
            .unwrap_or_else(|_| panic!("{}: no answer within 10 s", kubeconfig_path().display()))
        {
            panic!(
                "the control plane of {} is not reachable ({e}); run `make cluster` first \
                 (or run everything with `make test`)",
                kubeconfig_path().display()
            );
        }

        PROJECT_CRDS
            .get_or_init(|| async {
                let crds = poolboy::api::crd::all(&poolboy::api::OperatorDomain::default());
                apply_crds(&client, &crds).await;
            })
            .await;

        let namespace = format!("poolboy-test-{}", random_suffix());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.clone()),
                labels: Some([(NAMESPACE_LABEL.to_owned(), "true".to_owned())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {namespace}: {e}"));

        TestEnv {
            client,
            namespace,
            config,
            cleaned_up: false,
        }
    }

    /// `Api<K>` in this test's namespace, with the admin client.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Names `user` as the requester of claims in this test's namespace (§5.7).
    pub async fn annotate_requester(&self, user: &str) {
        let annotate = json!({"metadata": {"annotations": {"openshift.io/requester": user}}});
        Api::<Namespace>::all(self.client.clone())
            .patch(
                &self.namespace,
                &PatchParams::default(),
                &Patch::Merge(&annotate),
            )
            .await
            .expect("annotate the namespace");
    }

    /// The admin client's configuration: what an in-process operator connects with (it builds
    /// the broker's own client from it, see [`operator::TestOperator`]).
    pub fn kube_config(&self) -> Config {
        self.config.clone()
    }

    /// A client that authenticates as ServiceAccount `name` of this test's namespace (created
    /// when missing), with a token from the TokenRequest API. It has only the permissions that
    /// RBAC grants `system:serviceaccount:<namespace>:<name>`.
    pub async fn client_as_service_account(&self, name: &str) -> Client {
        let config = self.config_as_service_account(name).await;
        Client::try_from(config).expect("building a ServiceAccount client")
    }

    /// The configuration of [`TestEnv::client_as_service_account`].
    pub async fn config_as_service_account(&self, name: &str) -> Config {
        let accounts: Api<ServiceAccount> = self.api();
        let account = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        match accounts.create(&PostParams::default(), &account).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(e) => panic!("creating ServiceAccount {}/{name}: {e}", self.namespace),
        }
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: Vec::new(), // the API server's own audience
                expiration_seconds: Some(3600),
                ..Default::default()
            },
            ..Default::default()
        };
        let token = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .unwrap_or_else(|e| panic!("TokenRequest for {}/{name}: {e}", self.namespace))
            .status
            .unwrap_or_else(|| panic!("TokenRequest for {}/{name}: no status", self.namespace))
            .token;

        let mut config = self.config.clone();
        config.auth_info = AuthInfo {
            token: Some(token.into()),
            ..Default::default()
        };
        config
    }

    /// Grants ServiceAccount `account` of this test's namespace what `rules` (RBAC rules as
    /// JSON) allow there, through a Role and a RoleBinding both called `name`. The authorizer
    /// learns of bindings through an informer: a test waits for a request they allow.
    pub async fn grant(&self, name: &str, account: &str, rules: Value) {
        let role: Role = from_json(json!({"metadata": {"name": name}, "rules": rules}));
        self.api::<Role>()
            .create(&PostParams::default(), &role)
            .await
            .unwrap_or_else(|e| panic!("creating Role {name}: {e}"));
        let binding: RoleBinding = from_json(json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": self.namespace}],
        }));
        self.api::<RoleBinding>()
            .create(&PostParams::default(), &binding)
            .await
            .unwrap_or_else(|e| panic!("creating RoleBinding {name}: {e}"));
    }

    /// Creates `object` in this test's namespace and returns it as created. Panics when the
    /// API server refuses it.
    pub async fn create<K>(&self, object: &K) -> K
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
        <K as Resource>::DynamicType: Default,
    {
        create(&self.api(), object).await
    }

    /// The name of the ConfigMap handle `handle` made (its first resource's reference in its
    /// status), once the handle reports it and the ConfigMap exists (the handle may record the
    /// reference before the create went through).
    pub async fn configmap_of(&self, handle: &str, timeout: Duration) -> String {
        let handles: Api<ResourceHandle> = self.api();
        let configmaps: Api<ConfigMap> = self.api();
        let what = format!("handle {handle}: its ConfigMap");
        eventually(&what, timeout, || async {
            let handle = handles
                .get_opt(handle)
                .await
                .unwrap_or_else(|e| panic!("reading handle {handle}: {e}"))?;
            let reference = handle.status?.resources?.first()?.reference.clone()?;
            configmaps
                .get_opt(&reference.name)
                .await
                .unwrap_or_else(|e| panic!("reading ConfigMap {}: {e}", reference.name))?;
            Some(reference.name)
        })
        .await
    }

    /// The Event of `type_` (`Normal`, `Warning`) and `reason` about the object named
    /// `regarding`, once there is one. Panics when `timeout` passes first.
    pub async fn event(
        &self,
        regarding: &str,
        type_: &str,
        reason: &str,
        timeout: Duration,
    ) -> Event {
        let what = format!("a {type_} Event {reason:?} on {regarding}");
        eventually(&what, timeout, || async {
            self.events_about(regarding)
                .await
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some(type_))
        })
        .await
    }

    /// The Events about the object named `regarding` this namespace has now, oldest first.
    pub async fn events_about(&self, regarding: &str) -> Vec<Event> {
        let mut about: Vec<Event> = self
            .api::<Event>()
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing Events: {e}"))
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(regarding))
            .collect();
        about.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
        about
    }

    /// Every handle of this namespace whose `spec.resourcePool` names pool `pool`.
    pub async fn handles_of_pool(&self, pool: &str) -> Vec<ResourceHandle> {
        self.api::<ResourceHandle>()
            .list(&ListParams::default())
            .await
            .expect("list handles")
            .items
            .into_iter()
            .filter(|h| {
                h.spec
                    .resource_pool
                    .as_ref()
                    .is_some_and(|r| r.name == pool)
            })
            .collect()
    }

    /// The ConfigMaps of this namespace whose annotations say they belong to handle `handle`.
    pub async fn configmaps_of_handle(&self, handle: &str) -> Vec<ConfigMap> {
        let key = objects::key("resource-handle-name");
        self.api::<ConfigMap>()
            .list(&ListParams::default())
            .await
            .expect("list ConfigMaps")
            .items
            .into_iter()
            .filter(|cm| cm.annotations().get(&key).map(String::as_str) == Some(handle))
            .collect()
    }

    /// Sets label `key` to `value` on ConfigMap `name` (as a user, or the resource's own
    /// controller, would: the providers' checks read such labels).
    pub async fn label_configmap(&self, name: &str, key: &str, value: &str) {
        let patch = json!({"metadata": {"labels": {key: value}}});
        self.api::<ConfigMap>()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("labelling ConfigMap {name}: {e}"));
    }

    /// The end of a test that ran operators: stops `operators` (in order, each waiting for its
    /// in-flight reconciles), releases the finalizers of every ResourceClaim, ResourceHandle
    /// and ResourcePool of the namespace (nothing will remove them once the operators are
    /// stopped, and they would hold the namespace), then deletes the namespace.
    pub async fn teardown(self, operators: impl IntoIterator<Item = TestOperator>) {
        for operator in operators {
            operator.stop().await;
        }
        release_all_finalizers(&self.client, &self.namespace).await;
        self.cleanup().await;
    }

    /// Deletes this test's namespace (without waiting for it to be gone). Call it at the end of
    /// a test; if a test panics first, dropping the `TestEnv` does the same, best effort.
    pub async fn cleanup(mut self) {
        self.cleaned_up = true;
        delete_namespace(&self.client, &self.namespace).await;
    }

    /// Leaves this test's namespace and everything in it in place (a benchmark's population,
    /// kept to profile by hand); returns its name.
    pub fn keep(mut self) -> String {
        self.cleaned_up = true;
        std::mem::take(&mut self.namespace)
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if self.cleaned_up {
            return;
        }
        let namespace = self.namespace.clone();
        // A test that ends early (a panic, or no teardown) may leave its operator's finalizers,
        // and they would hold the namespace in Terminating for the cluster's life, the
        // namespace controller listing its content again and again.
        let deleted = clean_up_from_drop(self.config.clone(), |client| async move {
            release_all_finalizers(&client, &namespace).await;
            delete_namespace(&client, &namespace).await;
            Some(())
        });
        if deleted.is_none() {
            eprintln!(
                "warning: could not delete test namespace {}",
                self.namespace
            );
        }
    }
}

/// Runs `clean_up` with a client of `config`, for at most 10 s, from a `Drop`: drop cannot
/// await, and the test's runtime may be shutting down, so it runs on a thread with a runtime
/// and a client of its own. `None` when it could not run, took too long or said `None`.
pub fn clean_up_from_drop<F, Fut, T>(config: Config, clean_up: F) -> Option<T>
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Option<T>>,
    T: Send + 'static,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async {
            let client = Client::try_from(config).ok()?;
            tokio::time::timeout(Duration::from_secs(10), clean_up(client))
                .await
                .ok()?
        })
    })
    .join()
    .ok()?
}

async fn delete_namespace(client: &Client, namespace: &str) {
    match Api::<Namespace>::all(client.clone())
        .delete(namespace, &DeleteParams::background())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_not_found() => {}
        Err(e) => eprintln!("warning: deleting test namespace {namespace}: {e}"),
    }
}

/// The kubeconfig of the local control plane: `$POOLBOY_TEST_KUBECONFIG`, or the one
/// `make cluster` writes, `<crate>/target/cluster/kubeconfig`.
pub fn kubeconfig_path() -> PathBuf {
    match std::env::var_os("POOLBOY_TEST_KUBECONFIG") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/cluster/kubeconfig"),
    }
}

/// The admin client configuration, from [`kubeconfig_path`]. Panics when it is missing.
pub async fn admin_config() -> Config {
    let path = kubeconfig_path();
    if !path.exists() {
        panic!(
            "no kubeconfig at {}: the integration tests need the local control plane. \
             Run `make cluster` first (or run everything with `make test`), \
             or point POOLBOY_TEST_KUBECONFIG at a kubeconfig",
            path.display()
        );
    }
    let kubeconfig = Kubeconfig::read_from(&path)
        .unwrap_or_else(|e| panic!("reading kubeconfig {}: {e}", path.display()));
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("loading kubeconfig {}: {e}", path.display()));
    // A response lost on the way fails its request instead of hanging the test for good (kube
    // sets no read timeout). Watches of the in-process operator that stay silent this long
    // reconnect, resuming where they were.
    config.read_timeout = Some(Duration::from_secs(20));
    config.reset_reader_on_write = true;
    config
}

/// Applies `crds` server-side (field manager [`FIELD_MANAGER`]) and waits until every one of
/// them is Established. Safe to call from several tests and test binaries at once.
pub async fn apply_crds(client: &Client, crds: &[CustomResourceDefinition]) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for crd in crds {
        let name = crd.metadata.name.as_deref().expect("a CRD has a name");
        api.patch(name, &params, &Patch::Apply(crd))
            .await
            .unwrap_or_else(|e| panic!("applying CRD {name}: {e}"));
    }
    for crd in crds {
        let name = crd.metadata.name.as_deref().expect("a CRD has a name");
        tokio::time::timeout(
            SETTLE_TIMEOUT,
            await_condition(api.clone(), name, conditions::is_crd_established()),
        )
        .await
        .unwrap_or_else(|_| panic!("CRD {name} not Established within {SETTLE_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("watching CRD {name}: {e}"));
    }
}

/// Polls `check` every 100 ms until it returns `Some`, and returns that value. Panics with
/// `what` when `timeout` passes first. Use it to await anything a controller does.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A short random lowercase suffix for names (DNS-1123 safe).
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..8)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// Parses `value` (usually a `json!` literal) into `T`; panics when it does not fit.
pub fn from_json<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

/// `<plural>/<name>`, for messages (the plural is the last segment of the API's URL).
fn describe<K: Resource>(api: &Api<K>, name: &str) -> String {
    let plural = api.resource_url().rsplit('/').next().unwrap_or_default();
    format!("{plural}/{name}")
}

/// Creates `object` through `api` and returns it as created. Panics when the API server
/// refuses it.
pub async fn create<K>(api: &Api<K>, object: &K) -> K
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), object)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", describe(api, &object.name_any())))
}

/// Waits until object `name` of `api` exists and satisfies `check`, and returns it. Panics
/// with `what` when `timeout` passes first, and at once when the object cannot be read.
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&K) -> bool,
) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let described = describe(api, name);
    eventually(&format!("{described}: {what}"), timeout, || async {
        api.get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading {described}: {e}"))
            .filter(|object| check(object))
    })
    .await
}

/// Awaits until `api` no longer has `name` (gone, not merely being deleted). Panics when
/// `timeout` passes first, and at once when the object cannot be read.
pub async fn gone<K>(api: &Api<K>, name: &str, timeout: Duration)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let described = describe(api, name);
    eventually(&format!("{described} is gone"), timeout, || async {
        api.get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading {described}: {e}"))
            .is_none()
            .then_some(())
    })
    .await
}

/// Releases the finalizers of every ResourceClaim, ResourceHandle and ResourcePool of
/// `namespace`.
async fn release_all_finalizers(client: &Client, namespace: &str) {
    release_finalizers(&Api::<ResourceClaim>::namespaced(client.clone(), namespace)).await;
    release_finalizers(&Api::<ResourceHandle>::namespaced(
        client.clone(),
        namespace,
    ))
    .await;
    release_finalizers(&Api::<ResourcePool>::namespaced(client.clone(), namespace)).await;
}

/// Sets `metadata.finalizers` of every object of `api` to null. Best effort: what cannot be
/// listed or patched is left as it is.
async fn release_finalizers<K>(api: &Api<K>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let release = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let Ok(objects) = api.list(&ListParams::default()).await else {
        return;
    };
    for object in objects {
        let _ = api
            .patch(&object.name_any(), &PatchParams::default(), &release)
            .await;
    }
}
