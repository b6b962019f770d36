//! Lifespan strings evaluated for one claim (§10.1): each may be a template, rendered with
//! `resource_claim` (and `resource_handle` at handle level) and the vars of its owner
//! (Δ§3.4: provider vars for provider values, handle vars for handle values), then parsed as
//! an interval. An empty render means unset.

use serde_json::Value;

use super::interval::parse_interval;
use super::lifespan::{EvaluatedInterval, EvaluatedLifespan};
use super::provider::CompiledProvider;
use super::template::RenderContext;
use super::template::{TemplateEngine, TemplateError};
use super::view::Subjects;
use crate::api::ResourceHandle;

#[derive(Debug, Clone, thiserror::Error)]
pub enum LifespanValueError {
    #[error("{owner} spec.lifespan.{field}: {source}")]
    Template {
        owner: String,
        field: &'static str,
        #[source]
        source: Box<TemplateError>,
    },
    #[error("{owner} spec.lifespan.{field}: Failed to parse time interval: {value}")]
    Interval {
        owner: String,
        field: &'static str,
        value: String,
    },
}

/// A provider's `default`, `maximum` and `relativeMaximum` for the claim in `subjects`.
pub fn provider_lifespan(
    provider: &CompiledProvider,
    subjects: &Subjects,
    templates: &TemplateEngine,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<EvaluatedLifespan, LifespanValueError> {
    let Some(lifespan) = &provider.spec().lifespan else {
        return Ok(EvaluatedLifespan::default());
    };
    let scope = RenderContext::new(now, &serde_json::Map::new())
        .with_variable("resource_claim", subjects.claim.clone())
        .with_template_variables(provider.spec().vars.as_ref());
    let owner = format!("ResourceProvider {}", provider.name());
    evaluate(
        &owner,
        [
            &lifespan.default,
            &lifespan.maximum,
            &lifespan.relative_maximum,
        ],
        &scope,
        templates,
    )
}

/// A handle's `default`, `maximum` and `relativeMaximum` for the claim in `subjects`.
pub fn handle_lifespan(
    handle: &ResourceHandle,
    subjects: &Subjects,
    templates: &TemplateEngine,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<EvaluatedLifespan, LifespanValueError> {
    let Some(lifespan) = &handle.spec.lifespan else {
        return Ok(EvaluatedLifespan::default());
    };
    let scope = RenderContext::new(now, &serde_json::Map::new())
        .with_variable("resource_claim", subjects.claim.clone())
        .with_variable("resource_handle", subjects.handle.clone())
        .with_template_variables(handle.spec.vars.as_ref());
    let owner = format!(
        "ResourceHandle {}",
        handle.metadata.name.as_deref().unwrap_or_default()
    );
    evaluate(
        &owner,
        [
            &lifespan.default,
            &lifespan.maximum,
            &lifespan.relative_maximum,
        ],
        &scope,
        templates,
    )
}

fn evaluate(
    owner: &str,
    [default, maximum, relative_maximum]: [&Option<String>; 3],
    scope: &RenderContext,
    templates: &TemplateEngine,
) -> Result<EvaluatedLifespan, LifespanValueError> {
    let one = |field: &'static str, text: &Option<String>| -> Result<_, LifespanValueError> {
        let Some(text) = text.as_deref().filter(|t| !t.trim().is_empty()) else {
            return Ok(None);
        };
        let rendered = templates
            .render(&Value::String(text.to_owned()), scope)
            .map_err(|source| LifespanValueError::Template {
                owner: owner.to_owned(),
                field,
                source: Box::new(source),
            })?;
        let rendered = match rendered {
            Value::Null => return Ok(None),
            Value::String(s) if s.trim().is_empty() => return Ok(None),
            Value::String(s) => s,
            other => other.to_string(),
        };
        let value = parse_interval(&rendered).map_err(|_| LifespanValueError::Interval {
            owner: owner.to_owned(),
            field,
            value: rendered.clone(),
        })?;
        Ok(Some(EvaluatedInterval::new(text, value)))
    };
    Ok(EvaluatedLifespan {
        default: one("default", default)?,
        maximum: one("maximum", maximum)?,
        relative_maximum: one("relativeMaximum", relative_maximum)?,
    })
}
