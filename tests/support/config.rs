//! `config`: one ConfigMap provider in the test namespace that claim templates labelled
//! [`KIND_LABEL`]`: config` match, and the claims and handles of it. The tests of binding
//! choices, concurrent edits, handle deletion, lifespans and restores share it.

use poolboy::api::{ResourceClaim, ResourceHandle};
use serde_json::{Value, json};

use super::fixtures::await_object;
use super::objects::{self, D};
use super::{TestEnv, from_json};

/// The label the `config` provider matches claim templates by.
pub const KIND_LABEL: &str = "fixes.poolboy.test/kind";

/// A ConfigMap template the `config` provider matches, with `data`.
pub fn template(data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"labels": {KIND_LABEL: "config"}},
        "data": data,
    })
}

/// `config`: the provider of ConfigMaps in the test namespace, matched by [`KIND_LABEL`],
/// `data` ignored for matching and let through by its update filter. Ready once the
/// ConfigMap is labelled `ready: yes` when `gated`, else as soon as it exists.
pub async fn create_config_provider(env: &TestEnv, gated: bool) {
    let readiness = match gated {
        true => "metadata.labels.ready | default('no') == 'yes'",
        false => "metadata.uid is defined",
    };
    let spec = json!({
        "match": {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"labels": {KIND_LABEL: "config"}}},
        "matchIgnore": ["/data(/.*)?"],
        "updateFilters": [{"pathMatch": "/data/.*"}],
        "readinessCheck": readiness,
    });
    env.create(&objects::configmap_provider(&env.namespace, "config", spec))
        .await;
}

/// `spec.resources` of a handle: one `config` resource per `(name, data)`.
pub fn config_resources(env: &TestEnv, entries: &[(&str, Value)]) -> Value {
    let entries: Vec<(&str, &str, Value)> = entries
        .iter()
        .map(|(name, data)| (*name, "config", template(data.clone())))
        .collect();
    objects::resources(&env.namespace, &entries)
}

/// A resources claim with one `config` resource named `config`, with `metadata` and
/// `spec_extra` merged in.
pub async fn create_config_claim(
    env: &TestEnv,
    name: &str,
    metadata: Value,
    spec_extra: Value,
    data: Value,
) {
    let mut claim = json!({
        "apiVersion": format!("{D}/v1"), "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": {"resources": [{"name": "config", "template": template(data)}]},
    });
    claim["metadata"]["name"] = json!(name);
    if let (Some(spec), Some(extra)) = (claim["spec"].as_object_mut(), spec_extra.as_object()) {
        spec.extend(extra.clone());
    }
    env.create::<ResourceClaim>(&from_json(claim)).await;
}

/// Waits until handle `name` reports every resource referenced and the handle ready.
pub async fn ready_handle(env: &TestEnv, name: &str) -> Value {
    await_object(&env.api::<ResourceHandle>(), name, "ready", |h| {
        let resources = h["status"]["resources"].as_array();
        h["status"]["ready"] == true
            && resources.is_some_and(|r| r.iter().all(|r| r["reference"]["name"].is_string()))
    })
    .await
}
