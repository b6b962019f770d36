//! OpenAPI 3.0 schemas as Poolboy reads them: `validation.openAPIV3Schema` of a provider
//! (claim templates, Poolboy 1.12 §3.4, §7 step 6) and of a parameter (§8), the defaults
//! extracted from a schema (§6.3 step 2), and a cache of compiled schemas.
//!
//! Poolboy 1.17 validates with Python `openapi-schema-validator` 0.8.1 `OAS30Validator(schema)`
//! on `jsonschema` 4.26 and stores `str(exception)`. This module evaluates the same keywords in
//! the same order and renders the same text (see [`SchemaViolation`]). It is a direct
//! evaluator rather than a rewrite for the `jsonschema` crate because the reported error must
//! be the *first* one in Python's walk (schema key order), printed with the original OAS
//! sub-schema, and OAS null semantics live in `type`; see the tests for the differential
//! check against `jsonschema` 0.60 (draft 4) on the keywords both understand.
//!
//! Decisions (the module tests pin each one):
//! - `nullable: true` accepts `null` for the whole schema object, also with `enum`, `anyOf`,
//!   `allOf`, `oneOf` (Kubernetes' reading). Poolboy accepts `null` only through `type`, so it
//!   rejects it when an `enum` lacks `null` or the type sits in `anyOf` branches.
//! - Without `nullable: true`, a typed schema rejects `null` with `None for not nullable`.
//! - `x-kubernetes-int-or-string: true` requires an integer or a string (Kubernetes); Poolboy
//!   ignores the marker.
//! - `format` is not checked: Poolboy builds `OAS30Validator` without a format checker.
//! - `x-kubernetes-preserve-unknown-fields` and unknown keywords have no effect.
//! - A schema Python would only trip over while validating (unknown type, list-valued `type`
//!   or `items`, bad regex, non-numeric bound, `$ref`) is a [`SchemaError`] up front.

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Number, Value};
use thiserror::Error;

use crate::core::python::pprint::pformat;
use crate::core::python::repr::{repr, repr_number, repr_str};

/// Schemas nest at most this deep; deeper ones are refused rather than risking the stack.
const MAX_DEPTH: usize = 64;

/// A provider or parameter schema that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum SchemaError {
    /// The schema is malformed at `path` (a JSON pointer into the schema, `#` is the root).
    #[error("invalid OpenAPI schema at {path}: {problem}")]
    Invalid { path: String, problem: String },
}

/// The first rule an instance breaks, as Python's `jsonschema` reports it.
///
/// `Display` is Python's `str(ValidationError)`, which Poolboy stores, e.g.
///
/// ```text
/// 'abc' is not of type 'integer'
///
/// Failed validating 'type' in schema['properties']['count']:
///     {'type': 'integer'}
///
/// On instance['count']:
///     'abc'
/// ```
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SchemaViolation(Box<ViolationDetail>);

#[derive(Debug, Clone, PartialEq)]
struct ViolationDetail {
    message: String,
    keyword: Option<&'static str>,
    instance_path: Vec<PathSegment>,
    schema_path: Vec<PathSegment>,
    schema: Value,
    instance: Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PathSegment {
    Key(String),
    Index(usize),
}

#[cfg(test)]
impl SchemaViolation {
    /// The one-line message (Python's `e.message`), e.g. `'abc' is not of type 'integer'`.
    pub(crate) fn message(&self) -> &str {
        &self.0.message
    }

    /// The rule that failed (`type`, `enum`, `required`, …); `None` for a `false` schema.
    pub(crate) fn keyword(&self) -> Option<&str> {
        self.0.keyword
    }

    /// Where in the instance the rule failed, as a JSON pointer (`""` is the instance itself).
    pub(crate) fn instance_pointer(&self) -> String {
        self.0
            .instance_path
            .iter()
            .map(|segment| match segment {
                PathSegment::Key(key) => format!("/{}", key.replace('~', "~0").replace('/', "~1")),
                PathSegment::Index(i) => format!("/{i}"),
            })
            .collect()
    }
}

/// `jsonschema._utils.format_as_index`: `schema['properties'][0]`, or the bare container.
fn format_as_index(container: &str, path: &[PathSegment]) -> String {
    let mut out = container.to_string();
    for segment in path {
        out.push('[');
        match segment {
            PathSegment::Key(key) => out.push_str(&repr_str(key)),
            PathSegment::Index(i) => out.push_str(&i.to_string()),
        }
        out.push(']');
    }
    out
}

/// Continuation lines of a pretty-printed value sit four spaces in, as after `dedent`.
fn indented(value: &Value) -> String {
    pformat(value).replace('\n', "\n    ")
}

impl fmt::Display for SchemaViolation {
    // jsonschema 4.26 `_Error.__str__`; the schema path leaves out the failing keyword.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let detail = &self.0;
        let parent = &detail.schema_path[..detail.schema_path.len().saturating_sub(1)];
        let keyword = detail.keyword.map_or_else(|| "None".to_string(), repr_str);
        write!(
            f,
            "{}\n\nFailed validating {} in {}:\n    {}\n\nOn {}:\n    {}",
            detail.message,
            keyword,
            format_as_index("schema", parent),
            indented(&detail.schema),
            format_as_index("instance", &detail.instance_path),
            indented(&detail.instance),
        )
    }
}

impl std::error::Error for SchemaViolation {}

/// A compiled OpenAPI 3.0 schema.
#[derive(Debug)]
pub(crate) struct OpenApiSchema {
    source: Value,
    root: Node,
}

#[derive(Debug)]
enum Node {
    Bool(bool),
    Object(Box<ObjectNode>),
}

#[derive(Debug)]
struct ObjectNode {
    /// JSON pointer of this sub-schema in the source, to print it in a violation.
    pointer: String,
    nullable: bool,
    /// In the schema's key order: Python reports the first failure in that order.
    keywords: Vec<Keyword>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OasType {
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

    fn name(self) -> &'static str {
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
    fn matches(self, value: &Value) -> bool {
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
enum Keyword {
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
enum AdditionalProperties {
    Forbidden,
    Schema(Node),
}

impl Keyword {
    fn name(&self) -> &'static str {
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

impl OpenApiSchema {
    /// Checks and compiles an OpenAPI 3.0 schema (a provider's or a parameter's
    /// `openAPIV3Schema`).
    pub(crate) fn compile(schema: &Value) -> Result<Self, SchemaError> {
        let root = compile_node(schema, String::new(), 0)?;
        Ok(Self {
            source: schema.clone(),
            root,
        })
    }

    /// Validates `instance`; the error is the first violation in Python's order.
    pub(crate) fn validate(&self, instance: &Value) -> Result<(), SchemaViolation> {
        let mut walk = Walk {
            instance_path: Vec::new(),
            schema_path: Vec::new(),
        };
        match walk.first_error(&self.root, instance) {
            None => Ok(()),
            Some(found) => Err(SchemaViolation(Box::new(ViolationDetail {
                message: found.message,
                keyword: found.keyword,
                instance_path: found.instance_path,
                schema_path: found.schema_path,
                schema: match found.schema {
                    FailedSchema::Bool(b) => Value::Bool(b),
                    FailedSchema::Pointer(pointer) => {
                        self.source.pointer(pointer).cloned().unwrap_or(Value::Null)
                    }
                },
                instance: found.instance.clone(),
            }))),
        }
    }

    /// Whether `instance` satisfies the schema.
    #[cfg(test)]
    pub(crate) fn is_valid(&self, instance: &Value) -> bool {
        self.validate(instance).is_ok()
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

fn compile_node(schema: &Value, pointer: String, depth: usize) -> Result<Node, SchemaError> {
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

/// Which sub-schema a violation is printed with.
enum FailedSchema<'s> {
    Bool(bool),
    Pointer(&'s str),
}

struct Found<'s, 'i> {
    message: String,
    keyword: Option<&'static str>,
    instance_path: Vec<PathSegment>,
    schema_path: Vec<PathSegment>,
    schema: FailedSchema<'s>,
    instance: &'i Value,
}

/// The walk's current position, as Python's `descend` builds `path` and `schema_path`.
struct Walk {
    instance_path: Vec<PathSegment>,
    schema_path: Vec<PathSegment>,
}

fn is_valid_node(node: &Node, instance: &Value) -> bool {
    let mut walk = Walk {
        instance_path: Vec::new(),
        schema_path: Vec::new(),
    };
    walk.first_error(node, instance).is_none()
}

impl Walk {
    fn first_error<'s, 'i>(
        &mut self,
        node: &'s Node,
        instance: &'i Value,
    ) -> Option<Found<'s, 'i>> {
        let object = match node {
            Node::Bool(true) => return None,
            Node::Bool(false) => {
                return Some(Found {
                    message: format!("False schema does not allow {}", repr(instance)),
                    keyword: None,
                    instance_path: self.instance_path.clone(),
                    schema_path: self.schema_path.clone(),
                    schema: FailedSchema::Bool(false),
                    instance,
                });
            }
            Node::Object(object) => object,
        };
        // Decision (module docs): null at a nullable schema is valid, whatever else it says.
        if object.nullable && instance.is_null() {
            return None;
        }
        for keyword in &object.keywords {
            if let Some(found) = self.check(object, keyword, instance) {
                return Some(found);
            }
        }
        None
    }

    fn fail<'s, 'i>(
        &self,
        object: &'s ObjectNode,
        keyword: &Keyword,
        instance: &'i Value,
        message: String,
    ) -> Option<Found<'s, 'i>> {
        let mut schema_path = self.schema_path.clone();
        schema_path.push(PathSegment::Key(keyword.name().to_string()));
        Some(Found {
            message,
            keyword: Some(keyword.name()),
            instance_path: self.instance_path.clone(),
            schema_path,
            schema: FailedSchema::Pointer(&object.pointer),
            instance,
        })
    }

    /// Validates `instance` against `node` one level down, as Python's `descend`: the
    /// keyword joins the schema path, then `schema_segment` and `instance_segment`.
    fn descend<'s, 'i>(
        &mut self,
        node: &'s Node,
        instance: &'i Value,
        keyword: &'static str,
        schema_segment: Option<PathSegment>,
        instance_segment: Option<PathSegment>,
    ) -> Option<Found<'s, 'i>> {
        if let Node::Bool(false) = node {
            // jsonschema returns a `false` schema's error before adding this level's segments.
            let mut schema_path = self.schema_path.clone();
            schema_path.push(PathSegment::Key(keyword.to_string()));
            return Some(Found {
                message: format!("False schema does not allow {}", repr(instance)),
                keyword: None,
                instance_path: self.instance_path.clone(),
                schema_path,
                schema: FailedSchema::Bool(false),
                instance,
            });
        }
        let depth = (self.schema_path.len(), self.instance_path.len());
        self.schema_path.push(PathSegment::Key(keyword.to_string()));
        self.schema_path.extend(schema_segment);
        self.instance_path.extend(instance_segment);
        let found = self.first_error(node, instance);
        self.schema_path.truncate(depth.0);
        self.instance_path.truncate(depth.1);
        found
    }

    fn check<'s, 'i>(
        &mut self,
        object: &'s ObjectNode,
        keyword: &'s Keyword,
        instance: &'i Value,
    ) -> Option<Found<'s, 'i>> {
        let shown = || repr(instance);
        let key = |name: &str| PathSegment::Key(name.to_string());
        match keyword {
            Keyword::Type(t) => {
                if instance.is_null() {
                    // openapi-schema-validator's `type` keyword owns OAS null handling.
                    return self.fail(object, keyword, instance, "None for not nullable".into());
                }
                if !t.matches(instance) {
                    let message = format!("{} is not of type '{}'", shown(), t.name());
                    return self.fail(object, keyword, instance, message);
                }
            }
            Keyword::IntOrString => {
                if !(OasType::Integer.matches(instance) || instance.is_string()) {
                    let message = format!("{} is not of type 'integer', 'string'", shown());
                    return self.fail(object, keyword, instance, message);
                }
            }
            Keyword::Enum(options) => {
                let listed = options
                    .as_array()
                    .is_some_and(|o| o.iter().any(|option| python_equal(option, instance)));
                if !listed {
                    let message = format!("{} is not one of {}", shown(), repr(options));
                    return self.fail(object, keyword, instance, message);
                }
            }
            Keyword::Pattern { source, regex } => {
                if let Value::String(s) = instance {
                    let message = match regex.is_match(s) {
                        Ok(true) => return None,
                        Ok(false) => format!("{} does not match {}", shown(), repr_str(source)),
                        // fancy-regex gives up on runaway backtracking; Python would hang.
                        Err(e) => format!(
                            "{} could not be matched against {} ({e})",
                            shown(),
                            repr_str(source)
                        ),
                    };
                    return self.fail(object, keyword, instance, message);
                }
            }
            Keyword::MinLength(limit) => {
                if let Value::String(s) = instance
                    && (s.chars().count() as f64) < *limit
                {
                    let words = if *limit == 1.0 {
                        "should be non-empty"
                    } else {
                        "is too short"
                    };
                    return self.fail(object, keyword, instance, format!("{} {words}", shown()));
                }
            }
            Keyword::MaxLength(limit) => {
                if let Value::String(s) = instance
                    && (s.chars().count() as f64) > *limit
                {
                    let words = if *limit == 0.0 {
                        "is expected to be empty"
                    } else {
                        "is too long"
                    };
                    return self.fail(object, keyword, instance, format!("{} {words}", shown()));
                }
            }
            Keyword::Minimum { limit, exclusive } => {
                if let Value::Number(n) = instance {
                    let order = compare_numbers(n, limit);
                    let (failed, words) = if *exclusive {
                        (order.is_le(), "less than or equal to")
                    } else {
                        (order.is_lt(), "less than")
                    };
                    if failed {
                        let message = format!(
                            "{} is {words} the minimum of {}",
                            shown(),
                            repr_number(limit)
                        );
                        return self.fail(object, keyword, instance, message);
                    }
                }
            }
            Keyword::Maximum { limit, exclusive } => {
                if let Value::Number(n) = instance {
                    let order = compare_numbers(n, limit);
                    let (failed, words) = if *exclusive {
                        (order.is_ge(), "greater than or equal to")
                    } else {
                        (order.is_gt(), "greater than")
                    };
                    if failed {
                        let message = format!(
                            "{} is {words} the maximum of {}",
                            shown(),
                            repr_number(limit)
                        );
                        return self.fail(object, keyword, instance, message);
                    }
                }
            }
            Keyword::MultipleOf(divisor) => {
                if let Value::Number(n) = instance
                    && !is_multiple(n, divisor)
                {
                    let message =
                        format!("{} is not a multiple of {}", shown(), repr_number(divisor));
                    return self.fail(object, keyword, instance, message);
                }
            }
            Keyword::MinItems(limit) => {
                if let Value::Array(items) = instance
                    && (items.len() as f64) < *limit
                {
                    let words = if *limit == 1.0 {
                        "should be non-empty"
                    } else {
                        "is too short"
                    };
                    return self.fail(object, keyword, instance, format!("{} {words}", shown()));
                }
            }
            Keyword::MaxItems(limit) => {
                if let Value::Array(items) = instance
                    && (items.len() as f64) > *limit
                {
                    let words = if *limit == 0.0 {
                        "is expected to be empty"
                    } else {
                        "is too long"
                    };
                    return self.fail(object, keyword, instance, format!("{} {words}", shown()));
                }
            }
            Keyword::UniqueItems => {
                if let Value::Array(items) = instance
                    && !all_unique(items)
                {
                    let message = format!("{} has non-unique elements", shown());
                    return self.fail(object, keyword, instance, message);
                }
            }
            Keyword::MinProperties(limit) => {
                if let Value::Object(map) = instance
                    && (map.len() as f64) < *limit
                {
                    let words = if *limit == 1.0 {
                        "should be non-empty"
                    } else {
                        "does not have enough properties"
                    };
                    return self.fail(object, keyword, instance, format!("{} {words}", shown()));
                }
            }
            Keyword::MaxProperties(limit) => {
                if let Value::Object(map) = instance
                    && (map.len() as f64) > *limit
                {
                    let words = if *limit == 0.0 {
                        "is expected to be empty"
                    } else {
                        "has too many properties"
                    };
                    return self.fail(object, keyword, instance, format!("{} {words}", shown()));
                }
            }
            Keyword::Required(names) => {
                if let Value::Object(map) = instance
                    && let Some(missing) = names.iter().find(|name| !map.contains_key(*name))
                {
                    let message = format!("{} is a required property", repr_str(missing));
                    return self.fail(object, keyword, instance, message);
                }
            }
            Keyword::Properties(properties) => {
                if let Value::Object(map) = instance {
                    for (name, node) in properties {
                        if let Some(value) = map.get(name) {
                            let found = self.descend(
                                node,
                                value,
                                "properties",
                                Some(key(name)),
                                Some(key(name)),
                            );
                            if found.is_some() {
                                return found;
                            }
                        }
                    }
                }
            }
            Keyword::AdditionalProperties {
                schema,
                declared,
                patterns,
            } => {
                if let Value::Object(map) = instance {
                    // Python collects these in a set; sorted order makes the text stable.
                    let mut extras: Vec<&String> = map
                        .keys()
                        .filter(|name| !declared.contains(*name))
                        .filter(|name| {
                            patterns
                                .as_ref()
                                .is_none_or(|p| !p.is_match(name).unwrap_or(false))
                        })
                        .collect();
                    extras.sort();
                    match schema {
                        AdditionalProperties::Forbidden if !extras.is_empty() => {
                            let listed: Vec<String> =
                                extras.iter().map(|name| repr_str(name)).collect();
                            let verb = if extras.len() == 1 { "was" } else { "were" };
                            let message = format!(
                                "Additional properties are not allowed ({} {verb} unexpected)",
                                listed.join(", ")
                            );
                            return self.fail(object, keyword, instance, message);
                        }
                        AdditionalProperties::Forbidden => {}
                        AdditionalProperties::Schema(node) => {
                            for name in extras {
                                let Some(value) = map.get(name) else { continue };
                                let found = self.descend(
                                    node,
                                    value,
                                    "additionalProperties",
                                    None,
                                    Some(key(name)),
                                );
                                if found.is_some() {
                                    return found;
                                }
                            }
                        }
                    }
                }
            }
            Keyword::Items(node) => {
                if let Value::Array(items) = instance {
                    for (i, item) in items.iter().enumerate() {
                        let found =
                            self.descend(node, item, "items", None, Some(PathSegment::Index(i)));
                        if found.is_some() {
                            return found;
                        }
                    }
                }
            }
            Keyword::AllOf(nodes) => {
                for (i, node) in nodes.iter().enumerate() {
                    let found =
                        self.descend(node, instance, "allOf", Some(PathSegment::Index(i)), None);
                    if found.is_some() {
                        return found;
                    }
                }
            }
            Keyword::AnyOf(nodes) => {
                if !nodes.iter().any(|node| is_valid_node(node, instance)) {
                    let message =
                        format!("{} is not valid under any of the given schemas", shown());
                    return self.fail(object, keyword, instance, message);
                }
            }
            Keyword::OneOf(branches) => {
                let Some(first) = branches
                    .iter()
                    .position(|(node, _)| is_valid_node(node, instance))
                else {
                    let message =
                        format!("{} is not valid under any of the given schemas", shown());
                    return self.fail(object, keyword, instance, message);
                };
                // Python lists the other valid branches, then the first one.
                let mut valid: Vec<&Value> = branches[first + 1..]
                    .iter()
                    .filter(|(node, _)| is_valid_node(node, instance))
                    .map(|(_, raw)| raw)
                    .collect();
                if !valid.is_empty() {
                    valid.push(&branches[first].1);
                    let listed: Vec<String> = valid.into_iter().map(repr).collect();
                    let message =
                        format!("{} is valid under each of {}", shown(), listed.join(", "));
                    return self.fail(object, keyword, instance, message);
                }
            }
            Keyword::Not(node, raw) => {
                if is_valid_node(node, instance) {
                    let message = format!("{} should not be valid under {}", shown(), repr(raw));
                    return self.fail(object, keyword, instance, message);
                }
            }
        }
        None
    }
}

fn as_integer(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Python compares ints exactly and int with float by value.
fn compare_numbers(a: &Number, b: &Number) -> std::cmp::Ordering {
    match (as_integer(a), as_integer(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => {
            let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal)
        }
    }
}

/// jsonschema's `multipleOf`: integer remainder, or for a float divisor an integral quotient.
fn is_multiple(n: &Number, divisor: &Number) -> bool {
    match (as_integer(n), as_integer(divisor)) {
        (Some(x), Some(d)) if d != 0 => x % d == 0,
        (None, Some(d)) if d != 0 => n.as_f64().is_some_and(|x| x % (d as f64) == 0.0),
        _ => {
            let (x, d) = (n.as_f64().unwrap_or(0.0), divisor.as_f64().unwrap_or(1.0));
            let quotient = x / d;
            if quotient.is_finite() {
                quotient.trunc() == quotient
            } else {
                x % d == 0.0
            }
        }
    }
}

/// `jsonschema._utils.equal`: `1 == 1.0`, but `True != 1`; mappings ignore key order.
fn python_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y).is_eq(),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| python_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| python_equal(v, w)))
        }
        _ => false,
    }
}

/// A key equal for exactly the values `python_equal` calls equal, so `uniqueItems` is linear.
fn equality_key(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push('n'),
        Value::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Value::Number(n) => match as_integer(n) {
            Some(i) => out.push_str(&format!("i{i};")),
            None => {
                let f = n.as_f64().unwrap_or(0.0);
                if f.fract() == 0.0 && f.abs() < 1e38 {
                    out.push_str(&format!("i{};", f as i128));
                } else {
                    out.push_str(&format!("d{};", f.to_bits()));
                }
            }
        },
        Value::String(s) => out.push_str(&format!("s{}:{s}", s.len())),
        Value::Array(items) => {
            out.push('[');
            for item in items {
                equality_key(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (k, v) in entries {
                out.push_str(&format!("{}:{k}", k.len()));
                equality_key(v, out);
            }
            out.push('}');
        }
    }
}

fn all_unique(items: &[Value]) -> bool {
    let mut seen = HashSet::with_capacity(items.len());
    items.iter().all(|item| {
        let mut key = String::new();
        equality_key(item, &mut key);
        seen.insert(key)
    })
}

/// Compiled schemas shared across reconciles, so each distinct schema compiles once.
///
/// Keyed by the schema's JSON text in its own key order (key order decides which violation
/// is reported first, so differently ordered schemas are different entries). Holds at most
/// `capacity` schemas and evicts the least recently used one: providers change over time and
/// old versions must not pile up.
#[derive(Debug)]
pub(crate) struct SchemaCache {
    capacity: usize,
    state: Mutex<CacheState>,
}

#[derive(Debug, Default)]
struct CacheState {
    entries: HashMap<String, CacheEntry>,
    clock: u64,
}

#[derive(Debug)]
struct CacheEntry {
    schema: Arc<OpenApiSchema>,
    last_used: u64,
}

impl Default for SchemaCache {
    fn default() -> Self {
        Self::with_capacity(Self::DEFAULT_CAPACITY)
    }
}

impl SchemaCache {
    /// Room for every provider and parameter schema of a large installation.
    pub(crate) const DEFAULT_CAPACITY: usize = 1024;

    /// A cache holding at most `capacity` compiled schemas (at least one).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            state: Mutex::new(CacheState::default()),
        }
    }

    /// The compiled form of `schema`, compiling it on first use. Errors are not cached.
    pub(crate) fn get_or_compile(&self, schema: &Value) -> Result<Arc<OpenApiSchema>, SchemaError> {
        let key = schema.to_string();
        {
            let mut state = self.lock();
            state.clock += 1;
            let now = state.clock;
            if let Some(entry) = state.entries.get_mut(&key) {
                entry.last_used = now;
                return Ok(Arc::clone(&entry.schema));
            }
        }
        // Compile outside the lock; if another thread got there first, keep its copy.
        let compiled = Arc::new(OpenApiSchema::compile(schema)?);
        let mut state = self.lock();
        state.clock += 1;
        let now = state.clock;
        if let Some(entry) = state.entries.get_mut(&key) {
            entry.last_used = now;
            return Ok(Arc::clone(&entry.schema));
        }
        if state.entries.len() >= self.capacity {
            let oldest = state
                .entries
                .iter()
                .min_by_key(|(_, entry)| entry.last_used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                state.entries.remove(&oldest);
            }
        }
        state.entries.insert(
            key,
            CacheEntry {
                schema: Arc::clone(&compiled),
                last_used: now,
            },
        );
        Ok(compiled)
    }

    /// How many compiled schemas are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        // A panic elsewhere while holding the lock leaves the map consistent: keep using it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

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
