//! `poolboy run`: each controller watches its kind into a reflector store (the index every
//! decision reads) and follows the related kinds it is woken by; handles, which three
//! controllers follow, are watched once (`store::shared_watch::SharedWatch`); providers are
//! loaded before any controller starts; the controllers run until shutdown. The admission webhook, when configured, answers from start to end, a
//! replica standing by for the Lease included (it follows the providers for it).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::channel::mpsc;
use futures::future::{BoxFuture, FutureExt, Shared};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::ObjectRef;

use super::client::{Reporting, counted_broker_client};
use super::quarantine::WithConditions;
use super::webhook::{WebhookError, WebhookOptions, WebhookServer};
use super::{http, lease, quarantine};
use crate::api::kinds::{Kinds, PoolObject, ScalingObject};
use crate::controller::backlogged::Backlogged;
use crate::controller::context::{Config, Context, Stores, Triggers};
use crate::controller::events::{EventRecorders, PUBLISHED_AT_ONCE};
use crate::controller::managed::{self, EarlyWatches};
use crate::controller::{claim, handle, pool, providers, scaling};
use crate::metrics::Metrics;
use crate::shutdown::{Shutdown, raised_by};
use crate::store::claim_readers::ClaimReaders;
use crate::store::deleted_by_claims::HandlesDeletedByClaims;
use crate::store::free_handles::FreeHandles;
use crate::store::health::WatchHealth;
use crate::store::packed::{StoredClaim, StoredHandle};
use crate::store::render_clocks::RenderClocks;
use crate::store::unrecorded::UnrecordedResources;

/// How long in-flight reconciles may run on after shutdown (Kubernetes' default termination
/// grace period is 30 s).
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a graceful stop waits for the Events still waiting to be published, after the
/// reconciles' grace: within Kubernetes' default termination grace period with it.
const EVENTS_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How long `run` waits before listing the providers again after a failure, at first and at
/// most.
const PROVIDERS_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(500);
const PROVIDERS_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);

pub struct RunOptions {
    pub config: Config,
    /// Watch claims in this namespace only (Poolboy's `KOPF_NAMESPACED`); all namespaces when
    /// `None`.
    pub claim_namespace: Option<String>,
    /// Where to serve `/metrics`, `/healthz` and `/readyz`; nothing is served when `None`.
    pub metrics_address: Option<SocketAddr>,
    /// Reconciles of one kind running at once.
    pub concurrency: u16,
    /// The `cluster_domain` label of the metrics.
    pub cluster_domain: String,
    /// Run the controllers only while holding this Lease of the operator namespace (replicas
    /// take turns); always when `None`.
    pub lease: Option<String>,
    /// Serve the admission webhook; not when `None`.
    pub webhook: Option<WebhookOptions>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot connect to Kubernetes: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot serve metrics: {0}")]
    Http(#[source] std::io::Error),
    #[error(transparent)]
    WebhookCertificate(#[from] WebhookError),
    #[error("cannot serve the admission webhook: {0}")]
    Webhook(#[source] Arc<std::io::Error>),
    #[error(transparent)]
    Lease(#[from] lease::LeaseError),
    #[error("lost the Lease to another replica")]
    LeaseLost,
}

/// Runs the operator, with the API server of `kube_config`, until `shutdown` completes.
/// Every request goes through the broker's client (`client::broker_client`), so no object can fail the watch of
/// the others; the objects it sets aside are reported here.
pub async fn run(
    kube_config: kube::Config,
    options: RunOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let shutdown = raised_by(shutdown);
    // A webhook without a usable certificate is a configuration error: said at once.
    let webhook = options
        .webhook
        .clone()
        .map(WebhookServer::new)
        .transpose()?;
    let metrics = Arc::new(Metrics::new(&options.cluster_domain));
    let domain = &options.config.domain;
    // Each reconcile of the claim, handle and pool controllers has one request in flight at
    // most, and so has each Event being published (a scaling's reconciles come with its own
    // edits, schedule and its pool's appearance, never with binds, and are left out).
    let idle_connections = 3 * usize::from(options.concurrency) + PUBLISHED_AT_ONCE;
    let candidate = options.lease.as_ref().map(|lease| {
        let config = &options.config;
        lease::Candidate::new(&config.operator_namespace, lease, &config.instance)
    });
    let fence = candidate.as_ref().map(lease::Candidate::fence);
    let health = WatchHealth::default();
    let reporting = Reporting {
        metrics: Some(metrics.clone()),
        health: Some(health.clone()),
    };
    let (client, quarantined) =
        counted_broker_client(kube_config, domain, reporting, idle_connections, fence)
            .map_err(RunError::Client)?;
    let kinds = Kinds::new(domain);
    let (controllers, ctx) = Controllers::build(&client, &kinds, &options, metrics.clone(), health);
    let ready = Arc::new(AtomicBool::new(false));
    let mut server = serve_http(&options, &metrics, &ready, &ctx, &shutdown).shared();
    let webhook_enabled = webhook.is_some();
    let webhook_failed = serve_webhook(webhook, &ctx, &shutdown).shared();

    let serving = Serving {
        server: server.clone(),
        webhook_failed: webhook_failed.clone(),
        webhook_enabled,
    };
    let mut leadership = match &candidate {
        Some(candidate) => {
            match hold_lease(candidate, &client, &ctx, &ready, serving, &shutdown).await? {
                Some(held) => Some(held),
                None => return Ok(()),
            }
        }
        None => None,
    };
    if !load_providers(&ctx, &shutdown).await {
        return Ok(());
    }
    metrics.set_leader(true);
    let reporter = Reporter {
        controller: "poolboy".to_owned(),
        instance: Some(options.config.instance.clone()),
    };
    let conditions = WithConditions::of(&kinds);
    let reporting = quarantine::report(quarantined, client, reporter, metrics.clone(), conditions);
    let readiness = signal_ready(&controllers, ready);
    let background = futures::future::join3(providers::watch(ctx.clone()), readiness, reporting);
    let recorders = ctx.recorders().clone();
    let controllers = controllers.run(ctx, options.concurrency, shutdown.clone());
    // kube-runtime 5 holds a controller's runner until its store has listed, and stops polling
    // the watch on shutdown: a shutdown that comes before the first list never completes. So
    // in-flight reconciles get a grace period, then are dropped.
    let grace = shutdown.then(|()| tokio::time::sleep(SHUTDOWN_GRACE));
    let lost = lost(&mut leadership);
    tokio::select! {
        _ = controllers => {}
        _ = background => {}
        // The HTTP endpoint also stops on `shutdown`: that is no reason to skip the graceful
        // stop of the controllers and the release of the Lease below.
        Some(error) = &mut server => return server_ended(Some(error)),
        error = webhook_failed => return Err(RunError::Webhook(error)),
        () = grace => tracing::warn!(
            grace = ?SHUTDOWN_GRACE,
            "controllers did not stop within the grace period; stopping anyway"
        ),
        // Another replica holds it now: stop at once (the write fence and the guarded writes keep
        // what is still in flight from undoing its work).
        () = lost => {
            metrics.set_leader(false);
            return Err(RunError::LeaseLost);
        }
    }
    // Still holding the Lease: the write fence lets them through.
    recorders.flush(EVENTS_GRACE).await;
    metrics.set_leader(false);
    if let Some(leadership) = leadership {
        leadership.release().await;
    }
    tracing::info!("operator stopped");
    Ok(())
}

/// Ends when another replica holds the Lease this process held; never without one.
async fn lost(leadership: &mut Option<lease::Leadership>) {
    match leadership {
        Some(leadership) => leadership.lost().await,
        None => futures::future::pending().await,
    }
}

/// The servers a replica standing by for the Lease keeps serving.
struct Serving {
    server: Shared<BoxFuture<'static, Option<Arc<std::io::Error>>>>,
    webhook_failed: Shared<BoxFuture<'static, Arc<std::io::Error>>>,
    webhook_enabled: bool,
}

/// Waits until this process holds the Lease it is a `candidate` for: nothing is watched or
/// reconciled before. A replica standing by is ready while its watches work (the Lease's, and
/// the providers' with the webhook): it serves nothing but admission reviews (for which it
/// follows the providers), and a rolling update must be able to start it while the holder
/// still runs. `None` when the operator stops first.
async fn hold_lease(
    candidate: &lease::Candidate,
    client: &kube::Client,
    ctx: &Arc<Context>,
    ready: &AtomicBool,
    serving: Serving,
    shutdown: &Shutdown,
) -> Result<Option<lease::Leadership>, RunError> {
    ready.store(true, Ordering::Relaxed);
    let following = async {
        if serving.webhook_enabled {
            providers::follow(ctx.clone()).await;
        }
        futures::future::pending::<std::convert::Infallible>().await
    };
    let acquire = lease::acquire(client.clone(), candidate, &ctx.health, shutdown.clone());
    let acquired = tokio::select! {
        acquired = acquire => acquired?,
        error = serving.server => return server_ended(error).map(|()| None),
        error = serving.webhook_failed => return Err(RunError::Webhook(error)),
        never = following => match never {},
    };
    ready.store(false, Ordering::Relaxed);
    Ok(acquired)
}

/// The four controllers, built and wired to each other, and what wakes each from outside its
/// watches.
struct Controllers {
    claims: claim::ClaimController,
    handles: handle::HandleController,
    pools: pool::PoolController,
    scalings: kube::runtime::Controller<ScalingObject>,
    claim_triggers: mpsc::UnboundedReceiver<ObjectRef<StoredClaim>>,
    handle_triggers: mpsc::UnboundedReceiver<ObjectRef<StoredHandle>>,
    pool_triggers: mpsc::UnboundedReceiver<ObjectRef<PoolObject>>,
    early_watches: EarlyWatches,
}

impl Controllers {
    /// The controllers, and the context their reconciles share (its stores are theirs).
    fn build(
        client: &kube::Client,
        kinds: &Kinds,
        options: &RunOptions,
        metrics: Arc<Metrics>,
        health: WatchHealth,
    ) -> (Self, Arc<Context>) {
        let namespace = &options.config.operator_namespace;
        let (handle_trigger, handle_triggers) = mpsc::unbounded();
        let reporter = Reporter {
            controller: "poolboy".to_owned(),
            instance: Some(options.config.instance.clone()),
        };
        let backlogged = Backlogged::default();
        let recorders = EventRecorders::new(client.clone(), reporter, backlogged.clone());
        let waiting = recorders.clone();
        metrics.count_waiting_events_with(move || waiting.waiting());
        let mut handle_watch = handle::watch(client, kinds, namespace, &health);
        let claim_namespace = options.claim_namespace.as_deref();
        let mut claim_watch = claim::watch(client, kinds, claim_namespace, &health);
        recorders.follow(&mut handle_watch);
        recorders.follow(&mut claim_watch);
        let free_handles = FreeHandles::following(&mut handle_watch);
        let render_clocks = RenderClocks::following(&mut handle_watch);
        let claim_readers = ClaimReaders::following(&mut handle_watch);
        let unrecorded = UnrecordedResources::following(&mut handle_watch);
        let deleted_by_claims = HandlesDeletedByClaims::following(&mut handle_watch);
        let early_watches =
            EarlyWatches::following(&mut handle_watch, options.config.domain.clone());
        let claims = claim::controller(
            claim_watch,
            kinds,
            namespace,
            (&mut handle_watch, free_handles.clone()),
            (handle_trigger.clone(), claim_readers.clone()),
            options.concurrency,
            &backlogged,
        );
        let pools = pool::controller(
            client,
            kinds,
            namespace,
            (&mut handle_watch, free_handles),
            &health,
        );
        let handles = handle::controller(kinds, handle_watch, options.concurrency, &backlogged);
        let (scalings, listed_scalings) = scaling::controller(client, kinds, namespace, &health);
        let stores = Stores {
            claims: claims.store(),
            claim_summaries: claims.summaries(),
            handles: handles.store(),
            pools: pools.store(),
            pool_handles: pools.handles(),
            scalings: listed_scalings,
            render_clocks,
            claim_readers,
            unrecorded,
            deleted_by_claims,
        };
        let (claim_trigger, claim_triggers) = mpsc::unbounded();
        let (pool_trigger, pool_triggers) = mpsc::unbounded();
        let triggers = Triggers {
            claims: claim_trigger,
            handles: handle_trigger,
            pools: pool_trigger,
        };
        let summaries = stores.claim_summaries.clone();
        metrics.count_claims_with(move || summaries.counts());
        let config = options.config.clone();
        let ctx = Context::new(
            client.clone(),
            config,
            stores,
            triggers,
            metrics,
            recorders,
            health,
        );
        let controllers = Self {
            claims,
            handles,
            pools,
            scalings,
            claim_triggers,
            handle_triggers,
            pool_triggers,
            early_watches,
        };
        (controllers, Arc::new(ctx))
    }

    /// Runs every controller until `shutdown` stops them gracefully (in-flight reconciles
    /// finish); the watches are dropped with them.
    async fn run(self, ctx: Arc<Context>, concurrency: u16, shutdown: Shutdown) {
        let claims = claim::run(
            self.claims,
            ctx.clone(),
            self.claim_triggers,
            concurrency,
            shutdown.clone(),
        );
        let handles = handle::run(
            self.handles,
            ctx.clone(),
            self.handle_triggers,
            concurrency,
            shutdown.clone(),
        );
        let pools = pool::run(
            self.pools,
            ctx.clone(),
            self.pool_triggers,
            concurrency,
            shutdown.clone(),
        );
        let early_watches = self.early_watches.run(ctx.clone());
        let idle_watches = managed::stop_idle_watches(ctx.clone(), shutdown.clone());
        let scalings = scaling::run(self.scalings, ctx, concurrency, shutdown);
        let controllers = futures::future::join4(claims, handles, pools, scalings);
        futures::future::join3(controllers, early_watches, idle_watches).await;
    }
}

/// Serves `/metrics`, `/healthz` and `/readyz` when asked to; ends with the server's error,
/// or `None` when it stopped with the operator.
fn serve_http(
    options: &RunOptions,
    metrics: &Arc<Metrics>,
    ready: &Arc<AtomicBool>,
    ctx: &Context,
    shutdown: &Shutdown,
) -> BoxFuture<'static, Option<Arc<std::io::Error>>> {
    let Some(address) = options.metrics_address else {
        return futures::future::pending().boxed();
    };
    let serve = http::serve(
        address,
        metrics.clone(),
        ready.clone(),
        ctx.health.clone(),
        shutdown.clone(),
    );
    tokio::spawn(serve)
        .map(|r| r.ok().and_then(Result::err).map(Arc::new))
        .boxed()
}

/// Serves the admission webhook when there is one; ends only when the server fails (it stops
/// with the operator).
fn serve_webhook(
    webhook: Option<WebhookServer>,
    ctx: &Arc<Context>,
    shutdown: &Shutdown,
) -> BoxFuture<'static, Arc<std::io::Error>> {
    let Some(webhook) = webhook else {
        return futures::future::pending().boxed();
    };
    tokio::spawn(webhook.serve(ctx.clone(), shutdown.clone()))
        .then(|served| match served {
            Ok(Ok(())) => futures::future::pending().boxed(),
            Ok(Err(error)) => futures::future::ready(Arc::new(error)).boxed(),
            Err(panic) => {
                futures::future::ready(Arc::new(std::io::Error::other(panic.to_string()))).boxed()
            }
        })
        .boxed()
}

/// Loads the providers, waiting for an API server that is away (restarting, not reachable
/// yet): exiting would only turn its restart into a crash loop of every replica. `false` when
/// the operator stops first.
async fn load_providers(ctx: &Context, shutdown: &Shutdown) -> bool {
    let mut delay = PROVIDERS_RETRY_FIRST;
    while let Err(error) = providers::load(ctx).await {
        tracing::warn!(%error, retry_in = ?delay, "cannot load the ResourceProviders yet");
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shutdown.clone() => return false,
        }
        delay = (delay * 2).min(PROVIDERS_RETRY_MAX);
    }
    true
}

/// Marks the operator ready once the handles are listed. Never `Store::wait_until_ready` on
/// a controller's own store: kube-runtime 5 wakes only the last of its concurrent waiters, and
/// each controller's runner waits on it too, so a second waiter could leave a controller that
/// never reconciles (and never stops). The claim controller's handle index has its own signal.
fn signal_ready(
    controllers: &Controllers,
    ready: Arc<AtomicBool>,
) -> impl std::future::Future<Output = ()> + use<> {
    let claim_index = controllers.claims.index();
    async move {
        claim_index.wait_until_listed().await;
        ready.store(true, Ordering::Relaxed);
        tracing::info!("providers loaded and handles listed; operator ready");
    }
}

/// The HTTP endpoint ended: with an error, or (`None`) because the operator is stopping.
fn server_ended(error: Option<Arc<std::io::Error>>) -> Result<(), RunError> {
    match error {
        Some(error) => Err(RunError::Http(std::io::Error::new(
            error.kind(),
            error.to_string(),
        ))),
        None => Ok(()),
    }
}
