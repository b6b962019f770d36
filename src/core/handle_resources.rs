//! A handle with `spec.provider` generates its own `spec.resources` from the provider on every
//! reconcile (§9 "In the handle", Δ§3.2 step 4). This computes the patch that brings
//! `spec.resources` in line with what the provider generates now.

use json_patch::Patch;
use serde_json::json;

use super::bind::add;
use super::desired_resources::DesiredResource;
use super::patch::values_equal;

/// A generated resource whose provider differs from the one already at its index: Poolboy
/// logs "refusing" and patches anyway (§16); here the entry is left alone and reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderChangeRefused {
    pub index: usize,
    pub current: String,
    pub generated: String,
}

/// The patch to `spec.resources`: set it whole when absent; otherwise replace each template
/// that differs and append extra entries. Entries are never removed (Poolboy keeps resources
/// whose `when` turned false).
pub fn sync_generated_resources(
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
