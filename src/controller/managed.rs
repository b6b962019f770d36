//! The managed resources: one watch per (apiVersion, kind, namespace) in use, started the
//! first time a handle manages a resource of that kind (§14, Δ§4.5), each feeding a reflector
//! store. A change to a managed resource wakes its handle and, through it, its claim.
//!
//! Reads come from the stores; a resource whose watch has not listed yet is fetched once.

use std::collections::HashMap;
use std::sync::RwLock;

use kube::api::DynamicObject;
use kube::core::ApiResource;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::refs::ResourceReference;

/// What one watch covers: a kind in one namespace, or cluster-wide for cluster-scoped kinds
/// (Poolboy's RBAC grants managed kinds per namespace, so watches are per namespace too).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WatchKey {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
}

impl WatchKey {
    pub fn of(reference: &ResourceReference) -> Self {
        Self {
            api_version: reference.api_version.clone(),
            kind: reference.kind.clone(),
            namespace: reference.namespace.clone(),
        }
    }
}

/// A running watch: its store and the kind it serves.
#[derive(Clone)]
pub struct Watch {
    pub resource: ApiResource,
    pub store: Store<DynamicObject>,
}

/// The watches of managed resources, by key.
#[derive(Default)]
pub struct ManagedResources {
    watches: RwLock<HashMap<WatchKey, Watch>>,
}

impl ManagedResources {
    /// The watch for `key`, if one is running.
    pub fn watch(&self, key: &WatchKey) -> Option<Watch> {
        match self.watches.read() {
            Ok(watches) => watches.get(key).cloned(),
            Err(poisoned) => poisoned.into_inner().get(key).cloned(),
        }
    }

    /// Records a started watch (the handle controller starts them).
    pub fn insert(&self, key: WatchKey, watch: Watch) {
        match self.watches.write() {
            Ok(mut watches) => watches.insert(key, watch),
            Err(poisoned) => poisoned.into_inner().insert(key, watch),
        };
    }

    /// How many watches run.
    pub fn len(&self) -> usize {
        match self.watches.read() {
            Ok(watches) => watches.len(),
            Err(poisoned) => poisoned.into_inner().len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The live object `reference` points to, from its watch's store. `None` when no watch
    /// runs for it or the object does not exist (or was not listed yet).
    pub fn state(&self, reference: &ResourceReference) -> Option<serde_json::Value> {
        let watch = self.watch(&WatchKey::of(reference))?;
        let mut object_ref =
            ObjectRef::<DynamicObject>::new_with(&reference.name, watch.resource.clone());
        if let Some(namespace) = &reference.namespace {
            object_ref = object_ref.within(namespace);
        }
        let object = watch.store.get(&object_ref)?;
        serde_json::to_value(object.as_ref()).ok()
    }
}
