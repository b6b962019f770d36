//! The one reconcile shell every controller runs in ([`Lifecycle`], [`run`]): it skips a
//! version this process replaced itself (`write::is_replaced`), leaves §7.6-ignored objects
//! alone, finalizes deleting ones, and runs passes until one ends, re-reading the object after
//! each conflicting write (B06) up to [`MAX_PASSES`] times, counted in one metric; past that,
//! and on any error, the object's own backoff (`Context::retry_delay`) takes over, so a failing
//! object never turns into a retry storm. Every reconcile is timed (Poolboy's
//! `poolboy_process_time_seconds`) and a success forgets the object's failures.

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Instant;

use futures::channel::mpsc::UnboundedReceiver;
use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, ObjectMeta};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::backlog::Backlog;
use super::context::Context;
use super::echoes;
use super::write::{self, Halt, PassError};
use crate::api::OperatorDomain;
use crate::shutdown::Shutdown;
use crate::store::health::WatchHealth;
use crate::store::packed::Identified;
use crate::store::relist::{RelistGate, touched_once_stored};
use crate::store::shared_watch::{ListedStore, reflect_whole};

/// How many passes one reconcile makes when each ends in a conflicting write (Poolboy: 12
/// attempts, Δ§3.1.3) before the object's backoff takes over.
pub(crate) const MAX_PASSES: usize = 12;

/// What a controller does with one kind; the shell ([`reconcile`]) decides when.
pub(crate) trait Lifecycle: Send + Sync + 'static {
    /// The kind, as the metrics and logs name it.
    const KIND: &'static str;
    /// The object as the controller's store keeps it.
    type Stored: Resource + Identified + Clone + DeserializeOwned + Debug + Send + Sync + 'static;
    /// The object a pass works on.
    type Object: Resource + Send + Sync;
    type Error: PassError + std::error::Error + Send + 'static;
    /// What one reconcile carries from a pass that conflicted to the next.
    type Carry: Default + Send;

    fn context(&self) -> &Context;

    fn unpack(stored: &Self::Stored) -> Result<Self::Object, Self::Error>;

    /// Waits until what this controller's decisions count from has been listed once.
    fn prepare(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The object is ignored (§7.6): forget what this process remembers of it.
    fn ignored(&self, _object: &Self::Object) {}

    /// The object `namespace`/`name` was found gone (deleted, its watch's delete event missed
    /// or never seen by this controller): forget what this process remembers of it.
    fn gone(&self, _namespace: Option<&str>, _name: &str) {}

    /// The object is being deleted. `carry` holds what a pass of this reconcile left when the
    /// deletion showed only on the re-read after that pass's conflict.
    fn finalize(
        &self,
        object: &Self::Object,
        carry: &mut Self::Carry,
    ) -> impl Future<Output = Result<Action, Halt<Self::Error>>> + Send;

    /// One observe → plan → act pass over the object.
    fn pass(
        &self,
        object: Self::Object,
        carry: &mut Self::Carry,
    ) -> impl Future<Output = Result<Action, Halt<Self::Error>>> + Send;

    /// The object as the API server has it now; `None` when it is gone.
    fn reread(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> impl Future<Output = Result<Option<Self::Object>, Self::Error>> + Send;
}

/// How a reconcile failed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReconcileError<E> {
    #[error(transparent)]
    Failed(E),
    #[error("the object kept changing under concurrent writes ({MAX_PASSES} passes)")]
    Contended,
}

/// What a reconcile does with the object as it reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Ignored (§7.6): not touched, not even to finalize it.
    Leave,
    Finalize,
    Manage,
}

pub(crate) fn step(meta: &ObjectMeta, domain: &OperatorDomain) -> Step {
    if domain.ignores(meta) {
        Step::Leave
    } else if meta.deletion_timestamp.is_some() {
        Step::Finalize
    } else {
        Step::Manage
    }
}

/// What follows a pass that ended with `outcome`, the `passes`th of its reconcile.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum After<E> {
    Finish(Action),
    /// A guarded write found the object changed: read it again and start over.
    Reread,
    Fail(ReconcileError<E>),
}

pub(crate) fn after<E>(outcome: Result<Action, Halt<E>>, passes: usize) -> After<E> {
    match outcome {
        Ok(action) => After::Finish(action),
        // Its deletion comes with its own event.
        Err(Halt::Gone) => After::Finish(Action::await_change()),
        Err(Halt::Failed(error)) => After::Fail(ReconcileError::Failed(error)),
        Err(Halt::Conflict) if passes >= MAX_PASSES => After::Fail(ReconcileError::Contended),
        Err(Halt::Conflict) => After::Reread,
    }
}

/// Reconciles `stored`: timed and counted; a success forgets its failures.
async fn reconcile<L: Lifecycle>(
    stored: Arc<L::Stored>,
    lifecycle: Arc<L>,
) -> Result<Action, ReconcileError<L::Error>> {
    if write::is_replaced(&*stored) {
        tracing::trace!(kind = L::KIND, name = %stored.name_any(), "a version this process replaced: skipped");
        return Ok(Action::await_change());
    }
    tracing::debug!(kind = L::KIND, name = %stored.name_any(), version = ?Identified::resource_version(&*stored), "reconcile");
    let ctx = lifecycle.context();
    let started = Instant::now();
    let in_flight = ctx.metrics.reconcile_started(L::KIND);
    let object = Identified::uid(&*stored).map(|uid| (uid.into_owned(), stored.name_any()));
    // Boxed, like each pass (`converge`): what kube-runtime and tokio move is a pointer.
    let converging = Box::pin(converge(&*lifecycle, &stored));
    let result = echoes::reconciling(object, converging).await;
    drop(in_flight);
    let seconds = started.elapsed().as_secs_f64();
    ctx.metrics
        .observe(L::KIND, "reconcile", result.is_ok(), seconds);
    ctx.metrics.reconciled(L::KIND, result.is_ok(), seconds);
    if let Ok(action) = &result {
        tracing::debug!(kind = L::KIND, name = %stored.name_any(), ?action, "reconciled");
        ctx.succeeded(&key::<L>(&*stored));
    }
    result
}

/// Passes over the object until one ends, re-reading it after each conflict.
async fn converge<L: Lifecycle>(
    lifecycle: &L,
    stored: &L::Stored,
) -> Result<Action, ReconcileError<L::Error>> {
    let ctx = lifecycle.context();
    let mut object = L::unpack(stored).map_err(ReconcileError::Failed)?;
    let mut carry = L::Carry::default();
    lifecycle.prepare().await;
    for passes in 1.. {
        let (namespace, name) = (object.namespace(), object.name_any());
        let outcome = match step(object.meta(), ctx.domain()) {
            Step::Leave => {
                lifecycle.ignored(&object);
                return Ok(Action::await_change());
            }
            // Boxed: a pass's future holds every step it may take (tens of KiB for a claim);
            // inline, it would make the reconcile's future as large, and kube-runtime's
            // wrappers and tokio's spawn copy that whole on every reconcile.
            Step::Finalize => Box::pin(lifecycle.finalize(&object, &mut carry)).await,
            Step::Manage => Box::pin(lifecycle.pass(object, &mut carry)).await,
        };
        match after(outcome, passes) {
            After::Finish(action) => return Ok(action),
            After::Fail(error) => return Err(error),
            After::Reread => {
                ctx.metrics.conflict(L::KIND);
                let fresh = lifecycle.reread(namespace.as_deref(), &name).await;
                match fresh.map_err(ReconcileError::Failed)? {
                    Some(fresh) => object = fresh,
                    None => return Ok(Action::await_change()),
                }
            }
        }
    }
    Err(ReconcileError::Contended)
}

/// The error policy: logged, then retried after the object's backoff.
fn error_policy<L: Lifecycle>(
    stored: Arc<L::Stored>,
    error: &ReconcileError<L::Error>,
    lifecycle: Arc<L>,
) -> Action {
    let key = key::<L>(&*stored);
    tracing::warn!(%error, kind = L::KIND, %key, "reconcile failed");
    Action::requeue(lifecycle.context().retry_delay(&key))
}

/// The object's key in the failures map: its kind, namespace and name.
fn key<L: Lifecycle>(object: &L::Stored) -> String {
    failures_key(L::KIND, object.namespace().as_deref(), &object.name_any())
}

fn failures_key(kind: &str, namespace: Option<&str>, name: &str) -> String {
    format!("{kind}/{}/{name}", namespace.unwrap_or_default())
}

/// How a controller is driven besides its own watches: what else wakes its objects, the
/// backlog they wait in (claims and handles, of which a start lists many), how many
/// reconciles run at once, and when to stop.
pub(crate) struct Drive<K: Resource> {
    pub(crate) triggers: Option<UnboundedReceiver<ObjectRef<K>>>,
    pub(crate) backlog: Option<Backlog<K>>,
    pub(crate) concurrency: u16,
    pub(crate) shutdown: Shutdown,
}

/// A controller of the objects `api` watches, as `Controller::new_with` builds one, whose
/// watch also tells the write layer which objects are deleted (`write::forget_deleted`): for
/// the kinds whose watch no other part of the broker shares. An object deleted while the
/// watch was away is told deleted at the re-list that misses it (`reflect_whole`), and
/// reconciled: found gone, its [`Lifecycle::gone`] forgets it. The store comes with it,
/// [answered](answered_once) once the watch has listed or failed. The watch's failures and
/// recoveries go to `health`, under the kind's name.
pub(crate) fn forgetting_controller<K>(
    api: Api<K>,
    config: watcher::Config,
    kind: ApiResource,
    health: &WatchHealth,
) -> (Controller<K>, ListedStore<K>)
where
    K: Resource<DynamicType = ApiResource> + Identified + Clone + DeserializeOwned + Debug,
    K: Send + Sync + 'static,
{
    let writer = reflector::store::Writer::new(kind.clone());
    let listed = ListedStore::of(&writer);
    let store = writer.as_reader();
    let gate = RelistGate::new(store.clone(), kind.clone());
    let events = health.watch(kind.kind.clone(), api, config);
    let events = reflect_whole(events, writer).inspect_ok(write::forget_deleted);
    let events = answered_once(events, listed.clone());
    let own = touched_once_stored(events, gate);
    let own = echoes::without_echoes(own, |object| Some(object));
    (Controller::for_stream_with(own, store, kind), listed)
}

/// `events`, marking `listed` at the end of the first list, or at the first failure: a
/// kind the API server does not serve (its CRD missing) has nothing to wait for, and its
/// readers go on with an empty store, as they would without waiting.
fn answered_once<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    listed: ListedStore<K>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>
where
    K: reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    events.inspect(move |event| {
        if matches!(event, Ok(watcher::Event::InitDone) | Err(_)) {
            listed.mark_listed();
        }
    })
}

/// Runs `controller` for `lifecycle` as `drive` says until it stops; every result reaches the
/// backlog, which lets the next waiting object in.
pub(crate) async fn run<L>(
    controller: Controller<L::Stored>,
    drive: Drive<L::Stored>,
    lifecycle: Arc<L>,
) where
    L: Lifecycle,
    <L::Stored as Resource>::DynamicType:
        Debug + Unpin + std::hash::Hash + Eq + Clone + Send + Sync,
{
    let Drive {
        triggers,
        backlog,
        concurrency,
        shutdown,
    } = drive;
    let forgetting = lifecycle.clone();
    let controller = match (triggers, &backlog) {
        (Some(triggers), Some(backlog)) => controller.reconcile_on(backlog.triggers(triggers)),
        (Some(triggers), None) => controller.reconcile_on(triggers),
        (None, _) => controller,
    };
    let reconciles = controller
        .with_config(controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::<L>, error_policy::<L>, lifecycle)
        .inspect(move |result| {
            if let Some(backlog) = &backlog {
                backlog.observe(result);
            }
            // A deleted object is not reconciled again: its failures go with it.
            if let Err(controller::Error::ObjectNotFound(object)) = result {
                let key = failures_key(L::KIND, object.namespace.as_deref(), &object.name);
                forgetting.context().succeeded(&key);
                forgetting.gone(object.namespace.as_deref(), &object.name);
            }
        });
    reconciles.for_each(|_| async {}).await;
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn meta(labels: &[(&str, &str)], deleting: bool) -> ObjectMeta {
        ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            deletion_timestamp: deleting.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            ..ObjectMeta::default()
        }
    }

    /// §7.6: an ignored object is left alone, even while it is deleted.
    #[test]
    fn an_ignored_object_is_left_alone_even_when_deleting() {
        let domain = OperatorDomain::default();
        let ignore = domain.ignore_label();
        assert_eq!(step(&meta(&[(&ignore, "")], true), &domain), Step::Leave);
        assert_eq!(step(&meta(&[(&ignore, "")], false), &domain), Step::Leave);
        assert_eq!(step(&meta(&[], true), &domain), Step::Finalize);
        assert_eq!(step(&meta(&[], false), &domain), Step::Manage);
    }

    #[test]
    fn a_conflict_rereads_until_the_last_pass_then_backs_off() {
        assert_eq!(after::<()>(Err(Halt::Conflict), 1), After::Reread);
        assert_eq!(
            after::<()>(Err(Halt::Conflict), MAX_PASSES - 1),
            After::Reread
        );
        assert_eq!(
            after::<()>(Err(Halt::Conflict), MAX_PASSES),
            After::Fail(ReconcileError::Contended)
        );
    }

    #[test]
    fn a_gone_object_waits_and_an_error_fails_at_once() {
        assert_eq!(
            after::<()>(Err(Halt::Gone), 1),
            After::Finish(Action::await_change())
        );
        assert_eq!(
            after(Err(Halt::Failed("no")), 1),
            After::Fail(ReconcileError::Failed("no"))
        );
        let requeue = Action::requeue(std::time::Duration::from_secs(3));
        assert_eq!(after::<()>(Ok(requeue.clone()), 5), After::Finish(requeue));
    }

    /// The readers of a store wait for its first list, or for its watch's first failure (a
    /// kind without its CRD), and no longer.
    #[tokio::test]
    async fn a_store_is_answered_at_its_first_list_or_failure() {
        use k8s_openapi::api::core::v1::ConfigMap;

        let listing = [
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(ConfigMap::default())),
            Ok(watcher::Event::InitDone),
        ];
        let listed = ListedStore::of(&reflector::store::Writer::<ConfigMap>::default());
        let mut events = std::pin::pin!(answered_once(
            futures::stream::iter(listing),
            listed.clone()
        ));
        for _ in 0..2 {
            events.next().await;
            assert!(!listed.is_listed(), "not before the list ends");
        }
        events.next().await;
        assert!(listed.is_listed());

        let failing = [Err(watcher::Error::NoResourceVersion)];
        let failed = ListedStore::of(&reflector::store::Writer::<ConfigMap>::default());
        let mut events = std::pin::pin!(answered_once(
            futures::stream::iter(failing),
            failed.clone()
        ));
        events.next().await;
        assert!(failed.is_listed(), "a failed watch holds nobody back");
    }

    /// The size of the future `reconcile` returns, without making one.
    fn future_size<A, B, F>(_: fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// kube-runtime and tokio move a reconcile's future several times before it runs: it
    /// must not hold its passes inline (a claim's would take 78 KiB, copied whole at each move).
    #[test]
    fn a_reconcile_future_holds_its_passes_boxed() {
        use crate::controller::claim::ClaimContext;
        use crate::controller::handle::HandleContext;
        for size in [
            future_size(reconcile::<ClaimContext>),
            future_size(reconcile::<HandleContext>),
        ] {
            assert!(size <= 1024, "a reconcile's future takes {size} bytes");
        }
    }
}
