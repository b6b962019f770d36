//! ResourceProvider: how to validate, default, template and update one kind of resource
//! (§3.4). Providers live in the operator namespace and are written by platform admins.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::refs::LifespanSettings;

// kube-derive takes one `printcolumn` attribute per column; clippy reads them as duplicates.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
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
    pub approval: Option<ProviderApproval>,
    /// Deep-merged without overwriting into claim templates at initialisation (§6.3).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub default: Option<Value>,
    /// Claims never create handles through this provider; they only bind existing ones.
    pub disable_creation: Option<bool>,
    /// The most claims of one namespace that may hold a handle through this provider at once
    /// (not in Poolboy 1.17); a claim beyond it waits, saying so, until one of them goes.
    #[schemars(range(min = 0))]
    pub max_claims_per_namespace: Option<i64>,
    /// Jinja2 boolean expression over the live resource.
    pub health_check: Option<String>,
    pub lifespan: Option<LifespanSettings>,
    pub linked_resource_providers: Option<Vec<LinkedResourceProvider>>,
    /// Partial definition that selects this provider for a claim template (§6.2).
    #[serde(rename = "match", default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub match_: Option<Value>,
    /// JSON-pointer regexes ignored when matching a claim to a pooled handle (§7.1).
    pub match_ignore: Option<Vec<String>>,
    /// Deep-merged with overwrite over the handle template to give the definition (§12.3).
    #[serde(rename = "override", default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub override_: Option<Value>,
    pub parameters: Option<Vec<Parameter>>,
    pub readiness_check: Option<String>,
    pub resource_claim_annotations: Option<BTreeMap<String, String>>,
    pub resource_claim_labels: Option<BTreeMap<String, String>>,
    /// Name of the resource entry this provider generates; default the provider name.
    pub resource_name: Option<String>,
    /// Do not create the resource until the handle is bound (§11.10).
    pub resource_requires_claim: Option<bool>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub status_summary_template: Option<Value>,
    pub template: Option<ProviderTemplate>,
    pub update_filters: Option<Vec<UpdateFilter>>,
    pub validation: Option<Validation>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub vars: Option<Map<String, Value>>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderApproval {
    pub required: Option<bool>,
    /// Default "Approval pending.".
    pub pending_message: Option<String>,
}

/// A dependency on another provider (§9).
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkedResourceProvider {
    pub name: String,
    /// Each value is a template rendered with the parent's parameters.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub parameter_values: Option<Map<String, Value>>,
    pub resource_name: Option<String>,
    pub template_vars: Option<Vec<TemplateVar>>,
    /// Condition on the linked resource's state; the dependent waits until it holds.
    pub wait_for: Option<String>,
    /// Condition; when false the linked provider is left out.
    pub when: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateVar {
    /// A JSON pointer into the linked resource's live state.
    pub from: String,
    pub name: String,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Parameter {
    pub name: String,
    pub allow_update: Option<bool>,
    pub required: Option<bool>,
    pub default: Option<ParameterDefault>,
    pub validation: Option<Validation>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParameterDefault {
    pub template: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_value")]
    pub value: Option<Value>,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Validation {
    pub checks: Option<Vec<ValidationCheck>>,
    /// An OpenAPI 3.0 schema, as Poolboy's OAS30 validator reads it.
    #[serde(rename = "openAPIV3Schema", default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub open_api_v3_schema: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidationCheck {
    pub name: String,
    pub check: String,
}

#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderTemplate {
    /// Rendered with the parameters into the resource template; always rendered.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::free_object")]
    pub definition: Option<Value>,
    /// Enables Jinja2 in `default` and `override`.
    pub enable: Option<bool>,
    pub style: Option<TemplateStyle>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TemplateStyle {
    Jinja2,
}

/// Which handle → resource changes may be patched onto an existing resource (§12.2).
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateFilter {
    pub path_match: String,
    pub allowed_ops: Option<Vec<String>>,
}

/// Not in Poolboy (which has no provider status): where this broker reports a provider that
/// does not compile (bad template, regex or schema), so its author sees it on the object.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ResourceProviderStatus {
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
