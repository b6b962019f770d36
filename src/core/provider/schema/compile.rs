//! Checking and compiling a schema: each schema object becomes its keywords in the schema's
//! key order (Python reports the first failure in that order); what Python would only trip
//! over while validating is a [`SchemaError`] up front.

use std::collections::HashSet;

use serde_json::{Map, Number, Value};

use super::SchemaError;
use crate::core::python::repr::{repr, repr_str};

/// Schemas nest at most this deep; deeper ones are refused rather than risking the stack.
const MAX_DEPTH: usize = 64;

#[derive(Debug)]
pub(super) enum Node {
    Bool(bool),
    Object(Box<ObjectNode>),
}

#[derive(Debug)]
pub(super) struct ObjectNode {
    /// JSON pointer of this sub-schema in the source, to print it in a violation.
    pub(super) pointer: String,
    pub(super) nullable: bool,
    /// In the schema's key order: Python reports the first failure in that order.
    pub(super) keywords: Vec<Keyword>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OasType {
    String,
    Number,
    Integer,
    Boolean,
    Array,
    Object,
}

impl OasType {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Self::String,
            "number" => Self::Number,
            "integer" => Self::Integer,
            "boolean" => Self::Boolean,
            "array" => Self::Array,
            "object" => Self::Object,
            _ => return None,
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Integer => "integer",
            Self::Boolean => "boolean",
            Self::Array => "array",
            Self::Object => "object",
        }
    }

    /// The OAS 3.0 type checker: booleans are not numbers and `1.0` is not an integer.
    pub(super) fn matches(self, value: &Value) -> bool {
        match (self, value) {
            (Self::String, Value::String(_)) => true,
            (Self::Number, Value::Number(_)) => true,
            (Self::Integer, Value::Number(n)) => n.is_i64() || n.is_u64(),
            (Self::Boolean, Value::Bool(_)) => true,
            (Self::Array, Value::Array(_)) => true,
            (Self::Object, Value::Object(_)) => true,
            _ => false,
        }
    }
}

#[derive(Debug)]
pub(super) enum Keyword {
    Type(OasType),
    IntOrString,
    Enum(Value),
    Pattern {
        source: String,
        regex: fancy_regex::Regex,
    },
    MinLength(f64),
    MaxLength(f64),
    Minimum {
        limit: Number,
        exclusive: bool,
    },
    Maximum {
        limit: Number,
        exclusive: bool,
    },
    MultipleOf(Number),
    MinItems(f64),
    MaxItems(f64),
    UniqueItems,
    MinProperties(f64),
    MaxProperties(f64),
    Required(Vec<String>),
    Properties(Vec<(String, Node)>),
    AdditionalProperties {
        schema: AdditionalProperties,
        declared: HashSet<String>,
        patterns: Option<fancy_regex::Regex>,
    },
    Items(Node),
    AllOf(Vec<Node>),
    AnyOf(Vec<Node>),
    OneOf(Vec<(Node, Value)>),
    Not(Node, Value),
}

#[derive(Debug)]
pub(super) enum AdditionalProperties {
    Forbidden,
    Schema(Node),
}

impl Keyword {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Self::Type(_) => "type",
            Self::IntOrString => "x-kubernetes-int-or-string",
            Self::Enum(_) => "enum",
            Self::Pattern { .. } => "pattern",
            Self::MinLength(_) => "minLength",
            Self::MaxLength(_) => "maxLength",
            Self::Minimum { .. } => "minimum",
            Self::Maximum { .. } => "maximum",
            Self::MultipleOf(_) => "multipleOf",
            Self::MinItems(_) => "minItems",
            Self::MaxItems(_) => "maxItems",
            Self::UniqueItems => "uniqueItems",
            Self::MinProperties(_) => "minProperties",
            Self::MaxProperties(_) => "maxProperties",
            Self::Required(_) => "required",
            Self::Properties(_) => "properties",
            Self::AdditionalProperties { .. } => "additionalProperties",
            Self::Items(_) => "items",
            Self::AllOf(_) => "allOf",
            Self::AnyOf(_) => "anyOf",
            Self::OneOf(_) => "oneOf",
            Self::Not(..) => "not",
        }
    }
}

fn invalid(pointer: &str, problem: impl Into<String>) -> SchemaError {
    SchemaError::Invalid {
        path: format!("#{pointer}"),
        problem: problem.into(),
    }
}

fn child_pointer(pointer: &str, key: &str) -> String {
    format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// Python truthiness of a JSON value (`schema.get("exclusiveMinimum", False)` and the like).
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

fn compile_regex(pattern: &str, pointer: &str) -> Result<fancy_regex::Regex, SchemaError> {
    fancy_regex::Regex::new(pattern).map_err(|e| {
        invalid(
            pointer,
            format!("invalid regular expression {pattern:?}: {e}"),
        )
    })
}

pub(super) fn compile_node(
    schema: &Value,
    pointer: String,
    depth: usize,
) -> Result<Node, SchemaError> {
    if depth > MAX_DEPTH {
        return Err(invalid(
            &pointer,
            format!("schemas nest deeper than {MAX_DEPTH} levels"),
        ));
    }
    let map = match schema {
        Value::Bool(b) => return Ok(Node::Bool(*b)),
        Value::Object(map) => map,
        other => {
            return Err(invalid(
                &pointer,
                format!(
                    "a schema must be an object or a boolean, found {}",
                    repr(other)
                ),
            ));
        }
    };
    let mut keywords = Vec::new();
    for (key, value) in map {
        let at = child_pointer(&pointer, key);
        if let Some(keyword) = compile_keyword(map, key, value, &pointer, &at, depth)? {
            keywords.push(keyword);
        }
    }
    Ok(Node::Object(Box::new(ObjectNode {
        nullable: map.get("nullable") == Some(&Value::Bool(true)),
        pointer,
        keywords,
    })))
}

fn count(value: &Value, at: &str, key: &str) -> Result<f64, SchemaError> {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if f >= 0.0 => Ok(f),
            _ => Err(invalid(at, format!("{key} must not be negative"))),
        },
        other => Err(invalid(
            at,
            format!("{key} must be a number, found {}", repr(other)),
        )),
    }
}

fn number(value: &Value, at: &str, key: &str) -> Result<Number, SchemaError> {
    match value {
        Value::Number(n) => Ok(n.clone()),
        other => Err(invalid(
            at,
            format!("{key} must be a number, found {}", repr(other)),
        )),
    }
}

fn subschemas(
    value: &Value,
    at: &str,
    key: &str,
    depth: usize,
) -> Result<Vec<(Node, Value)>, SchemaError> {
    match value {
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                Ok((
                    compile_node(item, format!("{at}/{i}"), depth + 1)?,
                    item.clone(),
                ))
            })
            .collect(),
        _ => Err(invalid(
            at,
            format!("{key} must be a non-empty list of schemas"),
        )),
    }
}

/// One keyword of a schema object; `None` for keywords that do not validate (annotations,
/// `format`, `nullable`, `x-kubernetes-preserve-unknown-fields`, unknown keys).
fn compile_keyword(
    map: &Map<String, Value>,
    key: &str,
    value: &Value,
    pointer: &str,
    at: &str,
    depth: usize,
) -> Result<Option<Keyword>, SchemaError> {
    let keyword = match key {
        "type" => match value {
            Value::String(name) => match OasType::parse(name) {
                Some(t) => Keyword::Type(t),
                None => {
                    return Err(invalid(
                        at,
                        format!(
                            "unknown type {}; OpenAPI 3.0 types are string, number, integer, \
                             boolean, array and object",
                            repr_str(name)
                        ),
                    ));
                }
            },
            other => {
                return Err(invalid(
                    at,
                    format!(
                        "type must be a single type name in OpenAPI 3.0 (use nullable: true to \
                         allow null), found {}",
                        repr(other)
                    ),
                ));
            }
        },
        "x-kubernetes-int-or-string" if value == &Value::Bool(true) => Keyword::IntOrString,
        "enum" => match value {
            Value::Array(_) => Keyword::Enum(value.clone()),
            other => {
                return Err(invalid(
                    at,
                    format!("enum must be a list, found {}", repr(other)),
                ));
            }
        },
        "pattern" => match value {
            Value::String(source) => Keyword::Pattern {
                regex: compile_regex(source, at)?,
                source: source.clone(),
            },
            other => {
                return Err(invalid(
                    at,
                    format!("pattern must be a string, found {}", repr(other)),
                ));
            }
        },
        "minLength" => Keyword::MinLength(count(value, at, key)?),
        "maxLength" => Keyword::MaxLength(count(value, at, key)?),
        "minItems" => Keyword::MinItems(count(value, at, key)?),
        "maxItems" => Keyword::MaxItems(count(value, at, key)?),
        "minProperties" => Keyword::MinProperties(count(value, at, key)?),
        "maxProperties" => Keyword::MaxProperties(count(value, at, key)?),
        // OAS 3.0 (draft 4): exclusiveMinimum/Maximum are flags read by minimum/maximum.
        "minimum" => Keyword::Minimum {
            limit: number(value, at, key)?,
            exclusive: map.get("exclusiveMinimum").is_some_and(truthy),
        },
        "maximum" => Keyword::Maximum {
            limit: number(value, at, key)?,
            exclusive: map.get("exclusiveMaximum").is_some_and(truthy),
        },
        "multipleOf" => {
            let n = number(value, at, key)?;
            if n.as_f64().is_none_or(|f| f <= 0.0) {
                return Err(invalid(at, "multipleOf must be greater than 0"));
            }
            Keyword::MultipleOf(n)
        }
        "uniqueItems" if truthy(value) => Keyword::UniqueItems,
        "required" => {
            let names = match value {
                Value::Array(items) => items
                    .iter()
                    .map(|item| match item {
                        Value::String(s) => Ok(s.clone()),
                        other => Err(invalid(
                            at,
                            format!("required must list property names, found {}", repr(other)),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                other => {
                    return Err(invalid(
                        at,
                        format!("required must be a list, found {}", repr(other)),
                    ));
                }
            };
            // openapi-schema-validator skips required properties marked readOnly or writeOnly.
            let properties = map.get("properties").and_then(Value::as_object);
            let enforced = names
                .into_iter()
                .filter(|name| {
                    let flagged = |flag| {
                        properties
                            .and_then(|p| p.get(name))
                            .and_then(|p| p.get(flag))
                            .is_some_and(truthy)
                    };
                    !flagged("readOnly") && !flagged("writeOnly")
                })
                .collect();
            Keyword::Required(enforced)
        }
        "properties" => match value {
            Value::Object(properties) => Keyword::Properties(
                properties
                    .iter()
                    .map(|(name, sub)| {
                        Ok((
                            name.clone(),
                            compile_node(sub, child_pointer(at, name), depth + 1)?,
                        ))
                    })
                    .collect::<Result<_, SchemaError>>()?,
            ),
            other => {
                return Err(invalid(
                    at,
                    format!("properties must be an object, found {}", repr(other)),
                ));
            }
        },
        "additionalProperties" => {
            let schema = match value {
                Value::Bool(true) => return Ok(None),
                Value::Bool(false) => AdditionalProperties::Forbidden,
                Value::Object(_) => {
                    AdditionalProperties::Schema(compile_node(value, at.to_string(), depth + 1)?)
                }
                other => {
                    return Err(invalid(
                        at,
                        format!(
                            "additionalProperties must be a boolean or a schema, found {}",
                            repr(other)
                        ),
                    ));
                }
            };
            let declared = map
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            // jsonschema's find_additional_properties also exempts patternProperties matches.
            let patterns = match map.get("patternProperties") {
                Some(Value::Object(p)) if !p.is_empty() => {
                    let joined = p.keys().cloned().collect::<Vec<_>>().join("|");
                    Some(compile_regex(
                        &joined,
                        &child_pointer(pointer, "patternProperties"),
                    )?)
                }
                _ => None,
            };
            Keyword::AdditionalProperties {
                schema,
                declared,
                patterns,
            }
        }
        "items" => match value {
            Value::Array(_) => {
                return Err(invalid(
                    at,
                    "items must be a single schema in OpenAPI 3.0, not a list",
                ));
            }
            _ => Keyword::Items(compile_node(value, at.to_string(), depth + 1)?),
        },
        "allOf" => Keyword::AllOf(
            subschemas(value, at, key, depth)?
                .into_iter()
                .map(|(node, _)| node)
                .collect(),
        ),
        "anyOf" => Keyword::AnyOf(
            subschemas(value, at, key, depth)?
                .into_iter()
                .map(|(node, _)| node)
                .collect(),
        ),
        "oneOf" => Keyword::OneOf(subschemas(value, at, key, depth)?),
        "not" => Keyword::Not(
            compile_node(value, at.to_string(), depth + 1)?,
            value.clone(),
        ),
        "$ref" => {
            return Err(invalid(
                at,
                "$ref is not supported (Kubernetes structural schemas do not allow it)",
            ));
        }
        _ => return Ok(None),
    };
    Ok(Some(keyword))
}
