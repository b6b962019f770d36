//! The resources each handle's pass has created (or taken over) and not yet recorded in the
//! handle's status, by handle uid. A pass records its references in the one status write after
//! its creates; should the handle's deletion begin in between, that write fails, and its
//! finalizer deletes these beside the ones its status references (B11). A deleted handle's
//! entry goes with its watch's delete event.

use crate::api::kinds::HandleObject;
use crate::api::refs::ResourceReference;
use crate::store::by_handle_uid::ByHandleUid;
use crate::store::shared_watch::SharedWatch;

/// Shared by the handle watch (which it follows) and the handle reconciles. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct UnrecordedResources {
    by_handle: ByHandleUid<Vec<ResourceReference>>,
}

impl UnrecordedResources {
    /// Entries that follow `handles`: a deleted handle's goes.
    pub(crate) fn following(handles: &mut SharedWatch<HandleObject>) -> Self {
        Self {
            by_handle: ByHandleUid::following(handles),
        }
    }

    /// Handle `uid` has made `reference`, which its status does not reference yet.
    pub(crate) fn made(&self, uid: &str, reference: &ResourceReference) {
        let mut by_handle = self.by_handle.lock();
        let references = by_handle.entry(uid.to_owned()).or_default();
        if !references.contains(reference) {
            references.push(reference.clone());
        }
    }

    /// What handle `uid` made and has not recorded.
    pub(crate) fn of(&self, uid: &str) -> Vec<ResourceReference> {
        self.by_handle.lock().get(uid).cloned().unwrap_or_default()
    }

    /// Handle `uid`'s status references everything its passes made, or its finalizer deleted
    /// it, or it is gone.
    pub(crate) fn forget(&self, uid: &str) {
        self.by_handle.forget(uid);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::by_handle_uid::handle;

    fn reference(name: &str) -> ResourceReference {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "name": name, "namespace": "user"}))
        .expect("a reference")
    }

    #[test]
    fn made_resources_are_kept_once_until_forgotten() {
        let unrecorded = UnrecordedResources::default();
        unrecorded.made("h1", &reference("a"));
        unrecorded.made("h1", &reference("a"));
        unrecorded.made("h1", &reference("b"));
        unrecorded.made("h2", &reference("c"));
        assert_eq!(unrecorded.of("h1"), vec![reference("a"), reference("b")]);
        assert_eq!(unrecorded.of("h1"), vec![reference("a"), reference("b")]);
        unrecorded.forget("h1");
        assert_eq!(unrecorded.of("h1"), Vec::new());
        assert_eq!(unrecorded.of("h2"), vec![reference("c")]);
    }

    #[test]
    fn a_delete_event_empties_the_handles_entry() {
        let unrecorded = UnrecordedResources::default();
        unrecorded.made("h1", &reference("a"));
        unrecorded.made("h2", &reference("b"));
        unrecorded.by_handle.deleted(&handle("h1"));
        assert_eq!(unrecorded.of("h1"), Vec::new());
        assert_eq!(unrecorded.of("h2"), vec![reference("b")]);
        // The memory keeps no key for the deleted handle.
        assert_eq!(unrecorded.by_handle.lock().len(), 1);
    }
}
