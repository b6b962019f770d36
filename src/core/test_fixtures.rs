//! Objects for the core tests: written as YAML, read through the same serde types the
//! controller reads, with the clock pinned.

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::api::refs::ObjectRef;
use crate::api::{OperatorDomain, ResourceClaim, ResourceHandle, ResourcePool, ResourceProvider};
use crate::core::provider::schema::SchemaCache;
use crate::core::provider::{
    CompiledProvider, ProviderCatalog, ProviderCompiler, ProviderError, ProviderProblem,
};
use crate::core::template::{RenderContext, TemplateEngine};

/// The instant every test runs at.
pub(crate) fn now() -> DateTime<Utc> {
    at("2026-11-21T12:00:00Z")
}

pub(crate) fn at(timestamp: &str) -> DateTime<Utc> {
    timestamp.parse().expect("a test timestamp")
}

/// `t` as Kubernetes writes timestamps: RFC 3339, whole seconds, `Z`.
pub(crate) fn rfc3339(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A YAML document as JSON.
pub(crate) fn json_of(yaml: &str) -> Value {
    serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("bad test YAML: {e}\n{yaml}"))
}

/// A YAML document as a typed object, `apiVersion`/`kind` and the namespace filled in when
/// the test leaves them out.
fn object<T: DeserializeOwned>(yaml: &str, kind: &str, namespace: &str) -> T {
    object_of_json(json_of(yaml), kind, namespace)
}

/// [`object`] of a JSON value.
fn object_of_json<T: DeserializeOwned>(mut value: Value, kind: &str, namespace: &str) -> T {
    let what = value.to_string();
    let map = value.as_object_mut().expect("a mapping");
    map.entry("apiVersion")
        .or_insert_with(|| json!("poolboy.gpte.redhat.com/v1"));
    map.entry("kind").or_insert_with(|| json!(kind));
    let metadata = map.entry("metadata").or_insert_with(|| json!({}));
    if let Some(metadata) = metadata.as_object_mut() {
        metadata
            .entry("namespace")
            .or_insert_with(|| json!(namespace));
    }
    serde_json::from_value(value).unwrap_or_else(|e| panic!("bad test {kind}: {e}\n{what}"))
}

pub(crate) fn provider(yaml: &str) -> ResourceProvider {
    object(yaml, "ResourceProvider", "poolboy")
}

/// ResourceProvider `name` with `spec` given as JSON.
pub(crate) fn provider_with_spec(name: &str, spec: Value) -> ResourceProvider {
    object_of_json(
        json!({"metadata": {"name": name}, "spec": spec}),
        "ResourceProvider",
        "poolboy",
    )
}

/// A reference to ResourceProvider `name` of the operator namespace.
pub(crate) fn provider_ref(name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "poolboy.gpte.redhat.com/v1".into(),
        kind: "ResourceProvider".into(),
        name: name.into(),
        namespace: "poolboy".into(),
    }
}

pub(crate) fn claim(yaml: &str) -> ResourceClaim {
    object(yaml, "ResourceClaim", "user1")
}

pub(crate) fn handle(yaml: &str) -> ResourceHandle {
    object(yaml, "ResourceHandle", "poolboy")
}

pub(crate) fn pool(yaml: &str) -> ResourcePool {
    object(yaml, "ResourcePool", "poolboy")
}

/// ResourcePool `pool` of the operator namespace with `spec` given as JSON.
pub(crate) fn pool_with_spec(spec: Value) -> ResourcePool {
    object_of_json(
        json!({"metadata": {"name": "pool"}, "spec": spec}),
        "ResourcePool",
        "poolboy",
    )
}

/// A JSON object from YAML (parameter values, vars, …).
pub(crate) fn map_of(yaml: &str) -> Map<String, Value> {
    match json_of(yaml) {
        Value::Object(map) => map,
        other => panic!("not a mapping: {other}"),
    }
}

/// The shared pieces a broker decision needs.
pub(crate) struct Env {
    pub domain: OperatorDomain,
    pub templates: TemplateEngine,
    pub schemas: SchemaCache,
}

impl Env {
    pub(crate) fn new() -> Self {
        Self {
            domain: OperatorDomain::default(),
            templates: TemplateEngine::new(),
            schemas: SchemaCache::default(),
        }
    }

    pub(crate) fn compiler(&self) -> ProviderCompiler<'_> {
        ProviderCompiler {
            domain: &self.domain,
            templates: &self.templates,
            schemas: &self.schemas,
        }
    }

    /// A provider that must compile.
    pub(crate) fn compile(&self, yaml: &str) -> CompiledProvider {
        self.compiler()
            .compile(provider(yaml))
            .unwrap_or_else(|problems| panic!("provider does not compile: {problems:?}"))
    }

    /// The problems of a provider that must not compile.
    pub(crate) fn problems(&self, yaml: &str) -> Vec<ProviderProblem> {
        match self.compiler().compile(provider(yaml)) {
            Ok(_) => panic!("provider compiled:\n{yaml}"),
            Err(problems) => problems,
        }
    }

    pub(crate) fn catalog(&self, yamls: &[&str]) -> ProviderCatalog {
        ProviderCatalog::build(yamls.iter().map(|y| provider(y)), &self.compiler())
    }

    /// An empty render scope at [`now`].
    pub(crate) fn scope(&self) -> RenderContext {
        RenderContext::new(now(), &Map::new())
    }
}

/// A provider that the catalog must hold, compiled.
pub(crate) fn get<'a>(catalog: &'a ProviderCatalog, name: &str) -> &'a CompiledProvider {
    catalog
        .get(name)
        .map(AsRef::as_ref)
        .unwrap_or_else(|e: ProviderError| panic!("{e}"))
}

/// A patch as JSON, for comparing with a literal.
pub(crate) fn patch_json(patch: &json_patch::Patch) -> Value {
    serde_json::to_value(patch).expect("patches serialise")
}
