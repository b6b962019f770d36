//! Keeps the compiled providers current. Providers are loaded completely before any controller
//! starts (a claim must never be told its provider is missing because the list had not
//! arrived yet); afterwards every change recompiles that provider, reports problems on the
//! provider itself (a `Valid` condition and an Event), and wakes the claims and handles that
//! use it. A replica standing by for the Lease only follows them, for its admission checks:
//! the holder reports.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::watcher::Event;
use serde_json::json;

use super::context::{Context, EventKind};
use super::write::{self, Target, Written};
use crate::api::kinds::{Kinds, ProviderObject};
use crate::core::conditions::{self, Change, VALID};
use crate::core::provider::status::provider_conditions;
use crate::core::provider::users;
use crate::core::provider::{ProviderError, ProviderProblem};

#[derive(Debug, thiserror::Error)]
pub(crate) enum ProviderWatchError {
    #[error("cannot list ResourceProviders: {0}")]
    List(#[source] kube::Error),
}

fn api(ctx: &Context) -> Api<ProviderObject> {
    Api::namespaced_with(
        ctx.client.clone(),
        &ctx.config.operator_namespace,
        &ctx.kinds.provider,
    )
}

/// Loads every provider of the operator namespace into the catalog.
pub(crate) async fn load(ctx: &Context) -> Result<(), ProviderWatchError> {
    let providers = api(ctx)
        .list(&ListParams::default())
        .await
        .map_err(ProviderWatchError::List)?;
    ctx.update_providers(|catalog, compiler| {
        for provider in &providers {
            catalog.insert(Kinds::provider_of(provider), compiler);
        }
        catalog.check_links();
    });
    ctx.mark_providers_listed();
    for provider in &providers {
        report(ctx, provider).await;
    }
    Ok(())
}

/// Follows provider changes until the stream ends (never, short of shutdown). A re-list (after
/// the watch was down, 410 Gone) drops the providers it no longer shows: deleted meanwhile,
/// their deletion never came as an event.
pub(crate) async fn watch(ctx: Arc<Context>) {
    follow_providers(&ctx, Role::Holder).await;
}

/// Keeps the catalog current without writing or waking anything: what a replica standing by
/// for the Lease answers admission reviews from. The catalog counts as listed once
/// the first list has been applied.
pub(crate) async fn follow(ctx: Arc<Context>) {
    follow_providers(&ctx, Role::Standby).await;
}

/// Whether this process acts on provider changes (reports them on the providers and wakes
/// their users) or only keeps its catalog.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Holder,
    Standby,
}

async fn follow_providers(ctx: &Context, role: Role) {
    let acting = role == Role::Holder;
    let config = crate::store::shared_watch::watch_config();
    let stream = ctx
        .health
        .watch("ResourceProvider".to_owned(), api(ctx), config);
    let mut stream = std::pin::pin!(stream);
    let mut relisted: HashSet<String> = HashSet::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::InitApply(provider)) => {
                relisted.insert(provider.name_any());
                changed(ctx, &provider, acting).await;
            }
            Ok(Event::Apply(provider)) => changed(ctx, &provider, acting).await,
            Ok(Event::Delete(provider)) => {
                write::forget_replaced(&provider);
                let name = provider.name_any();
                ctx.update_providers(|catalog, _| {
                    catalog.remove(&name);
                    catalog.check_links();
                });
                if acting {
                    wake_users(ctx, &name);
                }
            }
            Ok(Event::Init) => relisted.clear(),
            Ok(Event::InitDone) => {
                let gone = ctx.update_providers(|catalog, _| {
                    let gone = catalog.retain(|name| relisted.contains(name));
                    catalog.check_links();
                    gone
                });
                ctx.mark_providers_listed();
                if acting {
                    for name in gone {
                        tracing::info!(provider = %name, "ResourceProvider deleted while unwatched");
                        wake_users(ctx, &name);
                    }
                }
                relisted.clear();
            }
            Err(error) => tracing::warn!(%error, "ResourceProvider watch error; retrying"),
        }
    }
}

async fn changed(ctx: &Context, provider: &ProviderObject, acting: bool) {
    let name = provider.name_any();
    let unchanged = ctx.providers(|catalog| {
        catalog
            .get(&name)
            .is_ok_and(|compiled| compiled.resource().spec == provider.spec)
    });
    if unchanged {
        return;
    }
    ctx.update_providers(|catalog, compiler| {
        catalog.insert(Kinds::provider_of(provider), compiler);
        catalog.check_links();
    });
    if acting {
        report(ctx, provider).await;
        wake_users(ctx, &name);
    }
}

/// Writes the provider's `Valid` condition when it changed, with an Event for a new problem.
async fn report(ctx: &Context, provider: &ProviderObject) {
    let name = provider.name_any();
    let problems: Vec<ProviderProblem> = ctx.providers(|catalog| match catalog.get(&name) {
        Err(ProviderError::Invalid { problems, .. }) => problems,
        _ => Vec::new(),
    });
    let (conditions, change) = provider_conditions(
        provider.status.as_ref(),
        &problems,
        provider.metadata.generation,
        ctx.now(),
    );
    if change == Change::Unchanged {
        return;
    }
    // Guarded by the version the conditions were computed from: a provider that changed
    // meanwhile comes back with its own event, and is reported then.
    let patch = json!({ "status": { "conditions": &conditions } });
    match write::merge(&api(ctx), provider, Target::Status, &patch).await {
        Ok(Written::Done(_)) => {}
        Ok(Written::Conflict | Written::Gone) => return,
        Err(error) => {
            tracing::warn!(%error, provider = %name, "cannot write ResourceProvider status");
            return;
        }
    }
    if change.is_news()
        && let Some(problem) = conditions::problem(Some(&conditions), VALID)
    {
        ctx.metrics.invalid("ResourceProvider");
        ctx.event(
            provider,
            &ctx.kinds.provider,
            EventKind::Warning,
            "InvalidProvider",
            problem.to_owned(),
        )
        .await;
    }
}

/// Wakes the claims, handles and pools a change of provider `name` concerns
/// ([`crate::core::provider::users`]).
fn wake_users(ctx: &Context, name: &str) {
    for (namespace, claim) in ctx.stores.claim_summaries.concerned_by(name) {
        ctx.triggers.wake_claim(&namespace, &claim, &ctx.kinds);
    }
    // Every handle is decoded: a provider change is rare, and an index of each handle's
    // providers would cost memory for every handle all the time.
    for handle in ctx.stores.handles.store().state() {
        if let Ok(object) = handle.unpack()
            && users::concerns_handle(&object.spec, name)
        {
            ctx.triggers.wake_handle(&*handle, &ctx.kinds);
        }
    }
    for pool in ctx.stores.pools.state() {
        if users::concerns_pool(&pool.spec, name) {
            ctx.triggers.wake_pool(&pool, &ctx.kinds);
        }
    }
}
