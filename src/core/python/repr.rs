//! Python's `repr()` of the objects `json.loads` gives: what Python prints for a JSON value
//! (in a `ValidationError`, [`super::pprint`]), and the float repr `json.dumps` writes too
//! ([`super::json`]).

use serde_json::{Number, Value};

/// `repr(value)` of the Python object `json.loads` would give for `value`.
pub(crate) fn repr(value: &Value) -> String {
    let mut out = String::new();
    super::write_nested(value, &mut out, write_leaf, key);
    out
}

/// The values `repr()` writes itself; lists and dicts go through [`super::write_nested`].
fn write_leaf(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&repr_number(n)),
        Value::String(s) => out.push_str(&repr_str(s)),
        Value::Array(_) | Value::Object(_) => super::write_nested(value, out, write_leaf, key),
    }
}

fn key(name: &str, out: &mut String) {
    out.push_str(&repr_str(name));
}

/// `repr(n)`: integers as written, floats in Python's shortest round-trip form.
pub(crate) fn repr_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    match n.as_f64() {
        Some(f) => repr_float(f),
        None => n.to_string(),
    }
}

/// Python's `float.__repr__`: the shortest digits that round-trip, in positional notation
/// when the decimal exponent is in [-4, 16), scientific (`1e+16`, `1.5e-05`) otherwise.
fn repr_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0.0");
    }
    // Rust's `{:e}` also prints the shortest round-trip digits: "1.2345e15".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i64 = exponent.parse().unwrap_or(0);
    // value = 0.d1d2d3... × 10^point
    let point = exponent + 1;
    let len = digits.len() as i64;
    if !(-4 < point && point <= 16) {
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exponent.abs())
    } else if point <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
    } else if len <= point {
        format!("{sign}{digits}{}.0", "0".repeat((point - len) as usize))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{sign}{int}.{frac}")
    }
}

/// Python's `str.__repr__`: single quotes unless the text holds `'` and no `"`; escapes for
/// the quote, backslash, `\t \n \r`, other control characters and non-printable characters.
pub(crate) fn repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if (c as u32) < 0x7f || is_printable(c) => out.push(c),
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
    out
}

/// An approximation of Python's `str.isprintable` for non-ASCII characters: false for the
/// control, format, separator and private-use characters one meets in practice.
fn is_printable(c: char) -> bool {
    !matches!(c as u32,
        0x80..=0xa0 | 0xad | 0x1680 | 0x180e | 0x2000..=0x200f | 0x2028..=0x202f
        | 0x205f..=0x2064 | 0x2066..=0x206f | 0x3000 | 0xd800..=0xf8ff | 0xfeff
        | 0xfff9..=0xfffb | 0xf0000..)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repr_matches_python_for_scalars() {
        assert_eq!(repr(&json!(null)), "None");
        assert_eq!(repr(&json!(true)), "True");
        assert_eq!(repr(&json!(-3)), "-3");
        assert_eq!(repr(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(repr(&json!("it's")), "\"it's\"");
        assert_eq!(repr(&json!("a'b\"c")), "'a\\'b\"c'");
        assert_eq!(
            repr(&json!("tab\there\n\u{1}é\u{a0}")),
            "'tab\\there\\n\\x01é\\xa0'"
        );
        assert_eq!(
            repr(&json!({"a": [1, "x"], "b": {}})),
            "{'a': [1, 'x'], 'b': {}}"
        );
    }

    #[test]
    fn floats_use_python_shortest_repr() {
        for (f, expected) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.25e-7, "1.25e-07"),
            (123.456, "123.456"),
            (1e300, "1e+300"),
        ] {
            assert_eq!(repr(&json!(f)), expected, "{f}");
        }
    }
}
