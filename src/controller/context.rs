//! What every controller shares: the client, the configuration, the kinds of the configured
//! domain, the template engine and schema cache, the compiled providers, the reflector stores
//! (the indexes every decision reads), the triggers that wake controllers from outside their
//! own watches, the event recorder and the metrics.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::Api;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource};

use super::events::EventRecorders;
use super::managed::resources::ManagedResources;
use super::requester::RequesterLookup;
use crate::api::OperatorDomain;
use crate::api::kinds::{ClaimObject, HandleObject, Kinds, PoolObject, ScalingObject};
use crate::core::provider::schema::SchemaCache;
use crate::core::provider::{ProviderCatalog, ProviderCompiler};
use crate::core::template::TemplateEngine;
use crate::metrics::Metrics;
use crate::store::claim_readers::ClaimReaders;
use crate::store::claim_summaries::ClaimSummaries;
use crate::store::deleted_by_claims::HandlesDeletedByClaims;
use crate::store::health::WatchHealth;
use crate::store::packed::{StoredClaim, StoredHandle};
use crate::store::pool_index::PoolIndex;
use crate::store::render_clocks::RenderClocks;
use crate::store::shared_watch::ListedStore;
use crate::store::unrecorded::UnrecordedResources;

/// How often a template whose result depends on the clock in a way no instant can be derived
/// from (it prints the current time) is rendered again: Poolboy's `MANAGE_HANDLES_INTERVAL`.
pub const DEFAULT_TIME_TEMPLATE_INTERVAL: Duration = Duration::from_secs(60);

/// How long a managed-resource watch whose store is empty may go unread before it stops.
pub const DEFAULT_MANAGED_WATCH_IDLE: Duration = Duration::from_secs(600);

/// How long after the instant a template's result changes it is rendered again: the clock
/// read on waking must be past that instant.
const TEMPLATE_FLIP_MARGIN: Duration = Duration::from_millis(50);

/// The operator's configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub domain: OperatorDomain,
    /// Where providers, pools and handles live.
    pub operator_namespace: String,
    /// This process, as Events and logs name it (the pod name in a cluster).
    pub instance: String,
    /// How often templates that use the clock unpredictably are rendered again.
    pub time_template_interval: Duration,
    /// How long before its lifespan ends a claim is warned; empty: never.
    pub lifespan_warnings: Vec<chrono::TimeDelta>,
    /// How long a managed-resource watch that holds no object (its namespace deleted, say) may
    /// go without a reader before it stops (`managed::stop_idle_watches`).
    pub managed_watch_idle: Duration,
}

/// Wakes a controller for one object from outside its own watches (a provider changed, a
/// managed resource changed, a handle was bound).
#[derive(Clone, Debug)]
pub(crate) struct Triggers {
    pub(crate) claims: UnboundedSender<ObjectRef<StoredClaim>>,
    pub(crate) handles: UnboundedSender<ObjectRef<StoredHandle>>,
    pub(crate) pools: UnboundedSender<ObjectRef<PoolObject>>,
}

impl Triggers {
    /// Wakes the claim controller for claim `name` of `namespace` (a closed channel means
    /// shutdown: ignored).
    pub(crate) fn wake_claim(&self, namespace: &str, name: &str, kinds: &Kinds) {
        let claim = ObjectRef::new_with(name, kinds.stored_claim.clone()).within(namespace);
        let _ = self.claims.unbounded_send(claim);
    }

    pub(crate) fn wake_handle<K: Resource>(&self, handle: &K, kinds: &Kinds) {
        let meta = handle.meta();
        let name = meta.name.as_deref().unwrap_or_default();
        let mut handle = ObjectRef::new_with(name, kinds.stored_handle.clone());
        handle.namespace = meta.namespace.clone();
        let _ = self.handles.unbounded_send(handle);
    }

    pub(crate) fn wake_pool(&self, pool: &PoolObject, kinds: &Kinds) {
        let _ = self
            .pools
            .unbounded_send(ObjectRef::from_obj_with(pool, kinds.pool.clone()));
    }
}

/// The reflector stores, kept up to date by one shared watch per kind.
#[derive(Clone)]
pub(crate) struct Stores {
    /// Claims, packed: decode the one you read; and whether their watch has listed them once.
    pub(crate) claims: ListedStore<StoredClaim>,
    /// What is read across all claims, without decoding them.
    pub(crate) claim_summaries: ClaimSummaries,
    /// Handles, packed: decode the one you read (the free ones are kept parsed too,
    /// `store::free_handles`); and whether their watch has listed them once.
    pub(crate) handles: ListedStore<StoredHandle>,
    pub(crate) pools: Store<PoolObject>,
    /// Each pool's handles, counted, and their provisioning times.
    pub(crate) pool_handles: PoolIndex,
    /// Scalings, and whether their watch has listed them once (or failed: no CRD).
    pub(crate) scalings: ListedStore<ScalingObject>,
    /// When each handle's templates last read the clock.
    pub(crate) render_clocks: RenderClocks,
    /// Which handles read their claim's status.
    pub(crate) claim_readers: ClaimReaders,
    /// What each handle made and has not recorded in its status yet.
    pub(crate) unrecorded: UnrecordedResources,
    /// The handles deleted for their claim's finalizer.
    pub(crate) deleted_by_claims: HandlesDeletedByClaims,
}

pub(crate) struct Context {
    pub(crate) client: Client,
    pub(crate) config: Config,
    pub(crate) kinds: Kinds,
    pub(crate) templates: TemplateEngine,
    pub(crate) schemas: SchemaCache,
    pub(crate) stores: Stores,
    pub(crate) triggers: Triggers,
    pub(crate) metrics: Arc<Metrics>,
    /// The watches and stores of managed resources.
    pub(crate) managed: ManagedResources,
    /// Who asked for claims, per namespace (§12.3 step 7).
    pub(crate) requesters: RequesterLookup,
    /// Which watches fail now (`/readyz`).
    pub(crate) health: WatchHealth,
    /// When each handle's templates last read the clock.
    providers: RwLock<ProviderCatalog>,
    /// Whether `providers` has held every provider since a complete list.
    providers_listed: AtomicBool,
    recorders: EventRecorders,
    failures: Mutex<HashMap<String, u32>>,
}

impl Context {
    pub(crate) fn new(
        client: Client,
        config: Config,
        stores: Stores,
        triggers: Triggers,
        metrics: Arc<Metrics>,
        recorders: EventRecorders,
        health: WatchHealth,
    ) -> Self {
        Self {
            recorders,
            kinds: Kinds::new(&config.domain),
            client,
            config,
            templates: TemplateEngine::new(),
            schemas: SchemaCache::default(),
            stores,
            triggers,
            metrics,
            managed: ManagedResources::default(),
            requesters: RequesterLookup::default(),
            health,
            providers: RwLock::new(ProviderCatalog::default()),
            providers_listed: AtomicBool::new(false),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// What publishes the controllers' Events.
    pub(crate) fn recorders(&self) -> &EventRecorders {
        &self.recorders
    }

    /// The one clock of the controllers; `core` always receives `now` from here.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    /// When the templates rendered through `templates` (a watching engine) at `now` must be
    /// rendered again: just after the next instant a comparison with the clock
    /// flips, or one `time_template_interval` later when a result uses the clock in a way no
    /// instant can be derived from; `None` when the clock cannot change them.
    pub(crate) fn template_rerender(
        &self,
        templates: &TemplateEngine,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let at = templates
            .clock_reading()
            .next_render(now, self.config.time_template_interval)?;
        Some(
            chrono::TimeDelta::from_std(TEMPLATE_FLIP_MARGIN)
                .ok()
                .and_then(|margin| at.checked_add_signed(margin))
                .unwrap_or(at),
        )
    }

    pub(crate) fn domain(&self) -> &OperatorDomain {
        &self.config.domain
    }

    pub(crate) fn claims_api(&self, namespace: &str) -> Api<ClaimObject> {
        Api::namespaced_with(self.client.clone(), namespace, &self.kinds.claim)
    }

    pub(crate) fn handles_api(&self) -> Api<HandleObject> {
        Api::namespaced_with(
            self.client.clone(),
            &self.config.operator_namespace,
            &self.kinds.handle,
        )
    }

    pub(crate) fn pools_api(&self) -> Api<PoolObject> {
        Api::namespaced_with(
            self.client.clone(),
            &self.config.operator_namespace,
            &self.kinds.pool,
        )
    }

    pub(crate) fn scalings_api(&self) -> Api<ScalingObject> {
        Api::namespaced_with(
            self.client.clone(),
            &self.config.operator_namespace,
            &self.kinds.scaling,
        )
    }

    /// Reads the compiled providers. The lock is never held across an `.await`.
    pub(crate) fn providers<R>(&self, read: impl FnOnce(&ProviderCatalog) -> R) -> R {
        match self.providers.read() {
            Ok(catalog) => read(&catalog),
            Err(poisoned) => read(&poisoned.into_inner()),
        }
    }

    /// Whether the compiled providers are complete: listed once, and followed since. Before,
    /// a provider missing from them may only not have arrived yet.
    pub(crate) fn providers_listed(&self) -> bool {
        self.providers_listed.load(Ordering::Acquire)
    }

    /// The compiled providers are complete (a list of them was applied).
    pub(crate) fn mark_providers_listed(&self) {
        self.providers_listed.store(true, Ordering::Release);
    }

    /// Changes the compiled providers (the provider watch does this).
    pub(crate) fn update_providers<R>(
        &self,
        change: impl FnOnce(&mut ProviderCatalog, &ProviderCompiler<'_>) -> R,
    ) -> R {
        let compiler = ProviderCompiler {
            domain: &self.config.domain,
            templates: &self.templates,
            schemas: &self.schemas,
        };
        match self.providers.write() {
            Ok(mut catalog) => change(&mut catalog, &compiler),
            Err(poisoned) => change(&mut poisoned.into_inner(), &compiler),
        }
    }

    /// Posts an Event about `object` in the background (it returns at once); failures are
    /// logged, never fatal.
    pub(crate) async fn event<K>(
        &self,
        object: &K,
        dyntype: &K::DynamicType,
        kind: EventKind,
        reason: &str,
        note: String,
    ) where
        K: Resource,
    {
        self.event_with_action(object, dyntype, kind, reason, reason, note)
            .await;
    }

    /// An Event whose `action` differs from its `reason` (Δ§3.1.3: `LifespanChange`).
    pub(crate) async fn event_with_action<K>(
        &self,
        object: &K,
        dyntype: &K::DynamicType,
        kind: EventKind,
        reason: &str,
        action: &str,
        note: String,
    ) where
        K: Resource,
    {
        let reference: ObjectReference = object.object_ref(dyntype);
        let event = Event {
            type_: match kind {
                EventKind::Normal => EventType::Normal,
                EventKind::Warning => EventType::Warning,
            },
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        // Published beside the reconcile, not in its way: an Event is a write of its own, and
        // waiting for it makes every bind two round trips longer.
        let uid = object.meta().uid.as_deref().unwrap_or_default();
        self.recorders.publish(uid, event, reference);
    }

    /// The delay before retrying `key` after a transient failure: 1 s, doubling up to five
    /// minutes, so that a failing object never turns into a retry storm.
    pub(crate) fn retry_delay(&self, key: &str) -> Duration {
        let mut failures = match self.failures.lock() {
            Ok(failures) => failures,
            Err(poisoned) => poisoned.into_inner(),
        };
        let count = failures.entry(key.to_owned()).or_insert(0);
        *count = count.saturating_add(1);
        let seconds = 1u64 << (*count - 1).min(9);
        Duration::from_secs(seconds.min(300))
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub(crate) fn succeeded(&self, key: &str) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.remove(key);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventKind {
    Normal,
    Warning,
}
