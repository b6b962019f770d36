//! A status the API server refuses for its size: a claim near the object size limit
//! whose status would copy parts of it (resource templates, the states of large resources)
//! cannot be stored. Retrying the same write fails the same way, so the object gets what does
//! fit: its `Valid` condition False with the API server's reason, and a Warning Event; the
//! reconcile then waits for a change to the object instead of retrying.

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::Api;
use kube::core::ApiResource;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::context::{Context, EventKind};
use super::write::{self, Target};
use crate::core::conditions::{ConditionStatus, DesiredCondition, VALID, set_condition};

/// The reason of the condition and of the Event.
const REASON: &str = "StatusTooLarge";

/// Whether an API error says the written object would exceed what the API server stores: 413
/// (the request body), etcd's "request is too large" (the object), or a 422 for a field over
/// its length limit.
pub(crate) fn is_too_large(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            status.code == 413
                || (status.code == 500 && status.message.contains("request is too large"))
                || (status.code == 422 && status.message.contains("Too long"))
        }
        _ => false,
    }
}

/// Reports on `object` that its status could not be written because of `error`: `Valid`
/// False (reason `StatusTooLarge`) and, when that is news, a Warning Event. Best effort: a
/// failure here is logged, the reconcile's outcome stays the same.
pub(crate) async fn report<K>(
    ctx: &Context,
    api: &Api<K>,
    object: &K,
    kind: &ApiResource,
    conditions: Option<&[Condition]>,
    error: &kube::Error,
) where
    K: Resource<DynamicType = ApiResource> + Clone + DeserializeOwned + Debug,
{
    let message = format!(
        "the status could not be written, the object would be too large ({}); \
         make the object smaller (resource templates, parameter values)",
        api_message(error)
    );
    let mut updated = conditions.map(<[Condition]>::to_vec).unwrap_or_default();
    let change = set_condition(
        &mut updated,
        DesiredCondition {
            type_: VALID,
            status: ConditionStatus::False,
            reason: REASON,
            message: message.clone(),
            observed_generation: object.meta().generation,
        },
        ctx.now(),
    );
    let name = object.name_any();
    tracing::warn!(%name, kind = %kind.kind, error = %api_message(error), "status too large to write");
    if change.is_news() {
        ctx.event(object, kind, EventKind::Warning, REASON, message)
            .await;
    }
    let patch = json!({ "status": { "conditions": updated } });
    if let Err(error) = write::merge(api, object, Target::Status, &patch).await {
        tracing::warn!(%name, %error, "cannot write the StatusTooLarge condition");
    }
}

fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} {}", status.code, status.message),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::Status;

    fn api_error(code: u16, message: &str) -> kube::Error {
        let status: Status = serde_json::from_value(
            json!({"status": "Failure", "message": message, "reason": "", "code": code}),
        )
        .expect("a Status");
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn only_size_refusals_are_too_large() {
        assert!(is_too_large(&api_error(
            500,
            "etcdserver: request is too large"
        )));
        assert!(is_too_large(&api_error(413, "Request Entity Too Large")));
        assert!(is_too_large(&api_error(
            422,
            "status.summary: Too long: may not be more than 262144 bytes"
        )));
        assert!(!is_too_large(&api_error(500, "etcdserver: leader changed")));
        assert!(!is_too_large(&api_error(422, "the test operation failed")));
        assert!(!is_too_large(&api_error(409, "conflict")));
    }
}
