//! The handles no claim holds, kept parsed beside the handle store, which keeps every handle
//! packed (`store::packed`).
//!
//! Every bind and every pool pass reads them, and they are few against the bound ones, so they
//! are kept as the watch brings them and as `core` reads them (docs/design.md,
//! "store::free_handles").

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::ResourceHandle;
use crate::api::kinds::{HandleObject, Kinds};
use crate::store::packed::Packed;
use crate::store::packed::StoredHandle;
use crate::store::shared_watch::{FollowedIndex, Relisting, SharedWatch};

/// Shared by the handle watch (which it follows) and the claim and pool controllers. Cheap to
/// clone.
#[derive(Clone, Default)]
pub(crate) struct FreeHandles {
    inner: Arc<RwLock<Free>>,
}

#[derive(Debug, Default)]
struct Free {
    /// Each handle whose `spec.resourceClaim` names no claim, by name (deleting ones too).
    handles: HashMap<String, FreeHandle>,
    relisting: Relisting<String, FreeHandle>,
}

/// A free handle as the watch showed it, and as `core` reads it.
#[derive(Clone, Debug)]
struct FreeHandle {
    object: Arc<HandleObject>,
    view: Arc<ResourceHandle>,
}

impl FreeHandles {
    /// The free handles of the handles `handles` watches; they follow the watch, so they are
    /// up to date before any controller is woken by a change.
    pub(crate) fn following(handles: &mut SharedWatch<HandleObject>) -> Self {
        let free = Self::default();
        let follower = free.inner.clone();
        handles.follow(move |event| write(&follower).apply(event));
        free
    }

    /// Free handle `name`, as the watch last showed it.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<HandleObject>> {
        self.read()
            .handles
            .get(name)
            .map(|free| free.object.clone())
    }

    /// `handle` as `core` reads it: the view kept of it while the watch shows this version of
    /// it free, else a conversion.
    pub(crate) fn view_of(&self, handle: &HandleObject) -> Arc<ResourceHandle> {
        let kept = handle.metadata.name.as_deref().and_then(|name| {
            let free = self.read();
            let kept = free.handles.get(name)?;
            let same = kept.object.metadata.resource_version == handle.metadata.resource_version
                && handle.metadata.resource_version.is_some();
            same.then(|| kept.view.clone())
        });
        kept.unwrap_or_else(|| Arc::new(Kinds::handle_of(handle)))
    }

    /// Handle `key` as the watch last showed it: parsed when it is free, else decoded from
    /// `store`, the handle store.
    pub(crate) fn or_stored(
        &self,
        store: &Store<StoredHandle>,
        key: &ObjectRef<StoredHandle>,
    ) -> Option<Arc<HandleObject>> {
        let free = self
            .get(&key.name)
            .filter(|handle| handle.metadata.namespace == key.namespace);
        free.or_else(|| Packed::read(store, key).map(Arc::new))
    }

    /// Every free handle, as the watch last showed it.
    pub(crate) fn all(&self) -> Vec<Arc<HandleObject>> {
        self.read()
            .handles
            .values()
            .map(|free| free.object.clone())
            .collect()
    }

    fn read(&self) -> RwLockReadGuard<'_, Free> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }
}

fn write(free: &RwLock<Free>) -> RwLockWriteGuard<'_, Free> {
    free.write().unwrap_or_else(PoisonError::into_inner)
}

impl FollowedIndex<HandleObject> for Free {
    /// The handle's name.
    type Key = String;
    /// The handle itself and its view, when it is free.
    type Entry = FreeHandle;

    fn key(handle: &HandleObject) -> Option<String> {
        handle.metadata.name.clone()
    }

    fn entry(handle: &HandleObject) -> Option<FreeHandle> {
        handle.spec.resource_claim.is_none().then(|| FreeHandle {
            object: Arc::new(handle.clone()),
            view: Arc::new(Kinds::handle_of(handle)),
        })
    }

    fn record(&mut self, name: String, handle: FreeHandle) {
        self.handles.insert(name, handle);
    }

    fn forget(&mut self, name: &String) {
        self.handles.remove(name);
    }

    fn clear(&mut self) {
        self.handles.clear();
    }

    fn relisting(&mut self) -> &mut Relisting<String, FreeHandle> {
        &mut self.relisting
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher::Event;

    use super::*;

    fn handle(name: &str, claim: Option<&str>) -> HandleObject {
        let claim = claim.map(|claim| {
            serde_json::json!({"apiVersion": "poolboy.gpte.redhat.com/v1",
                "kind": "ResourceClaim", "name": claim, "namespace": "user"})
        });
        serde_json::from_value(serde_json::json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceHandle",
            "metadata": {"name": name, "namespace": "poolboy"},
            "spec": {"resourceClaim": claim},
        }))
        .expect("a handle")
    }

    fn names(free: &Free) -> Vec<&str> {
        let mut names: Vec<&str> = free.handles.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// A handle is kept while it names no claim: bound or deleted, it goes; a re-list keeps
    /// only what it saw free.
    #[test]
    fn only_handles_that_name_no_claim_are_kept() {
        let mut free = Free::default();
        free.apply(&Event::Init);
        free.apply(&Event::InitDone);
        free.apply(&Event::Apply(handle("a", None)));
        free.apply(&Event::Apply(handle("b", None)));
        free.apply(&Event::Apply(handle("c", Some("claim"))));
        assert_eq!(names(&free), ["a", "b"]);

        free.apply(&Event::Apply(handle("a", Some("claim"))));
        free.apply(&Event::Delete(handle("b", None)));
        assert_eq!(names(&free), [] as [&str; 0]);

        free.apply(&Event::Apply(handle("d", None)));
        free.apply(&Event::Init);
        free.apply(&Event::InitApply(handle("e", None)));
        free.apply(&Event::InitApply(handle("f", Some("claim"))));
        assert_eq!(names(&free), ["d"], "a re-list counts once it is done");
        free.apply(&Event::InitDone);
        assert_eq!(names(&free), ["e"]);
    }

    /// The first list fills the index as it comes, and one begun again starts from empty.
    #[test]
    fn the_first_list_is_kept_as_it_comes() {
        let mut free = Free::default();
        free.apply(&Event::Init);
        free.apply(&Event::InitApply(handle("a", None)));
        free.apply(&Event::InitApply(handle("b", Some("claim"))));
        assert_eq!(names(&free), ["a"], "kept before the list is done");
        // The list failed half way: the watch lists again, without `a` (deleted meanwhile).
        free.apply(&Event::Init);
        free.apply(&Event::InitApply(handle("c", None)));
        assert_eq!(names(&free), ["c"]);
        free.apply(&Event::InitDone);
        assert_eq!(names(&free), ["c"]);
        free.apply(&Event::Init);
        free.apply(&Event::InitApply(handle("d", None)));
        assert_eq!(names(&free), ["c"], "a re-list counts once it is done");
    }

    /// A bind or a pool pass reads the view kept of a free handle's current version; any
    /// other version, or a bound handle, is converted on the spot.
    #[test]
    fn a_free_handle_is_converted_once_per_version() {
        let versioned = |claim: Option<&str>, version: &str| {
            let mut handle = handle("guid-a", claim);
            handle.metadata.resource_version = Some(version.to_owned());
            handle
        };
        let free = FreeHandles::default();
        let first = versioned(None, "1");
        write(&free.inner).apply(&Event::Apply(first.clone()));
        let view = free.view_of(&first);
        assert!(Arc::ptr_eq(&view, &free.view_of(&first)), "the kept view");
        assert_eq!(view.metadata.resource_version.as_deref(), Some("1"));

        let newer = versioned(None, "2");
        let converted = free.view_of(&newer);
        assert!(!Arc::ptr_eq(&view, &converted), "not yet seen by the watch");
        assert_eq!(converted.metadata.resource_version.as_deref(), Some("2"));

        let bound = versioned(Some("claim"), "3");
        write(&free.inner).apply(&Event::Apply(bound.clone()));
        assert!(free.read().handles.is_empty(), "bound: nothing kept");
        assert!(free.view_of(&bound).spec.resource_claim.is_some());
    }
}
