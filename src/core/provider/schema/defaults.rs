//! The defaults a schema declares, as Poolboy reads them.

use serde_json::{Map, Value};

/// The defaults a schema declares (Poolboy 1.12 §6.3 step 2, `openapi_schema_util`): each
/// `properties.<p>.default`; an object-typed property's own nested defaults, when there are
/// any, replace its `default`. Only `properties` is read: no `items`, `additionalProperties`
/// or `allOf`. `None` when the schema declares no defaults.
pub(crate) fn defaults_from_schema(schema: &Value) -> Option<Value> {
    let properties = schema.get("properties")?.as_object()?;
    let mut defaults = Map::new();
    for (name, property) in properties {
        if !property.is_object() {
            continue;
        }
        if let Some(default) = property.get("default") {
            defaults.insert(name.clone(), default.clone());
        }
        if property.get("type").and_then(Value::as_str) == Some("object")
            && let Some(nested) = defaults_from_schema(property)
        {
            defaults.insert(name.clone(), nested);
        }
    }
    (!defaults.is_empty()).then_some(Value::Object(defaults))
}

/// A parameter schema's top-level `default`, the last fallback for a parameter's value
/// (Poolboy 1.12 §8 step 1). A `null` default counts as none, as in Poolboy.
pub(crate) fn schema_default(schema: &Value) -> Option<&Value> {
    schema.get("default").filter(|value| !value.is_null())
}
