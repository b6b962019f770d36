//! Parameter values of provider claims (§8): collecting values from the claim, the last
//! validated values and the provider's defaults, then validating them.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::core::provider::CompiledProvider;
use crate::core::provider::schema::schema_default;
use crate::core::template::RenderContext;
use crate::core::template::TemplateEngine;

/// The outcome of validating a claim's parameters against its provider.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ParameterValidation {
    /// Every value, defaults included: what `status.provider.parameterValues` gets when valid,
    /// and what the handle's `spec.provider.parameterValues` gets at bind (Δ B20).
    pub values: Map<String, Value>,
    /// Poolboy's messages, in Poolboy's order; empty when valid.
    pub errors: Vec<String>,
}

impl ParameterValidation {
    pub(crate) fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Validates `requested` (the claim's `spec.provider.parameterValues`) given `validated` (its
/// `status.provider.parameterValues`, `None` before the first successful validation).
///
/// `scope` carries `resource_claim`, `resource_handle` and `resource_provider` and the vars;
/// parameter values and `value` are added here.
pub(crate) fn validate_parameters(
    provider: &CompiledProvider,
    requested: Option<&Map<String, Value>>,
    validated: Option<&Map<String, Value>>,
    scope: &RenderContext,
    templates: &TemplateEngine,
) -> ParameterValidation {
    let parameters = provider.spec().parameters.as_deref().unwrap_or(&[]);
    let mut values = requested.cloned().unwrap_or_default();
    let mut errors = Vec::new();

    // §8 step 1: missing values come from the last validated values, else from defaults.
    let mut from_defaults = BTreeSet::new();
    for parameter in parameters {
        if values.contains_key(&parameter.name) {
            continue;
        }
        if let Some(value) = validated.and_then(|v| v.get(&parameter.name)) {
            values.insert(parameter.name.clone(), value.clone());
            continue;
        }
        let default = parameter.default.as_ref();
        if let Some(template) = default.and_then(|d| d.template.as_ref()) {
            let scope = scope.clone().with_variables(&values);
            match templates.render(&Value::String(template.clone()), &scope) {
                Ok(value) => {
                    from_defaults.insert(parameter.name.clone());
                    values.insert(parameter.name.clone(), value);
                }
                // Poolboy lets this exception escape the reconcile; here it is reported.
                Err(e) => errors.push(format!(
                    "Parameter {} default template failed: {e}",
                    parameter.name
                )),
            }
        } else if let Some(value) = default_value(parameter) {
            from_defaults.insert(parameter.name.clone());
            values.insert(parameter.name.clone(), value);
        }
    }

    // §8 step 2–3.
    for parameter in parameters {
        let name = &parameter.name;
        let Some(value) = values.get(name) else {
            if parameter.required.unwrap_or(false) {
                errors.push(format!("Parameter {name} is required."));
            }
            continue;
        };
        if let Some(validated) = validated {
            // Unchanged values stay valid even when the rules changed since (§8 step 2).
            if validated.get(name) == Some(value) || from_defaults.contains(name) {
                continue;
            }
            if !parameter.allow_update.unwrap_or(false) {
                errors.push(format!("Parameter {name} is immutable."));
                continue;
            }
        }
        if let Some(schema) = provider.parameter_schema(name)
            && let Err(violation) = schema.validate(value)
        {
            errors.push(format!(
                "Parameter {name} schema validation failed: {violation}"
            ));
            continue;
        }
        let checks = parameter
            .validation
            .as_ref()
            .and_then(|v| v.checks.as_ref());
        for check in checks.into_iter().flatten() {
            let scope = scope
                .clone()
                .with_variables(&values)
                .with_variable("value", value.clone());
            match templates.check(&check.check, &scope) {
                Ok(true) => {}
                Ok(false) => errors.push(format!("Parameter {name} failed check: {}", check.name)),
                Err(e) => errors.push(format!(
                    "Parameter {name} exception on check {}: {e}",
                    check.name
                )),
            }
        }
    }

    // §8 step 4: undeclared names, unless unchanged from the validated values.
    for (name, value) in &values {
        let declared = parameters.iter().any(|p| &p.name == name);
        let unchanged = validated.is_some_and(|v| v.get(name) == Some(value));
        if !declared && !unchanged {
            errors.push(format!("No such parameter {name}."));
        }
    }

    ParameterValidation { values, errors }
}

/// `default.value`, else the schema's top-level `default` (§8 step 1).
fn default_value(parameter: &crate::api::provider::Parameter) -> Option<Value> {
    let explicit = parameter
        .default
        .as_ref()
        .and_then(|d| d.value.clone())
        .filter(|v| !v.is_null());
    explicit.or_else(|| {
        parameter
            .validation
            .as_ref()
            .and_then(|v| v.open_api_v3_schema.as_ref())
            .and_then(schema_default)
            .cloned()
    })
}

/// The values a handle renders with (§8 step 7, §9): the provider's static defaults
/// overlaid with the given values.
pub(crate) fn with_defaults(
    provider: &CompiledProvider,
    values: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let mut all: Map<String, Value> = provider
        .spec()
        .parameters
        .iter()
        .flatten()
        .filter_map(|p| default_value(p).map(|v| (p.name.clone(), v)))
        .collect();
    for (name, value) in values.into_iter().flatten() {
        all.insert(name.clone(), value.clone());
    }
    all
}

#[cfg(test)]
mod tests;
