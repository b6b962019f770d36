//! A handle with `spec.provider` generates its own `spec.resources` from the provider on every
//! reconcile (§9 "In the handle", Δ§3.2 step 4). This computes the patch that brings
//! `spec.resources` in line with what the provider generates now.

use json_patch::Patch;
use serde_json::json;

use crate::core::handle::desired::DesiredResource;
use crate::core::json::patch::values_equal;
use crate::core::json::pointer::add;

/// A generated resource whose provider differs from the one already at its index: Poolboy
/// logs "refusing" and patches anyway (§16); here the entry is left alone and reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProviderChangeRefused {
    pub index: usize,
    pub current: String,
    pub generated: String,
}

/// The patch to `spec.resources`: set it whole when absent; otherwise replace each template
/// that differs and append extra entries. Entries are never removed (Poolboy keeps resources
/// whose `when` turned false).
pub(crate) fn sync_generated_resources(
    current: Option<&[crate::api::handle::HandleResource]>,
    generated: &[DesiredResource],
) -> (Patch, Vec<ProviderChangeRefused>) {
    let entry = |r: &DesiredResource| json!({ "name": r.name, "provider": r.provider, "template": r.template });
    let Some(current) = current else {
        let all: Vec<_> = generated.iter().map(entry).collect();
        return (
            Patch(vec![add(&["spec", "resources"], json!(all))]),
            Vec::new(),
        );
    };
    let mut ops = Vec::new();
    let mut refused = Vec::new();
    for (index, resource) in generated.iter().enumerate() {
        let Some(existing) = current.get(index) else {
            ops.push(add(&["spec", "resources", "-"], entry(resource)));
            continue;
        };
        if existing.provider.name != resource.provider.name {
            refused.push(ProviderChangeRefused {
                index,
                current: existing.provider.name.clone(),
                generated: resource.provider.name.clone(),
            });
            continue;
        }
        let same = existing
            .template
            .as_ref()
            .is_some_and(|t| values_equal(t, &resource.template));
        if !same {
            let index_text = index.to_string();
            ops.push(add(
                &["spec", "resources", &index_text, "template"],
                resource.template.clone(),
            ));
        }
    }
    (Patch(ops), refused)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::api::handle::HandleResource;
    use crate::core::test_fixtures::{patch_json, provider_ref};

    fn generated(name: &str, provider: &str, template: Value) -> DesiredResource {
        DesiredResource {
            name: name.into(),
            provider: provider_ref(provider),
            template,
        }
    }

    fn existing(provider: &str, template: Option<Value>) -> HandleResource {
        HandleResource {
            name: Some(provider.into()),
            provider: provider_ref(provider),
            reference: None,
            template,
        }
    }

    #[test]
    fn absent_resources_are_set_whole() {
        let (patch, refused) = sync_generated_resources(
            None,
            &[
                generated("ns", "namespace", json!({"a": 1})),
                generated("cfg", "config", json!({})),
            ],
        );
        assert!(refused.is_empty());
        assert_eq!(
            patch_json(&patch),
            json!([{"op": "add", "path": "/spec/resources", "value": [
                {"name": "ns", "provider": provider_ref("namespace"), "template": {"a": 1}},
                {"name": "cfg", "provider": provider_ref("config"), "template": {}},
            ]}])
        );
    }

    #[test]
    fn differing_templates_are_replaced_and_extra_entries_appended() {
        let current = [
            existing("namespace", Some(json!({"a": 1}))),
            existing("config", Some(json!({"b": 1}))),
            existing("secret", None),
        ];
        let (patch, refused) = sync_generated_resources(
            Some(&current),
            &[
                // Python equality: 1.0 == 1, so no change.
                generated("namespace", "namespace", json!({"a": 1.0})),
                generated("config", "config", json!({"b": 2})),
                generated("secret", "secret", json!({})),
                generated("extra", "extra", json!({"c": 3})),
            ],
        );
        assert!(refused.is_empty());
        assert_eq!(
            patch_json(&patch),
            json!([
                {"op": "add", "path": "/spec/resources/1/template", "value": {"b": 2}},
                {"op": "add", "path": "/spec/resources/2/template", "value": {}},
                {"op": "add", "path": "/spec/resources/-", "value": {
                    "name": "extra", "provider": provider_ref("extra"), "template": {"c": 3},
                }},
            ])
        );
    }

    #[test]
    fn entries_are_never_removed() {
        // A `when` that turned false drops a generated entry; the handle keeps it.
        let current = [
            existing("a", Some(json!({}))),
            existing("b", Some(json!({}))),
        ];
        let (patch, _) =
            sync_generated_resources(Some(&current), &[generated("a", "a", json!({}))]);
        assert_eq!(patch_json(&patch), json!([]));
    }

    #[test]
    fn a_provider_change_at_an_index_is_refused_and_left_alone() {
        let current = [
            existing("a", Some(json!({"x": 1}))),
            existing("b", Some(json!({}))),
        ];
        let (patch, refused) = sync_generated_resources(
            Some(&current),
            &[
                generated("a", "other", json!({"x": 2})),
                generated("b", "b", json!({"y": 1})),
            ],
        );
        assert_eq!(
            refused,
            vec![ProviderChangeRefused {
                index: 0,
                current: "a".into(),
                generated: "other".into(),
            }]
        );
        assert_eq!(
            patch_json(&patch),
            json!([{"op": "add", "path": "/spec/resources/1/template", "value": {"y": 1}}])
        );
    }
}
