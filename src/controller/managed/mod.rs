//! The managed resources: one watch per (apiVersion, kind, namespace) in use, started the
//! first time a handle or claim reads a resource of that kind (§14, Δ§4.5), or the handle
//! watch brings a handle that references one ([`EarlyWatches`]), each feeding a reflector
//! store. A change to a managed resource wakes its handle and the handle's claim;
//! a watch's first list, which every reader waits for, wakes only the handles. Poolboy's
//! `ResourceWatch` objects are declared for other tools (Δ§2.2; docs/design.md,
//! "controller::managed").

use std::time::Duration;

use futures::StreamExt;
use futures::future::Either;
use kube::api::{Api, DynamicObject, ObjectMeta};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};

mod early;
mod idle;
mod orphans;
pub(super) mod resources;

pub(crate) use self::early::EarlyWatches;
pub(crate) use self::idle::stop_idle_watches;
use self::orphans::{Suspect, Sweeper};
pub(crate) use self::resources::WatchKey;
use self::resources::{LastRead, ManagedKind, Watch};
use super::context::{Context, Triggers};
use super::echoes::{self, Heard};
use super::write::{self, Written};
use crate::api::OperatorDomain;
use crate::api::kinds::SharedType;
use crate::api::kinds::{HandleObject, Kinds, WatchObject};
use crate::api::refs::ResourceReference;
use crate::api::watch::ResourceWatchSpec;
use crate::core::handle::definition::status_references;
use crate::core::naming::resource_watch_name;
use crate::store::packed::{Identified, StoredClaim, StoredHandle, StoredResource};
use crate::store::shared_watch::{ListedStore, Stored, reflect_kept, without_managed_fields};

/// The kind `api_version`/`kind` as the API server serves it, discovered once per process.
pub(crate) async fn discover(
    ctx: &Context,
    api_version: &str,
    kind: &str,
) -> Result<ManagedKind, kube::Error> {
    if let Some(known) = ctx.managed.known_kind(api_version, kind) {
        return Ok(known);
    }
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = kube::discovery::pinned_kind(&ctx.client, &gvk).await?;
    let managed = ManagedKind {
        resource,
        namespaced: capabilities.scope == Scope::Namespaced,
    };
    ctx.managed
        .remember_kind(api_version, kind, managed.clone());
    Ok(managed)
}

/// The API of the object `reference` points to.
pub(crate) async fn api_for(
    ctx: &Context,
    reference: &ResourceReference,
) -> Result<Api<DynamicObject>, kube::Error> {
    let kind = discover(ctx, &reference.api_version, &reference.kind).await?;
    Ok(match (&reference.namespace, kind.namespaced) {
        (Some(namespace), true) => {
            Api::namespaced_with(ctx.client.clone(), namespace, &kind.resource)
        }
        _ => Api::all_with(ctx.client.clone(), &kind.resource),
    })
}

/// Starts the watch that covers `reference`, unless it runs already (§12.4 step 6.6).
pub(crate) async fn ensure_watch(
    ctx: &Context,
    reference: &ResourceReference,
) -> Result<(), kube::Error> {
    let key = WatchKey::of(reference);
    if ctx.managed.watch(&key).is_some() {
        return Ok(());
    }
    let kind = discover(ctx, &reference.api_version, &reference.kind).await?;
    let api = match (&key.namespace, kind.namespaced) {
        (Some(namespace), true) => {
            Api::namespaced_with(ctx.client.clone(), namespace, &kind.resource)
        }
        _ => Api::all_with(ctx.client.clone(), &kind.resource),
    };
    let resource = SharedType::new(kind.resource.clone());
    let writer = reflector::store::Writer::new(resource.clone());
    let listed = ListedStore::of(&writer);
    let watch = Watch {
        resource: resource.clone(),
        store: listed.clone(),
        last_read: LastRead::default(),
    };
    // Two reconciles may race to start the same watch: the first to register wins.
    if !ctx.managed.insert(key.clone(), watch) {
        return Ok(());
    }
    let router = Router {
        triggers: ctx.triggers.clone(),
        kinds: ctx.kinds.clone(),
        handles: ctx.stores.handles.clone(),
        claims: ctx.stores.claims.store().clone(),
        domain: ctx.domain().clone(),
        operator_namespace: ctx.config.operator_namespace.clone(),
    };
    let events = ctx
        .health
        .watch(
            key.to_string(),
            api,
            crate::store::shared_watch::watch_config(),
        )
        .modify(DynamicObject::trim_for_store);
    let stream = reflect_kept(events, writer, resource);
    let sweeper = Sweeper::new(ctx.client.clone(), ctx.handles_api(), kind.resource.clone());
    let suspects = move |suspect| sweeper.check(suspect);
    let task = tokio::spawn(follow(stream, router, suspects, key.clone(), listed));
    ctx.managed.keep_task(key.clone(), task);
    ctx.metrics.managed_watches.set(ctx.managed.len() as i64);
    tracing::info!(
        api_version = %key.api_version,
        kind = %key.kind,
        namespace = key.namespace.as_deref().unwrap_or(""),
        "watching managed resources"
    );
    Ok(())
}

/// Poolboy's ResourceWatch object for `key` in `namespace` (the operator namespace): the
/// deterministic name of Δ§2.2, and `spec.namespace` only for a namespaced watch.
pub(crate) fn watch_object(kinds: &Kinds, namespace: &str, key: &WatchKey) -> WatchObject {
    let watched_namespace = key.namespace.clone().filter(|ns| !ns.is_empty());
    let metadata = ObjectMeta {
        name: Some(resource_watch_name(
            &key.api_version,
            &key.kind,
            watched_namespace.as_deref(),
        )),
        namespace: Some(namespace.to_owned()),
        ..ObjectMeta::default()
    };
    let spec = ResourceWatchSpec {
        api_version: key.api_version.clone(),
        kind: key.kind.clone(),
        namespace: watched_namespace,
        refresh_interval: None,
    };
    Kinds::object(&kinds.watch, metadata, spec, None)
}

/// Makes sure Poolboy's ResourceWatch object for `key` exists (Δ§2.2), once per key per
/// process: Poolboy issued a GET and a failing create on every manage (Q4). An object that
/// exists already (409) is adopted as it is; the operator never deletes them. A failure is
/// only logged, and retried the next time a handle manages a resource of `key`: the object
/// is for other tools, the watch this broker runs does not depend on it.
pub(crate) async fn declare_watch(ctx: &Context, key: &WatchKey) {
    if !ctx.managed.start_declaring(key) {
        return;
    }
    let namespace = &ctx.config.operator_namespace;
    let object = watch_object(&ctx.kinds, namespace, key);
    let api = Api::<WatchObject>::namespaced_with(ctx.client.clone(), namespace, &ctx.kinds.watch);
    match write::create(&api, &object).await {
        Ok(Written::Done(created)) => {
            tracing::info!(name = %created.name_any(), api_version = %key.api_version, kind = %key.kind, "created ResourceWatch");
        }
        Ok(Written::Conflict | Written::Gone) => {}
        Err(error) => {
            ctx.managed.declaring_failed(key);
            tracing::warn!(
                %error,
                api_version = %key.api_version,
                kind = %key.kind,
                "cannot create the ResourceWatch object; retrying on the next manage"
            );
        }
    }
}

/// The live object `reference` points to: from its watch's store, else fetched (the store
/// may lag behind a create). `None` when it does not exist.
///
/// The watch is started if no one has yet, and waited for as [`watched_state`] says: at start
/// every handle is reconciled while its watches list, and each read would otherwise be a GET
/// (`make bench-scale` saw 1,200 at 10,000 handles).
pub(crate) async fn live_state(
    ctx: &Context,
    reference: &ResourceReference,
) -> Result<Option<serde_json::Value>, kube::Error> {
    match watched_state(ctx, reference).await {
        InStore::Found(state) => Ok(Some(state)),
        InStore::Absent | InStore::Unknown => fetch(ctx, reference).await,
    }
}

/// The object `reference` points to as its watch's store has it: the watch is started if
/// no one has yet (a claim may pass before its handle does), then read as [`stored_state`]
/// says. A watch that cannot start leaves it `Unknown`.
pub(crate) async fn watched_state(ctx: &Context, reference: &ResourceReference) -> InStore {
    if let Err(error) = ensure_watch(ctx, reference).await {
        tracing::debug!(%error, kind = %reference.kind, name = %reference.name, "cannot watch a managed resource");
        return InStore::Unknown;
    }
    stored_state(ctx, reference).await
}

/// What a managed-resource watch's store says of one object.
pub(crate) enum InStore {
    Found(serde_json::Value),
    /// The watch has listed and lacks it: it does not exist, or the store has not caught up
    /// with its create yet.
    Absent,
    /// No watch of its kind has listed (not started, or waited out: its kind may be one the
    /// broker may not list).
    Unknown,
}

/// The object `reference` points to as its watch's store has it, once the watch has listed.
///
/// A watch that has not listed yet is waited for, up to [`FIRST_LIST_WAIT`]. A watch that
/// does not list in that time (its kind forbidden, say) is not waited for again, so it slows
/// no other reader; and its first list, when it comes, wakes the claims as well as the handles
/// (`follow`), since readers went without it.
pub(crate) async fn stored_state(ctx: &Context, reference: &ResourceReference) -> InStore {
    let Some(watch) = ctx.managed.watch(&WatchKey::of(reference)) else {
        return InStore::Unknown;
    };
    let listed = watch.store.listed_within(FIRST_LIST_WAIT).await;
    match ctx.managed.state(reference) {
        Some(state) => InStore::Found(state),
        None if listed => InStore::Absent,
        None => InStore::Unknown,
    }
}

/// How long a read waits for a managed-resource watch's first list.
const FIRST_LIST_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The live object `reference` points to, read from the API server.
pub(crate) async fn fetch(
    ctx: &Context,
    reference: &ResourceReference,
) -> Result<Option<serde_json::Value>, kube::Error> {
    let api = api_for(ctx, reference).await?;
    let object = api.get_opt(&reference.name).await?;
    Ok(object.and_then(|mut o| {
        without_managed_fields(&mut o);
        serde_json::to_value(o).ok()
    }))
}

/// How long a pass waits for a managed-resource store to show a write of this process.
const STORE_CATCH_UP: Duration = Duration::from_secs(1);
/// How often it looks meanwhile.
const STORE_CATCH_UP_LOOK: Duration = Duration::from_millis(5);

/// The live state of `reference`, from its store once the store shows the last write this
/// process made of it (its watch event usually follows the write's answer within
/// milliseconds), or from the API server past [`STORE_CATCH_UP`]. A pass that ran right after
/// the one that patched the resource would otherwise diff the copy the patch replaced, and
/// its guarded patch would conflict: a failed request and a GET.
pub(crate) async fn caught_up_state(
    ctx: &Context,
    reference: &ResourceReference,
) -> Result<Option<serde_json::Value>, kube::Error> {
    let deadline = tokio::time::Instant::now() + STORE_CATCH_UP;
    loop {
        let state = live_state(ctx, reference).await?;
        let Some(stale) = state.as_ref().filter(|state| write::is_stale_copy(*state)) else {
            return Ok(state);
        };
        if tokio::time::Instant::now() >= deadline {
            // A store that does not catch up (its watch is failing) is not waited for again.
            write::forget_replaced(stale);
            return fetch(ctx, reference).await;
        }
        tokio::time::sleep(STORE_CATCH_UP_LOOK).await;
    }
}

/// The handle a managed resource names in its annotations.
struct HandleAnnotations<'a> {
    name: &'a str,
    /// Absent on resources made before handles recorded their uid.
    uid: Option<&'a str>,
}

/// Routes events of managed resources to their handles and claims.
#[derive(Clone)]
struct Router {
    triggers: Triggers,
    kinds: Kinds,
    /// Handles, and whether their watch has listed them once.
    handles: ListedStore<StoredHandle>,
    claims: Store<StoredClaim>,
    domain: OperatorDomain,
    operator_namespace: String,
}

impl Router {
    /// Wakes the handle named by `object`'s annotations, and its claim (Δ§4.5 per event) as
    /// `claims` says; returns the handle's name. Objects without the annotation, or that
    /// Poolboy is deleting (`D/resource-handle-deleted`), are skipped (B12).
    fn route(&self, object: &DynamicObject, claims: Claims) -> Option<String> {
        let name = self.handle_annotations(object)?.name;
        self.wake(name, claims);
        Some(name.to_owned())
    }

    /// [`route`](Self::route) for a change of `object`; when the change is the echo of its
    /// handle's own write (`echoes::resource_echo`), which that reconcile acted on already,
    /// only the claim that reads it ([`Router::wake_claim_reading`]).
    fn route_change(&self, object: &DynamicObject, key: &WatchKey) -> Option<String> {
        let handle = self.handle_annotations(object)?;
        let name = handle.name.to_owned();
        let writer = match handle.uid {
            Some(uid) => Some(uid.to_owned()),
            None => self.handle_uid(&name),
        };
        let heard = match &writer {
            Some(writer) => echoes::resource_echo(object, writer),
            None => Heard::News,
        };
        let resource = reference_of(object, key);
        match heard {
            Heard::Echo => self.wake_claim_reading(&name, resource.as_ref()),
            Heard::News => self.wake(&name, Claims::Wake),
            Heard::Pending(echo) => {
                let router = self.clone();
                let handle = name.clone();
                tokio::spawn(async move {
                    match echo.await {
                        true => router.wake_claim_reading(&handle, resource.as_ref()),
                        false => router.wake(&handle, Claims::Wake),
                    }
                });
            }
        }
        Some(name)
    }

    /// The uid of handle `name`, as the store has it.
    fn handle_uid(&self, name: &str) -> Option<String> {
        let stored = self.handles.store().get(&self.handle_ref(name))?;
        Identified::uid(&*stored).map(std::borrow::Cow::into_owned)
    }

    /// The handle `object`'s annotations name (B12): none when it has no such annotation, is
    /// being deleted by Poolboy (`D/resource-handle-deleted`), or names another operator
    /// namespace.
    fn handle_annotations<'a>(&self, object: &'a DynamicObject) -> Option<HandleAnnotations<'a>> {
        let annotations = object.metadata.annotations.as_ref()?;
        if annotations.contains_key(&self.domain.resource_handle_deleted())
            || annotations
                .get(&self.domain.resource_handle_namespace())
                .is_some_and(|ns| *ns != self.operator_namespace)
        {
            return None;
        }
        Some(HandleAnnotations {
            name: annotations.get(&self.domain.resource_handle_name())?,
            uid: annotations
                .get(&self.domain.resource_handle_uid())
                .map(String::as_str)
                .filter(|uid| !uid.is_empty()),
        })
    }

    /// `object`, when the handle its annotations name is missing from the store, being
    /// deleted, or a namesake with another uid: it may have outlived its handle. Nothing
    /// before the handles have listed once: every handle would look missing (`follow` judges
    /// what its first list brought once they have).
    fn suspect(&self, object: &DynamicObject) -> Option<Suspect> {
        if !self.handles.is_listed() {
            return None;
        }
        let handle = self.handle_annotations(object)?;
        let owned = self
            .handles
            .store()
            .get(&self.handle_ref(handle.name))
            .is_some_and(|h| {
                h.meta().deletion_timestamp.is_none()
                    && handle.uid.is_none_or(|uid| h.uid().as_deref() == Some(uid))
            });
        if owned {
            return None;
        }
        Some(Suspect {
            namespace: object.metadata.namespace.clone(),
            name: object.metadata.name.clone()?,
            uid: object.metadata.uid.clone()?,
            handle_name: handle.name.to_owned(),
            handle_uid: handle.uid.map(str::to_owned),
        })
    }

    /// Judges every object of `store` as [`Router::suspect`] does.
    fn judge_stored(&self, store: &Store<StoredResource>, suspects: &impl Fn(Suspect)) {
        for stored in store.state() {
            let Ok(object) = stored.unpack() else {
                continue;
            };
            if let Some(suspect) = self.suspect(&object) {
                suspects(suspect);
            }
        }
    }

    /// Wakes every handle whose status references a resource that the watch `key` covers,
    /// and its claim as `claims` says. Every handle is decoded, once: this runs once per watch,
    /// after its first list.
    fn wake_handles_watching(&self, key: &WatchKey, claims: Claims) {
        for stored in self.handles.store().state() {
            let Some(handle) = self.served(&stored) else {
                continue;
            };
            let covered = status_references(&handle)
                .iter()
                .flatten()
                .any(|reference| WatchKey::of(reference) == *key);
            if covered && let Some(name) = handle.metadata.name.as_deref() {
                self.wake_served(name, &handle, claims);
            }
        }
    }

    fn wake(&self, handle_name: &str, claims: Claims) {
        let Some(stored) = self.handles.store().get(&self.handle_ref(handle_name)) else {
            // Not in the store yet. Just created, the controller finds it when it is. Before
            // the handles' first list, that list brings it and the controller reconciles it
            // then, as every listed handle.
            if self.handles.is_listed() {
                let _ = self
                    .triggers
                    .handles
                    .unbounded_send(self.handle_ref(handle_name));
            }
            return;
        };
        if let Some(handle) = self.served(&stored) {
            self.wake_served(handle_name, &handle, claims);
        }
    }

    /// Wakes `handle`, read from the store and served, and its claim as `claims` says.
    fn wake_served(&self, handle_name: &str, handle: &HandleObject, claims: Claims) {
        let _ = self
            .triggers
            .handles
            .unbounded_send(self.handle_ref(handle_name));
        if claims == Claims::Wake {
            self.wake_claim(handle);
        }
    }

    fn handle_ref(&self, handle_name: &str) -> ObjectRef<StoredHandle> {
        ObjectRef::new_with(handle_name, self.kinds.stored_handle.clone())
            .within(&self.operator_namespace)
    }

    /// Wakes the claim of handle `handle_name` alone, when the handle's status references
    /// `resource`: a change the handle's own write made changes what the claim's status
    /// copies (the resource's state), and nothing the handle's pass has not seen. A resource
    /// its status does not reference yet (just created) reaches the claim with the handle's
    /// status write that records it.
    fn wake_claim_reading(&self, handle_name: &str, resource: Option<&ResourceReference>) {
        let stored = self.handles.store().get(&self.handle_ref(handle_name));
        let Some(handle) = stored.and_then(|s| self.served(&s)) else {
            return;
        };
        let references = status_references(&handle);
        if resource.is_some_and(|resource| references.iter().flatten().any(|r| r == resource)) {
            self.wake_claim(&handle);
        }
    }

    /// The handle `stored`, unless it is left alone (B12): being deleted, or ignored.
    fn served(&self, stored: &StoredHandle) -> Option<HandleObject> {
        if stored.meta().deletion_timestamp.is_some() {
            return None;
        }
        let handle = stored.unpack().ok()?;
        (!self.domain.ignores(&handle.metadata)).then_some(handle)
    }

    /// Wakes the claim `handle` is bound to, unless the claim is ignored (B12).
    fn wake_claim(&self, handle: &HandleObject) {
        let Some(claim) = &handle.spec.resource_claim else {
            return;
        };
        let claim_ref = ObjectRef::new_with(&claim.name, self.kinds.stored_claim.clone())
            .within(&claim.namespace);
        let ignored = self
            .claims
            .get(&claim_ref)
            .and_then(|c| c.decoded_labels().ok())
            .is_some_and(|labels| self.domain.ignores_labelled(&labels));
        if !ignored {
            let _ = self.triggers.claims.unbounded_send(claim_ref);
        }
    }
}

/// The reference a handle's status gives `object`, of the kind the watch `key` covers.
fn reference_of(object: &DynamicObject, key: &WatchKey) -> Option<ResourceReference> {
    Some(ResourceReference {
        api_version: key.api_version.clone(),
        kind: key.kind.clone(),
        name: object.metadata.name.clone()?,
        namespace: object.metadata.namespace.clone(),
    })
}

/// Whether a handle woken for a managed resource wakes its claim too.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Claims {
    Wake,
    /// The watch's first list, when every reader waited for it: a claim reads its resources
    /// from the store only once it has listed (`watched_state`), so the list is no news to it,
    /// and whatever the handle makes of it reaches the claim through the handle's status.
    Spare,
}

/// Follows one watch until the operator stops. Each applied or deleted object wakes its
/// handle, those deleted while the watch was away too (`reflect_kept` tells them after a
/// re-list).
/// An object whose handle seems gone goes to `suspects`; those that came before the handles
/// had listed once are judged from the store when both lists are done.
async fn follow<S>(
    stream: S,
    router: Router,
    suspects: impl Fn(Suspect),
    key: WatchKey,
    listed: ListedStore<StoredResource>,
) where
    S: futures::Stream<Item = Result<Event<DynamicObject>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut listed_once = false;
    let mut unjudged = false;
    loop {
        let event = match unjudged && listed_once {
            true => {
                let handles_listed = std::pin::pin!(router.handles.wait_until_listed());
                match futures::future::select(stream.next(), handles_listed).await {
                    Either::Left((event, _)) => event,
                    Either::Right(((), _)) => {
                        unjudged = false;
                        router.judge_stored(listed.store(), &suspects);
                        continue;
                    }
                }
            }
            false => stream.next().await,
        };
        let Some(event) = event else {
            break;
        };
        match event {
            Ok(event @ (Event::Apply(_) | Event::InitApply(_))) => {
                let applied = matches!(event, Event::Apply(_));
                let (Event::Apply(object) | Event::InitApply(object)) = event else {
                    continue;
                };
                if !router.handles.is_listed() {
                    unjudged = true;
                } else if let Some(suspect) = router.suspect(&object) {
                    suspects(suspect);
                }
                match (applied, listed_once) {
                    (true, _) => router.route_change(&object, &key),
                    (false, true) => router.route(&object, Claims::Wake),
                    (false, false) => router.route(&object, Claims::Spare),
                };
            }
            Ok(Event::Delete(object)) => {
                write::forget_replaced(&object);
                router.route(&object, Claims::Wake);
            }
            // The objects a re-list does not bring back come as delete events after it.
            Ok(Event::Init) => {}
            Ok(Event::InitDone) => {
                // A resource deleted between its handle creating it and this watch's first
                // list never shows up here: its handle is told to look (a busy API server
                // made that gap long enough for a test to fall in).
                if !std::mem::replace(&mut listed_once, true) {
                    let claims = match listed.mark_listed() {
                        true => Claims::Wake,
                        false => Claims::Spare,
                    };
                    router.wake_handles_watching(&key, claims);
                }
            }
            Err(error) => tracing::warn!(
                %error,
                api_version = %key.api_version,
                kind = %key.kind,
                "managed resource watch error; retrying"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
