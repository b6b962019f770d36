//! A provider's status. Not in Poolboy, which has no provider status: where this broker
//! reports a provider that does not compile (a bad template, regex or schema, a link to a
//! missing provider), so that its author sees it on the object.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::api::provider::ResourceProviderStatus;
use crate::core::conditions::{Change, ConditionStatus, DesiredCondition, VALID, set_condition};
use crate::core::provider::ProviderProblem;

/// The provider's conditions with `Valid` set from its `problems`, and what changed: written
/// only when something did.
pub(crate) fn provider_conditions(
    status: Option<&ResourceProviderStatus>,
    problems: &[ProviderProblem],
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> (Vec<Condition>, Change) {
    let mut conditions = status
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let (status, reason, message) = if problems.is_empty() {
        (
            ConditionStatus::True,
            "Compiled",
            "every template, regex and schema compiles".to_owned(),
        )
    } else {
        let messages: Vec<String> = problems.iter().map(ToString::to_string).collect();
        (ConditionStatus::False, "Invalid", messages.join("; "))
    };
    let desired = DesiredCondition {
        type_: VALID,
        status,
        reason,
        message,
        observed_generation: generation,
    };
    let change = set_condition(&mut conditions, desired, now);
    (conditions, change)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::conditions;
    use crate::core::test_fixtures::{at, now};

    fn missing_link(name: &str) -> ProviderProblem {
        ProviderProblem {
            path: "spec.linkedResourceProviders[0].name".to_owned(),
            message: format!("ResourceProvider {name} does not exist"),
        }
    }

    #[test]
    fn a_compiling_provider_is_valid() {
        let (conditions, change) = provider_conditions(None, &[], Some(1), now());
        assert_eq!(change, Change::Transitioned);
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].reason, "Compiled");
    }

    #[test]
    fn a_new_problem_keeps_the_transition_time_of_the_old_one() {
        let (first, _) = provider_conditions(
            None,
            &[missing_link("a")],
            Some(1),
            at("2026-11-21T11:00:00Z"),
        );
        let status = ResourceProviderStatus {
            conditions: Some(first.clone()),
        };
        let (second, change) =
            provider_conditions(Some(&status), &[missing_link("b")], Some(2), now());
        assert_eq!(change, Change::Reworded);
        assert_eq!(
            conditions::problem(Some(&second), VALID),
            Some("spec.linkedResourceProviders[0].name: ResourceProvider b does not exist")
        );
        assert_eq!(
            second[0].last_transition_time,
            first[0].last_transition_time
        );

        let status = ResourceProviderStatus {
            conditions: Some(second),
        };
        let (_, unchanged) =
            provider_conditions(Some(&status), &[missing_link("b")], Some(2), now());
        assert_eq!(unchanged, Change::Unchanged);
    }
}
