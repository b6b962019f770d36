//! A controller's own view of a related kind: a watch reflected into a store that is written
//! before the controller is woken (so a reconcile woken by a change always reads it), with a
//! "listed once" signal any number of reconciles can wait on.
//!
//! A kind several controllers follow is watched once ([`SharedWatch`]): one store, and every
//! object the watch touches after its first list (deleted ones too) sent to each subscriber
//! after the store has it. The store keeps each object packed ([`Packed`]);
//! followers and subscribers see the object itself. Why not kube-runtime 5's own shared
//! streams: docs/design.md, "store::shared_watch".

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use futures::{Stream, StreamExt, TryStreamExt};
use kube::Resource;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Lookup, ObjectRef, Store};
use kube::runtime::watcher;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::api::kinds::SharedType;
use crate::api::kinds::{ClaimObject, HandleObject};
use crate::core::json::compact::{compact, compact_map};
use crate::store::health::WatchHealth;
use crate::store::packed::{Head, Identified, Names, Packed, Packer};
use crate::store::relist::RelistGate;

/// How long the API server keeps one watch request open (kube-runtime's default is 290 s).
/// A watch made while kube-apiserver was going down can stay open but silent, so no event
/// reaches its controller until the request ends: `make chaos` saw handles created after an
/// API-server restart go unnoticed for almost four minutes. Ending every watch after a minute
/// (and failing a read silent for longer, `poolboy run`'s read timeout) bounds that; an idle
/// broker pays one watch request per minute per watch, and no list.
pub(crate) const WATCH_TIMEOUT_SECS: u32 = 60;

/// The watch configuration every watch of the broker starts from. Its lists read the most
/// recent state, kube-runtime's 500 objects a page: kube-core sends `resourceVersion=0` (the
/// API server's cache as it is, every object in one answer) only without a page size, and one
/// answer is held and decoded whole (docs/design.md, "store::shared_watch").
pub(crate) fn watch_config() -> watcher::Config {
    watcher::Config::default().timeout(WATCH_TIMEOUT_SECS)
}

/// A store and whether its watch has listed once. Cheap to clone.
#[derive(Clone)]
pub(crate) struct ListedStore<K: Lookup + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    listed: Arc<watch::Sender<bool>>,
    first_list: Arc<FirstList>,
}

/// The marks of a store's first list. Readers that go without it and the list itself mark one
/// flag, so that each such reader is either seen by the list (whose lister is told) or sees it
/// (and reads the store again).
#[derive(Default)]
struct FirstList(AtomicU8);

impl FirstList {
    const LISTED: u8 = 1;
    const MISSED: u8 = 2;

    /// Records the list; whether a reader went without it.
    fn came(&self) -> bool {
        self.0.fetch_or(Self::LISTED, Ordering::AcqRel) & Self::MISSED != 0
    }

    /// Records a reader that found the store unlisted; whether the list came meanwhile.
    fn missed_unless_came(&self) -> bool {
        self.0.fetch_or(Self::MISSED, Ordering::AcqRel) & Self::LISTED != 0
    }

    /// Whether a reader went without the list.
    fn was_missed(&self) -> bool {
        self.0.load(Ordering::Acquire) & Self::MISSED != 0
    }
}

impl<K: Lookup + Clone + 'static> ListedStore<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    pub(crate) fn store(&self) -> &Store<K> {
        &self.store
    }

    /// The store `writer` fills, not listed yet: whoever feeds the writer calls
    /// [`ListedStore::mark_listed`] after the first list.
    pub(crate) fn of(writer: &reflector::store::Writer<K>) -> Self {
        Self {
            store: writer.as_reader(),
            listed: Arc::new(watch::Sender::new(false)),
            first_list: Arc::default(),
        }
    }

    /// Lets every waiter of [`ListedStore::wait_until_listed`] through, now and from now on;
    /// waiters hear of it once, however often the watch lists again. Whether a reader went
    /// without the list before it came ([`ListedStore::listed_within`]): what that reader
    /// read as unknown is news now.
    pub(crate) fn mark_listed(&self) -> bool {
        self.listed
            .send_if_modified(|listed| !std::mem::replace(listed, true));
        self.first_list.came()
    }

    /// A store whose contents are complete already (tests build one by hand).
    #[cfg(test)]
    pub(crate) fn listed(store: Store<K>) -> Self {
        Self {
            store,
            listed: Arc::new(watch::Sender::new(true)),
            first_list: Arc::new(FirstList(AtomicU8::new(FirstList::LISTED))),
        }
    }

    /// Whether the watch has listed every object once.
    pub(crate) fn is_listed(&self) -> bool {
        *self.listed.borrow()
    }

    /// Waits until the watch has listed every object once; any number of callers at once.
    pub(crate) async fn wait_until_listed(&self) {
        let mut listed = self.listed.subscribe();
        // Err only when the sender is gone, and `self` holds it.
        let _ = listed.wait_for(|listed| *listed).await;
    }

    /// Whether the watch has listed once, its first list waited for up to `wait`. Once a reader
    /// has gone without it (its kind forbidden to list, say), none waits again, so a watch that
    /// does not list slows no reader for longer than once; [`ListedStore::mark_listed`] tells
    /// whether one did.
    pub(crate) async fn listed_within(&self, wait: Duration) -> bool {
        if self.is_listed() {
            return true;
        }
        if !self.first_list.was_missed() {
            // A timeout leaves this reader without the list: marked below.
            let _ = tokio::time::timeout(wait, self.wait_until_listed()).await;
        }
        self.is_listed() || self.first_list.missed_unless_came()
    }

    /// The object `key` names, as the store has it; `None` when it lacks it. A store that lacks
    /// it before the watch has listed is waited for as [`ListedStore::listed_within`] says.
    pub(crate) async fn get_once_listed(
        &self,
        key: &ObjectRef<K>,
        wait: Duration,
    ) -> Option<Arc<K>> {
        if let Some(object) = self.store.get(key) {
            return Some(object);
        }
        self.listed_within(wait).await;
        self.store.get(key)
    }
}

/// `object` as every store of the broker keeps it, and as templates see a live resource: without
/// `metadata.managedFields`, as Poolboy's cache keeps objects (#121). No decision reads them,
/// and they are most of a small object: kept, every pass that copies a handle out of a store
/// copies them too (a fifth of a warm burst's CPU), and every store holds them.
pub(crate) fn without_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// An object as the broker's watches hand it on and its long-lived stores keep it: packed
/// ([`Packed`]).
pub(crate) trait Stored: Resource + Serialize + Sized {
    /// Drops what nothing reads (`metadata.managedFields`, [`without_managed_fields`]) and
    /// compacts what the store keeps parsed (`core::json::compact`): every follower,
    /// subscriber and store sees the object trimmed.
    fn trim_for_store(&mut self);

    /// Whether its status shows that the broker has dealt with it, as far as a list can tell:
    /// a start or a re-list reconciles the others first ([`Applied::Listed`]).
    fn settled(&self) -> bool {
        false
    }
}

/// What a watch hands the controller that drives it, once the store shows it.
pub(crate) enum Applied<S> {
    /// An object that changed, or that a list brought not [`Stored::settled`], as the store
    /// keeps it: its reconcile goes before the routine ones.
    Object(S),
    /// A list is done: every object the store holds now, as it holds them. Those the list
    /// brought settled come only here: their reconciles can wait behind the others', and
    /// handed on as the store's own objects they cost the controller's backlog a pointer
    /// each while they wait (`controller::backlog`).
    Listed(Vec<Arc<S>>),
}

impl<S> Applied<S> {
    /// The object, unless this is a list's end.
    pub(crate) fn object(&self) -> Option<&S> {
        match self {
            Self::Object(object) => Some(object),
            Self::Listed(_) => None,
        }
    }
}

/// Claims are kept packed: every claim of the cluster sits in the store, and each is read by
/// one reconcile at a time.
impl Stored for ClaimObject {
    fn trim_for_store(&mut self) {
        without_managed_fields(self);
    }

    /// Bound, and not being deleted.
    fn settled(&self) -> bool {
        self.metadata.deletion_timestamp.is_none()
            && self
                .status
                .as_ref()
                .is_some_and(|s| s.resource_handle.is_some())
    }
}

/// Handles are kept packed: one per claim sits in the store. The free ones, which every bind
/// and pool pass reads, are also kept parsed (`store::free_handles`), compacted here.
impl Stored for HandleObject {
    fn trim_for_store(&mut self) {
        without_managed_fields(self);
        let spec = &mut self.spec;
        compact_all(spec.resources.iter_mut().flatten().map(|r| &mut r.template));
        compact_all_maps([
            spec.provider.as_mut().map(|p| &mut p.parameter_values),
            Some(&mut spec.vars),
        ]);
        compact_all(self.status.as_mut().map(|s| &mut s.summary));
    }

    /// With a status, and not being deleted.
    fn settled(&self) -> bool {
        self.metadata.deletion_timestamp.is_none() && self.status.is_some()
    }
}

/// Compacts each of `values` that is there.
fn compact_all<'a>(values: impl IntoIterator<Item = &'a mut Option<Value>>) {
    values.into_iter().flatten().for_each(compact);
}

/// Compacts each of `maps` that is there.
fn compact_all_maps<'a>(
    maps: impl IntoIterator<Item = Option<&'a mut Option<Map<String, Value>>>>,
) {
    maps.into_iter().flatten().flatten().for_each(compact_map);
}

/// Managed resources are kept packed: every resource of every handle sits in a store, and
/// each is read by the one reconcile of its handle.
impl Stored for DynamicObject {
    fn trim_for_store(&mut self) {
        without_managed_fields(self);
    }
}

/// A function that sees every event of a watch after the store has it.
type Follower<K> = Box<dyn Fn(&watcher::Event<K>) + Send + Sync>;

/// A follower that hands `forget` each deleted object, and nothing else.
fn deletes_only<K>(forget: impl Fn(&K) + Send + Sync) -> impl Fn(&watcher::Event<K>) + Send + Sync {
    move |event| {
        if let watcher::Event::Delete(object) = event {
            forget(object);
        }
    }
}

/// An index kept beside a store from its watch's events ([`SharedWatch::follow`]), by a key
/// of each object: an applied object replaces what the index had of it, a deleted one is
/// forgotten, and a re-list replaces everything once it is done (an object deleted while the
/// watch was down gets no delete event of its own).
pub(crate) trait FollowedIndex<K: Resource> {
    /// What names an object in the index.
    type Key;
    /// What the index keeps of one object.
    type Entry;

    fn key(object: &K) -> Option<Self::Key>;
    /// What the index keeps of `object`; `None`: nothing.
    fn entry(object: &K) -> Option<Self::Entry>;
    fn record(&mut self, key: Self::Key, entry: Self::Entry);
    fn forget(&mut self, key: &Self::Key);
    fn clear(&mut self);
    /// Whether the index has listed once, and what a re-list in progress has seen so far.
    fn relisting(&mut self) -> &mut Relisting<Self::Key, Self::Entry>;

    fn apply(&mut self, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Apply(object) => self.replace(object),
            watcher::Event::Delete(object) => {
                if let Some(key) = Self::key(object) {
                    self.forget(&key);
                }
            }
            // The first list fills the index as it comes: there is nothing yet to keep
            // serving while it runs (a first list begun again starts from empty), and every
            // object's entry held aside until it is done adds to a start's peak memory (3.5
            // MiB for the claim summaries of 20,000 claims). A re-list replaces the index
            // once it is done.
            watcher::Event::Init => {
                let relisting = self.relisting();
                if relisting.listed_once {
                    relisting.entries = Some(Vec::new());
                } else {
                    self.clear();
                }
            }
            watcher::Event::InitApply(object) => match self.relisting().entries.as_mut() {
                Some(relisted) => {
                    if let (Some(key), Some(entry)) = (Self::key(object), Self::entry(object)) {
                        relisted.push((key, entry));
                    }
                }
                None => self.replace(object),
            },
            watcher::Event::InitDone => {
                let relisting = self.relisting();
                relisting.listed_once = true;
                if let Some(relisted) = relisting.entries.take() {
                    self.clear();
                    for (key, entry) in relisted {
                        self.record(key, entry);
                    }
                }
            }
        }
    }

    /// What the index had of `object` gives way to what it keeps of it now.
    fn replace(&mut self, object: &K) {
        if let Some(key) = Self::key(object) {
            self.forget(&key);
            if let Some(entry) = Self::entry(object) {
                self.record(key, entry);
            }
        }
    }
}

/// Whether an index has listed once, and the entries a re-list in progress has seen so far,
/// by key ([`FollowedIndex::relisting`]).
#[derive(Debug)]
pub(crate) struct Relisting<Key, E> {
    listed_once: bool,
    entries: Option<Vec<(Key, E)>>,
}

impl<Key, E> Default for Relisting<Key, E> {
    fn default() -> Self {
        Self {
            listed_once: false,
            entries: None,
        }
    }
}

/// One watch of a kind, reflected into one [`ListedStore`], for any number of controllers:
/// followers see each event and subscribers each touched object after the store has it, so
/// a reconcile woken by a change always reads it (kube-runtime's reflector stores a list's
/// objects together once it is done: [`ListedStore::wait_until_listed`] first). Nothing is
/// watched until the stream of [`SharedWatch::into_stream`] is polled; subscribers hear only
/// what it yields.
pub(crate) struct SharedWatch<K: Stored + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<Packed<K>>,
    kept: SharedType<K::DynamicType>,
    listed: ListedStore<Packed<K>>,
    health: WatchHealth,
    followers: Vec<Follower<K>>,
    subscribers: Vec<mpsc::UnboundedSender<K>>,
}

impl<K> SharedWatch<K>
where
    K: Stored + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// The watch of `api`; its store keys objects with `kept` (the kind's shared type, as the
    /// store's readers build their keys). Its failures and recoveries go to `health`, under
    /// the kind's name.
    pub(crate) fn new(
        api: Api<K>,
        config: watcher::Config,
        kept: SharedType<K::DynamicType>,
        health: &WatchHealth,
    ) -> Self {
        let writer = reflector::store::Writer::new(kept.clone());
        let listed = ListedStore::of(&writer);
        Self {
            api,
            config,
            writer,
            kept,
            listed,
            health: health.clone(),
            followers: Vec::new(),
            subscribers: Vec::new(),
        }
    }

    /// The store, and whether the watch has listed once.
    pub(crate) fn store(&self) -> ListedStore<Packed<K>> {
        self.listed.clone()
    }

    /// Lets `follower` see every event (an index kept beside the store).
    pub(crate) fn follow(&mut self, follower: impl Fn(&watcher::Event<K>) + Send + Sync + 'static) {
        self.followers.push(Box::new(follower));
    }

    /// Lets `forget` see each deleted object, those deleted while the watch was away
    /// included (what is kept of an object beside the store goes with it).
    pub(crate) fn follow_deletes(&mut self, forget: impl Fn(&K) + Send + Sync + 'static) {
        self.follow(deletes_only(forget));
    }

    /// Every object the watch touches after its first list, deleted ones too (for a
    /// controller's `watches_stream_with`). The first list is news to no subscriber: its
    /// controller waits for this store to have listed ([`ListedStore::wait_until_listed`])
    /// before any reconcile, and reconciles each of its own objects then; woken by the list
    /// too, many would run twice at a start. Watch errors go to the stream of
    /// [`SharedWatch::into_stream`] only: one controller reports them.
    pub(crate) fn subscribe(
        &mut self,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + use<K> {
        let (sender, receiver) = mpsc::unbounded();
        self.subscribers.push(sender);
        receiver.map(Ok)
    }

    /// The watch itself, for the controller that drives it: each touched object is sent to
    /// every subscriber, and the applied ones are yielded as the store keeps them (a deleted
    /// object has nothing left for its own controller to reconcile). The store, with
    /// [`SharedWatch::store`].
    pub(crate) fn into_stream(
        self,
    ) -> impl Stream<Item = Result<Applied<Packed<K>>, watcher::Error>> + Send + 'static {
        let Self {
            api,
            config,
            writer,
            kept,
            listed,
            health,
            followers,
            subscribers,
        } = self;
        let mut first_list = FirstListLog::new(api.resource_url());
        let events = health
            .watch(K::kind(&kept).into_owned(), api, config)
            .inspect_ok(move |event| first_list.see(event))
            .modify(K::trim_for_store);
        let packer = Packer::new(kept.clone());
        let gate = RelistGate::new(writer.as_reader(), kept);
        fan_out(
            events,
            packer,
            K::settled,
            (writer, gate),
            followers,
            listed,
            subscribers,
        )
    }
}

/// Logs how many objects a watch's first list brought, and how long it took from the watch's
/// start: at a start over many objects, what the broker waits for before it is ready.
struct FirstListLog {
    url: String,
    started: Instant,
    /// The objects of the list under way; `None` once the first list ended.
    listed: Option<usize>,
}

impl FirstListLog {
    fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            started: Instant::now(),
            listed: Some(0),
        }
    }

    fn see<K>(&mut self, event: &watcher::Event<K>) {
        let Some(listed) = &mut self.listed else {
            return;
        };
        match event {
            watcher::Event::Init => *listed = 0,
            watcher::Event::InitApply(_) => *listed += 1,
            watcher::Event::InitDone => {
                let seconds = self.started.elapsed().as_secs_f64();
                tracing::info!(url = %self.url, objects = *listed, seconds, "first list done");
                self.listed = None;
            }
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => {}
        }
    }
}

/// What a store keeps of the objects its watch brings.
trait Keeping<K, S: Lookup>
where
    S::DynamicType: Eq + Hash + Clone,
{
    /// What the store keeps of `object`, which a list brought when `listed`.
    fn keep(&mut self, object: &K, listed: bool) -> S;

    /// What the store keeps under a deleted object's key: all its delete event needs (it only
    /// drops what the store kept under that key).
    fn key(&self, object: &K) -> S;

    /// The object as the store kept it; `None` when it cannot be had back.
    fn restore(&self, kept: &S) -> Option<K>;

    /// What the store is to keep instead of some of its objects, once it has applied a change.
    fn replacements(&mut self, _store: &Store<S>) -> Vec<S> {
        Vec::new()
    }
}

/// A packed store: a list's objects compressed, changes plain until newer ones came
/// ([`Packer`]).
impl<K, H> Keeping<K, Packed<K, H>> for Packer<K, H>
where
    K: Resource + Serialize + DeserializeOwned,
    H: Head,
    Packed<K, H>: Lookup,
    <Packed<K, H> as Lookup>::DynamicType: Eq + Hash + Clone,
{
    fn keep(&mut self, object: &K, listed: bool) -> Packed<K, H> {
        match listed {
            true => self.pack_listed(object),
            false => self.pack_changed(object),
        }
    }

    /// A deleted object is not packed: packing it (an encode and a compression) would go for
    /// nothing.
    fn key(&self, object: &K) -> Packed<K, H> {
        Packed::empty(object)
    }

    /// Logged when it does not unpack: the broker packed it itself, so only a bug gets there.
    fn restore(&self, kept: &Packed<K, H>) -> Option<K> {
        kept.unpack()
            .inspect_err(|error| {
                tracing::warn!(%error, "an object deleted while its watch was away does not unpack")
            })
            .ok()
    }

    fn replacements(&mut self, store: &Store<Packed<K, H>>) -> Vec<Packed<K, H>> {
        self.compress_older(store)
    }
}

/// A store of whole objects, as kube-runtime's `reflector` keeps them.
struct Whole;

impl<K> Keeping<K, K> for Whole
where
    K: Lookup + Clone,
    K::DynamicType: Eq + Hash + Clone,
{
    fn keep(&mut self, object: &K, _listed: bool) -> K {
        object.clone()
    }

    fn key(&self, object: &K) -> K {
        object.clone()
    }

    fn restore(&self, kept: &K) -> Option<K> {
        Some(kept.clone())
    }
}

/// What [`SharedWatch::into_stream`] does with each of the watch's `events`: the store gets
/// what `keeping` keeps of it ([`kept_event`]), then followers see it, subscribers get each
/// touched object (after the first list: [`SharedWatch::subscribe`]), and the applied ones are
/// yielded as the store keeps them once the store shows them ([`RelistGate`]), but those a
/// list brought `settled`, which go with the rest of the store at the list's end
/// ([`Applied::Listed`]). An object deleted while the watch was away has no delete event: a
/// re-list that does not bring it tells followers and subscribers it was deleted, as the store
/// had it ([`Keeping::restore`]; [`Vanished`]).
fn fan_out<K, S>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    mut keeping: impl Keeping<K, S>,
    settled: fn(&K) -> bool,
    (mut writer, mut gate): (reflector::store::Writer<S>, RelistGate<S, ()>),
    followers: Vec<Follower<K>>,
    listed: ListedStore<S>,
    subscribers: Vec<mpsc::UnboundedSender<K>>,
) -> impl Stream<Item = Result<Applied<S>, watcher::Error>>
where
    K: Clone + 'static,
    S: Resource + Identified + Clone + 'static,
    S::DynamicType: Eq + Hash + Clone,
{
    use watcher::Event;
    let send = move |object: &K| {
        for subscriber in &subscribers {
            // Closed only when its controller has stopped.
            let _ = subscriber.unbounded_send(object.clone());
        }
    };
    let applied = |(object, ()): (S, ())| Applied::Object(object);
    let store = writer.as_reader();
    let mut vanished = Vanished::new(store.clone());
    events
        .map_ok(move |event| {
            let kept = kept_event(&event, &mut keeping);
            // Told before the re-list reaches the store and the indices following it, which
            // rebuild themselves from it then.
            let gone = vanished.follow_restored(&kept, |kept| keeping.restore(kept));
            for object in gone.iter().cloned() {
                let deleted = Event::Delete(object);
                for follower in &followers {
                    follower(&deleted);
                }
            }
            apply(&mut writer, &kept, &mut keeping);
            for follower in &followers {
                follower(&event);
            }
            // Woken once the store no longer shows them.
            for object in &gone {
                send(object);
            }
            let out: Vec<Applied<S>> = match (event, kept) {
                (Event::Apply(object), Event::Apply(kept)) => {
                    send(&object);
                    vec![Applied::Object(kept)]
                }
                (Event::InitApply(object), Event::InitApply(kept)) => {
                    if listed.is_listed() {
                        send(&object);
                    }
                    match settled(&object) {
                        true => Vec::new(),
                        false => gate.listed(kept, ()).into_iter().map(applied).collect(),
                    }
                }
                (Event::Delete(object), _) => {
                    send(&object);
                    Vec::new()
                }
                (Event::InitDone, _) => {
                    listed.mark_listed();
                    let held = gate.list_done().into_iter().map(applied);
                    held.chain([Applied::Listed(store.state())]).collect()
                }
                _ => Vec::new(),
            };
            futures::stream::iter(out.into_iter().map(Ok))
        })
        .try_flatten()
}

/// The objects a re-list does not bring back: deleted while the watch was away (its request
/// ended and the API server no longer had its place), they have no delete event of their own.
struct Vanished<S: Lookup + 'static>
where
    S::DynamicType: Eq + Hash + Clone,
{
    store: Store<S>,
    /// The uids of the re-list under way.
    relisted: Option<HashSet<String>>,
}

impl<S> Vanished<S>
where
    S: Lookup + Identified + Clone + 'static,
    S::DynamicType: Eq + Hash + Clone,
{
    fn new(store: Store<S>) -> Self {
        Self {
            store,
            relisted: None,
        }
    }

    /// Follows `event` (before the store applies it): at the end of a re-list, the objects
    /// the store shows that the re-list did not bring, by uid (one deleted and created again
    /// under its name is another object).
    fn follow(&mut self, event: &watcher::Event<S>) -> Vec<Arc<S>> {
        use watcher::Event;
        match event {
            // Nothing can vanish from an empty store: the first list is not followed.
            Event::Init => self.relisted = (!self.store.is_empty()).then(HashSet::new),
            Event::InitApply(object) => {
                let uid = Identified::uid(object);
                if let (Some(relisted), Some(uid)) = (self.relisted.as_mut(), uid) {
                    relisted.insert(uid.into_owned());
                }
            }
            Event::InitDone => {
                if let Some(relisted) = self.relisted.take() {
                    return self.store.state_filter(|object| {
                        Identified::uid(object).is_some_and(|uid| !relisted.contains(uid.as_ref()))
                    });
                }
            }
            Event::Apply(_) | Event::Delete(_) => {}
        }
        Vec::new()
    }

    /// [`follow`](Self::follow), each object `restore`d from what the store kept of it.
    fn follow_restored<K>(
        &mut self,
        event: &watcher::Event<S>,
        restore: impl Fn(&S) -> Option<K>,
    ) -> Vec<K> {
        self.follow(event)
            .iter()
            .filter_map(|object| restore(object))
            .collect()
    }
}

/// `event` with what `keeping` keeps of its object; a deleted object as the store's key alone.
fn kept_event<K, S: Lookup>(
    event: &watcher::Event<K>,
    keeping: &mut impl Keeping<K, S>,
) -> watcher::Event<S>
where
    S::DynamicType: Eq + Hash + Clone,
{
    use watcher::Event;
    match event {
        Event::Apply(object) => Event::Apply(keeping.keep(object, false)),
        Event::InitApply(object) => Event::InitApply(keeping.keep(object, true)),
        Event::Delete(object) => Event::Delete(keeping.key(object)),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

/// `writer`'s store gets `kept`, then, after a change, what `keeping` replaces of it: a
/// list's objects are kept as they are to stay.
fn apply<K, S>(
    writer: &mut reflector::store::Writer<S>,
    kept: &watcher::Event<S>,
    keeping: &mut impl Keeping<K, S>,
) where
    S: Lookup + Clone,
    S::DynamicType: Eq + Hash + Clone,
{
    writer.apply_watcher_event(kept);
    if let watcher::Event::Apply(_) = kept {
        for replacement in keeping.replacements(&writer.as_reader()) {
            writer.apply_watcher_event(&watcher::Event::Apply(replacement));
        }
    }
}

/// Each of `events`, once `writer`'s store (whose keys carry `kind`) has it packed with its
/// [`Names`] alone: a watch that its follower reads whole (events, deletions, re-lists) while
/// its store keeps objects packed, and drives no controller. A re-list's end is followed by a
/// delete event of each object it did not bring back ([`Vanished`]), once the store no longer
/// shows it.
pub(crate) fn reflect_kept<K: Stored + DeserializeOwned>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    writer: reflector::store::Writer<Packed<K, Names>>,
    kind: SharedType<K::DynamicType>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>
where
    K::DynamicType: Eq + Hash + Clone,
{
    reflect_telling_vanished(events, writer, Packer::new(kind))
}

/// Each of `events`, once `writer`'s store has it whole, as kube-runtime's `reflector` does;
/// but a re-list's end is followed by a delete event of each object it did not bring back
/// ([`Vanished`]), once the store no longer shows it: what a process remembers of an object
/// deleted while the watch was away goes as it would with the object's own delete event.
pub(crate) fn reflect_whole<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    writer: reflector::store::Writer<K>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>
where
    K: Resource + Identified + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    reflect_telling_vanished(events, writer, Whole)
}

/// Each of `events`, once `writer`'s store has what `keeping` keeps of it ([`kept_event`]),
/// followed at a re-list's end by a delete event of each object the re-list did not bring
/// back, as the store had it ([`Keeping::restore`]).
fn reflect_telling_vanished<K, S>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    mut writer: reflector::store::Writer<S>,
    mut keeping: impl Keeping<K, S>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>
where
    S: Lookup + Identified + Clone + 'static,
    S::DynamicType: Eq + Hash + Clone,
{
    let mut vanished = Vanished::new(writer.as_reader());
    events
        .map_ok(move |event| {
            let kept = kept_event(&event, &mut keeping);
            let gone = vanished.follow_restored(&kept, |kept| keeping.restore(kept));
            apply(&mut writer, &kept, &mut keeping);
            let deleted = gone.into_iter().map(watcher::Event::Delete);
            futures::stream::iter(std::iter::once(event).chain(deleted).map(Ok))
        })
        .try_flatten()
}

#[cfg(test)]
mod tests;
