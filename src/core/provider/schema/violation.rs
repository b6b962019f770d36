//! A violation as Python's `jsonschema` 4.26 prints it (`str(ValidationError)`), the text
//! Poolboy stores.

use std::fmt;

use serde_json::Value;

use crate::core::python::pprint::pformat;
use crate::core::python::repr::repr_str;

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
pub(crate) struct SchemaViolation(pub(super) Box<ViolationDetail>);

#[derive(Debug, Clone, PartialEq)]
pub(super) struct ViolationDetail {
    pub(super) message: String,
    pub(super) keyword: Option<&'static str>,
    pub(super) instance_path: Vec<PathSegment>,
    pub(super) schema_path: Vec<PathSegment>,
    pub(super) schema: Value,
    pub(super) instance: Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PathSegment {
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
