//! OpenAPI 3.0 schemas as Poolboy reads them: `validation.openAPIV3Schema` of a provider
//! (claim templates, Poolboy 1.12 §3.4, §7 step 6) and of a parameter (§8), the defaults
//! extracted from a schema (§6.3 step 2), and a cache of compiled schemas.
//!
//! Validation evaluates the keywords of Poolboy 1.17's Python `OAS30Validator` in the same order
//! and reports the *first* error in the same text ([`SchemaViolation`]); the decisions where it
//! differs (`nullable`, `x-kubernetes-int-or-string`, [`SchemaError`] up front) are pinned by the
//! module tests (docs/design.md, "core::provider::schema").

mod cache;
mod compile;
mod defaults;
mod violation;
mod walk;

#[cfg(test)]
mod tests;

use serde_json::Value;
use thiserror::Error;

pub(crate) use cache::SchemaCache;
use compile::{Node, compile_node};
pub(crate) use defaults::{defaults_from_schema, schema_default};
pub(crate) use violation::SchemaViolation;
use violation::ViolationDetail;
use walk::{FailedSchema, Walk};

/// A provider or parameter schema that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum SchemaError {
    /// The schema is malformed at `path` (a JSON pointer into the schema, `#` is the root).
    #[error("invalid OpenAPI schema at {path}: {problem}")]
    Invalid { path: String, problem: String },
}

/// A compiled OpenAPI 3.0 schema.
#[derive(Debug)]
pub(crate) struct OpenApiSchema {
    source: Value,
    root: Node,
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
