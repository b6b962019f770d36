//! Which handles render their claim, by handle name: a handle's pass reads it whole only
//! through its templates (`resource_claim`) and a provider's parameter values, and most passes
//! read neither. A change of only a claim's spec (which the claim's pass writes into the
//! handle), its status (the bind it records, an approval, a lifespan) or its deletion then has
//! nothing for the handle to render again (`claim::controller`).
//!
//! What is kept is the handles whose last pass here read it, and those whose pass is running
//! (so that a change that comes while a pass renders from what it read before is not missed).
//! A handle this process has not passed yet has a pass to come (every handle is passed once
//! listed or created), which reads its claim as it is then. So the memory follows the handles
//! whose templates read their claim, not all of them. A deleted handle's entry goes with its
//! watch's delete event.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::api::kinds::HandleObject;
use crate::store::shared_watch::SharedWatch;

/// Shared by the handle watch (which it follows), the claim watch (whose changes it weighs)
/// and the handle reconciles. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClaimReaders {
    /// The handles whose last pass read their claim, or whose pass is running.
    reading: Arc<Mutex<HashSet<String>>>,
}

impl ClaimReaders {
    /// Entries that follow `handles`: a deleted handle's goes.
    pub(crate) fn following(handles: &mut SharedWatch<HandleObject>) -> Self {
        let readers = Self::default();
        let follower = readers.clone();
        handles.follow_deletes(move |handle| follower.deleted(handle));
        readers
    }

    fn deleted(&self, handle: &HandleObject) {
        if let Some(name) = &handle.metadata.name {
            self.lock().remove(name);
        }
    }

    /// A pass of `handle` begins: until it ends, the handle reads its claim.
    pub(crate) fn pass_begins(&self, handle: &str) {
        let mut reading = self.lock();
        if !reading.contains(handle) {
            reading.insert(handle.to_owned());
        }
    }

    /// A pass of `handle` ended, having read its claim or not. (One that fails
    /// ends without this: the handle reads its claim until a pass ends.)
    pub(crate) fn pass_ended(&self, handle: &str, read: bool) {
        if !read {
            self.lock().remove(handle);
        }
    }

    /// Whether a change of only its claim's spec, status or deletion may change what
    /// `handle` renders.
    pub(crate) fn renders_claim(&self, handle: &str) -> bool {
        self.lock().contains(handle)
    }

    fn lock(&self) -> MutexGuard<'_, HashSet<String>> {
        self.reading.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(name: &str) -> HandleObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceHandle",
            "metadata": {"name": name, "namespace": "poolboy", "uid": format!("uid-{name}")},
            "spec": {"resources": []},
        }))
        .expect("a handle")
    }

    #[test]
    fn a_handle_reads_its_claim_while_its_pass_runs_and_after_one_that_read_it() {
        let readers = ClaimReaders::default();
        assert!(
            !readers.renders_claim("h1"),
            "its first pass is still to come"
        );
        readers.pass_begins("h1");
        assert!(readers.renders_claim("h1"), "while its pass runs");
        readers.pass_ended("h1", true);
        assert!(readers.renders_claim("h1"));
        readers.pass_begins("h1");
        readers.pass_ended("h1", false);
        assert!(!readers.renders_claim("h1"));
        readers.pass_begins("h2");
        assert!(
            readers.renders_claim("h2"),
            "a pass that failed: until one ends"
        );
        assert_eq!(readers.lock().len(), 1, "only the handles that read it");
    }

    #[test]
    fn a_delete_event_forgets_the_handle() {
        let readers = ClaimReaders::default();
        for name in ["h1", "h2"] {
            readers.pass_begins(name);
            readers.pass_ended(name, true);
        }
        readers.deleted(&handle("h1"));
        assert_eq!(readers.lock().len(), 1);
        readers.deleted(&handle("h2"));
        assert!(readers.lock().is_empty());
    }
}
