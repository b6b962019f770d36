//! Lifespan strings evaluated for one claim (§10.1): each may be a template, rendered with
//! `resource_claim` (and `resource_handle` at handle level) and the vars of its owner
//! (Δ§3.4: provider vars for provider values, handle vars for handle values), then parsed as
//! an interval. An empty render means unset.

use serde_json::Value;

use crate::api::ResourceHandle;
use crate::core::lifespan::interval::parse_interval;
use crate::core::lifespan::{EvaluatedInterval, EvaluatedLifespan};
use crate::core::provider::CompiledProvider;
use crate::core::template::RenderContext;
use crate::core::template::view::Subjects;
use crate::core::template::{TemplateEngine, TemplateError};

#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum LifespanValueError {
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
pub(crate) fn provider_lifespan(
    provider: &CompiledProvider,
    subjects: &Subjects,
    templates: &TemplateEngine,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<EvaluatedLifespan, LifespanValueError> {
    let Some(lifespan) = &provider.spec().lifespan else {
        return Ok(EvaluatedLifespan::default());
    };
    let scope = RenderContext::new(now, &serde_json::Map::new())
        .with_variable("resource_claim", &subjects.claim)
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
pub(crate) fn handle_lifespan(
    handle: &ResourceHandle,
    subjects: &Subjects,
    templates: &TemplateEngine,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<EvaluatedLifespan, LifespanValueError> {
    let Some(lifespan) = &handle.spec.lifespan else {
        return Ok(EvaluatedLifespan::default());
    };
    let scope = RenderContext::new(now, &serde_json::Map::new())
        .with_variable("resource_claim", &subjects.claim)
        .with_variable("resource_handle", &subjects.handle)
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

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::core::test_fixtures::{Env, claim, handle, now};

    fn claim_subjects(env: &Env, annotations: &str) -> Subjects {
        let claim = claim(&format!(
            "metadata: {{name: c, annotations: {annotations}}}\nspec: {{provider: {{name: p}}}}"
        ));
        Subjects::new(Some(&claim), None, &env.domain)
    }

    const PROVIDER: &str = r#"
metadata: {name: p}
spec:
  vars: {long: 5d}
  lifespan:
    default: "{{ resource_claim.annotations['example.com/default'] | default('') }}"
    maximum: "{{ long if resource_claim.annotations['example.com/long'] is defined else '2d' }}"
    relativeMaximum: 1h30m
"#;

    #[test]
    fn provider_values_are_templates_over_the_claim_and_provider_vars() {
        let env = Env::new();
        let provider = env.compile(PROVIDER);
        let lifespan = provider_lifespan(
            &provider,
            &claim_subjects(&env, "{example.com/long: 'yes'}"),
            &env.templates,
            now(),
        )
        .unwrap();
        // An empty render is unset.
        assert_eq!(lifespan.default, None);
        let maximum = lifespan.maximum.unwrap();
        assert_eq!(maximum.value, TimeDelta::days(5));
        // The raw text is kept: handles store it and evaluate it per claim.
        assert!(maximum.text.starts_with("{{ long"), "{}", maximum.text);
        assert_eq!(
            lifespan.relative_maximum.unwrap().value,
            TimeDelta::minutes(90)
        );

        let lifespan = provider_lifespan(
            &provider,
            &claim_subjects(&env, "{example.com/default: 3h}"),
            &env.templates,
            now(),
        )
        .unwrap();
        assert_eq!(lifespan.default.unwrap().value, TimeDelta::hours(3));
        assert_eq!(lifespan.maximum.unwrap().value, TimeDelta::days(2));
    }

    #[test]
    fn a_provider_without_lifespan_has_none() {
        let env = Env::new();
        let provider = env.compile("metadata: {name: p}\nspec: {}");
        let lifespan =
            provider_lifespan(&provider, &Subjects::default(), &env.templates, now()).unwrap();
        assert_eq!(lifespan, EvaluatedLifespan::default());
    }

    #[test]
    fn an_unparseable_interval_is_an_error_naming_owner_and_field() {
        let env = Env::new();
        let provider = env.compile("metadata: {name: p}\nspec: {lifespan: {maximum: 'soon'}}");
        let error =
            provider_lifespan(&provider, &Subjects::default(), &env.templates, now()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "ResourceProvider p spec.lifespan.maximum: Failed to parse time interval: soon"
        );
        let provider =
            env.compile("metadata: {name: p}\nspec: {lifespan: {default: '{{ nothing.here }}'}}");
        let error = provider_lifespan(&provider, &Subjects::default(), &env.templates, now())
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("ResourceProvider p spec.lifespan.default: template "),
            "{error}"
        );
    }

    #[test]
    fn handle_values_see_the_handle_and_its_vars() {
        let env = Env::new();
        let handle = handle(
            r#"
metadata: {name: guid-abcde}
spec:
  vars: {grace: 2h}
  lifespan:
    default: "{{ grace }}"
    maximum: "{{ '1d' if resource_handle.metadata.name == 'guid-abcde' else '' }}"
    relativeMaximum: ""
"#,
        );
        let claim = claim("metadata: {name: c}\nspec: {provider: {name: p}}");
        let subjects = Subjects::new(Some(&claim), Some(&handle), &env.domain);
        let lifespan = handle_lifespan(&handle, &subjects, &env.templates, now()).unwrap();
        assert_eq!(lifespan.default.unwrap().value, TimeDelta::hours(2));
        assert_eq!(lifespan.maximum.unwrap().value, TimeDelta::days(1));
        assert_eq!(lifespan.relative_maximum, None);

        let bad = crate::core::test_fixtures::handle(
            "metadata: {name: guid-x}\nspec: {lifespan: {default: 'forever'}}",
        );
        assert_eq!(
            handle_lifespan(&bad, &subjects, &env.templates, now())
                .unwrap_err()
                .to_string(),
            "ResourceHandle guid-x spec.lifespan.default: Failed to parse time interval: forever"
        );
    }
}
