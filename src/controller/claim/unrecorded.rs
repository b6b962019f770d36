//! Binds whose record in the claim's status waits for the bound handle's next pass (see
//! [`awaits_handle_pass`]). Kept from one reconcile of the claim to the next, by this
//! process only: a bind another process (or this one, restarted) left unrecorded is adopted
//! from the handle's side (`binding::bind_or_create`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::binding::Pending;
use crate::api::kinds::HandleObject;
use crate::core::conditions;
use crate::core::handle::definition::status_references;

/// The longest a bind waits for its handle's pass before the claim records it anyway (a
/// handle controller far behind, or a handle whose status cannot be written).
const HANDLE_PASS_WAIT: Duration = Duration::from_secs(3);

/// A parked bind older than this is not trusted: the claim adopts its handle afresh.
const STALE: Duration = Duration::from_secs(60);

/// Claim (namespace, name) → the bind that waits for its handle's pass, and the claim's uid.
#[derive(Default)]
pub(crate) struct UnrecordedBinds(Mutex<HashMap<(String, String), (String, Pending)>>);

impl UnrecordedBinds {
    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), (String, Pending)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `pending` for the next reconcile of claim `uid` at `namespace`/`name`.
    pub(super) fn park(&self, namespace: &str, name: &str, uid: &str, pending: Pending) {
        let key = (namespace.to_owned(), name.to_owned());
        self.lock().insert(key, (uid.to_owned(), pending));
    }

    /// The bind parked for claim `uid` at `namespace`/`name`, if one is and it is recent.
    pub(super) fn take(&self, namespace: &str, name: &str, uid: &str) -> Option<Pending> {
        let key = (namespace.to_owned(), name.to_owned());
        let (parked_uid, pending) = self.lock().remove(&key)?;
        (parked_uid == uid && pending.bound_at.elapsed() < STALE).then_some(pending)
    }

    /// Whether a bind of the claim at `namespace`/`name` is parked.
    pub(super) fn holds(&self, namespace: &str, name: &str) -> bool {
        let key = (namespace.to_owned(), name.to_owned());
        self.lock().contains_key(&key)
    }

    /// The claim at `namespace`/`name` is gone.
    pub(super) fn forget(&self, namespace: &str, name: &str) {
        self.lock().remove(&(namespace.to_owned(), name.to_owned()));
    }
}

/// How much longer a claim's status waits before recording `pending`: while the handle, bound
/// with its resources already made (a pool's), has not had the pass that carries the claim to
/// them (its conditions have not observed the bind's generation). That pass patches the
/// resources and so changes their state, which the claim's status copies: recorded before it,
/// the status is written twice for one bind. `None` when the status is written now: the handle
/// has had that pass, has nothing made yet (its resources' states come later anyway), or the
/// wait is over. `current` is the handle as the store shows it now.
pub(super) fn awaits_handle_pass(pending: &Pending, current: &HandleObject) -> Option<Duration> {
    let bound = &pending.handle;
    let status = current.status.as_ref();
    let made = status_references(current).iter().any(Option::is_some);
    let passed = conditions::observed(
        status.and_then(|s| s.conditions.as_deref()),
        bound.metadata.generation,
    );
    if !made || passed {
        return None;
    }
    HANDLE_PASS_WAIT
        .checked_sub(pending.bound_at.elapsed())
        .filter(|left| !left.is_zero())
}
