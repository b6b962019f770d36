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
use crate::core::template::TemplateEngine;

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
}

impl CompiledProvider {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn resource(&self) -> &ResourceProvider {
        &self.provider
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
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::test_fixtures::{Env, get, provider};

    const CONFIGMAP: &str = r#"
metadata: {name: configmap}
spec:
  match:
    apiVersion: v1
    kind: ConfigMap
  matchIgnore: ["/data(/.*)?"]
  override: {apiVersion: v1, kind: ConfigMap}
  updateFilters:
  - pathMatch: /data/.*
  validation:
    openAPIV3Schema:
      type: object
      properties:
        data: {type: object}
  parameters:
  - name: size
    validation:
      openAPIV3Schema: {type: integer, maximum: 8}
"#;

    fn paths(problems: &[ProviderProblem]) -> Vec<&str> {
        problems.iter().map(|p| p.path.as_str()).collect()
    }

    #[test]
    fn a_sound_provider_compiles_with_its_schemas_filters_and_reference() {
        let env = Env::new();
        let compiled = env.compile(CONFIGMAP);
        assert_eq!(compiled.name(), "configmap");
        assert_eq!(compiled.resource_name(), "configmap");
        assert_eq!(
            json!(compiled.reference(&env.domain)),
            json!({
                "apiVersion": "poolboy.gpte.redhat.com/v1",
                "kind": "ResourceProvider",
                "name": "configmap",
                "namespace": "poolboy",
            })
        );
        let schema = compiled.template_schema().expect("template schema");
        assert!(schema.is_valid(&json!({"data": {}})));
        assert!(!schema.is_valid(&json!({"data": "x"})));
        let size = compiled.parameter_schema("size").expect("parameter schema");
        assert!(size.is_valid(&json!(8)));
        assert!(!size.is_valid(&json!(9)));
        assert!(compiled.parameter_schema("other").is_none());
    }

    #[test]
    fn resource_name_comes_from_spec_resource_name() {
        let env = Env::new();
        let compiled = env.compile("metadata: {name: p}\nspec: {resourceName: lab}");
        assert_eq!(compiled.resource_name(), "lab");
    }

    #[test]
    fn every_problem_is_reported_at_once_with_its_path() {
        let env = Env::new();
        let problems = env.problems(
            r#"
metadata: {name: broken}
spec:
  matchIgnore: ["/spec/(unclosed"]
  updateFilters:
  - pathMatch: "/data/[z-a]"
  validation:
    openAPIV3Schema: {type: strnig}
    checks:
    - name: unbalanced
      check: "spec.size >"
  parameters:
  - name: size
    validation:
      openAPIV3Schema: {type: integer, pattern: "("}
      checks:
      - name: bad
        check: "value is"
  - name: size
  - name: password
    default:
      template: "{{ '[a-z]{8}' | strgen"
  template:
    enable: true
    definition:
      spec:
        items: ["ok", "{{ broken }"]
  override:
    metadata:
      name: "{% if guid %}x"
  default:
    data: "{{ }}"
  linkedResourceProviders:
  - name: other
    when: "size >"
    waitFor: "(("
    parameterValues:
      owner: "{{ owner"
  lifespan:
    default: "{{ 1h"
  healthCheck: "status ==="
  readinessCheck: "status.ready and"
  statusSummaryTemplate:
    state: "{{ resources[0 }}"
  vars:
    greeting: "{% endif %}"
"#,
        );
        let mut found = paths(&problems);
        found.sort_unstable();
        assert_eq!(
            found,
            vec![
                "spec.default.data",
                "spec.healthCheck",
                "spec.lifespan.default",
                "spec.linkedResourceProviders[0].parameterValues.owner",
                "spec.linkedResourceProviders[0].waitFor",
                "spec.linkedResourceProviders[0].when",
                "spec.matchIgnore",
                "spec.override.metadata.name",
                "spec.parameters[0].validation.checks[0].check",
                "spec.parameters[0].validation.openAPIV3Schema",
                "spec.parameters[1].name",
                "spec.parameters[2].default.template",
                "spec.readinessCheck",
                "spec.statusSummaryTemplate.state",
                "spec.template.definition.spec.items[1]",
                "spec.updateFilters",
                "spec.validation.checks[0].check",
                "spec.validation.openAPIV3Schema",
                "spec.vars.greeting",
            ]
        );
        let message = |path: &str| {
            problems
                .iter()
                .find(|p| p.path == path)
                .map(|p| p.message.clone())
                .unwrap_or_default()
        };
        assert!(message("spec.matchIgnore").contains("/spec/(unclosed"));
        assert!(message("spec.updateFilters").contains("/data/[z-a]"));
        assert!(message("spec.validation.openAPIV3Schema").contains("strnig"));
        assert_eq!(
            message("spec.parameters[1].name"),
            "duplicate parameter size"
        );
        assert!(
            message("spec.template.definition.spec.items[1]").contains("{{ broken }"),
            "{problems:?}"
        );
        // Displayed as `path: message`, joined with `; ` in the error a claim sees.
        let error = ProviderError::Invalid {
            name: "broken".into(),
            problems: problems[..2].to_vec(),
        };
        assert_eq!(
            error.to_string(),
            format!(
                "ResourceProvider broken is invalid: {}: {}; {}: {}",
                problems[0].path, problems[0].message, problems[1].path, problems[1].message
            )
        );
    }

    #[test]
    fn a_duplicate_parameter_is_a_problem_with_or_without_a_schema() {
        let env = Env::new();
        let problems = env
            .problems("metadata: {name: p}\nspec: {parameters: [{name: a}, {name: b}, {name: a}]}");
        assert_eq!(
            problems,
            vec![ProviderProblem {
                path: "spec.parameters[2].name".into(),
                message: "duplicate parameter a".into(),
            }]
        );
    }

    #[test]
    fn default_and_override_are_plain_data_unless_templates_are_enabled() {
        let env = Env::new();
        env.compile(
            r#"
metadata: {name: plain}
spec:
  default: {data: {text: "{{ not a template"}}
  override: {apiVersion: v1, kind: ConfigMap, data: {x: "{% nope"}}
"#,
        );
        let problems = env.problems(
            r#"
metadata: {name: templated}
spec:
  template: {enable: true}
  default: {data: {text: "{{ not a template"}}
  override: {apiVersion: v1, kind: ConfigMap, data: {x: "{% nope"}}
"#,
        );
        assert_eq!(
            paths(&problems),
            vec!["spec.default.data.text", "spec.override.data.x"]
        );
    }

    #[test]
    fn conditions_are_checked_as_wrapped_in_bool() {
        // `a) or (b` parses on its own inside `{{ (…) | bool }}` only by accident; a stray
        // `}}` does not.
        let env = Env::new();
        let problems = env.problems(
            r#"
metadata: {name: p}
spec:
  validation:
    checks:
    - {name: ok, check: "spec is defined"}
    - {name: closes, check: "x }} {{ y"}
"#,
        );
        assert_eq!(paths(&problems), vec!["spec.validation.checks[1].check"]);
    }

    const MISSING_LINK: &str = r#"
metadata: {name: aggregate}
spec:
  linkedResourceProviders:
  - name: present
  - name: absent
"#;

    #[test]
    fn the_catalog_reports_missing_linked_providers() {
        let env = Env::new();
        let catalog = env.catalog(&[MISSING_LINK, "metadata: {name: present}\nspec: {}"]);
        let error = catalog.get("aggregate").unwrap_err();
        assert_eq!(
            error.to_string(),
            "ResourceProvider aggregate is invalid: spec.linkedResourceProviders[1].name: \
             ResourceProvider absent not found"
        );
        let problems: Vec<_> = catalog
            .problems()
            .map(|(name, p)| (name, p.len()))
            .collect();
        assert_eq!(problems, vec![("aggregate", 1)]);
    }

    #[test]
    fn a_relist_drops_the_providers_it_no_longer_shows() {
        let env = Env::new();
        let mut catalog = env.catalog(&[
            "metadata: {name: kept}\nspec: {}",
            "metadata: {name: gone}\nspec: {}",
        ]);
        let gone = catalog.retain(|name| name == "kept");
        assert_eq!(gone, ["gone"]);
        assert!(catalog.get("kept").is_ok());
        assert!(matches!(
            catalog.get("gone"),
            Err(ProviderError::NotFound(_))
        ));
    }

    #[test]
    fn a_link_becomes_valid_when_its_provider_arrives_and_invalid_when_it_goes() {
        // Provider events arrive in any order: the catalog must not keep a provider invalid
        // because its linked provider came second.
        let env = Env::new();
        let compiler = env.compiler();
        let mut catalog = ProviderCatalog::default();
        catalog.insert(provider(MISSING_LINK), &compiler);
        catalog.insert(provider("metadata: {name: present}\nspec: {}"), &compiler);
        catalog.check_links();
        assert!(catalog.get("aggregate").is_err());
        catalog.insert(provider("metadata: {name: absent}\nspec: {}"), &compiler);
        catalog.check_links();
        assert!(catalog.get("aggregate").is_ok(), "still invalid");
        assert_eq!(catalog.problems().count(), 0);
        catalog.remove("absent");
        catalog.check_links();
        assert!(matches!(
            catalog.get("aggregate"),
            Err(ProviderError::Invalid { .. })
        ));
    }

    #[test]
    fn get_tells_not_found_from_invalid() {
        let env = Env::new();
        let catalog = env.catalog(&[
            CONFIGMAP,
            "metadata: {name: broken}\nspec: {matchIgnore: ['(']}",
        ]);
        assert_eq!(get(&catalog, "configmap").name(), "configmap");
        assert_eq!(
            catalog.get("nope").unwrap_err(),
            ProviderError::NotFound("nope".into())
        );
        assert_eq!(
            catalog.get("nope").unwrap_err().to_string(),
            "ResourceProvider nope not found"
        );
        let invalid = catalog.get("broken").unwrap_err().to_string();
        assert!(
            invalid.starts_with("ResourceProvider broken is invalid: spec.matchIgnore: "),
            "{invalid}"
        );
    }

    const SECRET: &str = r#"
metadata: {name: secret}
spec:
  match: {apiVersion: v1, kind: Secret}
"#;

    const LABELLED_SECRET: &str = r#"
metadata: {name: labelled-secret}
spec:
  match:
    apiVersion: v1
    kind: Secret
    metadata: {labels: {tier: gold}}
"#;

    #[test]
    fn match_finds_the_one_provider_whose_match_fits() {
        let env = Env::new();
        let catalog = env.catalog(&[CONFIGMAP, SECRET, "metadata: {name: no-match}\nspec: {}"]);
        let found = catalog
            .find_by_match(&json!({"apiVersion": "v1", "kind": "Secret", "data": {}}))
            .unwrap();
        assert_eq!(found.name(), "secret");
    }

    #[test]
    fn no_match_and_ambiguous_match_are_errors() {
        let env = Env::new();
        let catalog = env.catalog(&[CONFIGMAP, SECRET, LABELLED_SECRET]);
        let error = catalog
            .find_by_match(&json!({"apiVersion": "v1", "kind": "Service"}))
            .unwrap_err();
        assert_eq!(error, ProviderError::NoMatch);
        assert_eq!(
            error.to_string(),
            "Unable to match template to ResourceProvider"
        );
        let gold = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"labels": {"tier": "gold"}},
        });
        let error = catalog.find_by_match(&gold).unwrap_err();
        assert_eq!(
            error.to_string(),
            "Resource template matches multiple ResourceProviders: labelled-secret, secret"
        );
    }

    #[test]
    fn an_empty_match_matches_nothing() {
        let env = Env::new();
        let catalog = env.catalog(&["metadata: {name: empty}\nspec: {match: {}}"]);
        assert_eq!(
            catalog
                .find_by_match(&json!({"kind": "Secret"}))
                .unwrap_err(),
            ProviderError::NoMatch
        );
    }

    #[test]
    fn a_broken_provider_that_matches_is_reported_as_invalid_not_as_no_match() {
        let env = Env::new();
        let catalog = env.catalog(&[r#"
metadata: {name: secret}
spec:
  match: {apiVersion: v1, kind: Secret}
  updateFilters: [{pathMatch: "("}]
"#]);
        let error = catalog
            .find_by_match(&json!({"apiVersion": "v1", "kind": "Secret"}))
            .unwrap_err();
        assert!(
            matches!(&error, ProviderError::Invalid { name, problems }
                if name == "secret" && problems[0].path == "spec.updateFilters"),
            "{error:?}"
        );
    }

    #[test]
    fn insert_replaces_and_remove_forgets() {
        let env = Env::new();
        let compiler = env.compiler();
        let mut catalog = ProviderCatalog::default();
        catalog.insert(provider(SECRET), &compiler);
        catalog.insert(
            provider("metadata: {name: secret}\nspec: {match: {kind: Other}}"),
            &compiler,
        );
        assert!(catalog.find_by_match(&json!({"kind": "Other"})).is_ok());
        assert!(
            catalog
                .find_by_match(&json!({"apiVersion": "v1", "kind": "Secret"}))
                .is_err()
        );
        catalog.remove("secret");
        assert_eq!(
            catalog.get("secret").unwrap_err(),
            ProviderError::NotFound("secret".into())
        );
    }
}
