//! The claim controller's own indexes: the handles as its handle watch sees them, the claims
//! waiting for a matching handle (creation disabled, B18), and the handles found taken before
//! the handle store caught up.
//!
//! The handle store is fed by the same watch that wakes claims, and updated before the wake,
//! so a claim woken by a handle change always reads that change (the handle controller's
//! store is fed by another watch and may lag behind it). Waiting claims are woken when an
//! unbound handle appears or changes; the taken notes stop concurrent reconciles of this
//! process from racing for a handle another one just bound, and reservations stop them from
//! racing for the same handle while a bind of it is under way (all concurrent claims rank the
//! same handle first: without them, each bind of a burst is fought for by every reconcile).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use kube::runtime::reflector::{ObjectRef, Store};

use super::super::kinds::HandleObject;
use super::super::listed::ListedStore;

/// Shared by the claim controller's handle watch and its reconciles. Cheap to clone.
#[derive(Clone)]
pub(crate) struct ClaimIndex {
    handles: ListedStore<HandleObject>,
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    /// (namespace, name) of each claim waiting for a handle.
    waiting: HashSet<(String, String)>,
    /// Handle name → the resourceVersion the handle store had when the handle was found
    /// taken. Valid while the store still shows that version.
    taken: HashMap<String, String>,
    /// Handles one reconcile of this process is binding right now.
    reserved: HashSet<String>,
}

impl ClaimIndex {
    pub(crate) fn new(handles: ListedStore<HandleObject>) -> Self {
        Self {
            handles,
            inner: Arc::default(),
        }
    }

    /// Waits until the handle watch has listed once; any number of callers at once.
    pub(crate) async fn wait_until_listed(&self) {
        self.handles.wait_until_listed().await;
    }

    /// The handles, as the claim controller's handle watch last saw them.
    pub(crate) fn handles(&self) -> &Store<HandleObject> {
        self.handles.store()
    }

    /// The stored handle `name` of `namespace`.
    pub(crate) fn handle(
        &self,
        namespace: &str,
        name: &str,
        kind: &kube::core::ApiResource,
    ) -> Option<Arc<HandleObject>> {
        self.handles
            .store()
            .get(&ObjectRef::new_with(name, kind.clone()).within(namespace))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(inner) => inner,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Records that the claim waits for a matching handle.
    pub(crate) fn wait(&self, namespace: &str, name: &str) {
        self.lock()
            .waiting
            .insert((namespace.to_owned(), name.to_owned()));
    }

    /// The claim no longer waits (bound, invalid or gone).
    pub(crate) fn stop_waiting(&self, namespace: &str, name: &str) {
        self.lock()
            .waiting
            .remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// Every waiting claim, as (namespace, name).
    pub(crate) fn waiting(&self) -> Vec<(String, String)> {
        self.lock().waiting.iter().cloned().collect()
    }

    /// Records that handle `name`, whose stored copy has `store_version`, is taken.
    pub(crate) fn taken(&self, name: &str, store_version: Option<&str>) {
        if let Some(version) = store_version {
            self.lock()
                .taken
                .insert(name.to_owned(), version.to_owned());
        }
    }

    /// Reserves handle `name` for one bind attempt; `None` while another reconcile of this
    /// process holds it. The reservation ends when the returned guard is dropped.
    pub(crate) fn reserve(&self, name: &str) -> Option<Reservation> {
        self.lock()
            .reserved
            .insert(name.to_owned())
            .then(|| Reservation {
                index: self.clone(),
                name: name.to_owned(),
            })
    }

    /// Whether handle `name` is known taken while the store still shows `store_version`;
    /// a newer stored copy speaks for itself and the note is dropped.
    pub(crate) fn is_taken(&self, name: &str, store_version: Option<&str>) -> bool {
        let mut inner = self.lock();
        match inner.taken.get(name) {
            Some(version) if Some(version.as_str()) == store_version => true,
            Some(_) => {
                inner.taken.remove(name);
                false
            }
            None => false,
        }
    }
}

/// A handle reserved for one bind attempt (see [`ClaimIndex::reserve`]).
pub(crate) struct Reservation {
    index: ClaimIndex,
    name: String,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.index.lock().reserved.remove(&self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> ClaimIndex {
        let kind = crate::controller::kinds::Kinds::new(&Default::default()).handle;
        let writer = kube::runtime::reflector::store::Writer::<HandleObject>::new(kind);
        ClaimIndex::new(ListedStore::listed(writer.as_reader()))
    }

    #[test]
    fn waiting_claims_are_listed_until_they_stop_waiting() {
        let index = index();
        index.wait("user", "a");
        index.wait("user", "b");
        index.stop_waiting("user", "a");
        assert_eq!(index.waiting(), vec![("user".to_owned(), "b".to_owned())]);
    }

    #[test]
    fn a_taken_note_lasts_until_the_store_shows_a_newer_version() {
        let index = index();
        index.taken("guid-a", Some("10"));
        assert!(index.is_taken("guid-a", Some("10")));
        assert!(!index.is_taken("guid-a", Some("11")));
        // Dropped once outdated, even if the old version came back.
        assert!(!index.is_taken("guid-a", Some("10")));
        assert!(!index.is_taken("guid-b", Some("1")));
    }

    #[test]
    fn a_handle_is_reserved_by_one_reconcile_at_a_time() {
        let index = index();
        let first = index.reserve("guid-a");
        assert!(first.is_some());
        assert!(index.reserve("guid-a").is_none());
        assert!(index.reserve("guid-b").is_some());
        drop(first);
        assert!(index.reserve("guid-a").is_some());
    }
}
