//! `pprint.pformat(width=72, sort_dicts=False)` of JSON values, as the `jsonschema` package
//! prints them in a `ValidationError`. Poolboy stores `str(exception)` in
//! `status.resources[i].validationError` and in `Parameter <n> schema validation failed:`
//! (Poolboy 1.12 §7 step 6, §8), so the broker reproduces that text.

use serde_json::{Map, Value};

use super::repr::{repr, repr_str};

/// `pprint`'s line width as `jsonschema.exceptions._pretty` sets it.
const WIDTH: usize = 72;

/// `pprint.pformat(value, width=72, sort_dicts=False)`.
pub(crate) fn pformat(value: &Value) -> String {
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
