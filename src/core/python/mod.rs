//! What Python prints, reproduced where Poolboy's output depends on it: `repr()` (one float
//! repr for everything), `pprint.pformat` and `json.dumps`.

pub(crate) mod json;
pub(crate) mod pprint;
pub(crate) mod repr;

use serde_json::Value;

/// Writes `value` as Python's `repr()` and `json.dumps` both do for lists and dicts (`[a, b]`,
/// `{k: v}`, with `", "` and `": "`); `leaf` writes every other value and `key` a dict key,
/// which is where the two differ (`None` / `null`, quoting and escapes).
fn write_nested(
    value: &Value,
    out: &mut String,
    leaf: fn(&Value, &mut String),
    key: fn(&str, &mut String),
) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_nested(item, out, leaf, key);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (name, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                key(name, out);
                out.push_str(": ");
                write_nested(item, out, leaf, key);
            }
            out.push('}');
        }
        leaf_value => leaf(leaf_value, out),
    }
}
