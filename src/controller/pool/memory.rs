//! What the pool controller remembers of each pool between its reconciles, and the wakes it
//! puts off until a pool's status may be written (docs/design.md, "Memory").

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::ObjectRef;

use super::Woken;
use crate::api::kinds::PoolObject;
use crate::core::pool::autoscale::BindHistory;
use crate::core::pool::plan::PendingHandles;

/// Wakes a pool at an instant, once for all the changes that wait for it; the earliest
/// instant asked for wins. What the pool does of a change of only what it counts (its unbound
/// handles' readiness or health, its claimed handles' readiness or deletion) is mostly its
/// status's counts, written at most once a [`COUNTS_INTERVAL`] anyway: so a handle's getting
/// ready after the bind that made the pool create it costs the pool one pass, not one now and
/// one when the counts may be written, and the deletions of many bound handles cost it one
/// pass a second, not two each. The caps and the autoscale that weigh those counts
/// (`maxUnready`, unhealthy deletion, `maxSize`, `maxConcurrent`) act at most an interval
/// later. A pass of the pool that begins meanwhile reads the changes, and whatever it must
/// wait for it waits for itself: the wake is dropped then.
#[derive(Clone, Default)]
pub(super) struct LaterWakes(Arc<Mutex<HashMap<ObjectRef<PoolObject>, Instant>>>);

impl LaterWakes {
    pub(super) fn wake_at(
        &self,
        pool: ObjectRef<PoolObject>,
        at: Instant,
        wake: &UnboundedSender<Woken>,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            let _ = wake.unbounded_send((pool, None));
            return;
        };
        let mut due = self.due();
        if due.get(&pool).is_some_and(|due| *due <= at) {
            return;
        }
        due.insert(pool.clone(), at);
        let (later, wake) = (self.clone(), wake.clone());
        runtime.spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            let mut due = later.due();
            if due.get(&pool) == Some(&at) {
                due.remove(&pool);
                drop(due);
                // Closed only when the operator stops.
                let _ = wake.unbounded_send((pool, None));
            }
        });
    }

    /// A pass of `pool` begins: it reads every change a wake to come is for.
    pub(super) fn served(&self, pool: &ObjectRef<PoolObject>) {
        self.due().remove(pool);
    }

    /// The pools with a wake to come, and when.
    fn due(&self) -> MutexGuard<'_, HashMap<ObjectRef<PoolObject>, Instant>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What this process remembers of each pool between its reconciles, by uid (so that a pool
/// deleted and created again under the same name starts afresh); a pool's goes once the pool
/// is found gone (the pool controller's `Lifecycle::gone`). Shared by the reconciles and the
/// filter of the pool's wakes.
#[derive(Clone, Default)]
pub(super) struct Memories(Arc<Mutex<HashMap<String, PoolMemory>>>);

impl Memories {
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, PoolMemory>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this process reserved handle `name` for the pool of `meta` and its store does
    /// not show it yet.
    pub(super) fn is_pending(&self, meta: &ObjectMeta, name: &str) -> bool {
        self.lock()
            .get(&memory_key(meta))
            .is_some_and(|memory| memory.pending.is_pending(name))
    }

    /// When a pass woken by a bind of one of the pool's handles would do what it does: its
    /// refill waits for the status write then; `None` when it would do more now, or the pool
    /// is in a pass. Counts the bind against the pool's [`Patience`].
    pub(super) fn bind_may_wait(&self, meta: &ObjectMeta) -> Option<Instant> {
        let mut all = self.lock();
        let patience = all.get_mut(&memory_key(meta))?.patience.as_mut()?;
        if patience.binds == 0 || patience.until <= Instant::now() {
            return None;
        }
        patience.binds -= 1;
        Some(patience.until)
    }

    /// Forgets every pool but `pools` (memory is by uid: a pool gone and one created again
    /// under its name are two).
    pub(super) fn keep_only(&self, pools: &[Arc<PoolObject>]) {
        let live: HashSet<String> = pools
            .iter()
            .map(|pool| memory_key(&pool.metadata))
            .collect();
        self.lock().retain(|uid, _| live.contains(uid));
    }

    /// A pass of the pool of `meta` begins: what it ends with is the pool's patience then.
    pub(super) fn pass_begins(&self, meta: &ObjectMeta) {
        if let Some(memory) = self.lock().get_mut(&memory_key(meta)) {
            memory.patience = None;
        }
    }
}

/// What this process remembers of a pool between its reconciles.
#[derive(Default)]
pub(super) struct PoolMemory {
    pub(super) pending: PendingHandles,
    /// The binds of the pool's handles it saw, for `spec.autoscale`.
    pub(super) binds: BindHistory,
    /// When this process last wrote the pool's status.
    pub(super) status_written: Option<Instant>,
    /// Set by a pass that left the pool at its target, until its next status write may be
    /// made: so many binds would wake a pass whose refill only waits for that write.
    pub(super) patience: Option<Patience>,
}

/// Until when, and for how many more binds, a bind's refill waits for the pool's next status
/// write ([`PoolPlan::binds_may_wait`](crate::core::pool::plan::PoolPlan)).
#[derive(Clone, Copy, Debug)]
pub(super) struct Patience {
    pub(super) until: Instant,
    pub(super) binds: usize,
}

pub(super) fn memory_key(meta: &ObjectMeta) -> String {
    meta.uid
        .clone()
        .or_else(|| meta.name.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::Utc;
    use futures::StreamExt;
    use serde_json::json;

    use super::*;
    use crate::api::ResourcePool;
    use crate::controller::pool::COUNTS_INTERVAL;

    /// A short while, for the wakes' tests.
    const TICK: Duration = Duration::from_millis(200);

    fn pool_ref() -> ObjectRef<PoolObject> {
        let kind = kube::core::ApiResource::erase::<ResourcePool>(&());
        ObjectRef::<PoolObject>::new_with("p", kind).within("poolboy")
    }

    /// Wakes asked for within an interval wake the pool once, at the earliest instant asked
    /// for; then the next one waits its own.
    #[tokio::test]
    async fn later_wakes_wake_the_pool_once_at_the_earliest_instant() {
        let pool = pool_ref();
        let (wake, mut woken) = futures::channel::mpsc::unbounded();
        let wakes = LaterWakes::default();
        let started = Instant::now();
        // The first instant asked for is far enough away that a slow machine cannot reach it
        // before the earliest one: the wake that comes is the earliest's.
        let first_asked = started + TICK * 300;
        wakes.wake_at(pool.clone(), first_asked, &wake);
        wakes.wake_at(pool.clone(), started + TICK, &wake);
        wakes.wake_at(pool.clone(), started + TICK * 2, &wake);
        assert_eq!(wakes.due().len(), 1);
        assert!(woken.try_recv().is_err(), "nothing yet");
        let (first, created) = woken.next().await.expect("a wake");
        assert!(first == pool && created.is_none());
        let elapsed = started.elapsed();
        assert!(
            elapsed >= TICK && started + elapsed < first_asked,
            "{elapsed:?}"
        );
        tokio::time::sleep(TICK * 2).await;
        assert!(wakes.due().is_empty() && woken.try_recv().is_err(), "once");
        wakes.wake_at(pool.clone(), Instant::now() + TICK, &wake);
        assert_eq!(wakes.due().len(), 1, "the next change waits again");
    }

    /// A pass that begins before the instant reads the changes: no wake follows.
    #[tokio::test]
    async fn a_pass_that_begins_meanwhile_serves_the_wake() {
        let pool = pool_ref();
        let (wake, mut woken) = futures::channel::mpsc::unbounded();
        let wakes = LaterWakes::default();
        wakes.wake_at(pool.clone(), Instant::now() + TICK, &wake);
        wakes.served(&pool);
        tokio::time::sleep(TICK * 2).await;
        assert!(woken.try_recv().is_err(), "no wake");
        // A change after the pass began has its own wake.
        wakes.wake_at(pool.clone(), Instant::now() + TICK, &wake);
        let (again, _) = woken.next().await.expect("a wake");
        assert!(again == pool);
    }

    /// A pool's patience lets so many binds wait until its status may be written, and no more;
    /// a pass that begins ends it, and so does the instant.
    #[test]
    fn a_bind_waits_while_the_pool_is_patient() {
        let meta = ObjectMeta {
            name: Some("p".into()),
            uid: Some("u1".into()),
            ..ObjectMeta::default()
        };
        let memories = Memories::default();
        assert_eq!(memories.bind_may_wait(&meta), None, "no pass yet");
        let until = Instant::now() + COUNTS_INTERVAL;
        let patient = |binds| {
            memories
                .lock()
                .entry(memory_key(&meta))
                .or_default()
                .patience = Some(Patience { until, binds });
        };
        patient(2);
        assert_eq!(memories.bind_may_wait(&meta), Some(until));
        assert_eq!(memories.bind_may_wait(&meta), Some(until));
        assert_eq!(
            memories.bind_may_wait(&meta),
            None,
            "the third bind refills now"
        );
        patient(2);
        memories.pass_begins(&meta);
        assert_eq!(memories.bind_may_wait(&meta), None, "in a pass");
        let past = Instant::now() - Duration::from_millis(1);
        memories
            .lock()
            .entry(memory_key(&meta))
            .or_default()
            .patience = Some(Patience {
            until: past,
            binds: 2,
        });
        assert_eq!(
            memories.bind_may_wait(&meta),
            None,
            "the status may be written now"
        );
    }

    /// A name this process reserved counts as reserved until the store shows the handle,
    /// whatever the pool store's copy of the status says.
    #[test]
    fn a_name_reserved_here_is_pending_until_the_store_shows_it() {
        let meta = ObjectMeta {
            name: Some("p".into()),
            uid: Some("u1".into()),
            ..ObjectMeta::default()
        };
        let memories = Memories::default();
        assert!(!memories.is_pending(&meta, "guid-a"));
        let now = Utc::now();
        memories
            .lock()
            .entry(memory_key(&meta))
            .or_default()
            .pending
            .expect("guid-a", now);
        assert!(memories.is_pending(&meta, "guid-a"));
        assert!(!memories.is_pending(&meta, "guid-b"));
        let recreated = ObjectMeta {
            uid: Some("u2".into()),
            ..meta.clone()
        };
        assert!(
            !memories.is_pending(&recreated, "guid-a"),
            "another pool of that name"
        );
        if let Some(memory) = memories.lock().get_mut(&memory_key(&meta)) {
            memory.pending.observe(|name| name == "guid-a", [], now);
        }
        assert!(!memories.is_pending(&meta, "guid-a"), "shown");
    }

    /// A pool found gone takes its memory with it; the pools still stored keep theirs, and
    /// a pool created again under a gone one's name is another.
    #[test]
    fn a_pool_found_gone_is_forgotten() {
        let pool = |uid: &str| {
            let pool = json!({
                "apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourcePool",
                "metadata": {"name": "p", "namespace": "poolboy", "uid": uid},
                "spec": {"resources": []},
            });
            Arc::new(serde_json::from_value::<PoolObject>(pool).expect("a pool"))
        };
        let memories = Memories::default();
        for uid in ["gone", "kept"] {
            memories
                .lock()
                .entry(uid.to_owned())
                .or_default()
                .status_written = Some(Instant::now());
        }
        memories.keep_only(&[pool("kept"), pool("new")]);
        let mut remembered: Vec<String> = memories.lock().keys().cloned().collect();
        remembered.sort();
        assert_eq!(remembered, ["kept"]);
    }
}
