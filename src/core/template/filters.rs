//! Poolboy's custom filters (Poolboy 1.12 §5.5, 1.17 Δ§3.4) and the JSON helpers they share.

use minijinja::value::{Kwargs, Serde};
use minijinja::{Environment, Error, ErrorKind, Value};

use super::strgen::strgen;
use super::time::{self, Duration};
use crate::core::lifespan::interval::{format_simple_interval, parse_interval};
use crate::core::python::json::dumps;

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// Python's `str2bool` (1.17 Δ§3.4): `yes/true/t/y/1` → true, `no/false/f/n/0` → false,
/// case-insensitive; anything else → `None`.
pub(super) fn str2bool(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "yes" | "true" | "t" | "y" | "1" => Some(true),
        "no" | "false" | "f" | "n" | "0" => Some(false),
        _ => None,
    }
}

/// A template value as JSON. Undefined values cannot be serialised (Python's json.dumps raises).
pub(super) fn to_json_value(value: &Value) -> Result<serde_json::Value, Error> {
    if value.is_undefined() {
        return Err(Error::new(
            ErrorKind::UndefinedError,
            "cannot convert an undefined value to JSON",
        ));
    }
    serde_json::to_value(value).map_err(|e| invalid(format!("cannot convert value to JSON: {e}")))
}

pub(super) fn from_json_value(value: &serde_json::Value) -> Value {
    Value::from(Serde(value))
}

fn bool_filter(value: Value) -> bool {
    // Poolboy 1.17 Δ§3.4: str2bool for strings (unknown → False), truthiness otherwise.
    match value.as_str() {
        Some(text) => str2bool(text) == Some(true),
        None => value.is_true(),
    }
}

/// Jinja2's `int(default=0, base=10)`: Python's `int()`, then `int(float())`, then the default.
/// (minijinja's own `int` raises on text such as `''` or `'abc'`; Jinja2 gives 0.)
fn int_filter(
    value: Value,
    default: Option<Value>,
    base: Option<u32>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let default = default.or(kwargs.get("default")?).unwrap_or(Value::from(0));
    let base = base.or(kwargs.get("base")?).unwrap_or(10);
    kwargs.assert_all_used()?;
    if value.is_undefined() {
        return Err(Error::new(
            ErrorKind::UndefinedError,
            "int of an undefined value",
        ));
    }
    if !(2..=36).contains(&base) {
        return Err(invalid("int: base must be between 2 and 36"));
    }
    if let Some(text) = value.as_str() {
        let digits = text.trim().replace('_', "");
        let (negative, unsigned) = match digits.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, digits.strip_prefix('+').unwrap_or(&digits)),
        };
        let unsigned = match base {
            16 => unsigned
                .strip_prefix("0x")
                .or_else(|| unsigned.strip_prefix("0X"))
                .unwrap_or(unsigned),
            8 => unsigned
                .strip_prefix("0o")
                .or_else(|| unsigned.strip_prefix("0O"))
                .unwrap_or(unsigned),
            2 => unsigned
                .strip_prefix("0b")
                .or_else(|| unsigned.strip_prefix("0B"))
                .unwrap_or(unsigned),
            _ => unsigned,
        };
        if !unsigned.starts_with(['+', '-'])
            && let Ok(n) = i64::from_str_radix(unsigned, base)
        {
            return Ok(Value::from(if negative { -n } else { n }));
        }
        return Ok(match digits.parse::<f64>() {
            Ok(f) if f.is_finite() && f.abs() < 9.2e18 => Value::from(f.trunc() as i64),
            _ => default,
        });
    }
    if let Ok(b) = bool::try_from(value.clone()) {
        return Ok(Value::from(i64::from(b)));
    }
    if let Ok(n) = i64::try_from(value.clone()) {
        return Ok(Value::from(n));
    }
    Ok(match f64::try_from(value) {
        Ok(f) if f.is_finite() && f.abs() < 9.2e18 => Value::from(f.trunc() as i64),
        _ => default,
    })
}

/// Jinja2's `float(default=0.0)`: Python's `float()`, or the default.
fn float_filter(value: Value, default: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let default = default
        .or(kwargs.get("default")?)
        .unwrap_or(Value::from(0.0));
    kwargs.assert_all_used()?;
    if value.is_undefined() {
        return Err(Error::new(
            ErrorKind::UndefinedError,
            "float of an undefined value",
        ));
    }
    if let Some(text) = value.as_str() {
        let text = text.trim().replace('_', "");
        return Ok(text.parse::<f64>().map_or(default, Value::from));
    }
    if let Ok(b) = bool::try_from(value.clone()) {
        return Ok(Value::from(if b { 1.0 } else { 0.0 }));
    }
    Ok(f64::try_from(value).map_or(default, Value::from))
}

fn json_query(value: Value, query: String) -> Result<Value, Error> {
    let input = if value.is_undefined() {
        serde_json::Value::Null
    } else {
        to_json_value(&value)?
    };
    let result = super::jmespath::search(&query, &input)
        .map_err(|e| invalid(format!("json_query {query:?} failed: {e}")))?;
    Ok(from_json_value(&result))
}

fn merge_list_of_dicts(value: Value) -> Result<Value, Error> {
    let items = value
        .try_iter()
        .map_err(|_| invalid("merge_list_of_dicts expects a list of dicts"))?
        .map(|item| to_json_value(&item))
        .collect::<Result<Vec<_>, _>>()?;
    let merged = crate::core::json::merge::merge_list_of_dicts(&items)
        .map_err(|e| invalid(e.to_string()))?;
    Ok(from_json_value(&merged))
}

fn json_dumps(value: Value) -> Result<String, Error> {
    Ok(dumps(&to_json_value(&value)?))
}

fn parse_time_interval(value: Value) -> Result<Value, Error> {
    // Poolboy 1.17 Δ§3.4: the input is stringified first.
    let delta = parse_interval(&value.to_string()).map_err(|e| invalid(e.to_string()))?;
    Ok(Duration::value(delta))
}

fn seconds_to_interval(value: Value) -> Result<String, Error> {
    let delta = time::to_delta(&value)?;
    Ok(format_simple_interval(delta))
}

fn strgen_filter(pattern: String) -> Result<String, Error> {
    strgen(&pattern).map_err(|e| invalid(e.to_string()))
}

fn to_datetime(value: Value, format: Option<String>) -> Result<Value, Error> {
    time::to_datetime(&value, format.as_deref())
}

pub(super) fn register(env: &mut Environment<'static>) {
    env.add_filter("bool", bool_filter);
    env.add_filter("int", int_filter);
    env.add_filter("float", float_filter);
    env.add_filter("json_query", json_query);
    env.add_filter("merge_list_of_dicts", merge_list_of_dicts);
    env.add_filter("object", json_dumps);
    env.add_filter("to_json", json_dumps);
    env.add_filter("parse_time_interval", parse_time_interval);
    env.add_filter("seconds_to_interval", seconds_to_interval);
    env.add_filter("strgen", strgen_filter);
    env.add_filter("to_datetime", to_datetime);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn str2bool_sets() {
        for t in ["yes", "true", "t", "y", "1", "TRUE", "Yes"] {
            assert_eq!(str2bool(t), Some(true), "{t}");
        }
        for f in ["no", "false", "f", "n", "0", "False", "NO"] {
            assert_eq!(str2bool(f), Some(false), "{f}");
        }
        for other in ["on", "off", "", "2", " true"] {
            assert_eq!(str2bool(other), None, "{other}");
        }
    }
}
