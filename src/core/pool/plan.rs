//! What a ResourcePool reconcile does (Poolboy 1.12 §11 as replaced by 1.17 Δ§3.3): which
//! unbound handles to delete, how many to create, and the status to write; plus the memory of
//! handles that exist (or are being created) but the handle store has not shown yet.
//!
//! There is no scale-down (§11 step 7): lowering `minAvailable` deletes nothing; only pool
//! deletion, unhealthy deletion, lifespan expiry and the rolling refresh of stale handles
//! ([`super::refresh`]) remove unbound handles.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use kube::ResourceExt;

use crate::api::pool::{PoolHandleStatus, ResourceHandleCount, ResourcePoolStatus};
use crate::api::{OperatorDomain, ResourceHandle, ResourcePool};
use crate::core::binding::matching::{handle_is_healthy, is_released};
use crate::core::conditions::{Change, set_configuration_validity};
use crate::core::naming::random_handle_name;
use crate::core::pool::HandleParts;
use crate::core::pool::autoscale::AutoscaleDecision;

/// How long a handle name is expected before the store shows it. Past that, the reservation is
/// taken for a create that failed or a process that died, and stops counting (a live store
/// shows a new handle within seconds).
pub(crate) const PENDING_HANDLE_TTL: TimeDelta = TimeDelta::seconds(60);

/// How long a pending name waits before the API server is asked whether its handle exists:
/// a name reserved in the status by a process that died before creating it would
/// otherwise hold the pool short for the whole TTL. Past the moment a live process needs
/// between reserving a name and creating its handle.
pub(crate) const PENDING_HANDLE_CONFIRM_AFTER: TimeDelta = TimeDelta::seconds(5);

/// How often the settled names are swept of those past their TTL. A pass that swept them every
/// time walked every name settled in the last TTL (3,000 at 50 binds a second) to forget a few;
/// a name kept a little longer only keeps a stale status from making it pending, which is what
/// settled names are for.
const SETTLED_SWEEP_INTERVAL: TimeDelta = TimeDelta::seconds(5);

/// `count` new handle names ([`random_handle_name`]), none of them `taken` (a handle's, or a
/// name reserved for the pool) nor repeated: a client-chosen name that collides would make
/// the create fail after the name was reserved.
pub(crate) fn new_handle_names<R: rand::Rng + ?Sized>(
    count: usize,
    taken: impl Fn(&str) -> bool,
    rng: &mut R,
) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(count);
    while names.len() < count {
        let candidate = random_handle_name(rng);
        if !taken(&candidate) && !names.contains(&candidate) {
            names.push(candidate);
        }
    }
    names
}

/// Whether `handle` belongs to `pool` (`spec.resourcePool` names it; §11 step 1).
pub(crate) fn is_handle_of_pool<'a>(
    handle: impl Into<HandleParts<'a>>,
    pool: &ResourcePool,
) -> bool {
    let pool_namespace = pool.namespace().unwrap_or_default();
    handle
        .into()
        .spec
        .resource_pool
        .as_ref()
        .is_some_and(|reference| {
            reference.name == pool.name_any() && reference.namespace == pool_namespace
        })
}

/// Whether `handle` is one of `pool`'s unbound handles: the pool's, without a claim, not
/// being deleted, not labelled `D/ignore` (§7.6: Poolboy's handle cache and its label
/// selectors leave ignored handles out, so the pool neither counts nor deletes them), and not
/// released by a claim ([`is_released`]: on its way out, so the pool replaces it).
pub(crate) fn is_unbound_handle_of_pool<'a>(
    handle: impl Into<HandleParts<'a>>,
    pool: &ResourcePool,
    domain: &OperatorDomain,
) -> bool {
    let handle = handle.into();
    is_handle_of_pool(handle, pool)
        && handle.spec.resource_claim.is_none()
        && handle.metadata.deletion_timestamp.is_none()
        && !domain.ignores(handle.metadata)
        && !is_released(handle.metadata, domain)
}

/// A pool's bound handles not being deleted, which count toward `maxSize`, and how many of
/// them are not ready yet, which count toward `maxConcurrent`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BoundCounts {
    pub count: usize,
    pub unready: usize,
}

impl BoundCounts {
    /// What one handle of the pool adds to the counts.
    pub(crate) fn of_handle<'a>(handle: impl Into<HandleParts<'a>>) -> Self {
        let handle = handle.into();
        if handle.spec.resource_claim.is_none() || handle.metadata.deletion_timestamp.is_some() {
            return Self::default();
        }
        let unready = handle.status.as_ref().and_then(|s| s.ready) != Some(true);
        Self {
            count: 1,
            unready: usize::from(unready),
        }
    }

    /// Adds what one handle counts ([`BoundCounts::of_handle`]).
    pub(crate) fn add(&mut self, handle: Self) {
        self.count += handle.count;
        self.unready += handle.unready;
    }

    /// Takes away what one handle counted.
    pub(crate) fn remove(&mut self, handle: Self) {
        self.count = self.count.saturating_sub(handle.count);
        self.unready = self.unready.saturating_sub(handle.unready);
    }
}

/// What the pool reconcile observed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolInput<'a> {
    pub pool: &'a ResourcePool,
    /// The pool's unbound handles as the store shows them ([`is_unbound_handle_of_pool`]).
    pub unbound: &'a [Arc<ResourceHandle>],
    /// Handles of the pool that exist or are being created but the store does not show yet
    /// ([`PendingHandles::names`]): available, readiness unknown.
    pub pending: &'a [String],
    /// How many more handles an active ResourcePoolScaling still wants (its count minus what
    /// it has created); 0 without one. Δ§3.3 step 5: they are created under the same
    /// `maxUnready` throttle, and they satisfy the minAvailable deficit too.
    pub scaling_demand: u64,
    /// The unbound handles of an earlier version of the pool ([`super::refresh`]).
    pub stale: &'a BTreeSet<String>,
    /// What `spec.autoscale` decided, when the pool has one: its target replaces
    /// `minAvailable`, and when it may shrink the pool, the oldest surplus handles go.
    pub autoscale: Option<&'a AutoscaleDecision>,
    /// The pool's bound handles not being deleted: they count toward `maxSize`.
    pub bound: usize,
    /// Of those, the ones not ready yet: they count toward `maxConcurrent`.
    pub bound_unready: usize,
}

/// The cap that kept a pool from creating all the handles it wants: `maxUnready`,
/// `maxSize` or `maxConcurrent`, with its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolCap {
    Unready(i64),
    Size(i64),
    Concurrent(i64),
}

impl std::fmt::Display for PoolCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolCap::Unready(n) => write!(f, "{n} unbound handles not ready yet (maxUnready)"),
            PoolCap::Size(n) => write!(f, "{n} handles in all (maxSize)"),
            PoolCap::Concurrent(n) => write!(f, "{n} handles being provisioned (maxConcurrent)"),
        }
    }
}

/// Why the pool deletes one of its unbound handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Removal {
    /// Unhealthy, and the pool asks for that (`deleteUnhealthyResourceHandles`).
    Unhealthy,
    /// Of an earlier version of the pool, and a current handle takes its place.
    Stale,
    /// Beyond the target of `spec.autoscale`, which demand lowered.
    Surplus,
}

impl Removal {
    /// The `reason` label of the handle deletion metric.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Removal::Unhealthy => "unhealthy",
            Removal::Stale => "stale",
            Removal::Surplus => "surplus",
        }
    }
}

/// What the pool reconcile should do.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PoolPlan {
    /// Unbound handles to delete, and why.
    pub delete: Vec<(String, Removal)>,
    /// How many unbound handles are of an earlier version of the pool, deleted ones included.
    pub stale: usize,
    /// How many handles to create.
    pub create: usize,
    /// The cap that held `create` below what the pool wants, if one did.
    pub capped_by: Option<PoolCap>,
    /// Whether `create` may wait for the pool's next status write: it refills less than a
    /// quarter of the pool's target, for no scaling, under no cap. Binds that come in a
    /// stream are then refilled together, with one reservation for many handles instead of
    /// one a bind; a pool drained further, a scaling or a capped pool is served at once.
    pub refill_may_wait: bool,
    /// How many binds of the pool's handles, once `create` handles are made, leave a refill
    /// that may still wait (`refill_may_wait`): a pass woken by one would only wait. None while
    /// anything else is under way: a scaling, a cap, stale or doomed handles, autoscale.
    pub binds_may_wait: usize,
    /// `status.resourceHandleCount`, counted before the new handles (Δ§3.3 step 6).
    pub count: ResourceHandleCount,
    /// `status.resourceHandles` without the new handles, by name.
    entries: Vec<PoolHandleStatus>,
}

impl PoolPlan {
    /// The pool status to write once `new` handles are about to be created: the counted and
    /// pending handles plus `{name}` for each new one (Δ§3.3 step 6), sorted by name so that
    /// the list does not change when a pending handle shows up in the store; other status
    /// fields (conditions) are kept from `current`.
    pub(crate) fn status(
        &self,
        new: &[String],
        current: Option<&ResourcePoolStatus>,
    ) -> ResourcePoolStatus {
        let mut entries = self.entries.clone();
        entries.extend(new.iter().map(|name| fresh_entry(name)));
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries.dedup_by(|a, b| a.name == b.name);
        ResourcePoolStatus {
            resource_handle_count: Some(self.count),
            resource_handles: Some(entries),
            conditions: current.and_then(|s| s.conditions.clone()),
            autoscale: current.and_then(|s| s.autoscale.clone()),
        }
    }
}

/// Sets the pool's `Valid` condition in `status` for its configuration `problem` (its provider
/// missing or invalid, its lifespan unparsable; not in Poolboy, whose pool status has no
/// conditions: absent until there is a problem). Whether a problem is news tells the caller to
/// raise an Event.
pub(crate) fn set_pool_validity(
    status: &mut ResourcePoolStatus,
    problem: Option<&str>,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Change {
    let mut conditions = status.conditions.take().unwrap_or_default();
    let change = set_configuration_validity(&mut conditions, problem, generation, now);
    status.conditions = Some(conditions).filter(|c| !c.is_empty());
    change
}

/// Plans one pass over a pool (Δ§3.3 steps 2–6):
/// - with `deleteUnhealthyResourceHandles`, unbound handles whose computed health is false
///   are deleted and not counted;
/// - every other unbound handle, and every pending one, is available; ready when
///   `status.ready` is true (unknown readiness counts as unready);
/// - `deficit = minAvailable − available`; handles are created while the deficit (or the
///   scaling's demand) is positive and, when `maxUnready` is set, `unready < maxUnready`.
///
/// Rolling refresh: stale handles do not count toward the deficit, so current
/// ones are made for them under the same caps. A stale handle that is not ready is deleted at
/// once (it serves nobody yet); a ready one once the current ready handles and the stale ones
/// left exceed `minAvailable`, oldest first, so the pool never has fewer ready handles than
/// before the refresh. A pool at `maxSize` makes room by deleting stale handles first.
pub(crate) fn plan_pool(input: &PoolInput<'_>) -> PoolPlan {
    let spec = &input.pool.spec;
    let delete_unhealthy = spec.delete_unhealthy_resource_handles == Some(true);
    let mut delete = Vec::new();
    let mut entries = Vec::new();
    let mut ready = 0i64;
    let mut stale = 0;
    // The stale handles that are ready, oldest first: deleted as replacements get ready.
    let mut stale_ready: Vec<&ResourceHandle> = Vec::new();
    for handle in input.unbound {
        let healthy = handle_is_healthy(handle);
        if delete_unhealthy && healthy == Some(false) {
            delete.push((handle.name_any(), Removal::Unhealthy));
            continue;
        }
        let is_ready = handle.status.as_ref().and_then(|s| s.ready);
        if input.stale.contains(&handle.name_any()) {
            stale += 1;
            if is_ready != Some(true) {
                delete.push((handle.name_any(), Removal::Stale));
                continue;
            }
            stale_ready.push(handle);
        }
        if is_ready == Some(true) {
            ready += 1;
        }
        // Δ B17: `healthy` and `ready` only when known, never null.
        entries.push(PoolHandleStatus {
            name: handle.name_any(),
            healthy,
            ready: is_ready,
        });
    }
    let counted: BTreeSet<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    let pending: Vec<&String> = input
        .pending
        .iter()
        .filter(|name| !counted.contains(name.as_str()) && !delete.iter().any(|(d, _)| d == *name))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    entries.extend(pending.iter().map(|name| fresh_entry(name)));
    let mut available = i64::try_from(entries.len()).unwrap_or(i64::MAX);
    let unready = available - ready;
    let min_available = input
        .autoscale
        .map_or(spec.min_available.unwrap_or(0), |d| d.status.target);
    let stale_ready_count = i64::try_from(stale_ready.len()).unwrap_or(i64::MAX);
    let current_ready = ready - stale_ready_count;

    let deficit = min_available
        .saturating_sub(available - stale_ready_count)
        .max(0);
    let scaling = i64::try_from(input.scaling_demand).unwrap_or(i64::MAX);
    let wanted = deficit.max(scaling);
    let bound = i64::try_from(input.bound).unwrap_or(i64::MAX);
    let bound_unready = i64::try_from(input.bound_unready).unwrap_or(i64::MAX);
    // Each cap leaves room for so many more handles; the tightest one decides.
    let rooms = [
        spec.max_unready
            .map(|max| (PoolCap::Unready(max), max.saturating_sub(unready))),
        spec.max_size.map(|max| {
            let total = available.saturating_add(bound);
            (PoolCap::Size(max), max.saturating_sub(total))
        }),
        spec.max_concurrent.map(|max| {
            let provisioning = unready.saturating_add(bound_unready);
            (PoolCap::Concurrent(max), max.saturating_sub(provisioning))
        }),
    ];
    let tightest = rooms
        .into_iter()
        .flatten()
        .map(|(cap, room)| (cap, room.max(0)))
        .min_by_key(|(_, room)| *room);
    let (create, capped_by) = match tightest {
        Some((cap, room)) if room < wanted => (room, Some(cap)),
        _ => (wanted, None),
    };

    // The stale ready handles no longer needed to keep minAvailable ready, and, at maxSize,
    // those whose room the replacements need.
    let surplus = (current_ready + stale_ready_count - min_available).max(0);
    let room_needed = match capped_by {
        Some(PoolCap::Size(_)) => wanted - create,
        _ => 0,
    };
    let retire = usize::try_from(surplus.max(room_needed).min(stale_ready_count)).unwrap_or(0);
    stale_ready.sort_by(|a, b| oldest_first(a, b));
    for handle in &stale_ready[..retire] {
        let name = handle.name_any();
        entries.retain(|e| e.name != name);
        delete.push((name, Removal::Stale));
    }
    let retired = i64::try_from(retire).unwrap_or(0);
    available -= retired;
    ready -= retired;

    // Demand fell below what the pool holds: the oldest current handles go.
    if input.autoscale.is_some_and(|d| d.shrink) && available > min_available {
        let mut current: Vec<&ResourceHandle> = input
            .unbound
            .iter()
            .map(Arc::as_ref)
            .filter(|h| entries.iter().any(|e| e.name == h.name_any()))
            .filter(|h| !input.stale.contains(&h.name_any()))
            .collect();
        current.sort_by(|a, b| oldest_first(a, b));
        let surplus = usize::try_from(available - min_available).unwrap_or(0);
        for handle in current.into_iter().take(surplus) {
            let name = handle.name_any();
            entries.retain(|e| e.name != name);
            available -= 1;
            if handle.status.as_ref().and_then(|s| s.ready) == Some(true) {
                ready -= 1;
            }
            delete.push((name, Removal::Surplus));
        }
    }
    let refill_may_wait =
        create > 0 && scaling == 0 && capped_by.is_none() && create < min_available / 4;
    // With the pool at its target once `create` handles are made, `b` binds make a refill of
    // `b`, which may wait while `b` is under a quarter of the target and within every cap's
    // room (a bind takes no room: the created handles do).
    let settled = scaling == 0
        && capped_by.is_none()
        && delete.is_empty()
        && input.stale.is_empty()
        && input.autoscale.is_none();
    let binds_may_wait = match settled {
        true => {
            let room = tightest.map_or(i64::MAX, |(_, room)| room.saturating_sub(create));
            usize::try_from((min_available / 4 - 1).min(room)).unwrap_or(0)
        }
        false => 0,
    };
    PoolPlan {
        delete,
        stale,
        create: usize::try_from(create).unwrap_or(0),
        capped_by,
        refill_may_wait,
        binds_may_wait,
        count: ResourceHandleCount { available, ready },
        entries,
    }
}

/// Handles in order of creation, oldest first (one the API server has not dated yet last); by
/// name among equals.
fn oldest_first(a: &ResourceHandle, b: &ResourceHandle) -> std::cmp::Ordering {
    let created = |h: &ResourceHandle| {
        let created = h.metadata.creation_timestamp.clone();
        (created.is_none(), created)
    };
    created(a)
        .cmp(&created(b))
        .then_with(|| a.name_any().cmp(&b.name_any()))
}

/// The status entry of a handle the store does not show yet: what a handle without status
/// gives (healthy by Δ§3.2 `is_healthy`, readiness unknown), so that the entry does not change
/// when the handle shows up. Poolboy lists a new handle as `{name}` and adds `healthy: true` on
/// its next pass; this saves that second write.
fn fresh_entry(name: &str) -> PoolHandleStatus {
    PoolHandleStatus {
        name: name.to_owned(),
        healthy: handle_is_healthy(&ResourceHandle::new(name, Default::default())),
        ready: None,
    }
}

/// One process's memory of a pool's handles that exist, or are about to, but that its handle
/// store has not shown yet ("expectations", as Kubernetes' ReplicaSet controller keeps them).
///
/// A name becomes pending when this process reserves it ([`expect`](Self::expect)) or when it
/// first sees it in the pool's `status.resourceHandles` without the store knowing it (another
/// process reserved it). It stops being pending, for good ("settled"), when the store shows
/// it, when the create fails ([`settle`](Self::settle)), or after [`PENDING_HANDLE_TTL`].
/// Settled names are forgotten once the status no longer lists them and the TTL has passed
/// again (at the next sweep), so that a stale status cannot bring a deleted handle back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PendingHandles {
    pending: BTreeMap<String, DateTime<Utc>>,
    settled: BTreeMap<String, DateTime<Utc>>,
    /// Pending names the API server confirmed to exist (the store lags): they wait for the
    /// store, or the TTL.
    confirmed: BTreeSet<String>,
    /// When `settled` was last swept ([`SETTLED_SWEEP_INTERVAL`]).
    swept: Option<DateTime<Utc>>,
}

impl PendingHandles {
    /// Brings the memory up to date: `shown` tells whether the store shows a handle of the
    /// pool by that name (bound and deleting ones too), `listed` are the names in the pool's
    /// `status.resourceHandles`.
    ///
    /// Only pending and listed names are looked up: a pass costs what the pool's unbound
    /// handles cost, not what all its handles do (at 100,000 bound handles, copying every name
    /// into the memory on every pass would make each bind slower).
    pub(crate) fn observe<'a>(
        &mut self,
        shown: impl Fn(&str) -> bool,
        listed: impl IntoIterator<Item = &'a str>,
        now: DateTime<Utc>,
    ) {
        let listed: BTreeSet<&str> = listed.into_iter().collect();
        let arrived: Vec<String> = self
            .pending
            .keys()
            .filter(|name| shown(name))
            .cloned()
            .collect();
        for name in arrived {
            self.pending.remove(&name);
            self.settled.insert(name, now);
        }
        // A listed handle the store shows is settled for as long as it is listed, and a TTL
        // after: a stale status listing it once it is gone must not make it pending.
        for name in listed.iter().filter(|name| shown(name)) {
            match self.settled.get_mut(*name) {
                Some(since) => *since = now,
                None => {
                    self.settled.insert((*name).to_owned(), now);
                }
            }
        }
        self.confirmed
            .retain(|name| self.pending.contains_key(name));
        let expired: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, since)| **since + PENDING_HANDLE_TTL <= now)
            .map(|(name, _)| name.clone())
            .collect();
        for name in expired {
            self.pending.remove(&name);
            self.settled.insert(name, now);
        }
        for name in &listed {
            if !shown(name)
                && !self.pending.contains_key(*name)
                && !self.settled.contains_key(*name)
            {
                self.pending.insert((*name).to_owned(), now);
            }
        }
        if self
            .swept
            .is_none_or(|swept| swept + SETTLED_SWEEP_INTERVAL <= now)
        {
            self.settled.retain(|name, since| {
                listed.contains(name.as_str()) || *since + PENDING_HANDLE_TTL > now
            });
            self.swept = Some(now);
        }
    }

    /// Records a name this process reserved and is about to create.
    pub(crate) fn expect(&mut self, name: &str, now: DateTime<Utc>) {
        self.settled.remove(name);
        self.pending.insert(name.to_owned(), now);
    }

    /// Stops expecting `name` (its create failed): it no longer counts, and the pool status
    /// listing it does not make it pending again.
    pub(crate) fn settle(&mut self, name: &str, now: DateTime<Utc>) {
        self.pending.remove(name);
        self.confirmed.remove(name);
        self.settled.insert(name.to_owned(), now);
    }

    /// The pending names to look up on the API server: pending for
    /// [`PENDING_HANDLE_CONFIRM_AFTER`], not confirmed yet. One that does not exist is
    /// [`settle`](Self::settle)d, one that does is [`confirm`](Self::confirm)ed.
    pub(crate) fn to_confirm(&self, now: DateTime<Utc>) -> Vec<String> {
        self.pending
            .iter()
            .filter(|(name, since)| {
                **since + PENDING_HANDLE_CONFIRM_AFTER <= now && !self.confirmed.contains(*name)
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The API server has handle `name`: it stays pending until the store shows it.
    pub(crate) fn confirm(&mut self, name: &str) {
        if self.pending.contains_key(name) {
            self.confirmed.insert(name.to_owned());
        }
    }

    /// Whether `name` is pending.
    pub(crate) fn is_pending(&self, name: &str) -> bool {
        self.pending.contains_key(name)
    }

    /// The pending names.
    pub(crate) fn names(&self) -> Vec<String> {
        self.pending.keys().cloned().collect()
    }

    /// When a pending name is due for confirmation, or stops counting: the reconcile looks
    /// again then, so that a reservation whose handle never comes does not hold the pool short.
    pub(crate) fn next_expiry(&self) -> Option<DateTime<Utc>> {
        self.pending
            .iter()
            .map(|(name, since)| match self.confirmed.contains(name) {
                true => *since + PENDING_HANDLE_TTL,
                false => *since + PENDING_HANDLE_CONFIRM_AFTER,
            })
            .min()
    }

    /// Whether nothing is remembered.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.settled.is_empty() && self.confirmed.is_empty()
    }
}

#[cfg(test)]
mod tests;
