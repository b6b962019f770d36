//! Binds whose record in the claim's status waits for the bound handle's resources to show
//! the claim (see [`awaits_resources`]). Kept from one reconcile of the claim to the next, by
//! this process only: a bind another process (or this one, restarted) left unrecorded is
//! adopted from the handle's side (`binding::bind_or_create`). The echo of the bind's own
//! patch is no news to the claim while its reconcile makes the bind, nor its handle's changes
//! while the bind is parked ([`UnrecordedBinds::news_of`]): the change a parked bind waits for
//! is its resources', which wake the claim as news ([`UnrecordedBinds::is_parked`]).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;

use super::binding::Pending;
use crate::api::domain::OperatorDomain;
use crate::api::kinds::HandleObject;

/// The longest a bind waits for its resources to show the claim before the claim records it
/// anyway (a handle controller far behind, or a resource the handle cannot patch).
const RESOURCES_WAIT: Duration = Duration::from_secs(3);

/// A parked bind older than this is not trusted: the claim adopts its handle afresh.
const STALE: Duration = Duration::from_secs(60);

/// Where a claim's bind stands, between the reconcile that makes it and the one that records it.
enum Bind {
    /// A reconcile of the claim is binding it (or recording the bind) now; `echo` is the
    /// handle's version its bind wrote, once the bind is made.
    Making { echo: Option<String> },
    /// Made by claim `uid`, waiting for the handle's resources.
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
        self.lock()
            .entry(key.clone())
            .or_insert(Bind::Making { echo: None });
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

    /// Whether the claim at `namespace`/`name` has a bind parked: a wake from its resources'
    /// watch is then its news.
    pub(crate) fn is_parked(&self, namespace: &str, name: &str) -> bool {
        let key = (namespace.to_owned(), name.to_owned());
        matches!(self.lock().get(&key), Some(Bind::Parked { .. }))
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
            // The echo of the bind's own patch: seen before the bind returns, or as the
            // version it returned. A later change is read by a pass after this one.
            Some(Bind::Making { echo: None }) => true,
            Some(Bind::Making { echo: Some(echo) }) => {
                handle.metadata.resource_version.as_deref() == Some(echo.as_str())
            }
            // Read when the bind is taken up: by the wake of its resources, or at the end
            // of its wait; or by the first status of a handle that had none, which records
            // the resources it made.
            Some(Bind::Parked { pending, .. }) => {
                pending.handle.metadata.name == handle.metadata.name
                    && (pending.handle.status.is_some() || handle.status.is_none())
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

impl Making<'_> {
    /// The bind is made: `handle` is the version it wrote, whose echo is no news.
    pub(super) fn made(&self, handle: &HandleObject) {
        if let Some(Bind::Making { echo }) = self.binds.lock().get_mut(&self.key) {
            echo.clone_from(&handle.metadata.resource_version);
        }
    }
}

impl Drop for Making<'_> {
    fn drop(&mut self) {
        let mut binds = self.binds.lock();
        if let Some(Bind::Making { .. }) = binds.get(&self.key) {
            binds.remove(&self.key);
        }
    }
}

/// What a change of a bound handle is to its claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum News {
    /// No bind of the claim is being made or parked: a change like any other.
    Routine,
    /// A change the bind's record waits for, or one that concerns it (another handle bound
    /// to the claim, or its handle being deleted).
    Awaited,
    /// Not news: the echo of the bind's own patch, or a change of a parked bind's handle
    /// (read when the bind is taken up).
    None,
}

/// How much longer a claim's status waits before recording `pending`, whose handle is now
/// `handle`: while the handle has no status (its first pass, which creates its resources and
/// records them, is still to come: a handle made for the claim), or a resource of the handle,
/// made before the bind (a pool's), does not show the claim in its live state (`states`, one
/// per status reference). The handle's first pass after the bind writes the claim's
/// annotations on its resources (§12.3), which changes their state, which the claim's status
/// copies: recorded before, the status is written twice for one bind. `None` when the status
/// is written now: every resource whose state is known shows the claim (a resource not made,
/// or not readable, has none), or the wait is over.
pub(super) fn awaits_resources(
    pending: &Pending,
    handle: &HandleObject,
    states: &[Option<Value>],
    (namespace, name): (&str, &str),
    domain: &OperatorDomain,
) -> Option<Duration> {
    let (name_key, namespace_key) = (
        domain.resource_claim_name(),
        domain.resource_claim_namespace(),
    );
    let shows_claim = |state: &Value| {
        let annotations = &state["metadata"]["annotations"];
        annotations[&name_key].as_str() == Some(name)
            && annotations[&namespace_key].as_str() == Some(namespace)
    };
    if handle.status.is_some() && states.iter().flatten().all(shows_claim) {
        return None;
    }
    RESOURCES_WAIT
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

    /// Handle `name` at `version`, bound to claim `user/c`, with one resource made.
    fn handle(name: &str, version: &str) -> HandleObject {
        serde_json::from_value(json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceHandle",
            "metadata": {"name": name, "namespace": "poolboy", "resourceVersion": version},
            "spec": {"resourceClaim": {"apiVersion": "poolboy.gpte.redhat.com/v1",
                     "kind": "ResourceClaim", "name": "c", "namespace": "user"},
                     "resources": [{"provider": {"apiVersion": "poolboy.gpte.redhat.com/v1",
                                   "kind": "ResourceProvider", "name": "lab",
                                   "namespace": "poolboy"}}]},
            "status": {
                "resources": [{"reference": {"apiVersion": "v1", "kind": "ConfigMap",
                               "name": "cm", "namespace": "labs"}}],
            },
        }))
        .expect("a handle")
    }

    fn pending(handle: HandleObject, bound_at: Instant) -> Pending {
        Pending {
            handle,
            rewrite_requested_end: None,
            bound_at,
            bound_on: chrono::DateTime::UNIX_EPOCH,
            created_because: None,
        }
    }

    fn parked(binds: &UnrecordedBinds, handle: HandleObject) {
        binds.park("user", "c", "uid-c", pending(handle, Instant::now()));
    }

    /// The echo of the bind's own patch wakes nothing while the bind is made, nor its
    /// handle's changes while it is parked; a later change of the handle, another handle
    /// bound to the claim, and a handle being deleted are the claim's news.
    #[test]
    fn a_bind_being_made_or_parked_hears_only_what_concerns_it() {
        let binds = UnrecordedBinds::default();
        let bound = handle("guid-a", "2");
        assert_eq!(binds.news_of("user", "c", &bound), News::Routine);
        let mut unbound_here = bound.clone();
        unbound_here.spec.resource_claim = None;
        {
            let making = binds.making("user", "c");
            assert_eq!(
                binds.news_of("user", "c", &bound),
                News::None,
                "echo, early"
            );
            making.made(&bound);
            assert_eq!(binds.news_of("user", "c", &bound), News::None, "its echo");
            let changed = handle("guid-a", "3");
            assert_eq!(binds.news_of("user", "c", &changed), News::Awaited);
            assert_eq!(binds.news_of("user", "c", &unbound_here), News::Routine);
        }
        assert_eq!(binds.news_of("user", "c", &bound), News::Routine, "made");

        let making = binds.making("user", "c");
        parked(&binds, bound.clone());
        drop(making);
        assert!(binds.is_parked("user", "c"));
        assert!(!binds.is_parked("user", "other"));
        assert_eq!(binds.news_of("user", "c", &bound), News::None, "its echo");
        let changed = handle("guid-a", "3");
        assert_eq!(
            binds.news_of("user", "c", &changed),
            News::None,
            "read when taken"
        );
        let other = handle("guid-b", "2");
        assert_eq!(binds.news_of("user", "c", &other), News::Awaited);
        let mut deleting = bound.clone();
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert_eq!(binds.news_of("user", "c", &deleting), News::Awaited);
        assert_eq!(binds.news_of("user", "other", &bound), News::Routine);

        assert!(binds.take("user", "c", "uid-c").is_some());
        assert!(!binds.is_parked("user", "c"));
        assert_eq!(binds.news_of("user", "c", &bound), News::Routine, "taken");

        // A handle made for the claim has no status when the bind is parked: its first
        // status, which records the resources its pass made, is the news the bind waits for.
        let mut made = handle("guid-c", "1");
        made.status = None;
        parked(&binds, made.clone());
        let mut still_without = handle("guid-c", "2");
        still_without.status = None;
        assert_eq!(binds.news_of("user", "c", &still_without), News::None);
        let recorded = handle("guid-c", "3");
        assert_eq!(binds.news_of("user", "c", &recorded), News::Awaited);
    }

    /// A ConfigMap's live state, annotated for claim `namespace`/`name` when given.
    fn state(claim: Option<(&str, &str)>) -> Option<Value> {
        let annotations = match claim {
            Some((namespace, name)) => json!({
                "poolboy.gpte.redhat.com/resource-claim-name": name,
                "poolboy.gpte.redhat.com/resource-claim-namespace": namespace,
            }),
            None => json!({"poolboy.gpte.redhat.com/resource-handle-name": "guid-a"}),
        };
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cm", "namespace": "labs", "annotations": annotations}}))
    }

    /// The record waits while a resource's state does not name the claim yet, or the handle
    /// has no status yet, and no longer than the wait; a resource without a state (not made,
    /// or not readable) is not waited for.
    #[test]
    fn a_bind_is_recorded_once_its_resources_show_the_claim() {
        let domain = OperatorDomain::default();
        let claim = ("user", "c");
        let now = pending(handle("guid-a", "2"), Instant::now());
        let waits = |bind: &Pending, states: &[Option<Value>]| {
            awaits_resources(bind, &bind.handle, states, claim, &domain).is_some()
        };
        assert!(waits(&now, &[state(None)]));
        assert!(waits(&now, &[state(Some(claim)), state(None)]));
        assert!(waits(&now, &[state(Some(("user", "other")))]));
        assert!(waits(&now, &[state(Some(("elsewhere", "c")))]));
        assert!(!waits(&now, &[state(Some(claim))]));
        assert!(!waits(&now, &[state(Some(claim)), None]));
        assert!(!waits(&now, &[None]), "nothing made");
        assert!(!waits(&now, &[]));

        let long_ago = Instant::now()
            .checked_sub(RESOURCES_WAIT)
            .expect("a clock past its first seconds");
        let old = pending(handle("guid-a", "2"), long_ago);
        assert!(!waits(&old, &[state(None)]), "waited long enough");

        // A handle made for the claim: waited for until its first pass wrote its status.
        let mut made = handle("guid-c", "1");
        made.status = None;
        let created = pending(made.clone(), Instant::now());
        assert!(awaits_resources(&created, &made, &[], claim, &domain).is_some());
        let passed = handle("guid-c", "2");
        let states = [state(Some(claim))];
        assert!(awaits_resources(&created, &passed, &states, claim, &domain).is_none());
        let old = pending(made.clone(), long_ago);
        assert!(
            awaits_resources(&old, &made, &[], claim, &domain).is_none(),
            "waited long enough"
        );
    }
}
