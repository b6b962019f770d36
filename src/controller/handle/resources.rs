//! Creating and updating one managed resource (§12.4 steps 6.6–6.7 and 9, Δ§3.2 Manage
//! steps 6 and 8): make sure its kind is watched (and Poolboy's ResourceWatch object exists,
//! Δ§2.2), then patch the live object with the filtered
//! diff or create it.

use kube::api::{DynamicObject, Patch};
use serde_json::Value;

use super::HandleError;
use crate::api::refs::ResourceReference;
use crate::controller::context::Context;
use crate::controller::echoes;
use crate::controller::managed::{self, InStore};
use crate::controller::write::{self, Target, Written};
use crate::core::json::patch::{diff, to_json_patch};
use crate::core::provider::CompiledProvider;
use crate::store::shared_watch::without_managed_fields;

/// How often a patch that lost a race (or a create that found the object) is retried on a
/// fresh read.
const ATTEMPTS: usize = 3;

/// A resource brought in line with its definition.
pub(super) struct Applied {
    /// Its live object afterwards.
    pub(super) state: Value,
    /// Whether this call created it.
    pub(super) created: bool,
}

/// Brings the resource `reference` in line with `definition`, starting from `known` (its live
/// object as last seen, if any).
pub(super) async fn apply(
    ctx: &Context,
    provider: &CompiledProvider,
    reference: &ResourceReference,
    definition: &Value,
    known: Option<Value>,
) -> Result<Applied, HandleError> {
    let existing = |state: Value| Applied {
        state,
        created: false,
    };
    managed::ensure_watch(ctx, reference).await?;
    managed::declare_watch(ctx, &managed::WatchKey::of(reference)).await;
    let api = managed::api_for(ctx, reference).await?;
    // Absent from a listed store: created without a GET first. An object the store has not
    // caught up with is a 409, read then; a GET first costs a request for every new resource
    // (one of the six requests a pool handle takes with it).
    let mut live = match known {
        Some(live) => Some(live),
        None => match managed::stored_state(ctx, reference).await {
            InStore::Found(state) => Some(state),
            InStore::Absent => None,
            InStore::Unknown => managed::fetch(ctx, reference).await?,
        },
    };
    for _ in 0..ATTEMPTS {
        let Some(current) = live.take() else {
            let object: DynamicObject = serde_json::from_value(definition.clone())?;
            let writing = echoes::writing_managed();
            match write::create(&api, &object).await? {
                Written::Done(mut created) => {
                    if let Some(writing) = writing {
                        writing.record(&created);
                    }
                    without_managed_fields(&mut created);
                    return Ok(Applied {
                        state: serde_json::to_value(created)?,
                        created: true,
                    });
                }
                // B13: someone (a previous pass whose store had not caught up) made it.
                Written::Conflict | Written::Gone => {
                    live = managed::fetch(ctx, reference).await?;
                    continue;
                }
            }
        };
        // §12.1–12.2: the live object → definition diff, through the provider's filters.
        let ops = provider.update_filters().filter(diff(&current, definition));
        if ops.is_empty() {
            return Ok(existing(current));
        }
        let mut patch = to_json_patch(&ops)?;
        // The live object may come from a store: apply the diff only to what it was made from.
        if let Some(test) = write::version_test_of_json(&current) {
            patch.0.insert(0, test);
        }
        let patch = Patch::Json::<()>(patch);
        let writing = echoes::writing_managed();
        match write::send(&api, &reference.name, Target::Object, &patch).await? {
            Written::Done(mut patched) => {
                write::record_replaced_state(&current, writing.as_ref());
                if let Some(writing) = writing {
                    writing.record(&patched);
                }
                without_managed_fields(&mut patched);
                tracing::info!(
                    kind = %reference.kind,
                    name = %reference.name,
                    ops = ops.len(),
                    "updated managed resource"
                );
                return Ok(existing(serde_json::to_value(patched)?));
            }
            Written::Gone => live = None,
            Written::Conflict => live = managed::fetch(ctx, reference).await?,
        }
    }
    Err(HandleError::ResourceContended(reference.name.clone()))
}
