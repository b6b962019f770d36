//! ResourceProvider: how to validate, default, template and update one kind of resource
//! (§3.4). Providers live in the operator namespace and are written by platform admins.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::refs::LifespanSettings;

// kube-derive takes one `printcolumn` attribute per column; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "poolboy.gpte.redhat.com",
    version = "v1",
    doc = "How to validate, default, template and update one kind of resource.",
    kind = "ResourceProvider",
    namespaced,
    status = "ResourceProviderStatus",
    category = "poolboy",
    shortname = "pbprovider",
    printcolumn(
        name = "Api Version",
        type_ = "string",
        json_path = ".spec.override.apiVersion"
    ),
    printcolumn(name = "Kind", type_ = "string", json_path = ".spec.override.kind"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceProviderSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ProviderApproval>,
    /// Deep-merged without overwriting into claim templates at initialisation (§6.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::free_object")]
    pub default: Option<Value>,
    /// Claims never create handles through this provider; they only bind existing ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_creation: Option<bool>,
    /// The most claims of one namespace that may hold a handle through this provider at once
    /// (not in Poolboy 1.17); a claim beyond it waits, saying so, until one of them goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_claims_per_namespace: Option<i64>,
    /// Jinja2 boolean expression over the live resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifespan: Option<LifespanSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linked_resource_providers: Option<Vec<LinkedResourceProvider>>,
    /// Partial definition that selects this provider for a claim template (§6.2).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "match")]
    #[schemars(schema_with = "super::schema::free_object")]
    pub match_: Option<Value>,
    /// JSON-pointer regexes ignored when matching a claim to a pooled handle (§7.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_ignore: Option<Vec<String>>,
    /// Deep-merged with overwrite over the handle template to give the definition (§12.3).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "override")]
    #[schemars(schema_with = "super::schema::free_object")]
    pub override_: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Vec<Parameter>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_check: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_annotations: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_labels: Option<BTreeMap<String, String>>,
    /// Name of the resource entry this provider generates; default the provider name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
    /// Do not create the resource until the handle is bound (§11.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_requires_claim: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::free_object")]
    pub status_summary_template: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<ProviderTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_filters: Option<Vec<UpdateFilter>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::free_object")]
    pub vars: Option<Map<String, Value>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderApproval {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Default "Approval pending.".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_message: Option<String>,
}

/// A dependency on another provider (§9).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkedResourceProvider {
    pub name: String,
    /// Each value is a template rendered with the parent's parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::free_object")]
    pub parameter_values: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_vars: Option<Vec<TemplateVar>>,
    /// Condition on the linked resource's state; the dependent waits until it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for: Option<String>,
    /// Condition; when false the linked provider is left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateVar {
    /// A JSON pointer into the linked resource's live state.
    pub from: String,
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Parameter {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_update: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<ParameterDefault>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParameterDefault {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::free_value")]
    pub value: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Validation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<Vec<ValidationCheck>>,
    /// An OpenAPI 3.0 schema, as Poolboy's OAS30 validator reads it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "openAPIV3Schema"
    )]
    #[schemars(schema_with = "super::schema::free_object")]
    pub open_api_v3_schema: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidationCheck {
    pub name: String,
    pub check: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderTemplate {
    /// Rendered with the parameters into the resource template; always rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::free_object")]
    pub definition: Option<Value>,
    /// Enables Jinja2 in `default` and `override`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<TemplateStyle>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TemplateStyle {
    Jinja2,
}

/// Which handle → resource changes may be patched onto an existing resource (§12.2).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateFilter {
    pub path_match: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_ops: Option<Vec<String>>,
}

/// Not in Poolboy (which has no provider status): where this broker reports a provider that
/// does not compile (bad template, regex or schema), so its author sees it on the object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ResourceProviderStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

impl ResourceProviderSpec {
    /// `spec.template.enable`: whether `default` and `override` are Jinja2 templates.
    pub fn template_enabled(&self) -> bool {
        self.template
            .as_ref()
            .and_then(|t| t.enable)
            .unwrap_or(false)
    }
}
