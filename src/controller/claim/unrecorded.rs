//! Binds whose record in the claim's status waits for the bound handle's next pass (see
//! [`awaits_handle_pass`]). Kept from one reconcile of the claim to the next, by this
//! process only: a bind another process (or this one, restarted) left unrecorded is adopted
//! from the handle's side (`binding::bind_or_create`). While a bind is being made or is
//! parked, only the handle's pass it waits for wakes the claim ([`UnrecordedBinds::news_of`]).

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

/// Where a claim's bind stands, between the reconcile that makes it and the one that records it.
enum Bind {
    /// A reconcile of the claim is binding it (or recording the bind) now.
    Making,
    /// Made by claim `uid`, waiting for the handle's pass.
    Parked { uid: String, pending: Box<Pending> },
}

/// Claim (namespace, name) → where its bind stands.
#[derive(Default)]
pub(crate) struct UnrecordedBinds(Mutex<HashMap<(String, String), Bind>>);

impl UnrecordedBinds {
    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), Bind>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that a reconcile of the claim at `namespace`/`name` binds it, until the returned
    /// guard is dropped (or the bind is parked).
    pub(super) fn making<'a>(&'a self, namespace: &str, name: &str) -> Making<'a> {
        let key = (namespace.to_owned(), name.to_owned());
        self.lock().entry(key.clone()).or_insert(Bind::Making);
        Making { binds: self, key }
    }

    /// Keeps `pending` for the next reconcile of claim `uid` at `namespace`/`name`.
    pub(super) fn park(&self, namespace: &str, name: &str, uid: &str, pending: Pending) {
        let key = (namespace.to_owned(), name.to_owned());
        let uid = uid.to_owned();
        let pending = Box::new(pending);
        self.lock().insert(key, Bind::Parked { uid, pending });
    }

    /// The bind parked for claim `uid` at `namespace`/`name`, if one is and it is recent.
    pub(super) fn take(&self, namespace: &str, name: &str, uid: &str) -> Option<Pending> {
        let key = (namespace.to_owned(), name.to_owned());
        let mut binds = self.lock();
        match binds.remove(&key) {
            Some(Bind::Parked {
                uid: parked_uid,
                pending,
            }) => (parked_uid == uid && pending.bound_at.elapsed() < STALE).then_some(*pending),
            Some(making) => {
                binds.insert(key, making);
                None
            }
            None => None,
        }
    }

    /// What a change of `handle` is to the claim at `namespace`/`name` it wakes.
    pub(super) fn news_of(&self, namespace: &str, name: &str, handle: &HandleObject) -> News {
        let bound_here = handle
            .spec
            .resource_claim
            .as_ref()
            .is_some_and(|claim| claim.namespace == namespace && claim.name == name);
        if !bound_here {
            return News::Routine;
        }
        let key = (namespace.to_owned(), name.to_owned());
        let binds = self.lock();
        let waits = match binds.get(&key) {
            None => return News::Routine,
            Some(_) if handle.metadata.deletion_timestamp.is_some() => false,
            // The echo of the bind's own patch, seen before the bind is parked.
            Some(Bind::Making) => !conditions::observed(
                handle.status.as_ref().and_then(|s| s.conditions.as_deref()),
                handle.metadata.generation,
            ),
            Some(Bind::Parked { pending, .. }) => {
                pending.handle.metadata.name == handle.metadata.name
                    && awaits_handle_pass(pending, handle).is_some()
            }
        };
        match waits {
            true => News::None,
            false => News::Awaited,
        }
    }

    /// The claim at `namespace`/`name` is gone.
    pub(super) fn forget(&self, namespace: &str, name: &str) {
        self.lock().remove(&(namespace.to_owned(), name.to_owned()));
    }
}

/// A reconcile binding its claim: see [`UnrecordedBinds::making`].
pub(super) struct Making<'a> {
    binds: &'a UnrecordedBinds,
    key: (String, String),
}

impl Drop for Making<'_> {
    fn drop(&mut self) {
        let mut binds = self.binds.lock();
        if let Some(Bind::Making) = binds.get(&self.key) {
            binds.remove(&self.key);
        }
    }
}

/// What a change of a bound handle is to its claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum News {
    /// No bind of the claim is being made or parked: a change like any other.
    Routine,
    /// The handle's pass the bind waits for (or another change that concerns it).
    Awaited,
    /// Not the pass the bind waits for (the echo of the bind's own patch, for one): the
    /// reconcile binding the claim goes on, or the parked bind is requeued for the end of
    /// its wait.
    None,
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use super::*;

    /// Handle `name` at `generation`, bound to claim `user/c`, with one resource made; its
    /// conditions observed `observed`.
    fn handle(name: &str, generation: i64, observed: i64) -> HandleObject {
        serde_json::from_value(json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceHandle",
            "metadata": {"name": name, "namespace": "poolboy", "generation": generation},
            "spec": {"resourceClaim": {"apiVersion": "poolboy.gpte.redhat.com/v1",
                     "kind": "ResourceClaim", "name": "c", "namespace": "user"},
                     "resources": [{"provider": {"apiVersion": "poolboy.gpte.redhat.com/v1",
                                   "kind": "ResourceProvider", "name": "lab",
                                   "namespace": "poolboy"}}]},
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
                                "observedGeneration": observed}],
                "resources": [{"reference": {"apiVersion": "v1", "kind": "ConfigMap",
                               "name": "cm", "namespace": "labs"}}],
            },
        }))
        .expect("a handle")
    }

    fn parked(binds: &UnrecordedBinds, handle: HandleObject) {
        let pending = Pending {
            handle,
            rewrite_requested_end: None,
            bound_at: Instant::now(),
        };
        binds.park("user", "c", "uid-c", pending);
    }

    /// The echo of the bind's own patch wakes nothing, while the bind is made or parked; the
    /// handle's pass that observes the bind is the claim's news.
    #[test]
    fn only_the_pass_a_parked_bind_waits_for_wakes_its_claim() {
        let binds = UnrecordedBinds::default();
        let bound = handle("guid-a", 2, 1);
        assert_eq!(binds.news_of("user", "c", &bound), News::Routine);

        let unbound = handle("guid-a", 1, 1);
        let mut unbound_here = unbound.clone();
        unbound_here.spec.resource_claim = None;
        {
            let _making = binds.making("user", "c");
            assert_eq!(binds.news_of("user", "c", &bound), News::None, "its echo");
            assert_eq!(binds.news_of("user", "c", &unbound), News::Awaited);
            assert_eq!(binds.news_of("user", "c", &unbound_here), News::Routine);
        }
        assert_eq!(binds.news_of("user", "c", &bound), News::Routine, "made");

        let making = binds.making("user", "c");
        parked(&binds, bound.clone());
        drop(making);
        assert_eq!(binds.news_of("user", "c", &bound), News::None, "its echo");
        let passed = handle("guid-a", 2, 2);
        assert_eq!(binds.news_of("user", "c", &passed), News::Awaited);
        let other = handle("guid-b", 2, 1);
        assert_eq!(binds.news_of("user", "c", &other), News::Awaited);
        let mut deleting = bound.clone();
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert_eq!(binds.news_of("user", "c", &deleting), News::Awaited);
        assert_eq!(binds.news_of("user", "other", &bound), News::Routine);

        assert!(binds.take("user", "c", "uid-c").is_some());
        assert_eq!(binds.news_of("user", "c", &bound), News::Routine, "taken");
    }
}
