//! What the managed-resource watches share with every controller (through the operator's
//! context): the running watches and their stores, the discovered kinds, and which
//! ResourceWatch objects this process made sure of (Δ§2.2).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use kube::core::ApiResource;
use kube::runtime::reflector::ObjectRef;
use tokio::task::JoinHandle;

use crate::api::kinds::SharedType;
use crate::api::refs::ResourceReference;
use crate::store::packed::StoredResource;
use crate::store::shared_watch::ListedStore;

/// What one watch covers: a kind in one namespace, or cluster-wide for cluster-scoped kinds
/// (Poolboy's RBAC grants managed kinds per namespace, so watches are per namespace too).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct WatchKey {
    pub(crate) api_version: String,
    pub(crate) kind: String,
    pub(crate) namespace: Option<String>,
}

impl WatchKey {
    pub(crate) fn of(reference: &ResourceReference) -> Self {
        Self {
            api_version: reference.api_version.clone(),
            kind: reference.kind.clone(),
            namespace: reference.namespace.clone(),
        }
    }
}

/// The watch as `/readyz` and the logs name it: "v1 ConfigMap in user-a".
impl std::fmt::Display for WatchKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)?;
        match &self.namespace {
            Some(namespace) => write!(f, " in {namespace}"),
            None => Ok(()),
        }
    }
}

/// A running watch: its store (and whether it has listed once), and the kind it serves.
#[derive(Clone)]
pub(crate) struct Watch {
    /// Its kind, as its store's keys hold it.
    pub(crate) resource: SharedType<ApiResource>,
    pub(crate) store: ListedStore<StoredResource>,
    /// When a reader last looked it up ([`ManagedResources::watch`]).
    pub(crate) last_read: LastRead,
}

/// When a watch was last looked up by a reader. Cheap to clone.
#[derive(Clone)]
pub(crate) struct LastRead(Arc<Mutex<Instant>>);

impl Default for LastRead {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(Instant::now())))
    }
}

impl LastRead {
    fn lock(&self) -> std::sync::MutexGuard<'_, Instant> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn touch(&self) {
        *self.lock() = Instant::now();
    }

    /// Whether no reader looked the watch up in the `idle` before `now`.
    fn idle_at(&self, now: Instant, idle: Duration) -> bool {
        now.saturating_duration_since(*self.lock()) >= idle
    }
}

/// A managed kind as discovery describes it.
#[derive(Clone, Debug)]
pub(crate) struct ManagedKind {
    pub(crate) resource: ApiResource,
    pub(crate) namespaced: bool,
}

/// The watches of managed resources, by key, and the discovered kinds. Dropping it (with the
/// operator's context) stops the watches.
#[derive(Default)]
pub(crate) struct ManagedResources {
    watches: RwLock<HashMap<WatchKey, Watch>>,
    kinds: RwLock<HashMap<(String, String), ManagedKind>>,
    /// The keys whose ResourceWatch object is known to exist, or being made sure of (Δ§2.2, Q4).
    declared: Mutex<HashSet<WatchKey>>,
    tasks: Mutex<HashMap<WatchKey, JoinHandle<()>>>,
}

impl Drop for ManagedResources {
    fn drop(&mut self) {
        let tasks = match self.tasks.get_mut() {
            Ok(tasks) => tasks,
            Err(poisoned) => poisoned.into_inner(),
        };
        for (_, task) in tasks.drain() {
            task.abort();
        }
    }
}

impl ManagedResources {
    /// The watch for `key`, if one is running; a reader's look keeps it from stopping
    /// ([`stop_idle`](Self::stop_idle)).
    pub(crate) fn watch(&self, key: &WatchKey) -> Option<Watch> {
        // Touched under the read lock, so that a look and a stop never cross.
        let watches = match self.watches.read() {
            Ok(watches) => watches,
            Err(poisoned) => poisoned.into_inner(),
        };
        let watch = watches.get(key)?;
        watch.last_read.touch();
        Some(watch.clone())
    }

    /// Stops the watches whose store holds no object and which no reader looked up in the
    /// `idle` before `now`, and returns their keys. Such a watch serves no handle: a handle
    /// whose resource it would show looks it up whenever it reads or makes that resource, and
    /// starts it again if it stopped. A watch of a namespace that was deleted would otherwise
    /// run (and ask the API server again every minute) for as long as the broker does.
    pub(crate) fn stop_idle(&self, now: Instant, idle: Duration) -> Vec<WatchKey> {
        let mut watches = match self.watches.write() {
            Ok(watches) => watches,
            Err(poisoned) => poisoned.into_inner(),
        };
        let stopped: Vec<WatchKey> = watches
            .iter()
            .filter(|(_, watch)| {
                watch.store.store().is_empty() && watch.last_read.idle_at(now, idle)
            })
            .map(|(key, _)| key.clone())
            .collect();
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        let mut declared = self.declared.lock().unwrap_or_else(PoisonError::into_inner);
        for key in &stopped {
            watches.remove(key);
            if let Some(task) = tasks.remove(key) {
                task.abort();
            }
            // Made sure of again when the watch starts again (a create that finds it: 409).
            declared.remove(key);
        }
        stopped
    }

    /// Records a started watch; `false` (and nothing recorded) when one runs for `key` already.
    pub(crate) fn insert(&self, key: WatchKey, watch: Watch) -> bool {
        let mut watches = match self.watches.write() {
            Ok(watches) => watches,
            Err(poisoned) => poisoned.into_inner(),
        };
        if watches.contains_key(&key) {
            return false;
        }
        watches.insert(key, watch);
        true
    }

    /// How many watches run.
    pub(crate) fn len(&self) -> usize {
        match self.watches.read() {
            Ok(watches) => watches.len(),
            Err(poisoned) => poisoned.into_inner().len(),
        }
    }

    /// The live object `reference` points to, from its watch's store, with its `apiVersion`
    /// and `kind` ([`typed_state`]). `None` when no watch runs for it or the object does not
    /// exist (or was not listed yet).
    pub(crate) fn state(&self, reference: &ResourceReference) -> Option<serde_json::Value> {
        let watch = self.watch(&WatchKey::of(reference))?;
        let mut object_ref =
            ObjectRef::<StoredResource>::new_with(&reference.name, watch.resource.clone());
        if let Some(namespace) = &reference.namespace {
            object_ref = object_ref.within(namespace);
        }
        let packed = watch.store.store().get(&object_ref)?;
        match packed.unpack_as::<serde_json::Value>() {
            Ok(state) => Some(typed_state(state, &watch.resource)),
            // Not for what the store packed itself; the reader reads the object instead.
            Err(error) => {
                tracing::error!(%error, name = %reference.name, "cannot unpack a managed resource");
                None
            }
        }
    }

    /// Whether the caller is to make sure of the ResourceWatch object of `key`: true for one
    /// caller per key in this process (the many handles a start manages at once send one
    /// create, not one each), and again only after [`declaring_failed`](Self::declaring_failed).
    pub(crate) fn start_declaring(&self, key: &WatchKey) -> bool {
        let mut declared = self.declared.lock().unwrap_or_else(PoisonError::into_inner);
        declared.insert(key.clone())
    }

    /// The ResourceWatch object of `key` could not be made sure of: the next caller tries.
    pub(super) fn declaring_failed(&self, key: &WatchKey) {
        let mut declared = self.declared.lock().unwrap_or_else(PoisonError::into_inner);
        declared.remove(key);
    }

    pub(super) fn known_kind(&self, api_version: &str, kind: &str) -> Option<ManagedKind> {
        let key = (api_version.to_owned(), kind.to_owned());
        match self.kinds.read() {
            Ok(kinds) => kinds.get(&key).cloned(),
            Err(poisoned) => poisoned.into_inner().get(&key).cloned(),
        }
    }

    pub(super) fn remember_kind(&self, api_version: &str, kind: &str, managed: ManagedKind) {
        let key = (api_version.to_owned(), kind.to_owned());
        match self.kinds.write() {
            Ok(mut kinds) => kinds.insert(key, managed),
            Err(poisoned) => poisoned.into_inner().insert(key, managed),
        };
    }

    /// Keeps the task of `key`'s watch, to stop it with the watch.
    pub(super) fn keep_task(&self, key: WatchKey, task: JoinHandle<()>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.insert(key, task);
    }
}

/// `object` as a JSON state with its `apiVersion` and `kind` from `resource` when it lacks
/// them: the API server leaves them out of the items of a LIST and sends them in WATCH
/// events, and a state copied into handle and claim status must not depend on how the
/// object arrived (else the status flips after every restart, and two processes, one
/// holding a listed copy and one a watched copy, rewrite it forever). Poolboy's state always
/// has them: it reads the object with a GET.
fn typed_state(mut state: serde_json::Value, resource: &ApiResource) -> serde_json::Value {
    if let Some(fields) = state.as_object_mut() {
        for (field, value) in [
            ("apiVersion", &resource.api_version),
            ("kind", &resource.kind),
        ] {
            fields
                .entry(field)
                .or_insert_with(|| serde_json::Value::String(value.clone()));
        }
    }
    state
}

#[cfg(test)]
mod tests {
    use kube::api::{DynamicObject, GroupVersionKind};
    use serde_json::json;

    use super::*;

    #[test]
    fn a_listed_object_gets_the_api_version_and_kind_a_watched_one_has() {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let watched: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "user1"}, "data": {"k": "v"},
        }))
        .expect("a watched object");
        let mut listed = watched.clone();
        listed.types = None;
        assert!(serde_json::to_value(&listed).is_ok_and(|v| v.get("kind").is_none()));
        let state = |object: &DynamicObject| {
            typed_state(serde_json::to_value(object).expect("serialises"), &resource)
        };
        let from_list = state(&listed);
        assert_eq!(from_list, state(&watched));
        assert_eq!(from_list["kind"], json!("ConfigMap"));
        assert_eq!(from_list["apiVersion"], json!("v1"));
    }
}
