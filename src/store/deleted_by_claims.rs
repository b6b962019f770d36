//! The handles this process deleted for their claim's finalizer (§7.3), by uid. The handle's
//! own finalizer then knows that its claim is being deleted and needs no deletion (Δ§3.2
//! Delete) without looking: the claim is usually gone from the store by then, released by the
//! same finalizer, and asking the API server would only hear 404. A handle missing here (it
//! was deleted by someone else, or by another process) is looked up as before. A deleted
//! handle's entry goes with its watch's delete event, or with its finalizer.

use crate::api::kinds::HandleObject;
use crate::store::by_handle_uid::ByHandleUid;
use crate::store::shared_watch::SharedWatch;

/// Shared by the handle watch (which it follows), the claim reconciles that delete handles
/// and the handle reconciles that finalize them. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct HandlesDeletedByClaims {
    uids: ByHandleUid<()>,
}

impl HandlesDeletedByClaims {
    /// Entries that follow `handles`: a deleted handle's goes.
    pub(crate) fn following(handles: &mut SharedWatch<HandleObject>) -> Self {
        Self {
            uids: ByHandleUid::following(handles),
        }
    }

    /// Handle `uid` is being deleted because its claim is.
    pub(crate) fn record(&self, uid: &str) {
        self.uids.lock().insert(uid.to_owned(), ());
    }

    /// Whether handle `uid` is being deleted because its claim is.
    pub(crate) fn contains(&self, uid: &str) -> bool {
        self.uids.lock().contains_key(uid)
    }

    /// Handle `uid`'s finalizer is done, or the handle is gone.
    pub(crate) fn forget(&self, uid: &str) {
        self.uids.forget(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::by_handle_uid::handle;

    #[test]
    fn a_recorded_handle_is_known_until_forgotten() {
        let deleted = HandlesDeletedByClaims::default();
        deleted.record("h1");
        deleted.record("h2");
        assert!(deleted.contains("h1"));
        deleted.forget("h1");
        assert!(!deleted.contains("h1"));
        assert!(deleted.contains("h2"));
        assert!(!deleted.contains("h3"));
    }

    #[test]
    fn a_delete_event_empties_the_handles_entry() {
        let deleted = HandlesDeletedByClaims::default();
        deleted.record("h1");
        deleted.record("h2");
        deleted.uids.deleted(&handle("h1"));
        assert!(!deleted.contains("h1"));
        assert!(deleted.contains("h2"));
        // The memory keeps no key for the deleted handle.
        assert_eq!(deleted.uids.lock().len(), 1);
    }
}
