//! A memory kept for each handle by its uid, which forgets a handle when the handle watch
//! tells of its deletion (a handle deleted and created again under its name is another). What
//! `render_clocks`, `unrecorded` and `deleted_by_claims` remember is kept in one.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::api::kinds::HandleObject;
use crate::store::shared_watch::SharedWatch;

/// Entries by handle uid, shared by the handle watch (which it follows) and whoever keeps
/// them. Cheap to clone.
pub(crate) struct ByHandleUid<V> {
    entries: Arc<Mutex<HashMap<String, V>>>,
}

impl<V> Clone for ByHandleUid<V> {
    fn clone(&self) -> Self {
        Self {
            entries: self.entries.clone(),
        }
    }
}

impl<V> Default for ByHandleUid<V> {
    fn default() -> Self {
        Self {
            entries: Arc::default(),
        }
    }
}

impl<V> fmt::Debug for ByHandleUid<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ByHandleUid")
            .field("handles", &self.lock().len())
            .finish()
    }
}

impl<V: Send + 'static> ByHandleUid<V> {
    /// Entries that follow `handles`: a deleted handle's goes.
    pub(super) fn following(handles: &mut SharedWatch<HandleObject>) -> Self {
        let memory = Self::default();
        let follower = memory.clone();
        handles.follow_deletes(move |handle| follower.deleted(handle));
        memory
    }
}

impl<V> ByHandleUid<V> {
    /// The handle watch told of `handle`'s deletion.
    pub(super) fn deleted(&self, handle: &HandleObject) {
        if let Some(uid) = &handle.metadata.uid {
            self.forget(uid);
        }
    }

    /// Handle `uid`'s entry goes.
    pub(super) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// The entries, while the guard lives.
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, V>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A handle of uid `uid`, as the handle watch's delete event brings it.
#[cfg(test)]
pub(super) fn handle(uid: &str) -> HandleObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceHandle",
        "metadata": {"name": format!("guid-{uid}"), "namespace": "poolboy", "uid": uid},
        "spec": {"resources": []},
    }))
    .expect("a handle")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_event_empties_the_handles_entry_and_no_other() {
        let memory = ByHandleUid::<u8>::default();
        memory.lock().insert("h1".to_owned(), 1);
        memory.lock().insert("h2".to_owned(), 2);
        memory.clone().deleted(&handle("h1"));
        assert_eq!(memory.lock().keys().collect::<Vec<_>>(), ["h2"]);
        memory.deleted(&handle("h3"));
        memory.forget("h2");
        assert!(memory.lock().is_empty());
    }
}
