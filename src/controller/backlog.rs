//! A bound on how many objects a controller has scheduled at once.
//!
//! Every trigger of a controller passes through its [`Backlog`]: an object is let into the
//! scheduler while fewer than a few per worker are there or running ([`Backlog::admit`]); the
//! rest wait here, once each and in arrival order, and are let in as reconciles finish
//! ([`Backlog::finished`]). Triggers from other watches, and the objects a list brought that
//! look settled ([`Applied::Listed`]), wait in a second line, one let in after every
//! [`FIRST_PER_ROUTINE`] from the first. Why kube-runtime's scheduler needs this, and the two
//! lines: docs/design.md, "controller::backlog".

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use futures::{Stream, StreamExt, TryStreamExt, future};
use kube::Resource;
use kube::runtime::controller::{Action, Error as ControllerError};
use kube::runtime::reflector::ObjectRef;

use super::backlogged::Backlogged;
use super::echoes;
use crate::store::packed::Identified;
use crate::store::shared_watch::Applied;

/// How many objects a controller's scheduler holds at most per reconcile it runs at once,
/// besides those it requeued itself: enough that it never runs dry between a reconcile's end
/// and the next object let in, few enough that its last-in-first-out order (module comment)
/// stays among a handful.
const SCHEDULED_PER_WORKER: usize = 4;

/// While both lines have objects waiting, how many are let in from the first line for each
/// one from the routine line.
const FIRST_PER_ROUTINE: usize = 3;

/// An object let in whose reconcile never reported back (none should) stops counting after
/// this long, so that a lost report cannot shut the gate for good.
const FORGOTTEN_AFTER: Duration = Duration::from_secs(600);

/// Shared by a controller's trigger streams and the driver of its results. Cheap to clone.
pub(crate) struct Backlog<K: Resource> {
    state: Arc<Mutex<State<K>>>,
    /// Objects let in as others finish: the stream of [`Backlog::new`].
    release: mpsc::UnboundedSender<ObjectRef<K>>,
    /// Which objects a trigger from another watch is news to: [`Backlog::hearing_news`].
    news: Option<Arc<NewsTest<K>>>,
    /// Told when objects start and stop waiting here.
    backlogged: Backlogged,
}

/// Whether a trigger from another watch is news to its object.
type NewsTest<K> = dyn Fn(&ObjectRef<K>) -> bool + Send + Sync;

impl<K: Resource> Clone for Backlog<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            release: self.release.clone(),
            news: self.news.clone(),
            backlogged: self.backlogged.clone(),
        }
    }
}

/// An object as the backlog keeps it: its namespace and name (what the scheduler tells objects
/// apart by) as `namespace/name`, or `name` when it has no namespace (neither holds a `/`), in
/// one allocation that a line and the table of where it waits share.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key(Arc<str>);

impl Key {
    fn new(namespace: Option<&str>, name: &str) -> Self {
        match namespace {
            Some(namespace) => Self(format!("{namespace}/{name}").into()),
            None => Self(name.into()),
        }
    }

    fn of<K: Resource>(object: &ObjectRef<K>) -> Self {
        Self::new(object.namespace.as_deref(), &object.name)
    }

    /// The object's namespace and name.
    fn names(&self) -> Names<'_> {
        match self.0.split_once('/') {
            Some((namespace, name)) => (Some(namespace), name),
            None => (None, &self.0),
        }
    }

    /// The object again, as a reference of `kind`.
    fn object<K: Resource>(&self, kind: &K::DynamicType) -> ObjectRef<K>
    where
        K::DynamicType: Clone,
    {
        match self.names() {
            (Some(namespace), name) => ObjectRef::new_with(name, kind.clone()).within(namespace),
            (None, name) => ObjectRef::new_with(name, kind.clone()),
        }
    }
}

/// An object's namespace and name, in the order the listed line is sorted by.
type Names<'a> = (Option<&'a str>, &'a str);

fn names_of<K: Resource>(object: &K) -> Names<'_> {
    let meta = object.meta();
    (
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// The objects a list brought that wait in the routine line ([`Applied::Listed`]): the
/// store's own, sorted by namespace and name, which is also the order they are let in. Kept
/// as a pointer each (not a [`Key`] in a line and a table, about 120 bytes): a start puts
/// every listed claim and handle here, at 100,000 claims the largest part of what a start
/// holds above what the broker keeps.
struct ListedLine<K> {
    objects: Vec<Arc<K>>,
    /// Let in, moved to the first line, or waiting elsewhere already, by index in `objects`.
    gone: Vec<bool>,
    /// Where the next one to let in is looked for from.
    next: usize,
    /// How many still wait.
    left: usize,
}

impl<K: Resource> ListedLine<K> {
    fn new(mut objects: Vec<Arc<K>>) -> Self {
        objects.sort_unstable_by(|a, b| names_of(&**a).cmp(&names_of(&**b)));
        let left = objects.len();
        Self {
            gone: vec![false; left],
            objects,
            next: 0,
            left,
        }
    }

    fn empty() -> Self {
        Self::new(Vec::new())
    }

    /// Where the object named `names` waits here, if it does.
    fn position(&self, names: Names<'_>) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        let index = self
            .objects
            .binary_search_by(|object| names_of(&**object).cmp(&names))
            .ok()?;
        (!self.gone[index]).then_some(index)
    }

    /// Takes the object named `names` out of the line, if it waits here.
    fn take(&mut self, names: Names<'_>) {
        if let Some(index) = self.position(names) {
            self.gone[index] = true;
            self.left -= 1;
            self.forget_if_drained();
        }
    }

    /// The next object to let in, as a key.
    fn pop(&mut self) -> Option<Key> {
        while self.left > 0 {
            let index = self.next;
            self.next += 1;
            if !self.gone[index] {
                self.gone[index] = true;
                let (namespace, name) = names_of(&*self.objects[index]);
                let key = Key::new(namespace, name);
                self.left -= 1;
                self.forget_if_drained();
                return Some(key);
            }
        }
        None
    }

    /// Drops the objects once none waits: the store's own, they would keep the versions they
    /// were alive.
    fn forget_if_drained(&mut self) {
        if self.left == 0 {
            *self = Self::empty();
        }
    }
}

/// Which line an object waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Line {
    /// Changes, and listed objects that need work: let in first.
    First,
    /// Listed objects that look settled, and triggers from other watches.
    Routine,
}

/// Whether an object goes on to the scheduler now, and the waiting objects let in meanwhile.
type Admission<K> = (bool, Vec<ObjectRef<K>>);

struct State<K: Resource> {
    limit: usize,
    /// The kind of every object of the controller.
    kind: K::DynamicType,
    /// Let into the scheduler and not reported finished yet, with when.
    admitted: HashMap<Key, Instant>,
    /// Waiting for room, each line in arrival order. An object moved to the first line stays
    /// in the routine one too, skipped there: `waiting` says where it waits.
    first: VecDeque<Key>,
    routine: VecDeque<Key>,
    waiting: HashMap<Key, Line>,
    /// The last list's objects, in the routine line behind its triggers (`routine`).
    listed: ListedLine<K>,
    /// Let in from the first line since the last one from the routine line.
    first_run: usize,
    /// The controller's own watch has listed once ([`State::listed`]).
    listed_once: bool,
    /// Whether objects waited here when [`Backlogged`] was last told.
    reported_behind: bool,
}

impl<K> Backlog<K>
where
    K: Resource,
    K::DynamicType: Clone,
{
    /// The backlog of a controller of objects of `kind` that runs `concurrency` reconciles at
    /// once, and the stream of the objects it lets in later (for the controller's
    /// `reconcile_on`). It tells `backlogged` when objects start and stop waiting.
    pub(crate) fn new(
        kind: K::DynamicType,
        concurrency: u16,
        backlogged: Backlogged,
    ) -> (Self, impl Stream<Item = ObjectRef<K>> + Send + 'static)
    where
        K: 'static,
        K::DynamicType: Send,
    {
        let (release, released) = mpsc::unbounded();
        let state = State::new(kind, usize::from(concurrency) * SCHEDULED_PER_WORKER);
        let backlog = Self {
            state: Arc::new(Mutex::new(state)),
            release,
            news: None,
            backlogged,
        };
        (backlog, released)
    }

    /// This backlog, where a trigger from another watch ([`Backlog::triggers`]) waits in the
    /// first line when `is_news` says it is its object's news (a claim whose parked bind
    /// waits for its resources), in the routine line otherwise.
    pub(crate) fn hearing_news(
        mut self,
        is_news: impl Fn(&ObjectRef<K>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.news = Some(Arc::new(is_news));
        self
    }

    /// `objects` (a controller's main stream, from `SharedWatch::into_stream`) without those
    /// that wait here and the echoes of the controller's own writes (`echoes`).
    pub(crate) fn objects<E>(
        &self,
        objects: impl Stream<Item = Result<Applied<K>, E>> + Send + 'static,
    ) -> impl Stream<Item = Result<K, E>> + Send + 'static
    where
        K: Identified + Send + Sync + 'static,
        K::DynamicType: Send + Sync,
        E: Send + 'static,
    {
        let backlog = self.clone();
        let kind = self.lock().kind.clone();
        let objects = echoes::without_echoes(objects, Applied::object);
        objects.try_filter_map(move |applied| {
            let admitted = match applied {
                Applied::Object(object) => {
                    let reference = ObjectRef::from_obj_with(&object, kind.clone());
                    let admitted = backlog
                        .lock()
                        .admit(&reference, Line::First, Instant::now());
                    backlog.admitted(admitted).then_some(object)
                }
                Applied::Listed(objects) => {
                    backlog.listed(objects);
                    None
                }
            };
            future::ready(Ok(admitted))
        })
    }

    /// A list is done and its store holds `objects`: those not in the scheduler or waiting
    /// already wait in the routine line.
    fn listed(&self, objects: Vec<Arc<K>>) {
        let released = self.lock().listed(objects, Instant::now());
        self.send(released);
    }

    /// `triggers` (a controller's `reconcile_on`) without those that wait here.
    pub(crate) fn triggers(
        &self,
        triggers: impl Stream<Item = ObjectRef<K>> + Send + 'static,
    ) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
    where
        K: Send + Sync + 'static,
        K::DynamicType: Send + Sync,
    {
        let backlog = self.clone();
        triggers.filter(move |object| {
            let news = backlog.news.as_ref().is_some_and(|is_news| is_news(object));
            let line = match news {
                true => Line::First,
                false => Line::Routine,
            };
            future::ready(backlog.admit_trigger(object, line))
        })
    }

    /// Whether a trigger for `object` from another watch goes on to the scheduler now; if
    /// not, it waits here, in the routine line (or is dropped: [`State::admit_trigger`]).
    pub(crate) fn admit(&self, object: &ObjectRef<K>) -> bool {
        self.admit_trigger(object, Line::Routine)
    }

    /// [`Backlog::admit`] for a trigger from another watch that is news to `object` (it waits
    /// for it): if it must wait, it waits in the first line.
    pub(crate) fn admit_news(&self, object: &ObjectRef<K>) -> bool {
        self.admit_trigger(object, Line::First)
    }

    fn admit_trigger(&self, object: &ObjectRef<K>, line: Line) -> bool {
        let admitted = self.lock().admit_trigger(object, line, Instant::now());
        self.admitted(admitted)
    }

    /// Whether an object goes on now; sends those let in meanwhile.
    fn admitted(&self, (now, released): Admission<K>) -> bool {
        self.send(released);
        now
    }

    /// A reconcile of the object `namespace`/`name` finished (or found it gone): room for the
    /// next waiting one.
    pub(crate) fn finished(&self, namespace: Option<&str>, name: &str) {
        let released = self.lock().finish(namespace, name, Instant::now());
        self.send(released);
    }

    fn send(&self, released: Vec<ObjectRef<K>>) {
        for object in released {
            // Closed only when the controller has stopped.
            let _ = self.release.unbounded_send(object);
        }
    }

    /// Notes one result of the controller's stream: every reconcile reports its object, a
    /// failed one and one whose object was gone too.
    pub(crate) fn observe<E, Q>(
        &self,
        result: &Result<(ObjectRef<K>, Action), ControllerError<E, Q>>,
    ) where
        E: std::error::Error + 'static,
        Q: std::error::Error + 'static,
    {
        match result {
            Ok((object, _)) => self.finished(object.namespace.as_deref(), &object.name),
            Err(ControllerError::ReconcilerFailed(_, object))
            | Err(ControllerError::ObjectNotFound(object)) => {
                self.finished(object.namespace.as_deref(), &object.name)
            }
            Err(_) => {}
        }
    }

    /// The state, locked; unlocked, it tells [`Backlogged`] whether objects now wait here, if
    /// that changed.
    fn lock(&self) -> Locked<'_, K> {
        Locked {
            state: self.state.lock().unwrap_or_else(PoisonError::into_inner),
            backlogged: &self.backlogged,
        }
    }
}

/// A backlog's state, locked ([`Backlog::lock`]).
struct Locked<'a, K: Resource> {
    state: MutexGuard<'a, State<K>>,
    backlogged: &'a Backlogged,
}

impl<K: Resource> std::ops::Deref for Locked<'_, K> {
    type Target = State<K>;

    fn deref(&self) -> &State<K> {
        &self.state
    }
}

impl<K: Resource> std::ops::DerefMut for Locked<'_, K> {
    fn deref_mut(&mut self) -> &mut State<K> {
        &mut self.state
    }
}

impl<K: Resource> Drop for Locked<'_, K> {
    fn drop(&mut self) {
        let behind = self.state.behind();
        if behind != self.state.reported_behind {
            self.state.reported_behind = behind;
            // Under the lock: the reports of one backlog reach `backlogged` in order.
            self.backlogged.report(behind);
        }
    }
}

impl<K: Resource> State<K> {
    /// Whether objects wait here for room, in either line.
    fn behind(&self) -> bool {
        !self.waiting.is_empty() || self.listed.left > 0
    }
}

impl<K> State<K>
where
    K: Resource,
    K::DynamicType: Clone,
{
    fn new(kind: K::DynamicType, limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            kind,
            admitted: HashMap::new(),
            first: VecDeque::new(),
            routine: VecDeque::new(),
            waiting: HashMap::new(),
            listed: ListedLine::empty(),
            first_run: 0,
            listed_once: false,
            reported_behind: false,
        }
    }

    /// Whether `object` goes on now ([`Admission`]).
    fn admit(&mut self, object: &ObjectRef<K>, line: Line, now: Instant) -> Admission<K> {
        let key = Key::of(object);
        // Already in the scheduler: it merges the trigger, or runs the object again after
        // the reconcile under way.
        if self.admitted.contains_key(&key) {
            return (true, Vec::new());
        }
        let mut released = Vec::new();
        if self.admitted.len() >= self.limit {
            self.admitted
                .retain(|_, since| now.duration_since(*since) < FORGOTTEN_AFTER);
            released = self.fill(now);
        }
        let ahead = match line {
            Line::First => self.first.is_empty(),
            Line::Routine => {
                self.first.is_empty() && self.routine.is_empty() && self.listed.left == 0
            }
        };
        let waits = self.waiting.get(&key).copied().or_else(|| {
            let listed = self.listed.position(key.names()).is_some();
            listed.then_some(Line::Routine)
        });
        if self.admitted.len() < self.limit && ahead && waits.is_none() {
            self.admitted.insert(key, now);
            return (true, released);
        }
        match (waits, line) {
            (None, _) => {
                self.queue(line).push_back(key.clone());
                self.waiting.insert(key, line);
            }
            (Some(Line::Routine), Line::First) => {
                self.listed.take(key.names());
                self.first.push_back(key.clone());
                self.waiting.insert(key, Line::First);
            }
            (Some(_), _) => {}
        }
        (false, released)
    }

    /// [`State::admit`] for a trigger from another watch. Before the controller's own watch
    /// has listed once, it is dropped: no reconcile runs before that list is done, and its
    /// end reconciles every object then (a later one comes as a change), so the trigger is
    /// no news to any. At a start, the claims' list wakes every handle: waiting here, those
    /// triggers would take about 10 MiB at 100,000 claims.
    fn admit_trigger(&mut self, object: &ObjectRef<K>, line: Line, now: Instant) -> Admission<K> {
        match self.listed_once {
            true => self.admit(object, line, now),
            false => (false, Vec::new()),
        }
    }

    /// A list brought `objects`: those neither in the scheduler nor waiting already wait in
    /// the routine line, in place of what waited there from an earlier list (each of which
    /// is in this one, or deleted); what now fits is let in.
    fn listed(&mut self, objects: Vec<Arc<K>>, now: Instant) -> Vec<ObjectRef<K>> {
        self.listed_once = true;
        let mut line = ListedLine::new(objects);
        for key in self.admitted.keys().chain(self.waiting.keys()) {
            line.take(key.names());
        }
        self.listed = line;
        self.fill(now)
    }

    fn queue(&mut self, line: Line) -> &mut VecDeque<Key> {
        match line {
            Line::First => &mut self.first,
            Line::Routine => &mut self.routine,
        }
    }

    /// The next object waiting in `line`: in the routine line, its triggers before the
    /// listed objects. One moved to the first line is let in from there, and skipped here.
    fn pop(&mut self, line: Line) -> Option<(Key, Line)> {
        while let Some(key) = self.queue(line).pop_front() {
            if self.waiting.get(&key) == Some(&line) {
                return Some((key, line));
            }
        }
        match line {
            Line::First => None,
            Line::Routine => self.listed.pop().map(|key| (key, line)),
        }
    }

    /// Forgets the finished object and lets in what now fits.
    fn finish(&mut self, namespace: Option<&str>, name: &str, now: Instant) -> Vec<ObjectRef<K>> {
        self.admitted.remove(&Key::new(namespace, name));
        self.fill(now)
    }

    /// Lets waiting objects in while there is room: the first line first, but one from the
    /// routine line after every [`FIRST_PER_ROUTINE`] from the first.
    fn fill(&mut self, now: Instant) -> Vec<ObjectRef<K>> {
        let mut released = Vec::new();
        while self.admitted.len() < self.limit {
            let next = match self.first_run >= FIRST_PER_ROUTINE {
                true => self.pop(Line::Routine).or_else(|| self.pop(Line::First)),
                false => self.pop(Line::First).or_else(|| self.pop(Line::Routine)),
            };
            let Some((key, line)) = next else {
                break;
            };
            self.first_run = match line {
                Line::First => self.first_run + 1,
                Line::Routine => 0,
            };
            self.waiting.remove(&key);
            released.push(key.object(&self.kind));
            self.admitted.insert(key, now);
        }
        let grown = self.first.capacity().max(self.routine.capacity()) > self.limit;
        if self.waiting.is_empty() && grown {
            // The start's backlog is gone: so are its tables.
            self.first = VecDeque::new();
            self.routine = VecDeque::new();
            self.waiting = HashMap::new();
        }
        released
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn object(name: &str) -> ObjectRef<ConfigMap> {
        ObjectRef::new(name).within("ns")
    }

    fn names(objects: &[ObjectRef<ConfigMap>]) -> Vec<&str> {
        objects.iter().map(|o| o.name.as_str()).collect()
    }

    /// Reports `last` finished, then each object that lets in, until none is: the order
    /// they were let in.
    fn drain(backlog: &mut State<ConfigMap>, last: &str, now: Instant) -> Vec<String> {
        let mut order = Vec::new();
        let mut last = last.to_owned();
        while let Some(next) = backlog.finish(Some("ns"), &last, now).pop() {
            order.push(next.name.clone());
            last = next.name;
        }
        order
    }

    /// Lets `name` in (or not) from the routine line.
    fn routine(backlog: &mut State<ConfigMap>, name: &str, now: Instant) -> bool {
        backlog.admit(&object(name), Line::Routine, now).0
    }

    #[test]
    fn objects_beyond_the_limit_wait_and_are_let_in_in_order_as_others_finish() {
        let now = Instant::now();
        let mut backlog = State::new((), 2);
        assert!(routine(&mut backlog, "a", now));
        assert!(routine(&mut backlog, "b", now));
        assert!(!routine(&mut backlog, "c", now));
        assert!(!routine(&mut backlog, "d", now));
        assert!(!routine(&mut backlog, "c", now), "waits once");
        assert_eq!(backlog.waiting.len(), 2);

        assert_eq!(names(&backlog.finish(Some("ns"), "a", now)), ["c"]);
        assert_eq!(names(&backlog.finish(Some("ns"), "b", now)), ["d"]);
        assert!(backlog.finish(Some("ns"), "c", now).is_empty());
        assert_eq!(backlog.admitted.len(), 1);
    }

    #[test]
    fn an_object_in_the_scheduler_is_always_let_through_again() {
        let now = Instant::now();
        let mut backlog = State::new((), 1);
        assert!(routine(&mut backlog, "a", now));
        assert!(!routine(&mut backlog, "b", now));
        assert!(routine(&mut backlog, "a", now), "the scheduler merges it");
        assert_eq!(names(&backlog.finish(Some("ns"), "a", now)), ["b"]);
    }

    #[test]
    fn nothing_jumps_its_line_while_objects_wait() {
        let now = Instant::now();
        let mut backlog = State::new((), 1);
        assert!(routine(&mut backlog, "a", now));
        assert!(!routine(&mut backlog, "b", now));
        // A report for an object that was never let in frees nothing it did not hold, and
        // `b` goes first.
        assert!(backlog.finish(Some("ns"), "x", now).is_empty());
        assert!(!routine(&mut backlog, "c", now));
        assert_eq!(names(&backlog.finish(Some("ns"), "a", now)), ["b"]);
    }

    /// A trigger from another watch waits in the routine line, unless it is its object's news.
    #[tokio::test]
    async fn a_trigger_that_is_news_waits_in_the_first_line() {
        let (backlog, released) = Backlog::<ConfigMap>::new((), 1, Backlogged::default());
        let backlog = backlog.hearing_news(|object| object.name.starts_with("news"));
        backlog.listed(Vec::new());
        let mut released = Box::pin(released);
        let triggers = ["a", "b", "c", "d", "routine", "news"].map(object);
        let admitted: Vec<_> = backlog
            .triggers(futures::stream::iter(triggers))
            .collect()
            .await;
        assert_eq!(names(&admitted), ["a", "b", "c", "d"]);
        backlog.finished(Some("ns"), "a");
        let first = released.next().await.map(|o| o.name);
        assert_eq!(first.as_deref(), Some("news"));
    }

    /// A start lists every object: those that need work go before the settled ones, and one
    /// waiting among the settled moves up when it changes.
    #[test]
    fn the_first_line_goes_before_the_routine_one() {
        let now = Instant::now();
        let mut backlog = State::new((), 1);
        assert!(routine(&mut backlog, "settled-0", now));
        assert!(!routine(&mut backlog, "settled-1", now));
        assert!(!routine(&mut backlog, "settled-2", now));
        assert!(!backlog.admit(&object("unbound"), Line::First, now).0);
        assert!(
            !backlog.admit(&object("settled-2"), Line::First, now).0,
            "changed"
        );
        assert_eq!(backlog.waiting.len(), 3);

        assert_eq!(
            drain(&mut backlog, "settled-0", now),
            ["unbound", "settled-2", "settled-1"],
            "each once"
        );
        assert!(backlog.waiting.is_empty());
    }

    /// What the store of a list holds: `names`, in namespace `ns`.
    fn store_of(names: &[&str]) -> Vec<Arc<ConfigMap>> {
        let stored = |name: &str| {
            let mut object = ConfigMap::default();
            object.metadata.name = Some(name.to_owned());
            object.metadata.namespace = Some("ns".to_owned());
            Arc::new(object)
        };
        names.iter().map(|name| stored(name)).collect()
    }

    /// A list's settled objects wait in the routine line, once each, in name order and
    /// behind the first line: not those let in or waiting already. One that changes moves
    /// up; a routine trigger for one is the same wait.
    #[test]
    fn a_lists_objects_wait_in_the_routine_line_once_each() {
        let now = Instant::now();
        let mut backlog = State::new((), 1);
        assert!(routine(&mut backlog, "running", now));
        assert!(!backlog.admit(&object("unbound"), Line::First, now).0);
        assert!(!routine(&mut backlog, "triggered", now));
        let store = store_of(&["d", "b", "running", "a", "unbound", "triggered", "c"]);
        assert!(backlog.listed(store, now).is_empty(), "no room");
        assert_eq!(backlog.listed.left, 4, "a b c d");

        assert!(!routine(&mut backlog, "b", now), "waits already");
        assert!(!backlog.admit(&object("c"), Line::First, now).0, "changed");
        assert_eq!(backlog.listed.left, 3);
        assert_eq!(
            drain(&mut backlog, "running", now),
            ["unbound", "c", "triggered", "a", "b", "d"],
            "the first line, then the routine triggers, then the list"
        );
        assert!(
            backlog.listed.objects.is_empty(),
            "drained, it holds nothing"
        );
    }

    /// A re-list's line takes the place of what waited from the one before: each of those
    /// objects is in it, or deleted.
    #[test]
    fn a_relist_replaces_the_listed_line() {
        let now = Instant::now();
        let mut backlog = State::new((), 1);
        assert!(routine(&mut backlog, "running", now));
        backlog.listed(store_of(&["a", "b", "gone"]), now);
        backlog.listed(store_of(&["a", "b", "new"]), now);
        assert_eq!(drain(&mut backlog, "running", now), ["a", "b", "new"]);
    }

    /// With room, a list's objects are let in at once.
    #[test]
    fn a_list_is_let_in_as_far_as_there_is_room() {
        let now = Instant::now();
        let mut backlog = State::new((), 2);
        let released = backlog.listed(store_of(&["b", "a", "c", "d"]), now);
        assert_eq!(names(&released), ["a", "b"]);
        assert_eq!(names(&backlog.finish(Some("ns"), "a", now)), ["c"]);
        // Let in and finished, it no longer waits: a trigger for it waits on its own, and
        // goes before the list.
        assert!(!routine(&mut backlog, "a", now));
        assert_eq!(backlog.waiting.len(), 1);
        assert_eq!(drain(&mut backlog, "b", now), ["a", "d"]);
    }

    /// Before its own first list is done, a controller hears no trigger: that list's end
    /// reconciles every object. After, triggers wait as usual.
    #[test]
    fn triggers_before_the_first_list_are_dropped() {
        let now = Instant::now();
        let mut backlog = State::new((), 1);
        assert!(backlog.admit(&object("own"), Line::First, now).0, "its own");
        for line in [Line::Routine, Line::First] {
            let (admitted, released) = backlog.admit_trigger(&object("woken"), line, now);
            assert!(!admitted && released.is_empty());
        }
        assert!(backlog.waiting.is_empty(), "nothing waits");
        backlog.listed(store_of(&["own", "woken"]), now);
        assert!(
            !backlog
                .admit_trigger(&object("other"), Line::Routine, now)
                .0
        );
        assert_eq!(drain(&mut backlog, "own", now), ["other", "woken"]);
    }

    /// New claims arriving without end still let the routine line (the status updates that
    /// handle changes trigger) in: one in `FIRST_PER_ROUTINE + 1`.
    #[test]
    fn a_busy_first_line_still_lets_the_routine_one_in() {
        let now = Instant::now();
        let mut backlog = State::new((), 1);
        assert!(routine(&mut backlog, "running", now));
        for index in 0..3 {
            routine(&mut backlog, &format!("settled-{index}"), now);
        }
        for index in 0..7 {
            backlog.admit(&object(&format!("new-{index}")), Line::First, now);
        }
        assert_eq!(
            drain(&mut backlog, "running", now),
            [
                "new-0",
                "new-1",
                "new-2",
                "settled-0",
                "new-3",
                "new-4",
                "new-5",
                "settled-1",
                "new-6",
                "settled-2",
            ]
        );
        assert!(backlog.waiting.is_empty());
    }

    #[test]
    fn the_scheduler_holds_a_few_objects_per_worker() {
        let (backlog, _released) = Backlog::<ConfigMap>::new((), 8, Backlogged::default());
        backlog.listed(Vec::new());
        let admitted = (0..100)
            .filter(|index| backlog.admit(&object(&format!("o{index}"))))
            .count();
        assert_eq!(admitted, 8 * SCHEDULED_PER_WORKER);
    }

    #[test]
    fn a_lost_report_stops_counting_after_a_while() {
        let start = Instant::now();
        let mut backlog = State::new((), 1);
        assert!(routine(&mut backlog, "a", start));
        assert!(!routine(&mut backlog, "b", start));
        // `a` never reports: the next trigger forgets it, `b` goes first and the newcomer
        // waits.
        let (now, released) = backlog.admit(&object("c"), Line::Routine, start + FORGOTTEN_AFTER);
        assert!(!now);
        assert_eq!(names(&released), ["b"]);
        assert_eq!(names(&backlog.finish(Some("ns"), "b", start)), ["c"]);
    }

    #[test]
    fn a_drained_backlog_gives_its_memory_back() {
        let now = Instant::now();
        let mut backlog = State::new((), 1);
        assert!(routine(&mut backlog, "first", now));
        for index in 0..10_000 {
            routine(&mut backlog, &format!("o{index}"), now);
        }
        drain(&mut backlog, "first", now);
        assert!(backlog.routine.capacity() <= 1 && backlog.waiting.capacity() <= 1);
        // A re-list of objects that all need work waits in the first line: it shrinks too.
        assert!(routine(&mut backlog, "again", now));
        for index in 0..10_000 {
            backlog.admit(&object(&format!("o{index}")), Line::First, now);
        }
        drain(&mut backlog, "again", now);
        assert!(backlog.first.capacity() <= 1 && backlog.waiting.capacity() <= 1);
    }

    #[test]
    fn a_waiting_object_is_let_in_as_the_reference_it_came_as() {
        let namespaced = object("a");
        let key = Key::of(&namespaced);
        assert_eq!(key.object::<ConfigMap>(&()), namespaced);
        let cluster_scoped = ObjectRef::<ConfigMap>::new("b");
        let key = Key::of(&cluster_scoped);
        let back = key.object::<ConfigMap>(&());
        assert_eq!(back, cluster_scoped);
        assert_eq!(back.namespace, None);
    }

    #[test]
    fn the_backlog_says_when_objects_start_and_stop_waiting() {
        let backlogged = Backlogged::default();
        let (backlog, _released) = Backlog::<ConfigMap>::new((), 1, backlogged.clone());
        let limit = SCHEDULED_PER_WORKER;
        let listed: Vec<Arc<ConfigMap>> = (0..=limit)
            .map(|index| {
                let mut object = ConfigMap::default();
                object.metadata.name = Some(format!("o{index}"));
                object.metadata.namespace = Some("ns".into());
                Arc::new(object)
            })
            .collect();
        backlog.listed(listed);
        assert!(backlogged.behind(), "one listed object waits");
        backlog.finished(Some("ns"), "o0");
        assert!(!backlogged.behind(), "it was let in");
        assert!(!backlog.admit(&object("late")), "a trigger past the limit");
        assert!(backlogged.behind(), "the trigger waits");
        backlog.finished(Some("ns"), "o1");
        assert!(!backlogged.behind());
    }
}
