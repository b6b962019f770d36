//! Python's `repr()` and `pprint.pformat(width=72, sort_dicts=False)` of JSON values, as the
//! `jsonschema` package prints them in a `ValidationError`. Poolboy stores `str(exception)`
//! in `status.resources[i].validationError` and in `Parameter <n> schema validation failed:`
//! (Poolboy 1.12 §7 step 6, §8), so the broker reproduces that text.

use serde_json::{Map, Number, Value};

/// `pprint`'s line width as `jsonschema.exceptions._pretty` sets it.
const WIDTH: usize = 72;

/// `repr(value)` of the Python object `json.loads` would give for `value`.
pub(super) fn repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(value, &mut out);
    out
}

fn write_repr(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&repr_number(n)),
        Value::String(s) => out.push_str(&repr_str(s)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&repr_str(key));
                out.push_str(": ");
                write_repr(item, out);
            }
            out.push('}');
        }
    }
}

/// `repr(n)`: integers as written, floats in Python's shortest round-trip form.
pub(super) fn repr_number(n: &Number) -> String {
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
pub(super) fn repr_str(s: &str) -> String {
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

/// `pprint.pformat(value, width=72, sort_dicts=False)`.
pub(super) fn pformat(value: &Value) -> String {
    let mut out = String::new();
    format(value, &mut out, 0, 0, 0);
    out
}

fn char_len(s: &str) -> usize {
    s.chars().count()
}

// The functions below follow `pprint.PrettyPrinter` step by step (`_format`, `_pprint_dict`,
// `_format_dict_items`, `_pprint_list`, `_format_items`, `_pprint_str`), indent_per_level 1.
fn format(value: &Value, out: &mut String, indent: usize, allowance: usize, level: usize) {
    let rep = repr(value);
    let max_width = WIDTH as i64 - indent as i64 - allowance as i64;
    if char_len(&rep) as i64 > max_width {
        match value {
            Value::Object(map) => return pprint_dict(map, out, indent, allowance, level + 1),
            Value::Array(items) => return pprint_list(items, out, indent, allowance, level + 1),
            Value::String(s) => return pprint_str(s, out, indent, allowance, level + 1),
            _ => {}
        }
    }
    out.push_str(&rep);
}

fn pprint_dict(
    map: &Map<String, Value>,
    out: &mut String,
    indent: usize,
    allowance: usize,
    level: usize,
) {
    out.push('{');
    let allowance = allowance + 1;
    let indent = indent + 1;
    let last_index = map.len().saturating_sub(1);
    for (i, (key, item)) in map.iter().enumerate() {
        let last = i == last_index;
        let rep = repr_str(key);
        out.push_str(&rep);
        out.push_str(": ");
        let item_allowance = if last { allowance } else { 1 };
        format(
            item,
            out,
            indent + char_len(&rep) + 2,
            item_allowance,
            level,
        );
        if !last {
            out.push_str(",\n");
            out.push_str(&" ".repeat(indent));
        }
    }
    out.push('}');
}

fn pprint_list(items: &[Value], out: &mut String, indent: usize, allowance: usize, level: usize) {
    out.push('[');
    let allowance = allowance + 1;
    let indent = indent + 1;
    let last_index = items.len().saturating_sub(1);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(",\n");
            out.push_str(&" ".repeat(indent));
        }
        let item_allowance = if i == last_index { allowance } else { 1 };
        format(item, out, indent, item_allowance, level);
    }
    out.push(']');
}

fn pprint_str(s: &str, out: &mut String, indent: usize, allowance: usize, level: usize) {
    if s.is_empty() {
        out.push_str(&repr_str(s));
        return;
    }
    let (indent, allowance) = if level == 1 {
        (indent + 1, allowance + 1)
    } else {
        (indent, allowance)
    };
    let max_width = WIDTH as i64 - indent as i64;
    let mut max_width1 = max_width;
    let lines = split_lines_keep_ends(s);
    let mut chunks: Vec<String> = Vec::new();
    let mut last_rep = String::new();
    for (i, line) in lines.iter().enumerate() {
        let rep = repr_str(line);
        let last_line = i == lines.len() - 1;
        if last_line {
            max_width1 -= allowance as i64;
        }
        if char_len(&rep) as i64 <= max_width1 {
            chunks.push(rep.clone());
        } else {
            // Alternating runs of non-space then space, as `re.findall(r'\S*\s*', line)`.
            let parts = word_parts(line);
            let mut max_width2 = max_width;
            let mut current = String::new();
            for (j, part) in parts.iter().enumerate() {
                let candidate = format!("{current}{part}");
                if j == parts.len() - 1 && last_line {
                    max_width2 -= allowance as i64;
                }
                if char_len(&repr_str(&candidate)) as i64 > max_width2 {
                    if !current.is_empty() {
                        chunks.push(repr_str(&current));
                    }
                    current = (*part).to_string();
                } else {
                    current = candidate;
                }
            }
            if !current.is_empty() {
                chunks.push(repr_str(&current));
            }
        }
        last_rep = rep;
    }
    if chunks.len() == 1 {
        // Python writes `rep`, the repr of the last line, which is then the whole string.
        out.push_str(&last_rep);
        return;
    }
    if level == 1 {
        out.push('(');
    }
    for (i, chunk) in chunks.iter().enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(chunk);
    }
    if level == 1 {
        out.push(')');
    }
}

/// Python's `str.isspace` for the characters `\s` matches in a `str` pattern.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// `re.findall(r'\S*\s*', line)` without the trailing empty match.
fn word_parts(line: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in line.char_indices() {
        let space = is_py_space(c);
        if in_space && !space {
            parts.push(&line[start..i]);
            start = i;
        }
        in_space = space;
    }
    if start < line.len() {
        parts.push(&line[start..]);
    }
    parts
}

/// `str.splitlines(keepends=True)`: Python's line boundaries, `\r\n` counted as one.
fn split_lines_keep_ends(s: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\r' => match chars.peek() {
                Some(&(j, '\n')) => {
                    chars.next();
                    j + 1
                }
                _ => i + 1,
            },
            '\n' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => i + c.len_utf8(),
            _ => continue,
        };
        lines.push(&s[start..end]);
        start = end;
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
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

    #[test]
    fn pformat_wraps_like_pprint() {
        // Expected text produced by CPython 3.11 `pprint.pformat(v, width=72, sort_dicts=False)`.
        let v = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z]+$"},
                "count": {"type": "integer", "minimum": 1, "maximum": 10},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["name"],
            "additionalProperties": false
        });
        let expected = "{'type': 'object',\n 'properties': {'name': {'type': 'string', 'pattern': '^[a-z]+$'},\n                'count': {'type': 'integer',\n                          'minimum': 1,\n                          'maximum': 10},\n                'tags': {'type': 'array', 'items': {'type': 'string'}}},\n 'required': ['name'],\n 'additionalProperties': False}";
        assert_eq!(pformat(&v), expected);
    }

    #[test]
    fn pformat_splits_long_strings() {
        let long = "word ".repeat(20);
        let expected = "('word word word word word word word word word word word word word '\n 'word word word word word word word ')";
        assert_eq!(pformat(&json!(long)), expected);
        let nested = json!({"description": "word ".repeat(20)});
        let expected = "{'description': 'word word word word word word word word word word '\n                'word word word word word word word word word word '}";
        assert_eq!(pformat(&nested), expected);
    }
}
