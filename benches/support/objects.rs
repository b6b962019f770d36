//! The objects the benchmarks serve: a provider of ConfigMaps whose handles are ready as soon
//! as their ConfigMap exists, a pool of its handles, and claims of it.

use serde_json::{Value, json};

use crate::support::TestEnv;

/// Provider `name`: ConfigMaps labelled `bench/kind: <name>`, data ignored when matching.
pub fn provider(env: &TestEnv, name: &str) -> Value {
    json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceProvider",
        "metadata": {"name": name, "namespace": env.namespace},
        "spec": {
            "match": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"bench/kind": name}}},
            "matchIgnore": ["/data(/.*)?"],
            "override": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": env.namespace}},
            "readinessCheck": "metadata.uid is defined",
        },
    })
}

/// Pool `name` of `min_available` handles of the provider of the same name.
pub fn pool(env: &TestEnv, name: &str, min_available: usize) -> Value {
    json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourcePool",
        "metadata": {"name": name, "namespace": env.namespace},
        "spec": {
            "minAvailable": min_available,
            "resources": [{
                "provider": {
                    "apiVersion": "poolboy.gpte.redhat.com/v1",
                    "kind": "ResourceProvider",
                    "name": name,
                    "namespace": env.namespace,
                },
                "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"bench/kind": name}}},
            }],
        },
    })
}

/// Claim `name` in `namespace` of one ConfigMap of provider `kind`, its data naming the claim.
pub fn claim(namespace: &str, name: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "poolboy.gpte.redhat.com/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resources": [{
            "name": "config",
            "template": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"labels": {"bench/kind": kind}},
                "data": {"claim": name},
            },
        }]},
    })
}

/// The edit `make soak` makes to one claim in five: a key added to its ConfigMap's data. A
/// JSON patch: a merge patch would replace the whole resources list.
#[allow(dead_code)] // benches/claims.rs edits no claim
pub fn claim_edit() -> json_patch::Patch {
    let ops = json!([
        {"op": "add", "path": "/spec/resources/0/template/data/edited", "value": "yes"}
    ]);
    serde_json::from_value(ops).expect("a JSON patch")
}
