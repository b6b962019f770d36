//! The resources a provider generates from parameter values, linked providers first (§9).

use serde_json::{Map, Value};

use crate::api::OperatorDomain;
use crate::api::refs::ObjectRef;
use crate::core::claim::parameters::with_defaults;
use crate::core::provider::{CompiledProvider, ProviderCatalog, ProviderError};
use crate::core::template::RenderContext;
use crate::core::template::view::Subjects;
use crate::core::template::{TemplateEngine, TemplateError};

/// Linked providers nest; a cycle among them would otherwise never end.
const MAX_LINK_DEPTH: usize = 16;

/// One resource entry of a handle (`spec.resources[i]`), as a provider generates it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DesiredResource {
    pub name: String,
    pub provider: ObjectRef,
    pub template: Value,
}

#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum DesiredResourcesError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("ResourceProvider {provider}: linkedResourceProviders[{index}].when failed: {source}")]
    When {
        provider: String,
        index: usize,
        #[source]
        source: Box<TemplateError>,
    },
    #[error(
        "ResourceProvider {provider}: linkedResourceProviders[{index}].parameterValues.{parameter} failed: {source}"
    )]
    LinkedParameter {
        provider: String,
        index: usize,
        parameter: String,
        #[source]
        source: Box<TemplateError>,
    },
    #[error("ResourceProvider {provider}: template.definition failed: {source}")]
    Definition {
        provider: String,
        #[source]
        source: Box<TemplateError>,
    },
    #[error(
        "ResourceProvider {0}: linked providers nest deeper than {MAX_LINK_DEPTH} levels (a cycle?)"
    )]
    TooDeep(String),
}

/// What generating resources needs besides the provider itself.
pub(crate) struct Generation<'a> {
    pub catalog: &'a ProviderCatalog,
    pub templates: &'a TemplateEngine,
    pub domain: &'a OperatorDomain,
    pub subjects: &'a Subjects,
    pub now: chrono::DateTime<chrono::Utc>,
}

impl Generation<'_> {
    /// The resources of `provider` for the given parameter values (defaults are added here),
    /// in Poolboy's order: each linked provider's resources (when its `when` holds), then the
    /// provider's own entry if it has `override` or `template.definition` (§9; a provider with
    /// neither is a pure aggregator, #98).
    pub(crate) fn resources(
        &self,
        provider: &CompiledProvider,
        parameter_values: Option<&Map<String, Value>>,
    ) -> Result<Vec<DesiredResource>, DesiredResourcesError> {
        let mut out = Vec::new();
        self.collect(provider, parameter_values, None, 0, &mut out)?;
        Ok(out)
    }

    fn collect(
        &self,
        provider: &CompiledProvider,
        parameter_values: Option<&Map<String, Value>>,
        resource_name: Option<&str>,
        depth: usize,
        out: &mut Vec<DesiredResource>,
    ) -> Result<(), DesiredResourcesError> {
        if depth > MAX_LINK_DEPTH {
            return Err(DesiredResourcesError::TooDeep(provider.name().to_owned()));
        }
        let spec = provider.spec();
        let values = with_defaults(provider, parameter_values);
        // Poolboy passes the linked entry as `resource_provider` to `when` (§16); the parent
        // provider is what the variable's name promises.
        let scope = RenderContext::new(self.now, &serde_json::Map::new())
            .with_variables(&values)
            .with_variable("resource_claim", &self.subjects.claim)
            .with_variable("resource_handle", &self.subjects.handle)
            .with_variable("resource_provider", provider.view())
            .with_template_variables(spec.vars.as_ref())
            .with_template_variables(self.subjects.handle_vars.as_ref());

        for (index, link) in spec.linked_resource_providers.iter().flatten().enumerate() {
            if let Some(when) = &link.when {
                let holds = self.templates.check(when, &scope).map_err(|source| {
                    DesiredResourcesError::When {
                        provider: provider.name().to_owned(),
                        index,
                        source: Box::new(source),
                    }
                })?;
                if !holds {
                    continue;
                }
            }
            let linked = self.catalog.get(&link.name)?;
            let mut linked_values = Map::new();
            for (parameter, template) in link.parameter_values.iter().flatten() {
                let value = self.templates.render(template, &scope).map_err(|source| {
                    DesiredResourcesError::LinkedParameter {
                        provider: provider.name().to_owned(),
                        index,
                        parameter: parameter.clone(),
                        source: Box::new(source),
                    }
                })?;
                linked_values.insert(parameter.clone(), value);
            }
            let name = link.resource_name.as_deref().unwrap_or(&link.name);
            self.collect(linked, Some(&linked_values), Some(name), depth + 1, out)?;
        }

        let definition = spec.template.as_ref().and_then(|t| t.definition.as_ref());
        if spec.override_.is_some() || definition.is_some() {
            let template = match definition {
                Some(definition) => {
                    self.templates
                        .render(definition, &scope)
                        .map_err(|source| DesiredResourcesError::Definition {
                            provider: provider.name().to_owned(),
                            source: Box::new(source),
                        })?
                }
                None => Value::Object(Map::new()),
            };
            out.push(DesiredResource {
                name: resource_name.unwrap_or(provider.resource_name()).to_owned(),
                provider: provider.reference(self.domain),
                template,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
