//! The claim controller's own indexes: the handles as the handle watch shows them, the handles
//! bound to each claim and how many of each pool's each namespace holds, the claims waiting for
//! a matching handle (creation disabled, B18), and the handles found taken before the handle
//! store caught up.
//!
//! Taken notes and reservations stop concurrent reconciles of this process from racing for the
//! same handle (docs/design.md, "store::claim_index").

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::Stream;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::api::ResourceHandle;
use crate::api::kinds::SharedType;
use crate::api::kinds::{ClaimObject, HandleObject};
use crate::store::free_handles::FreeHandles;
use crate::store::packed::StoredHandle;
use crate::store::shared_watch::{FollowedIndex, ListedStore, Relisting, SharedWatch};

/// How long a claim let through a provider's limit counts before the claim store shows it
/// holding a handle: longer than any bind or create takes to show.
const ADMITTED_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// Shared by the handle watch (which it follows) and the claim reconciles. Cheap to clone.
#[derive(Clone)]
pub(crate) struct ClaimIndex {
    handles: ListedStore<StoredHandle>,
    free: FreeHandles,
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
    /// The claims let through a provider's `maxClaimsPerNamespace`, by (namespace,
    /// provider), with when: they count until the claim store shows them holding a handle.
    admitted: HashMap<(String, String), HashMap<String, std::time::Instant>>,
    /// When each claim first let claims ahead of it in a pool's line go first.
    deferred: HashMap<(String, String), std::time::Instant>,
    /// The handles bound to each claim, and those bound to none.
    bindings: Bindings,
}

impl Inner {
    /// A handle event: the bindings follow it, and a deleted handle's taken note goes (a
    /// relist keeps the notes of the handles it shows).
    fn apply_handle(&mut self, event: &watcher::Event<HandleObject>) {
        self.bindings.apply(event);
        match event {
            watcher::Event::Delete(handle) => {
                if let Some(name) = &handle.metadata.name {
                    self.taken.remove(name);
                }
            }
            watcher::Event::InitDone => {
                let bindings = &self.bindings;
                self.taken.retain(|name, _| {
                    bindings.claim_of.contains_key(name.as_str())
                        || bindings.free.contains(name.as_str())
                });
            }
            _ => {}
        }
    }

    /// A claim event: a deleted claim is forgotten.
    fn apply_claim(&mut self, event: &watcher::Event<ClaimObject>) {
        if let watcher::Event::Delete(claim) = event
            && let (Some(namespace), Some(name)) = (&claim.metadata.namespace, &claim.metadata.name)
        {
            self.forget_claim(namespace, name);
        }
    }

    /// Claim `name` of `namespace` is gone: it waits for nothing and counts against no limit.
    fn forget_claim(&mut self, namespace: &str, name: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        self.waiting.remove(&key);
        self.deferred.remove(&key);
        self.admitted.retain(|(admitted_in, _), claims| {
            if admitted_in == namespace {
                claims.remove(name);
            }
            !claims.is_empty()
        });
    }
}

/// What the handle watch says of bindings, kept without scanning every handle: which handles
/// name each claim in `spec.resourceClaim` (normally one, more when a process died between
/// binding a handle and recording it in its claim: such a handle is found when its claim
/// changes or goes), which handles name none (what a bind ranks, without copying and filtering
/// 100,000 bound handles for each bind), and how many handles of each pool the claims of each
/// namespace hold (a pool's fair line, `claim::line`).
///
/// One entry per bound handle in each of two tables: a handle's name, its claim's key and its
/// pool's name are each one shared string (`Arc<str>`), not a copy per table.
#[derive(Debug, Default)]
struct Bindings {
    /// The handles naming each claim, by name, sorted: nearly always one (a `BTreeSet` of one
    /// took a 280-byte node per claim).
    by_claim: HashMap<ClaimKey, Vec<Arc<str>>>,
    claim_of: HashMap<Arc<str>, Binding>,
    free: HashSet<Arc<str>>,
    /// Pool name → claim namespace → how many of the pool's handles, not being deleted, the
    /// claims of that namespace hold.
    held: HashMap<Arc<str>, BTreeMap<String, usize>>,
    relisting: Relisting<Arc<str>, Option<Binding>>,
}

/// A claim's namespace and name, as one `namespace/name` string (a namespace has no `/`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ClaimKey(Arc<str>);

impl ClaimKey {
    fn new(namespace: &str, name: &str) -> Self {
        Self(format!("{namespace}/{name}").into())
    }

    fn namespace(&self) -> &str {
        self.0
            .split_once('/')
            .map_or("", |(namespace, _)| namespace)
    }
}

/// The claim a handle names, and the pool it counts for in [`Bindings::held`].
#[derive(Debug)]
struct Binding {
    claim: ClaimKey,
    /// The handle's pool, when it is not being deleted.
    held_in: Option<Arc<str>>,
}

impl FollowedIndex<HandleObject> for Bindings {
    /// The handle's name.
    type Key = Arc<str>;
    /// The claim the handle names, if any.
    type Entry = Option<Binding>;

    fn key(handle: &HandleObject) -> Option<Arc<str>> {
        handle.metadata.name.as_deref().map(Arc::from)
    }

    fn entry(handle: &HandleObject) -> Option<Option<Binding>> {
        let claim = handle.spec.resource_claim.as_ref();
        let held_in = handle
            .spec
            .resource_pool
            .as_ref()
            .filter(|_| handle.metadata.deletion_timestamp.is_none())
            .map(|pool| Arc::from(pool.name.as_str()));
        Some(claim.map(|claim| Binding {
            claim: ClaimKey::new(&claim.namespace, &claim.name),
            held_in,
        }))
    }

    fn record(&mut self, handle: Arc<str>, binding: Option<Binding>) {
        let Some(mut binding) = binding else {
            self.free.insert(handle);
            return;
        };
        // Room for the one handle nearly every claim has (a first push makes room for four).
        let handles = entry_sharing_key(&mut self.by_claim, &mut binding.claim, || {
            Vec::with_capacity(1)
        });
        if let Err(at) = handles.binary_search(&handle) {
            handles.insert(at, handle.clone());
        }
        if let Some(pool) = &mut binding.held_in {
            let held = entry_sharing_key(&mut self.held, pool, BTreeMap::new);
            let namespace = binding.claim.namespace();
            match held.get_mut(namespace) {
                Some(count) => *count += 1,
                None => {
                    held.insert(namespace.to_owned(), 1);
                }
            }
        }
        self.claim_of.insert(handle, binding);
    }

    fn clear(&mut self) {
        self.by_claim.clear();
        self.claim_of.clear();
        self.free.clear();
        self.held.clear();
    }

    fn relisting(&mut self) -> &mut Relisting<Arc<str>, Option<Binding>> {
        &mut self.relisting
    }

    fn forget(&mut self, handle: &Arc<str>) {
        self.free.remove(handle);
        let Some(Binding { claim, held_in }) = self.claim_of.remove(handle) else {
            return;
        };
        if let Some(handles) = self.by_claim.get_mut(&claim) {
            handles.retain(|name| name != handle);
            if handles.is_empty() {
                self.by_claim.remove(&claim);
            }
        }
        if let Some(pool) = held_in
            && let Some(held) = self.held.get_mut(&pool)
        {
            if let Some(count) = held.get_mut(claim.namespace()) {
                *count -= 1;
                if *count == 0 {
                    held.remove(claim.namespace());
                }
            }
            if held.is_empty() {
                self.held.remove(&pool);
            }
        }
    }
}

/// The value of `map` under `key`, made with `new` when there is none; `key` becomes the one
/// the map holds, so both share one allocation.
fn entry_sharing_key<'m, K: Clone + Eq + std::hash::Hash, V>(
    map: &'m mut HashMap<K, V>,
    key: &mut K,
    new: impl FnOnce() -> V,
) -> &'m mut V {
    match map.entry(key.clone()) {
        Entry::Occupied(entry) => {
            *key = entry.key().clone();
            entry.into_mut()
        }
        Entry::Vacant(entry) => entry.insert(new()),
    }
}

impl ClaimIndex {
    /// The index of the handles `handles` watches: it follows the watch, and the returned
    /// stream yields each touched handle after the index has it (for the claim controller's
    /// `watches_stream_with`).
    pub(crate) fn following(
        handles: &mut SharedWatch<HandleObject>,
        free: FreeHandles,
    ) -> (
        Self,
        impl Stream<Item = Result<HandleObject, watcher::Error>> + Send + 'static,
    ) {
        let inner: Arc<Mutex<Inner>> = Arc::default();
        let follower = inner.clone();
        handles.follow(move |event| lock(&follower).apply_handle(event));
        let events = handles.subscribe();
        let index = Self {
            handles: handles.store(),
            free,
            inner,
        };
        (index, events)
    }

    /// Follows the claim watch: a deleted claim is forgotten.
    pub(crate) fn follow_claims(&self, claims: &mut SharedWatch<ClaimObject>) {
        let inner = self.inner.clone();
        claims.follow(move |event| lock(&inner).apply_claim(event));
    }

    /// Claim `name` of `namespace` is gone (its watch missed the deletion, a reconcile found
    /// it gone).
    pub(crate) fn forget_claim(&self, namespace: &str, name: &str) {
        self.lock().forget_claim(namespace, name);
    }

    /// Waits until the handle watch has listed once; any number of callers at once.
    pub(crate) async fn wait_until_listed(&self) {
        self.handles.wait_until_listed().await;
    }

    /// The handles no claim holds, as the handle watch last showed them (it may show one
    /// bound a moment ago: callers still check).
    pub(crate) fn free_handles(&self) -> Vec<Arc<HandleObject>> {
        self.free.all()
    }

    /// The stored handle `name` of `namespace` (handles live in the operator namespace).
    pub(crate) fn handle(
        &self,
        namespace: &str,
        name: &str,
        kind: &SharedType<kube::core::ApiResource>,
    ) -> Option<Arc<HandleObject>> {
        let key = ObjectRef::new_with(name, kind.clone()).within(namespace);
        self.free.or_stored(self.handles.store(), &key)
    }

    /// How many handles of pool `pool` (by name) the claims of each namespace hold, leaving
    /// out handles being deleted.
    pub(crate) fn held(&self, pool: &str) -> BTreeMap<String, usize> {
        self.lock()
            .bindings
            .held
            .get(pool)
            .cloned()
            .unwrap_or_default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// The names of the handles whose `spec.resourceClaim` names claim `name` of `namespace`.
    pub(crate) fn bound_to(&self, namespace: &str, name: &str) -> Vec<String> {
        self.lock()
            .bindings
            .by_claim
            .get(&ClaimKey::new(namespace, name))
            .map(|handles| handles.iter().map(|handle| handle.to_string()).collect())
            .unwrap_or_default()
    }

    /// Records that the claim waits for a matching handle.
    pub(crate) fn wait(&self, namespace: &str, name: &str) {
        self.lock()
            .waiting
            .insert((namespace.to_owned(), name.to_owned()));
    }

    /// The claim no longer waits (bound, invalid or gone).
    pub(crate) fn stop_waiting(&self, namespace: &str, name: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        let mut inner = self.lock();
        inner.waiting.remove(&key);
        inner.deferred.remove(&key);
    }

    /// Lets claim `name` of `namespace` hold a handle through `provider` if fewer than `limit`
    /// others do: those in `active` (per the claim store) and those let through in the last
    /// [`ADMITTED_FOR`] that the store does not show holding a handle yet, unless they are
    /// gone from `alive` (the namespace's claims in the store, not being deleted). `false`: it
    /// must wait.
    pub(crate) fn admit(
        &self,
        namespace: &str,
        provider: &str,
        name: &str,
        limit: usize,
        active: &BTreeSet<String>,
        alive: &BTreeSet<String>,
    ) -> bool {
        let mut inner = self.lock();
        let admitted = inner
            .admitted
            .entry((namespace.to_owned(), provider.to_owned()))
            .or_default();
        admitted.retain(|claim, since| {
            !active.contains(claim) && alive.contains(claim) && since.elapsed() < ADMITTED_FOR
        });
        let others = active.iter().filter(|c| *c != name).count()
            + admitted.keys().filter(|c| *c != name).count();
        if others >= limit && !active.contains(name) {
            return false;
        }
        admitted
            .entry(name.to_owned())
            .or_insert_with(std::time::Instant::now);
        true
    }

    /// Records that the claim lets claims ahead of it in line go first; how long it has been
    /// doing so.
    pub(crate) fn defer(&self, namespace: &str, name: &str) -> std::time::Duration {
        let key = (namespace.to_owned(), name.to_owned());
        self.lock()
            .deferred
            .entry(key)
            .or_insert_with(std::time::Instant::now)
            .elapsed()
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

    /// `handle` as `core` sees it, converted once per version while it is free
    /// ([`FreeHandles::view_of`]).
    pub(crate) fn view_of(&self, handle: &HandleObject) -> Arc<ResourceHandle> {
        self.free.view_of(handle)
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

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    match inner.lock() {
        Ok(inner) => inner,
        Err(poisoned) => poisoned.into_inner(),
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
    use kube::runtime::watcher::Event;

    use super::*;

    fn index() -> ClaimIndex {
        let kind = crate::api::kinds::Kinds::new(&Default::default()).stored_handle;
        let writer = kube::runtime::reflector::store::Writer::<StoredHandle>::new(kind);
        ClaimIndex {
            handles: ListedStore::listed(writer.as_reader()),
            free: FreeHandles::default(),
            inner: Arc::default(),
        }
    }

    impl ClaimIndex {
        fn apply_handle_event(&self, event: &Event<HandleObject>) {
            self.lock().apply_handle(event);
        }

        fn free_names(&self) -> Vec<String> {
            let mut names: Vec<String> = self
                .lock()
                .bindings
                .free
                .iter()
                .map(|n| n.to_string())
                .collect();
            names.sort();
            names
        }
    }

    #[test]
    fn a_limit_lets_through_only_as_many_as_it_allows_before_the_store_shows_them() {
        let index = index();
        let none = BTreeSet::new();
        let all = BTreeSet::from(["a", "b", "c"].map(str::to_owned));
        assert!(index.admit("user", "lab", "a", 2, &none, &all));
        assert!(index.admit("user", "lab", "b", 2, &none, &all));
        assert!(
            !index.admit("user", "lab", "c", 2, &none, &all),
            "a and b are let through"
        );
        assert!(
            index.admit("user", "lab", "a", 2, &none, &all),
            "a again is still a"
        );
        assert!(
            index.admit("other", "lab", "c", 2, &none, &all),
            "per namespace"
        );
        // The store shows a holding a handle: b still counts until it shows too.
        let active = BTreeSet::from(["a".to_owned()]);
        assert!(!index.admit("user", "lab", "c", 2, &active, &all));
        // b is deleted: c takes its place.
        let left = BTreeSet::from(["a", "c"].map(str::to_owned));
        assert!(index.admit("user", "lab", "c", 2, &active, &left));
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
    fn a_deleted_handle_takes_its_taken_note_with_it() {
        let index = index();
        index.apply_handle_event(&Event::Apply(handle("guid-a", Some("c"))));
        index.taken("guid-a", Some("10"));
        index.taken("guid-b", Some("10"));
        index.apply_handle_event(&Event::Delete(handle("guid-a", Some("c"))));
        assert!(!index.lock().taken.contains_key("guid-a"));
        // guid-b went while the watch was down: the relist, which does not show it, drops it.
        index.apply_handle_event(&Event::Init);
        index.apply_handle_event(&Event::InitApply(handle("guid-c", None)));
        index.apply_handle_event(&Event::InitDone);
        assert!(index.lock().taken.is_empty());
    }

    #[test]
    fn a_deleted_claim_is_forgotten() {
        let index = index();
        let all = BTreeSet::from(["a".to_owned(), "b".to_owned()]);
        for name in ["a", "b"] {
            index.wait("user", name);
            index.defer("user", name);
            assert!(index.admit("user", "lab", name, 5, &BTreeSet::new(), &all));
        }
        let claim = |name: &str| -> ClaimObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "user"}, "spec": {},
            }))
            .expect("a claim")
        };
        index.lock().apply_claim(&Event::Delete(claim("a")));
        assert_eq!(index.waiting(), vec![("user".to_owned(), "b".to_owned())]);
        // b's watch missed its deletion; its reconcile found it gone.
        index.forget_claim("user", "b");
        let inner = index.lock();
        assert!(inner.waiting.is_empty() && inner.deferred.is_empty());
        assert!(inner.admitted.is_empty(), "{:?}", inner.admitted);
    }

    fn handle(name: &str, claim: Option<&str>) -> HandleObject {
        let mut handle: HandleObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "poolboy.gpte.redhat.com/v1",
            "kind": "ResourceHandle",
            "metadata": {"name": name, "namespace": "poolboy"},
            "spec": {"resources": []},
        }))
        .expect("a handle");
        handle.spec.resource_claim = claim.map(|claim| crate::api::refs::ObjectRef {
            api_version: "poolboy.gpte.redhat.com/v1".into(),
            kind: "ResourceClaim".into(),
            name: claim.into(),
            namespace: "user".into(),
        });
        handle
    }

    #[test]
    fn the_handles_bound_to_a_claim_follow_the_handle_watch() {
        let index = index();
        index.apply_handle_event(&Event::Apply(handle("guid-a", Some("c"))));
        index.apply_handle_event(&Event::Apply(handle("guid-b", Some("c"))));
        index.apply_handle_event(&Event::Apply(handle("guid-c", None)));
        assert_eq!(index.bound_to("user", "c"), vec!["guid-a", "guid-b"]);
        // Unbound, rebound elsewhere, deleted.
        index.apply_handle_event(&Event::Apply(handle("guid-a", None)));
        index.apply_handle_event(&Event::Apply(handle("guid-c", Some("d"))));
        assert_eq!(index.bound_to("user", "c"), vec!["guid-b"]);
        index.apply_handle_event(&Event::Delete(handle("guid-b", Some("c"))));
        assert!(index.bound_to("user", "c").is_empty());
        assert_eq!(index.bound_to("user", "d"), vec!["guid-c"]);
        assert!(index.bound_to("other", "d").is_empty());
    }

    /// A pool's fair line counts, per namespace, the pool's handles claims hold and that are
    /// not being deleted.
    #[test]
    fn the_handles_held_of_each_pool_follow_the_handle_watch() {
        let index = index();
        let of_pool = |name: &str, pool: &str, claim: Option<&str>| {
            let mut handle = handle(name, claim);
            handle.spec.resource_pool = Some(crate::api::refs::ObjectRef {
                api_version: "poolboy.gpte.redhat.com/v1".into(),
                kind: "ResourcePool".into(),
                name: pool.into(),
                namespace: "poolboy".into(),
            });
            handle
        };
        let held = |pool: &str| index.held(pool).into_iter().collect::<Vec<_>>();
        index.apply_handle_event(&Event::Apply(of_pool("guid-a", "lab", Some("c"))));
        index.apply_handle_event(&Event::Apply(of_pool("guid-b", "lab", Some("d"))));
        index.apply_handle_event(&Event::Apply(of_pool("guid-c", "lab", None)));
        index.apply_handle_event(&Event::Apply(of_pool("guid-d", "db", Some("e"))));
        index.apply_handle_event(&Event::Apply(handle("guid-e", Some("f"))));
        assert_eq!(held("lab"), [("user".to_owned(), 2)]);
        assert_eq!(held("db"), [("user".to_owned(), 1)]);

        let mut deleting = of_pool("guid-a", "lab", Some("c"));
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        index.apply_handle_event(&Event::Apply(deleting));
        assert_eq!(
            held("lab"),
            [("user".to_owned(), 1)],
            "a deleting handle is not held"
        );
        index.apply_handle_event(&Event::Apply(of_pool("guid-b", "lab", None)));
        index.apply_handle_event(&Event::Delete(of_pool("guid-d", "db", Some("e"))));
        assert!(held("lab").is_empty());
        assert!(held("db").is_empty());
        assert!(index.lock().bindings.held.is_empty(), "nothing left behind");
    }

    #[test]
    fn a_bound_handle_keeps_one_copy_of_its_names_across_the_tables() {
        let index = index();
        for (name, claim) in [("guid-a", "c"), ("guid-b", "c"), ("guid-c", "d")] {
            let mut handle = handle(name, Some(claim));
            handle.spec.resource_pool = Some(crate::api::refs::ObjectRef {
                api_version: "poolboy.gpte.redhat.com/v1".into(),
                kind: "ResourcePool".into(),
                name: "lab".into(),
                namespace: "poolboy".into(),
            });
            index.apply_handle_event(&Event::Apply(handle));
        }
        let inner = index.lock();
        let bindings = &inner.bindings;
        let (pool, _) = bindings.held.get_key_value("lab").expect("held");
        for (handle, binding) in &bindings.claim_of {
            let (claim, handles) = bindings
                .by_claim
                .get_key_value(&binding.claim)
                .expect("its claim");
            assert!(
                Arc::ptr_eq(&claim.0, &binding.claim.0),
                "{handle}: one claim key"
            );
            let listed = handles.iter().find(|h| *h == handle).expect("listed");
            assert!(Arc::ptr_eq(listed, handle), "{handle}: one name");
            let held_in = binding.held_in.as_ref().expect("in a pool");
            assert!(Arc::ptr_eq(held_in, pool), "{handle}: one pool name");
        }
        assert_eq!(bindings.claim_of.len(), 3);
    }

    #[test]
    fn a_relist_replaces_the_bindings_when_it_ends() {
        let index = index();
        index.apply_handle_event(&Event::Init);
        index.apply_handle_event(&Event::InitDone);
        index.apply_handle_event(&Event::Apply(handle("guid-a", Some("c"))));
        index.apply_handle_event(&Event::Init);
        index.apply_handle_event(&Event::InitApply(handle("guid-b", Some("c"))));
        // Until the re-list ends, the old bindings answer.
        assert_eq!(index.bound_to("user", "c"), vec!["guid-a"]);
        index.apply_handle_event(&Event::InitDone);
        // guid-a vanished while the watch was down: no delete event came for it.
        assert_eq!(index.bound_to("user", "c"), vec!["guid-b"]);
    }

    #[test]
    fn the_free_handles_follow_the_handle_watch_and_a_relist_replaces_them() {
        let index = index();
        index.apply_handle_event(&Event::Init);
        index.apply_handle_event(&Event::InitDone);
        index.apply_handle_event(&Event::Apply(handle("guid-a", None)));
        index.apply_handle_event(&Event::Apply(handle("guid-b", None)));
        index.apply_handle_event(&Event::Apply(handle("guid-c", Some("c"))));
        assert_eq!(index.free_names(), ["guid-a", "guid-b"]);
        // Bound, released, deleted.
        index.apply_handle_event(&Event::Apply(handle("guid-a", Some("c"))));
        index.apply_handle_event(&Event::Apply(handle("guid-c", None)));
        index.apply_handle_event(&Event::Delete(handle("guid-b", None)));
        assert_eq!(index.free_names(), ["guid-c"]);
        index.apply_handle_event(&Event::Init);
        index.apply_handle_event(&Event::InitApply(handle("guid-d", None)));
        index.apply_handle_event(&Event::InitApply(handle("guid-a", Some("c"))));
        assert_eq!(index.free_names(), ["guid-c"], "until the re-list ends");
        index.apply_handle_event(&Event::InitDone);
        assert_eq!(index.free_names(), ["guid-d"]);
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
