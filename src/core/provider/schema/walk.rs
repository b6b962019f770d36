//! Validating an instance: Python's walk over the compiled keywords, stopping at the first
//! violation (`Validator.validate` raises the first error `iter_errors` yields).

use std::collections::HashSet;

use serde_json::{Number, Value};

use super::compile::{AdditionalProperties, Keyword, Node, OasType, ObjectNode};
use super::violation::PathSegment;
use crate::core::python::repr::{repr, repr_number, repr_str};

/// Which sub-schema a violation is printed with.
pub(super) enum FailedSchema<'s> {
    Bool(bool),
    Pointer(&'s str),
}

pub(super) struct Found<'s, 'i> {
    pub(super) message: String,
    pub(super) keyword: Option<&'static str>,
    pub(super) instance_path: Vec<PathSegment>,
    pub(super) schema_path: Vec<PathSegment>,
    pub(super) schema: FailedSchema<'s>,
    pub(super) instance: &'i Value,
}

/// The walk's current position, as Python's `descend` builds `path` and `schema_path`.
pub(super) struct Walk {
    pub(super) instance_path: Vec<PathSegment>,
    pub(super) schema_path: Vec<PathSegment>,
}

fn is_valid_node(node: &Node, instance: &Value) -> bool {
    let mut walk = Walk {
        instance_path: Vec::new(),
        schema_path: Vec::new(),
    };
    walk.first_error(node, instance).is_none()
}

impl Walk {
    pub(super) fn first_error<'s, 'i>(
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
