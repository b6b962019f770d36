//! A bound on how many objects a controller has scheduled at once (issue 11).
//!
//! kube-runtime's scheduler keeps each object it is asked to reconcile in hash tables and a
//! delay queue that grow to the largest backlog they ever held and never shrink. A start (or a
//! re-list) asks for every listed object at once, through several watches: at 100,000 claims
//! the broker's memory grew by about 110 MiB during the start's reconciles and kept it.
//!
//! Every trigger of a controller passes through its [`Backlog`]: an object is let into the
//! scheduler while fewer than `limit` are there or running ([`Backlog::admit`]); the rest wait
//! here, in arrival order and once each, and are let in as reconciles finish
//! ([`Backlog::finished`], fed from the controller's results). A burst of live changes passes
//! as before; what waits here is dropped, and its tables shrunk, once it has drained.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use futures::{Stream, StreamExt, TryStreamExt, future};
use kube::Resource;
use kube::runtime::controller::{Action, Error as ControllerError};
use kube::runtime::reflector::ObjectRef;

/// How many objects a controller's scheduler holds at most, besides those it requeued itself:
/// far more than any concurrency runs at once, so the scheduler never runs dry.
pub(crate) const BACKLOG_LIMIT: usize = 1024;

/// An object let in whose reconcile never reported back (none should) stops counting after
/// this long, so that a lost report cannot shut the gate for good.
const FORGOTTEN_AFTER: Duration = Duration::from_secs(600);

/// Shared by a controller's trigger streams and the driver of its results. Cheap to clone.
pub(crate) struct Backlog<K: Resource> {
    state: Arc<Mutex<State<K>>>,
    /// Objects let in as others finish: the stream of [`Backlog::new`].
    release: mpsc::UnboundedSender<ObjectRef<K>>,
}

impl<K: Resource> Clone for Backlog<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            release: self.release.clone(),
        }
    }
}

/// An object's namespace and name: what the scheduler tells objects apart by.
type Key = (Option<String>, String);

struct State<K: Resource> {
    limit: usize,
    /// Let into the scheduler and not reported finished yet, with when.
    admitted: HashMap<Key, Instant>,
    /// Waiting for room, in arrival order, once each.
    waiting: VecDeque<ObjectRef<K>>,
    waiting_keys: HashSet<Key>,
}

impl<K> Backlog<K>
where
    K: Resource,
    K::DynamicType: Clone,
{
    /// A backlog that lets `limit` objects into the scheduler, and the stream of the objects it
    /// lets in later (for the controller's `reconcile_on`).
    pub(crate) fn new(limit: usize) -> (Self, impl Stream<Item = ObjectRef<K>> + Send + 'static)
    where
        K: 'static,
        K::DynamicType: Send,
    {
        let (release, released) = mpsc::unbounded();
        let state = State {
            limit: limit.max(1),
            admitted: HashMap::new(),
            waiting: VecDeque::new(),
            waiting_keys: HashSet::new(),
        };
        let backlog = Self {
            state: Arc::new(Mutex::new(state)),
            release,
        };
        (backlog, released)
    }

    /// `objects` (a controller's main stream) without those that wait here; `kind` is their
    /// dynamic type.
    pub(crate) fn objects<E>(
        &self,
        objects: impl Stream<Item = Result<K, E>> + Send + 'static,
        kind: K::DynamicType,
    ) -> impl Stream<Item = Result<K, E>> + Send + 'static
    where
        K: Send + 'static,
        K::DynamicType: Send + Sync,
        E: Send + 'static,
    {
        let backlog = self.clone();
        objects.try_filter(move |object| {
            let object = ObjectRef::from_obj_with(object, kind.clone());
            future::ready(backlog.admit(&object))
        })
    }

    /// `triggers` (a controller's `reconcile_on`) without those that wait here.
    pub(crate) fn triggers(
        &self,
        triggers: impl Stream<Item = ObjectRef<K>> + Send + 'static,
    ) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
    where
        K: Send + 'static,
        K::DynamicType: Send + Sync,
    {
        let backlog = self.clone();
        triggers.filter(move |object| future::ready(backlog.admit(object)))
    }

    /// Whether a trigger for `object` goes on to the scheduler now; if not, it waits here.
    pub(crate) fn admit(&self, object: &ObjectRef<K>) -> bool {
        let (now, released) = self.lock().admit(object, Instant::now());
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

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn key_of<K: Resource>(object: &ObjectRef<K>) -> Key {
    (object.namespace.clone(), object.name.clone())
}

impl<K> State<K>
where
    K: Resource,
    K::DynamicType: Clone,
{
    /// Whether `object` goes on now, and the waiting objects let in meanwhile.
    fn admit(&mut self, object: &ObjectRef<K>, now: Instant) -> (bool, Vec<ObjectRef<K>>) {
        let key = key_of(object);
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
        if self.admitted.len() < self.limit && self.waiting.is_empty() {
            self.admitted.insert(key, now);
            return (true, released);
        }
        if self.waiting_keys.insert(key) {
            self.waiting.push_back(object.clone());
        }
        (false, released)
    }

    /// Forgets the finished object and lets in what now fits.
    fn finish(&mut self, namespace: Option<&str>, name: &str, now: Instant) -> Vec<ObjectRef<K>> {
        let key = (namespace.map(str::to_owned), name.to_owned());
        self.admitted.remove(&key);
        self.fill(now)
    }

    /// Lets waiting objects in while there is room.
    fn fill(&mut self, now: Instant) -> Vec<ObjectRef<K>> {
        let mut released = Vec::new();
        while self.admitted.len() < self.limit {
            let Some(object) = self.waiting.pop_front() else {
                break;
            };
            let key = key_of(&object);
            self.waiting_keys.remove(&key);
            self.admitted.insert(key, now);
            released.push(object);
        }
        if self.waiting.is_empty() && self.waiting.capacity() > self.limit {
            // The start's backlog is gone: so are its tables.
            self.waiting = VecDeque::new();
            self.waiting_keys = HashSet::new();
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

    fn state(limit: usize) -> State<ConfigMap> {
        State {
            limit,
            admitted: HashMap::new(),
            waiting: VecDeque::new(),
            waiting_keys: HashSet::new(),
        }
    }

    fn names(objects: &[ObjectRef<ConfigMap>]) -> Vec<&str> {
        objects.iter().map(|o| o.name.as_str()).collect()
    }

    #[test]
    fn objects_beyond_the_limit_wait_and_are_let_in_in_order_as_others_finish() {
        let now = Instant::now();
        let mut backlog = state(2);
        assert!(backlog.admit(&object("a"), now).0);
        assert!(backlog.admit(&object("b"), now).0);
        assert!(!backlog.admit(&object("c"), now).0);
        assert!(!backlog.admit(&object("d"), now).0);
        assert!(!backlog.admit(&object("c"), now).0, "waits once");
        assert_eq!(backlog.waiting.len(), 2);

        assert_eq!(names(&backlog.finish(Some("ns"), "a", now)), ["c"]);
        assert_eq!(names(&backlog.finish(Some("ns"), "b", now)), ["d"]);
        assert!(backlog.finish(Some("ns"), "c", now).is_empty());
        assert_eq!(backlog.admitted.len(), 1);
    }

    #[test]
    fn an_object_in_the_scheduler_is_always_let_through_again() {
        let now = Instant::now();
        let mut backlog = state(1);
        assert!(backlog.admit(&object("a"), now).0);
        assert!(!backlog.admit(&object("b"), now).0);
        assert!(
            backlog.admit(&object("a"), now).0,
            "the scheduler merges it"
        );
        assert_eq!(names(&backlog.finish(Some("ns"), "a", now)), ["b"]);
    }

    #[test]
    fn nothing_jumps_the_line_while_objects_wait() {
        let now = Instant::now();
        let mut backlog = state(1);
        assert!(backlog.admit(&object("a"), now).0);
        assert!(!backlog.admit(&object("b"), now).0);
        // A report for an object that was never let in frees nothing it did not hold, and
        // `b` goes first.
        assert!(backlog.finish(Some("ns"), "x", now).is_empty());
        assert!(!backlog.admit(&object("c"), now).0);
        assert_eq!(names(&backlog.finish(Some("ns"), "a", now)), ["b"]);
    }

    #[test]
    fn a_lost_report_stops_counting_after_a_while() {
        let start = Instant::now();
        let mut backlog = state(1);
        assert!(backlog.admit(&object("a"), start).0);
        assert!(!backlog.admit(&object("b"), start).0);
        // `a` never reports: the next trigger forgets it, `b` goes first and the newcomer
        // waits.
        let (now, released) = backlog.admit(&object("c"), start + FORGOTTEN_AFTER);
        assert!(!now);
        assert_eq!(names(&released), ["b"]);
        assert_eq!(names(&backlog.finish(Some("ns"), "b", start)), ["c"]);
    }

    #[test]
    fn a_drained_backlog_gives_its_memory_back() {
        let now = Instant::now();
        let mut backlog = state(1);
        assert!(backlog.admit(&object("first"), now).0);
        for index in 0..10_000 {
            backlog.admit(&object(&format!("o{index}")), now);
        }
        let mut last = "first".to_owned();
        while let Some(next) = backlog.finish(Some("ns"), &last, now).pop() {
            last = next.name;
        }
        assert!(backlog.waiting.capacity() <= 1 && backlog.waiting_keys.capacity() <= 1);
    }
}
