//! Python's `json.dumps` with default settings, as Poolboy's templates call it (the `to_json`
//! filter, `json_query` results): `", "` and `": "` separators, non-ASCII escaped as `\uXXXX`,
//! floats in Python's repr.

use serde_json::Value;

use super::repr::repr_number;

/// `json.dumps(value)`.
pub(crate) fn dumps(value: &Value) -> String {
    let mut out = String::new();
    super::write_nested(value, &mut out, write_leaf, key);
    out
}

/// The values json.dumps writes itself; lists and dicts are written as `repr()` writes them.
fn write_leaf(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // json.dumps writes numbers as repr() does (serde_json numbers are finite: its NaN
        // and Infinity cannot occur).
        Value::Number(n) => out.push_str(&repr_number(n)),
        Value::String(s) => write_json_string(out, s),
        Value::Array(_) | Value::Object(_) => super::write_nested(value, out, write_leaf, key),
    }
}

fn key(name: &str, out: &mut String) {
    write_json_string(out, name);
}

fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dumps_matches_python() {
        let value = json!({"a": 1, "b": [true, null, "x\"é😀"], "c": {"d": 1.5, "e": 2.0, "f": 1e20, "g": 1.5e-7}});
        assert_eq!(
            dumps(&value),
            r#"{"a": 1, "b": [true, null, "x\"\u00e9\ud83d\ude00"], "c": {"d": 1.5, "e": 2.0, "f": 1e+20, "g": 1.5e-07}}"#
        );
    }
}
