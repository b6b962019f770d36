//! The Events a claim's passes publish on the claim: its milestones (`Bound`, `Ready`), a
//! changed lifespan, an end that draws near or was cut back, and bad input. Each comes from the
//! process whose status write made it so.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::{ClaimContext, Mirrored, binding, parse_end};
use crate::api::claim::ClaimStatusLifespan;
use crate::api::kinds::ClaimObject;
use crate::controller::context::EventKind;
use crate::core::claim::status::LifespanEvent;
use crate::core::conditions;
use crate::core::lifespan;
use crate::core::naming::claim_handle_name;

/// The Events of a changed lifespan end: a Warning when the end moved short of what the
/// claim asks for (the request was cut back), and the Normal `event`.
pub(super) async fn announce_lifespan_change(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    lifespan: &ClaimStatusLifespan,
    event: LifespanEvent,
) {
    let requested = parse_end(claim.spec.lifespan.as_ref().and_then(|l| l.end.as_deref()));
    if let (Some(requested), Some(end)) = (requested, parse_end(lifespan.end.as_deref()))
        && requested > end
    {
        warn_clamped(ctx, claim, requested, end, lifespan).await;
    }
    ctx.event_with_action(
        claim,
        &ctx.kinds.claim,
        EventKind::Normal,
        event.reason,
        "LifespanChange",
        event.note,
    )
    .await;
}

/// A Warning Event when the claim's `LifespanEnding` condition turns True or says a new lead
/// time was crossed, from the process whose write made it so.
pub(super) async fn warn_lifespan_ending(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    before: Option<&[Condition]>,
) {
    let after = claim.status.as_ref().and_then(|s| s.conditions.as_deref());
    if let Some(ending) = conditions::news(before, after, conditions::LIFESPAN_ENDING)
        .filter(|c| c.status == conditions::ConditionStatus::True.as_str())
    {
        let note = ending.message.clone();
        ctx.event(
            claim,
            &ctx.kinds.claim,
            EventKind::Warning,
            "LifespanEnding",
            note,
        )
        .await;
    }
}

/// A Warning Event when the end a claim asked for was cut back to the latest its lifespan
/// allows, naming the maximums that apply.
async fn warn_clamped(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    requested: DateTime<Utc>,
    end: DateTime<Utc>,
    lifespan: &ClaimStatusLifespan,
) {
    let limits: Vec<String> = [
        ("maximum", lifespan.maximum.as_deref()),
        ("relativeMaximum", lifespan.relative_maximum.as_deref()),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.map(|value| format!("{name} {value}")))
    .collect();
    let note = format!(
        "the requested end {} is past what the lifespan allows ({}): set to {}",
        lifespan::format_timestamp(requested),
        limits.join(", "),
        lifespan::format_timestamp(end)
    );
    ctx.event(
        claim,
        &ctx.kinds.claim,
        EventKind::Warning,
        "LifespanClamped",
        note,
    )
    .await;
}

/// Normal Events for the claim's milestones, from the process whose status write
/// reached them: `Bound` (saying where the handle came from, and why no existing handle
/// fitted when one was made for the claim) and `Ready`; one `Bound` that
/// says the resources are ready when one write reached both (a warm bind of a ready handle).
pub(super) async fn announce_milestones(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    before: Option<&[Condition]>,
    mirrored: &Mirrored<'_>,
) {
    let handle = mirrored.handle;
    let after = claim.status.as_ref().and_then(|s| s.conditions.as_deref());
    let name = handle.metadata.name.as_deref().unwrap_or_default();
    let warm = handle.spec.resource_pool.is_some();
    let age = claim
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|created| lifespan::seconds_since(created, ctx.now()));
    let bound = conditions::became_true(before, after, conditions::BOUND);
    let ready = conditions::became_true(before, after, conditions::READY);
    let ready_note = format!("the resources of ResourceHandle {name} are ready");
    if bound {
        let mut note = bound_note(
            handle,
            claim.metadata.uid.as_deref(),
            mirrored.created_because,
        );
        if ready {
            note = format!("{note}; {ready_note}");
        }
        ctx.event(claim, &ctx.kinds.claim, EventKind::Normal, "Bound", note)
            .await;
        if let Some(age) = age {
            ctx.metrics.claim_bound(warm, age);
        }
    }
    if ready {
        if !bound {
            ctx.event(
                claim,
                &ctx.kinds.claim,
                EventKind::Normal,
                "Ready",
                ready_note,
            )
            .await;
        }
        if let Some(age) = age {
            ctx.metrics.claim_ready(warm, age);
        }
    }
}

/// What the `Bound` Event says: where the handle came from (a pool, or made for the claim of
/// `claim_uid`), and why no existing handle fitted, when the pass that made it says.
fn bound_note(
    handle: &crate::api::ResourceHandle,
    claim_uid: Option<&str>,
    created_because: Option<&str>,
) -> String {
    let name = handle.metadata.name.as_deref().unwrap_or_default();
    let named_for_claim = claim_uid.is_some_and(|uid| claim_handle_name(uid) == name);
    match (&handle.spec.resource_pool, created_because) {
        (Some(pool), _) => format!(
            "bound to ResourceHandle {name} from ResourcePool {}",
            pool.name
        ),
        (None, Some(why)) => {
            format!("bound to ResourceHandle {name}, created for the claim because {why}")
        }
        (None, None) if named_for_claim => {
            format!("bound to ResourceHandle {name}, created for the claim")
        }
        (None, None) => format!("bound to ResourceHandle {name}"),
    }
}

/// A new bad-input message: logged, counted, and a Warning Event on the claim.
pub(super) async fn warn_invalid(ctx: &ClaimContext, claim: &ClaimObject, message: String) {
    tracing::warn!(claim = %binding::claim_key(claim), %message, "invalid claim");
    ctx.metrics.invalid("ResourceClaim");
    ctx.event(
        claim,
        &ctx.kinds.claim,
        EventKind::Warning,
        "InvalidClaim",
        message,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn handle(name: &str, pool: Option<&str>) -> crate::api::ResourceHandle {
        let mut handle = json!({"metadata": {"name": name}, "spec": {"resources": []}});
        if let Some(pool) = pool {
            handle["spec"]["resourcePool"] = json!({"apiVersion": "poolboy.gpte.redhat.com/v1", "kind": "ResourcePool",
                       "name": pool, "namespace": "poolboy"});
        }
        serde_json::from_value(handle).expect("a handle")
    }

    #[test]
    fn the_bound_event_says_where_the_handle_came_from() {
        let uid = "7c1d2e3f-4a5b-4c6d-8e9f-a0b1c2d3e4f5";
        let own = claim_handle_name(uid);
        assert_eq!(
            bound_note(&handle("guid-a", Some("labs")), Some(uid), None),
            "bound to ResourceHandle guid-a from ResourcePool labs"
        );
        assert_eq!(
            bound_note(&handle(&own, None), Some(uid), None),
            format!("bound to ResourceHandle {own}, created for the claim")
        );
        assert_eq!(
            bound_note(&handle("guid-b", None), Some(uid), None),
            "bound to ResourceHandle guid-b"
        );
        // Made under a generated name (the claim's own was taken), by the pass that knows why.
        assert_eq!(
            bound_note(
                &handle("guid-c", None),
                Some(uid),
                Some("no unbound ResourceHandle exists")
            ),
            "bound to ResourceHandle guid-c, created for the claim because no unbound \
             ResourceHandle exists"
        );
    }
}
