//! Schema fragments schemars cannot derive: free-form objects must say
//! `x-kubernetes-preserve-unknown-fields`, or the API server rejects the CRD as non-structural
//! (a bare `serde_json::Value` derives to `{}`; notes §0.9).

use schemars::{Schema, SchemaGenerator, json_schema};

/// Any object, kept as written (templates, states, vars, parameter values).
pub(super) fn free_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Any JSON value (a parameter default, a schema default).
pub(super) fn free_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A lifespan interval in the single-unit form the CRD accepts (`30m`, `2d`).
pub(super) fn simple_interval(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": "^[0-9]+[smhd]$",
    })
}

/// An RFC 3339 timestamp.
pub(super) fn date_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "format": "date-time",
    })
}

/// A label value (Δ§2.4).
pub(super) fn label_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "type": "string",
            "pattern": "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$",
        },
    })
}
