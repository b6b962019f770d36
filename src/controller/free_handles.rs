//! The handles no claim holds, kept parsed beside the handle store, which keeps every handle
//! packed (`controller::packed`).
//!
//! A bind ranks every free handle and a pool pass reads each of its pool's; decoding them for
//! each pass would cost what the free handles cost, times every bind of a burst. They are few
//! (a pool's stock) against the bound ones (one per claim: most of the broker's memory at
//! 100,000 claims when kept parsed, issue 11), so they are kept as the watch brings them.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kube::runtime::reflector::{ObjectRef, Store};

use super::kinds::{HandleObject, StoredHandle};
use super::listed::{FollowedIndex, Relisting, SharedWatch};
use super::packed::Packed;

/// Shared by the handle watch (which it follows) and the claim and pool controllers. Cheap to
/// clone.
#[derive(Clone, Default)]
pub(crate) struct FreeHandles {
    inner: Arc<RwLock<Free>>,
}

#[derive(Debug, Default)]
struct Free {
    /// Each handle whose `spec.resourceClaim` names no claim, by name (deleting ones too).
    handles: HashMap<String, Arc<HandleObject>>,
    relisting: Relisting<String, Arc<HandleObject>>,
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
        self.read().handles.get(name).cloned()
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
        self.read().handles.values().cloned().collect()
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
    /// The handle itself, when it is free.
    type Entry = Arc<HandleObject>;

    fn key(handle: &HandleObject) -> Option<String> {
        handle.metadata.name.clone()
    }

    fn entry(handle: &HandleObject) -> Option<Arc<HandleObject>> {
        handle
            .spec
            .resource_claim
            .is_none()
            .then(|| Arc::new(handle.clone()))
    }

    fn record(&mut self, name: String, handle: Arc<HandleObject>) {
        self.handles.insert(name, handle);
    }

    fn forget(&mut self, name: &String) {
        self.handles.remove(name);
    }

    fn clear(&mut self) {
        self.handles.clear();
    }

    fn relisting(&mut self) -> &mut Relisting<String, Arc<HandleObject>> {
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
}
