//! The pool controller's index of each pool's handles, kept from the handle watch event by
//! event: which handles no claim holds, how many the claims hold (and how many of those are
//! not ready), and their provisioning times. A pool pass reads its pool's entry and looks up
//! only the unclaimed handles, kept parsed (`store::free_handles`), so that it costs what
//! the pool's unbound handles cost. A pass follows every bind: were it to scan the whole store,
//! one more bind at 100,000 bound handles would cost two to three times what it does at 10,000.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chrono::TimeDelta;
use kube::ResourceExt;
use kube::core::ApiResource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::api::kinds::HandleObject;
use crate::api::kinds::SharedType;
use crate::api::{OperatorDomain, ResourceHandle, ResourcePool};
use crate::core::pool::autoscale::{ProvisioningTimes, provisioning_time};
use crate::core::pool::plan::{BoundCounts, is_handle_of_pool, is_unbound_handle_of_pool};
use crate::store::free_handles::FreeHandles;
use crate::store::packed::StoredHandle;
use crate::store::shared_watch::{FollowedIndex, ListedStore, Relisting, SharedWatch};

/// A pool's (namespace, name).
type PoolKey = (String, String);

/// A pool a handle's change concerns.
#[derive(Debug)]
pub(crate) struct Concern<'a> {
    pub(crate) namespace: &'a str,
    pub(crate) pool: &'a str,
    /// The handle, when the change is its creation ([`Told::creation`]).
    pub(crate) created: Option<&'a str>,
    /// Whether the change moves only what the pool counts ([`Told::counts_only`]).
    pub(crate) counts_only: bool,
    /// Whether the change is a claim's bind of one of the pool's unclaimed handles
    /// ([`Told::bind`]).
    pub(crate) bind: bool,
}

/// What a handle's change tells the pools.
#[derive(Debug, Default, PartialEq, Eq)]
struct Told {
    /// The pools it concerns.
    pools: Vec<PoolKey>,
    /// Whether it is the handle's creation: it appears, unclaimed and without a status. A pool
    /// that reserved the handle's name before creating it counts it already.
    creation: bool,
    /// Whether it moves only what the pool counts: an unclaimed handle's readiness or health
    /// (and with readiness its provisioning time), which the pool's status reports and its
    /// `maxUnready` cap weighs, except its turning unhealthy; or what a claimed handle adds (its
    /// readiness, its deletion), which the `maxSize` and `maxConcurrent` caps and autoscale
    /// weigh. No bind, no creation, no change of what the pool holds.
    counts_only: bool,
    /// Whether it is a claim's bind of an unclaimed handle of the pool: the handle leaves
    /// what the pool holds, and nothing else of the pool changes.
    bind: bool,
}

/// Shared by the handle watch (which it follows) and the pool reconciles. Cheap to clone.
#[derive(Clone)]
pub(crate) struct PoolIndex {
    handles: ListedStore<StoredHandle>,
    free: FreeHandles,
    handle_kind: SharedType<ApiResource>,
    /// Where handles live: the operator namespace.
    namespace: String,
    members: Arc<Mutex<Members>>,
}

impl PoolIndex {
    /// The index of the handles `handles` watches, in `namespace`; it follows the watch, and
    /// `wake`s each pool a handle's change concerns ([`pools_concerned`]) once its entry shows
    /// the change.
    pub(crate) fn following(
        handles: &mut SharedWatch<HandleObject>,
        free: FreeHandles,
        handle_kind: SharedType<ApiResource>,
        namespace: &str,
        wake: impl Fn(Concern<'_>) + Send + Sync + 'static,
    ) -> Self {
        let members: Arc<Mutex<Members>> = Arc::default();
        let follower = members.clone();
        handles.follow(move |event| {
            let told = lock(&follower).apply_telling(event);
            let created = match (told.creation, event) {
                (true, watcher::Event::Apply(handle)) => handle.metadata.name.as_deref(),
                _ => None,
            };
            for (namespace, pool) in &told.pools {
                tracing::trace!(%pool, ?created, told.counts_only, "a handle's change concerns its pool");
                wake(Concern {
                    namespace,
                    pool,
                    created,
                    counts_only: told.counts_only,
                    bind: told.bind,
                });
            }
        });
        Self {
            handles: handles.store(),
            free,
            handle_kind,
            namespace: namespace.to_owned(),
            members,
        }
    }

    /// Waits until the handle watch has listed once; any number of callers at once.
    pub(crate) async fn wait_until_listed(&self) {
        self.handles.wait_until_listed().await;
    }

    /// Whether the store shows handle `name`, of any pool or none.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.handles.store().get(&self.key(name)).is_some()
    }

    /// Whether the index shows a handle of `pool` named `name` (bound and deleting ones too).
    ///
    /// Read from the index, the last follower of the watch to see an event, not from the store
    /// or the free handles, which see it first: a pass that found a new handle shown there
    /// but not yet among [`unclaimed`](Self::unclaimed) counted it neither as pending nor as
    /// available, and created one handle too many (a chaos run left a pool at 11 of 10).
    pub(crate) fn shows(&self, pool: &ResourcePool, name: &str) -> bool {
        lock(&self.members).shows(&pool_key(pool), name)
    }

    /// Whether a claim holds handle `name`, of a pool, as the watch last showed it.
    pub(crate) fn is_claimed(&self, name: &str) -> bool {
        lock(&self.members)
            .handles
            .get(name)
            .is_some_and(|(_, part)| part.claimed)
    }

    /// The handles of `pool` no claim holds, as the watch last showed them: deleting, ignored
    /// and released ones too (callers tell the unbound ones).
    pub(crate) fn unclaimed(&self, pool: &ResourcePool) -> Vec<Arc<HandleObject>> {
        let names: Vec<String> = self
            .with_pool(pool, |handles| handles.unclaimed.iter().cloned().collect())
            .unwrap_or_default();
        names
            .iter()
            .filter_map(|name| self.free.get(name))
            .filter(|handle| is_handle_of_pool(&**handle, pool))
            .collect()
    }

    /// Of `unclaimed`, handles of `pool` ([`Self::unclaimed`]), the unbound ones
    /// ([`is_unbound_handle_of_pool`]), as `core` reads them.
    pub(crate) fn unbound(
        &self,
        pool: &ResourcePool,
        unclaimed: &[Arc<HandleObject>],
        domain: &OperatorDomain,
    ) -> Vec<Arc<ResourceHandle>> {
        unclaimed
            .iter()
            .filter(|h| is_unbound_handle_of_pool(&***h, pool, domain))
            .map(|h| self.view_of(h))
            .collect()
    }

    /// `handle`, one of the free ones, as `core` reads it ([`FreeHandles::view_of`]).
    pub(crate) fn view_of(&self, handle: &HandleObject) -> Arc<ResourceHandle> {
        self.free.view_of(handle)
    }

    fn key(&self, name: &str) -> ObjectRef<StoredHandle> {
        ObjectRef::new_with(name, self.handle_kind.clone()).within(&self.namespace)
    }

    /// How many handles of `pool` claims hold, and how many of those are not ready.
    pub(crate) fn bound(&self, pool: &ResourcePool) -> BoundCounts {
        self.with_pool(pool, |handles| handles.bound)
            .unwrap_or_default()
    }

    /// The median time from creation to readiness of `pool`'s handles that got ready, and how
    /// many there are.
    pub(crate) fn provisioning_time(&self, pool: &ResourcePool) -> Option<(TimeDelta, usize)> {
        self.with_pool(pool, |handles| handles.provisioning.median())
            .flatten()
    }

    fn with_pool<R>(&self, pool: &ResourcePool, f: impl FnOnce(&PoolHandles) -> R) -> Option<R> {
        lock(&self.members).pools.get(&pool_key(pool)).map(f)
    }
}

fn pool_key(pool: &ResourcePool) -> PoolKey {
    (pool.namespace().unwrap_or_default(), pool.name_any())
}

fn lock(members: &Mutex<Members>) -> MutexGuard<'_, Members> {
    members.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every pool's handles, and what each handle adds to its pool's entry.
#[derive(Debug, Default)]
struct Members {
    pools: HashMap<Arc<PoolKey>, PoolHandles>,
    /// Each handle of a pool, by name: its pool (shared with `pools`: one copy of the key per
    /// pool, not per handle) and what it adds.
    handles: HashMap<String, (Arc<PoolKey>, Part)>,
    relisting: Relisting<String, (PoolKey, Part)>,
}

/// One pool's handles, as the index keeps them.
#[derive(Debug, Default)]
struct PoolHandles {
    /// How many handles the pool has.
    members: usize,
    /// The names of those no claim holds.
    unclaimed: BTreeSet<String>,
    bound: BoundCounts,
    provisioning: ProvisioningTimes,
}

/// What one handle adds to its pool's entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Part {
    claimed: bool,
    bound: BoundCounts,
    provisioning: Option<TimeDelta>,
    /// Of an unclaimed handle, what a pool pass reads of it ([`looks_of`]) but its state; 0
    /// for a claimed one, whose pool reads only what it adds.
    looks: u64,
    /// Of an unclaimed handle, its readiness and health (`status.ready`, `status.healthy`);
    /// unknown for a claimed one.
    state: (Option<bool>, Option<bool>),
}

impl Members {
    /// Applies `event`; what it tells the pools.
    fn apply_telling(&mut self, event: &watcher::Event<HandleObject>) -> Told {
        let before = match event {
            watcher::Event::Apply(handle) | watcher::Event::Delete(handle) => Self::key(handle)
                .and_then(|name| {
                    let (pool, part) = self.handles.get(&name)?;
                    Some(((**pool).clone(), *part))
                }),
            _ => None,
        };
        self.apply(event);
        match event {
            watcher::Event::Apply(handle) => {
                let after = Self::entry(handle);
                let bind = match (&before, &after) {
                    (Some((was, old)), Some((is, new))) => was == is && !old.claimed && new.claimed,
                    _ => false,
                };
                let counts_only = match (&before, &after) {
                    (Some((was, old)), Some((is, new))) if was == is && old != new => {
                        let same_but_state = Part {
                            state: new.state,
                            provisioning: new.provisioning,
                            ..*old
                        };
                        // An unclaimed handle turning unhealthy is one its pool may delete
                        // (`deleteUnhealthyResourceHandles`) and replace: not only counts.
                        let ((_, was_healthy), (_, healthy)) = (old.state, new.state);
                        let turned_unhealthy =
                            !new.claimed && healthy == Some(false) && was_healthy != Some(false);
                        (old.claimed && new.claimed)
                            || (same_but_state == *new && !turned_unhealthy)
                    }
                    _ => false,
                };
                Told {
                    creation: before.is_none()
                        && handle.spec.resource_claim.is_none()
                        && handle.status.is_none(),
                    counts_only,
                    bind,
                    pools: pools_concerned(before, after),
                }
            }
            // A claimed handle's deletion takes away only what it added to the counts.
            watcher::Event::Delete(_) => Told {
                counts_only: before.as_ref().is_some_and(|(_, part)| part.claimed),
                pools: pools_concerned(before, None),
                ..Told::default()
            },
            // A re-list: each pool hears of each of its handles, as when it was first listed.
            watcher::Event::InitApply(handle) => Told {
                pools: pools_concerned(None, Self::entry(handle)),
                ..Told::default()
            },
            watcher::Event::Init | watcher::Event::InitDone => Told::default(),
        }
    }

    /// Whether handle `name` is one of `pool`'s.
    fn shows(&self, pool: &PoolKey, name: &str) -> bool {
        self.handles.get(name).is_some_and(|(of, _)| **of == *pool)
    }
}

/// A digest of what a pool pass reads of an unclaimed handle but its state (`Part::state`):
/// its spec (by generation), labels, annotations and deletion (of its conditions, only when it
/// got ready, which `Part::provisioning` holds); not its finalizers, nor its resources'
/// references and states, which its own passes write as they create them.
fn looks_of(handle: &HandleObject) -> u64 {
    let read = (
        handle.metadata.generation,
        &handle.metadata.labels,
        &handle.metadata.annotations,
        &handle.metadata.deletion_timestamp,
    );
    super::digest(&read)
}

/// The pools a handle's change from `before` to `after` (its pool and what it adds there;
/// `None`: of no pool, or gone) concerns. A pool pass reads its unclaimed handles whole, but
/// of a claimed one only what it adds: a claimed handle's status moving on (its resources'
/// state after each change, the claim's edits) wakes no pool, nor an unclaimed one's
/// finalizer and resource references.
fn pools_concerned(
    before: Option<(PoolKey, Part)>,
    after: Option<(PoolKey, Part)>,
) -> Vec<PoolKey> {
    match (before, after) {
        (Some((was, old)), Some((is, new))) if was == is => {
            if old == new {
                Vec::new()
            } else {
                vec![is]
            }
        }
        (before, after) => before
            .into_iter()
            .chain(after)
            .map(|(pool, _)| pool)
            .collect(),
    }
}

impl FollowedIndex<HandleObject> for Members {
    /// The handle's name.
    type Key = String;
    /// The handle's pool and what it adds to it; handles of no pool are not kept.
    type Entry = (PoolKey, Part);

    fn key(handle: &HandleObject) -> Option<String> {
        handle.metadata.name.clone()
    }

    fn entry(handle: &HandleObject) -> Option<(PoolKey, Part)> {
        let pool = handle.spec.resource_pool.as_ref()?;
        let claimed = handle.spec.resource_claim.is_some();
        let part = Part {
            claimed,
            bound: BoundCounts::of_handle(handle),
            provisioning: provisioning_time(handle),
            looks: if claimed { 0 } else { looks_of(handle) },
            state: match (claimed, handle.status.as_ref()) {
                (false, Some(status)) => (status.ready, status.healthy),
                _ => (None, None),
            },
        };
        Some(((pool.namespace.clone(), pool.name.clone()), part))
    }

    fn record(&mut self, name: String, (pool, part): (PoolKey, Part)) {
        let pool = match self.pools.get_key_value(&pool) {
            Some((shared, _)) => shared.clone(),
            None => Arc::new(pool),
        };
        let handles = self.pools.entry(pool.clone()).or_default();
        handles.members += 1;
        if !part.claimed {
            handles.unclaimed.insert(name.clone());
        }
        handles.bound.add(part.bound);
        if let Some(time) = part.provisioning {
            handles.provisioning.insert(time);
        }
        self.handles.insert(name, (pool, part));
    }

    fn forget(&mut self, name: &String) {
        let Some((pool, part)) = self.handles.remove(name) else {
            return;
        };
        let Some(handles) = self.pools.get_mut(&pool) else {
            return;
        };
        handles.members -= 1;
        handles.unclaimed.remove(name);
        handles.bound.remove(part.bound);
        if let Some(time) = part.provisioning {
            handles.provisioning.remove(time);
        }
        if handles.members == 0 {
            self.pools.remove(&pool);
        }
    }

    fn clear(&mut self) {
        self.pools.clear();
        self.handles.clear();
    }

    fn relisting(&mut self) -> &mut Relisting<String, (PoolKey, Part)> {
        &mut self.relisting
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;

    fn handle(name: &str, pool: &str, claim: Option<&str>, ready: bool) -> HandleObject {
        let mut value = json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceHandle",
            "metadata": {"name": name, "namespace": "poolboy",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"resourcePool": {"apiVersion": "poolboy.gpte.redhat.com/v1",
                     "kind": "ResourcePool", "name": pool, "namespace": "poolboy"}},
            "status": {"ready": ready},
        });
        if let Some(claim) = claim {
            value["spec"]["resourceClaim"] = json!({"apiVersion": "poolboy.gpte.redhat.com/v1",
                "kind": "ResourceClaim", "name": claim, "namespace": "user"});
        }
        if ready {
            value["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
                "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:02:00Z"}]);
        }
        serde_json::from_value(value).expect("handle")
    }

    fn of(members: &Members, pool: &str) -> Option<(Vec<String>, BoundCounts, usize)> {
        let handles = members
            .pools
            .get(&("poolboy".to_owned(), pool.to_owned()))?;
        let times = handles.provisioning.median().map_or(0, |(_, count)| count);
        let unclaimed = handles.unclaimed.iter().cloned().collect();
        Some((unclaimed, handles.bound, times))
    }

    fn counts(count: usize, unready: usize) -> BoundCounts {
        BoundCounts { count, unready }
    }

    #[test]
    fn each_event_moves_a_handle_between_the_counts_of_its_pool() {
        let mut members = Members::default();
        members.apply(&Event::Apply(handle("guid-a", "p", None, false)));
        members.apply(&Event::Apply(handle("guid-b", "p", None, true)));
        members.apply(&Event::Apply(handle("guid-c", "q", None, true)));
        assert_eq!(
            of(&members, "p"),
            Some((vec!["guid-a".into(), "guid-b".into()], counts(0, 0), 1))
        );
        // A bind: the handle leaves the unclaimed ones, and counts unready until it is ready.
        members.apply(&Event::Apply(handle("guid-a", "p", Some("c1"), false)));
        assert_eq!(
            of(&members, "p"),
            Some((vec!["guid-b".into()], counts(1, 1), 1))
        );
        members.apply(&Event::Apply(handle("guid-a", "p", Some("c1"), true)));
        assert_eq!(
            of(&members, "p"),
            Some((vec!["guid-b".into()], counts(1, 0), 2))
        );
        members.apply(&Event::Delete(handle("guid-a", "p", Some("c1"), true)));
        members.apply(&Event::Delete(handle("guid-b", "p", None, true)));
        assert_eq!(
            of(&members, "p"),
            None,
            "a pool without handles is forgotten"
        );
        assert_eq!(
            of(&members, "q"),
            Some((vec!["guid-c".into()], counts(0, 0), 1))
        );
    }

    /// A handle is shown as its pool's from the event that brings it, bound or not, until the
    /// one that deletes it.
    #[test]
    fn a_handle_is_shown_as_its_pools_until_it_is_deleted() {
        let mut members = Members::default();
        let p = ("poolboy".to_owned(), "p".to_owned());
        let q = ("poolboy".to_owned(), "q".to_owned());
        assert!(!members.shows(&p, "guid-a"));
        members.apply(&Event::Apply(handle("guid-a", "p", None, false)));
        assert!(members.shows(&p, "guid-a") && !members.shows(&q, "guid-a"));
        members.apply(&Event::Apply(handle("guid-a", "p", Some("c1"), true)));
        assert!(members.shows(&p, "guid-a"), "bound, still the pool's");
        members.apply(&Event::Delete(handle("guid-a", "p", Some("c1"), true)));
        assert!(!members.shows(&p, "guid-a"));
    }

    #[test]
    fn a_relist_replaces_every_pool_once_it_is_done() {
        let mut members = Members::default();
        members.apply(&Event::Init);
        members.apply(&Event::InitDone);
        members.apply(&Event::Apply(handle("guid-gone", "p", Some("c1"), true)));
        members.apply(&Event::Init);
        members.apply(&Event::InitApply(handle("guid-new", "p", None, false)));
        assert_eq!(
            of(&members, "p"),
            Some((vec![], counts(1, 0), 1)),
            "unchanged while the re-list runs"
        );
        members.apply(&Event::InitDone);
        assert_eq!(
            of(&members, "p"),
            Some((vec!["guid-new".into()], counts(0, 0), 0))
        );
        assert_eq!(members.handles.len(), 1);
    }

    #[test]
    fn handles_of_no_pool_are_not_kept() {
        let mut members = Members::default();
        let mut lone = handle("guid-a", "p", Some("c1"), true);
        lone.spec.resource_pool = None;
        members.apply(&Event::Apply(lone));
        assert!(members.pools.is_empty() && members.handles.is_empty());
    }

    /// A bind, a readiness change and a deletion wake the pool; a handle's status moving on
    /// without changing what the pool reads of it does not.
    #[test]
    fn a_pool_hears_of_what_changes_what_it_counts() {
        let mut members = Members::default();
        let p = || vec![("poolboy".to_owned(), "p".to_owned())];
        let mut tell = |handle: HandleObject| members.apply_telling(&Event::Apply(handle)).pools;
        assert_eq!(
            tell(handle("guid-a", "p", None, false)),
            p(),
            "a new handle"
        );
        let mut finalized = handle("guid-a", "p", None, false);
        finalized.metadata.finalizers = Some(vec!["poolboy.gpte.redhat.com".to_owned()]);
        assert_eq!(
            tell(finalized),
            Vec::<PoolKey>::new(),
            "unclaimed, finalizer"
        );
        assert_eq!(
            tell(handle("guid-a", "p", None, true)),
            p(),
            "unclaimed, ready"
        );
        let mut labelled = handle("guid-a", "p", None, true);
        labelled.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        assert_eq!(tell(labelled), p(), "unclaimed, labelled");
        assert_eq!(
            tell(handle("guid-a", "p", Some("c1"), true)),
            p(),
            "the bind"
        );
        let mut moved_on = handle("guid-a", "p", Some("c1"), true);
        moved_on.status.get_or_insert_default().summary = Some(json!({"state": "on"}));
        assert_eq!(
            tell(moved_on),
            Vec::<PoolKey>::new(),
            "bound, counted the same"
        );
        assert_eq!(
            tell(handle("guid-a", "p", Some("c1"), false)),
            p(),
            "unready"
        );
        let mut deleting = handle("guid-a", "p", Some("c1"), false);
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert_eq!(tell(deleting.clone()), p(), "no longer counted");
        assert_eq!(
            members.apply_telling(&Event::Delete(deleting)).pools,
            p(),
            "gone"
        );
        assert_eq!(members.apply_telling(&Event::Init), Told::default());
    }

    /// A handle moved to another pool concerns both.
    #[test]
    fn a_handle_moved_between_pools_concerns_both() {
        let mut members = Members::default();
        members.apply(&Event::Apply(handle("guid-a", "p", Some("c1"), true)));
        let told = members.apply_telling(&Event::Apply(handle("guid-a", "q", Some("c1"), true)));
        assert_eq!(
            told.pools,
            vec![
                ("poolboy".to_owned(), "p".to_owned()),
                ("poolboy".to_owned(), "q".to_owned())
            ]
        );
    }

    /// Only a handle's first appearance, unclaimed and without a status, is its creation.
    #[test]
    fn a_handle_is_created_when_it_first_appears_unclaimed_without_a_status() {
        let mut members = Members::default();
        let mut fresh = handle("guid-a", "p", None, false);
        fresh.status = None;
        let told = members.apply_telling(&Event::Apply(fresh.clone()));
        assert!(told.creation && told.pools.len() == 1);
        let mut labelled = fresh.clone();
        labelled.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        let told = members.apply_telling(&Event::Apply(labelled));
        assert!(!told.creation && told.pools.len() == 1, "known already");
        let mut relisted = fresh.clone();
        relisted.metadata.name = Some("guid-b".to_owned());
        assert!(!members.apply_telling(&Event::InitApply(relisted)).creation);
        assert!(
            !members
                .apply_telling(&Event::Apply(handle("guid-c", "p", None, false)))
                .creation,
            "with a status"
        );
        assert!(
            !members
                .apply_telling(&Event::Apply(handle("guid-d", "p", Some("c1"), false)))
                .creation,
            "claimed"
        );
    }

    /// A change of an unbound handle's readiness or health alone (except its turning unhealthy),
    /// and of a claimed handle's readiness or deletion, moves only the counts; a bind, a label,
    /// an unbound handle turning unhealthy or its deletion is more.
    #[test]
    fn a_change_of_readiness_health_or_a_claimed_handle_moves_only_the_counts() {
        let mut members = Members::default();
        let mut tell = |handle: HandleObject| members.apply_telling(&Event::Apply(handle));
        assert!(!tell(handle("guid-a", "p", None, false)).counts_only, "new");
        let told = tell(handle("guid-a", "p", None, true));
        assert!(told.counts_only && told.pools.len() == 1, "ready");
        let mut unhealthy = handle("guid-a", "p", None, true);
        unhealthy.status.get_or_insert_default().healthy = Some(false);
        assert!(
            !tell(unhealthy.clone()).counts_only,
            "turning unhealthy: the pool may delete it"
        );
        let mut unready = unhealthy.clone();
        unready.status.get_or_insert_default().ready = Some(false);
        assert!(tell(unready).counts_only, "unready, unhealthy still");
        let mut healthy = handle("guid-a", "p", None, true);
        healthy.status.get_or_insert_default().healthy = Some(true);
        assert!(tell(healthy).counts_only, "healthy again");
        assert!(!tell(unhealthy.clone()).counts_only, "unhealthy again");
        let mut labelled = unhealthy;
        labelled.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        assert!(!tell(labelled).counts_only, "labelled");
        let bind = tell(handle("guid-a", "p", Some("c1"), true));
        assert!(!bind.counts_only && bind.bind, "the bind");
        let unready = tell(handle("guid-a", "p", Some("c1"), false));
        assert!(
            unready.counts_only && !unready.bind && unready.pools.len() == 1,
            "a bound handle's readiness"
        );
        let mut deleting = handle("guid-a", "p", Some("c1"), false);
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        let told = tell(deleting.clone());
        assert!(
            told.counts_only && told.pools.len() == 1,
            "a bound handle deleting"
        );
        let told = members.apply_telling(&Event::Delete(deleting));
        assert!(
            told.counts_only && told.pools.len() == 1,
            "a bound handle gone"
        );

        members.apply(&Event::Apply(handle("guid-b", "p", None, true)));
        let told = members.apply_telling(&Event::Delete(handle("guid-b", "p", None, true)));
        assert!(
            !told.counts_only && told.pools.len() == 1,
            "an unbound handle gone"
        );
        members.apply(&Event::Apply(handle("guid-c", "p", Some("c2"), true)));
        let released = members.apply_telling(&Event::Apply(handle("guid-c", "p", None, true)));
        assert!(
            !released.counts_only && released.pools.len() == 1,
            "a claimed handle released"
        );
    }
}
