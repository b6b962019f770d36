//! ResourceProviders, compiled once: regexes, schemas and template syntax are checked when a
//! provider is added, so a broken provider is reported on its own (every problem at once) and
//! claims that use it get a clear message instead of a failure deep inside a reconcile.

pub(crate) mod schema;
pub(crate) mod status;
pub(crate) mod users;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::api::refs::ObjectRef;
use crate::api::{OperatorDomain, ResourceProvider};
use crate::core::binding::matching::{self, MatchIgnore};
use crate::core::json::patch::UpdateFilters;
use crate::core::provider::schema::{OpenApiSchema, SchemaCache};
use crate::core::template::view::provider_value;
use crate::core::template::{TemplateEngine, TemplateValue};

/// One thing wrong with a provider, located by its path in the provider's spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProviderProblem {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ProviderProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Why a claim or handle cannot use a provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProviderError {
    #[error("ResourceProvider {0} not found")]
    NotFound(String),
    #[error("ResourceProvider {name} is invalid: {}", join(problems))]
    Invalid {
        name: String,
        problems: Vec<ProviderProblem>,
    },
    #[error("Unable to match template to ResourceProvider")]
    NoMatch,
    #[error("Resource template matches multiple ResourceProviders: {}", .0.join(", "))]
    AmbiguousMatch(Vec<String>),
}

fn join(problems: &[ProviderProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A provider whose regexes and schemas compiled and whose templates parse.
#[derive(Debug)]
pub(crate) struct CompiledProvider {
    provider: ResourceProvider,
    name: String,
    namespace: String,
    update_filters: UpdateFilters,
    match_ignore: MatchIgnore,
    template_schema: Option<Arc<OpenApiSchema>>,
    parameter_schemas: BTreeMap<String, Arc<OpenApiSchema>>,
    /// `resource_provider` as templates see it: built on a template's first read, then shared
    /// by every render while this version of the provider lasts.
    view: TemplateValue,
}

impl CompiledProvider {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn resource(&self) -> &ResourceProvider {
        &self.provider
    }

    /// `resource_provider` as templates see it (§5.7).
    pub(crate) fn view(&self) -> &TemplateValue {
        &self.view
    }

    pub(crate) fn spec(&self) -> &crate::api::provider::ResourceProviderSpec {
        &self.provider.spec
    }

    /// `{apiVersion: D/v1, kind: ResourceProvider, name, namespace}`.
    pub(crate) fn reference(&self, domain: &OperatorDomain) -> ObjectRef {
        ObjectRef {
            api_version: domain.api_version(),
            kind: "ResourceProvider".to_owned(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
        }
    }

    pub(crate) fn update_filters(&self) -> &UpdateFilters {
        &self.update_filters
    }

    pub(crate) fn match_ignore(&self) -> &MatchIgnore {
        &self.match_ignore
    }

    /// `spec.validation.openAPIV3Schema`, compiled.
    pub(crate) fn template_schema(&self) -> Option<&OpenApiSchema> {
        self.template_schema.as_deref()
    }

    /// A parameter's `validation.openAPIV3Schema`, compiled.
    pub(crate) fn parameter_schema(&self, parameter: &str) -> Option<&OpenApiSchema> {
        self.parameter_schemas.get(parameter).map(Arc::as_ref)
    }

    /// The entry name this provider's own resource gets: `resourceName`, else its name (§9).
    pub(crate) fn resource_name(&self) -> &str {
        self.provider
            .spec
            .resource_name
            .as_deref()
            .unwrap_or(&self.name)
    }
}

/// What compiling a provider needs: the shared template engine and schema cache.
pub(crate) struct ProviderCompiler<'a> {
    pub domain: &'a OperatorDomain,
    pub templates: &'a TemplateEngine,
    pub schemas: &'a SchemaCache,
}

impl ProviderCompiler<'_> {
    /// Compiles a provider, or returns every problem found in it.
    pub(crate) fn compile(
        &self,
        provider: ResourceProvider,
    ) -> Result<CompiledProvider, Vec<ProviderProblem>> {
        let mut problems = Vec::new();
        let spec = &provider.spec;
        let mut problem =
            |path: String, message: String| problems.push(ProviderProblem { path, message });

        let update_filters =
            UpdateFilters::compile(spec.update_filters.as_deref().unwrap_or(&[]), self.domain)
                .map_err(|e| problem("spec.updateFilters".into(), e.to_string()))
                .ok();
        let match_ignore = MatchIgnore::compile(spec.match_ignore.as_deref().unwrap_or(&[]))
            .map_err(|e| problem("spec.matchIgnore".into(), e.to_string()))
            .ok();

        let validation = spec.validation.as_ref();
        let template_schema = validation
            .and_then(|v| v.open_api_v3_schema.as_ref())
            .and_then(|schema| {
                self.schemas
                    .get_or_compile(schema)
                    .map_err(|e| problem("spec.validation.openAPIV3Schema".into(), e.to_string()))
                    .ok()
            });
        let mut parameter_schemas = BTreeMap::new();
        let mut parameter_names = std::collections::BTreeSet::new();
        for (i, parameter) in spec.parameters.iter().flatten().enumerate() {
            if !parameter_names.insert(&parameter.name) {
                problem(
                    format!("spec.parameters[{i}].name"),
                    format!("duplicate parameter {}", parameter.name),
                );
            }
            let schema = parameter
                .validation
                .as_ref()
                .and_then(|v| v.open_api_v3_schema.as_ref());
            if let Some(schema) = schema {
                match self.schemas.get_or_compile(schema) {
                    Ok(compiled) => {
                        parameter_schemas.insert(parameter.name.clone(), compiled);
                    }
                    Err(e) => problem(
                        format!("spec.parameters[{i}].validation.openAPIV3Schema"),
                        e.to_string(),
                    ),
                }
            }
        }

        for (path, source) in template_sources(&provider) {
            if let Err(e) = self.templates.check_syntax(&source) {
                problem(path, e.to_string());
            }
        }

        match (update_filters, match_ignore) {
            (Some(update_filters), Some(match_ignore)) if problems.is_empty() => {
                Ok(CompiledProvider {
                    view: provider_value(&provider, self.domain),
                    name: provider.metadata.name.clone().unwrap_or_default(),
                    namespace: provider.metadata.namespace.clone().unwrap_or_default(),
                    provider,
                    update_filters,
                    match_ignore,
                    template_schema,
                    parameter_schemas,
                })
            }
            _ => Err(problems),
        }
    }
}

/// Every template string of a provider with its path, conditions already wrapped the way they
/// are evaluated (§5.6), so that one syntax check covers them all.
fn template_sources(provider: &ResourceProvider) -> Vec<(String, String)> {
    let spec = &provider.spec;
    let mut sources = Vec::new();
    let condition = |c: &str| format!("{{{{ ({c}) | bool }}}}");

    let mut strings_in = |path: &str, value: Option<&Value>| {
        if let Some(value) = value {
            collect_strings(path, value, &mut sources);
        }
    };
    strings_in(
        "spec.template.definition",
        spec.template.as_ref().and_then(|t| t.definition.as_ref()),
    );
    if spec.template_enabled() {
        strings_in("spec.default", spec.default.as_ref());
        strings_in("spec.override", spec.override_.as_ref());
    }
    strings_in(
        "spec.statusSummaryTemplate",
        spec.status_summary_template.as_ref(),
    );
    let vars = spec.vars.clone().map(Value::Object);
    strings_in("spec.vars", vars.as_ref());
    if let Some(lifespan) = &spec.lifespan {
        for (field, value) in [
            ("default", &lifespan.default),
            ("maximum", &lifespan.maximum),
            ("relativeMaximum", &lifespan.relative_maximum),
        ] {
            if let Some(value) = value {
                sources.push((format!("spec.lifespan.{field}"), value.clone()));
            }
        }
    }
    for (field, check) in [
        ("healthCheck", &spec.health_check),
        ("readinessCheck", &spec.readiness_check),
    ] {
        if let Some(check) = check {
            sources.push((format!("spec.{field}"), condition(check)));
        }
    }
    let checks = spec.validation.as_ref().and_then(|v| v.checks.as_ref());
    for (i, check) in checks.into_iter().flatten().enumerate() {
        sources.push((
            format!("spec.validation.checks[{i}].check"),
            condition(&check.check),
        ));
    }
    for (i, parameter) in spec.parameters.iter().flatten().enumerate() {
        let default = parameter.default.as_ref().and_then(|d| d.template.as_ref());
        if let Some(template) = default {
            sources.push((
                format!("spec.parameters[{i}].default.template"),
                template.clone(),
            ));
        }
        let checks = parameter
            .validation
            .as_ref()
            .and_then(|v| v.checks.as_ref());
        for (j, check) in checks.into_iter().flatten().enumerate() {
            sources.push((
                format!("spec.parameters[{i}].validation.checks[{j}].check"),
                condition(&check.check),
            ));
        }
    }
    for (i, link) in spec.linked_resource_providers.iter().flatten().enumerate() {
        for (field, check) in [("when", &link.when), ("waitFor", &link.wait_for)] {
            if let Some(check) = check {
                sources.push((
                    format!("spec.linkedResourceProviders[{i}].{field}"),
                    condition(check),
                ));
            }
        }
        if let Some(values) = &link.parameter_values {
            for (name, value) in values {
                collect_strings(
                    &format!("spec.linkedResourceProviders[{i}].parameterValues.{name}"),
                    value,
                    &mut sources,
                );
            }
        }
    }
    sources
}

fn collect_strings(path: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::String(s) => out.push((path.to_owned(), s.clone())),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect_strings(&format!("{path}[{i}]"), item, out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                collect_strings(&format!("{path}.{key}"), item, out);
            }
        }
        _ => {}
    }
}

/// The providers of the operator namespace by name, each compiled or with its problems.
#[derive(Debug, Default)]
pub(crate) struct ProviderCatalog {
    providers: BTreeMap<String, Entry>,
}

#[derive(Debug)]
struct Entry {
    compiled: Result<Arc<CompiledProvider>, Vec<ProviderProblem>>,
    /// Links to providers the catalog does not hold, as of the last [`ProviderCatalog::check_links`];
    /// kept apart from `compiled` so that the provider recovers when they arrive.
    missing_links: Vec<ProviderProblem>,
    /// `spec.match`, kept even for a broken provider so that a claim it would match is told
    /// the provider is broken rather than that nothing matches.
    match_spec: Option<Value>,
}

impl ProviderCatalog {
    /// Compiles `providers`; then checks that every linked provider exists (§9).
    pub(crate) fn build(
        providers: impl IntoIterator<Item = ResourceProvider>,
        compiler: &ProviderCompiler<'_>,
    ) -> Self {
        let mut catalog = Self::default();
        for provider in providers {
            catalog.insert(provider, compiler);
        }
        catalog.check_links();
        catalog
    }

    /// Adds or replaces one provider (the controller calls this on every provider event).
    pub(crate) fn insert(&mut self, provider: ResourceProvider, compiler: &ProviderCompiler<'_>) {
        let name = provider.metadata.name.clone().unwrap_or_default();
        let match_spec = provider.spec.match_.clone();
        let compiled = compiler.compile(provider).map(Arc::new);
        self.providers.insert(
            name,
            Entry {
                compiled,
                missing_links: Vec::new(),
                match_spec,
            },
        );
    }

    pub(crate) fn remove(&mut self, name: &str) {
        self.providers.remove(name);
    }

    /// Removes every provider `keep` rejects (those a re-list no longer shows) and returns
    /// their names.
    pub(crate) fn retain(&mut self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let gone: Vec<String> = self
            .providers
            .keys()
            .filter(|name| !keep(name))
            .cloned()
            .collect();
        for name in &gone {
            self.providers.remove(name);
        }
        gone
    }

    /// Marks providers whose linked providers are missing as invalid, and those whose missing
    /// links have arrived since as valid again.
    pub(crate) fn check_links(&mut self) {
        let known: Vec<String> = self.providers.keys().cloned().collect();
        for entry in self.providers.values_mut() {
            let Ok(compiled) = &entry.compiled else {
                continue;
            };
            let links = compiled.spec().linked_resource_providers.iter().flatten();
            entry.missing_links = links
                .enumerate()
                .filter(|(_, link)| !known.contains(&link.name))
                .map(|(i, link)| ProviderProblem {
                    path: format!("spec.linkedResourceProviders[{i}].name"),
                    message: format!("ResourceProvider {} not found", link.name),
                })
                .collect();
        }
    }

    /// The provider called `name`.
    pub(crate) fn get(&self, name: &str) -> Result<&Arc<CompiledProvider>, ProviderError> {
        let entry = self
            .providers
            .get(name)
            .ok_or_else(|| ProviderError::NotFound(name.to_owned()))?;
        entry.checked().map_err(|problems| ProviderError::Invalid {
            name: name.to_owned(),
            problems: problems.to_vec(),
        })
    }

    /// The one provider whose `match` fits `template` (§6.2).
    pub(crate) fn find_by_match(
        &self,
        template: &Value,
    ) -> Result<&Arc<CompiledProvider>, ProviderError> {
        let matches: Vec<&String> = self
            .providers
            .iter()
            .filter(|(_, entry)| {
                entry
                    .match_spec
                    .as_ref()
                    .is_some_and(|m| matching::provider_matches(m, template))
            })
            .map(|(name, _)| name)
            .collect();
        match matches.as_slice() {
            [] => Err(ProviderError::NoMatch),
            [name] => self.get(name),
            several => Err(ProviderError::AmbiguousMatch(
                several.iter().map(|n| (*n).clone()).collect(),
            )),
        }
    }

    /// Every provider with problems, for reporting (`poolboy render`, provider conditions).
    pub(crate) fn problems(&self) -> impl Iterator<Item = (&str, &[ProviderProblem])> {
        self.providers
            .iter()
            .filter_map(|(name, entry)| entry.checked().err().map(|p| (name.as_str(), p)))
    }
}

impl Entry {
    /// The compiled provider, unless it failed to compile or links a missing provider.
    fn checked(&self) -> Result<&Arc<CompiledProvider>, &[ProviderProblem]> {
        match &self.compiled {
            Err(problems) => Err(problems),
            Ok(_) if !self.missing_links.is_empty() => Err(&self.missing_links),
            Ok(compiled) => Ok(compiled),
        }
    }
}

#[cfg(test)]
mod tests;
