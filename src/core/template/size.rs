//! How large one render may grow (template bombs). Tenants write templates too
//! (`autoDelete.when`, `autoDetach.when`, parameter values that reach provider templates), so a
//! render must not be able to take the process's memory. Fuel bounds the instructions and
//! minijinja bounds `'x' * n` and `range(n)`; what a single instruction can still multiply is
//! bounded here: the text one template string renders, and the filters and Python string
//! methods whose result can be many times their input (`replace`, padding to a width).

use std::io;

use minijinja::value::{Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

/// The most text one template string may render, and the longest string a `replace` or a
/// padding may make. Far above any real resource field (a whole object is at most 1.5 MB).
pub(super) const MAX_TEXT: usize = 1 << 20;

/// An output buffer that refuses to grow past [`MAX_TEXT`].
#[derive(Default)]
pub(super) struct BoundedOutput {
    text: Vec<u8>,
    exceeded: bool,
}

impl BoundedOutput {
    /// Whether a write was refused: the render failed for its size.
    pub(super) fn exceeded(&self) -> bool {
        self.exceeded
    }

    pub(super) fn into_string(self) -> String {
        // minijinja writes whole UTF-8 strings; a lossy conversion never changes them.
        String::from_utf8(self.text)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

impl io::Write for &mut BoundedOutput {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.text.len() + bytes.len() > MAX_TEXT {
            self.exceeded = true;
            return Err(io::Error::other(too_long_message()));
        }
        self.text.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn too_long_message() -> String {
    format!("the rendered text is longer than {MAX_TEXT} bytes")
}

/// The error of a render whose output was refused for its size.
pub(super) fn output_too_long() -> Error {
    Error::new(ErrorKind::InvalidOperation, too_long_message())
}

fn result_too_long(what: &str) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!("{what} would make a string longer than {MAX_TEXT} bytes"),
    )
}

/// Refuses a string of `len` bytes made by `what`.
fn check_len(len: Option<usize>, what: &str) -> Result<(), Error> {
    match len {
        Some(len) if len <= MAX_TEXT => Ok(()),
        _ => Err(result_too_long(what)),
    }
}

/// The length of `value` with every `from` replaced by `to` (an empty `from` matches between
/// every character and at both ends, as in Python).
fn replaced_len(value: &str, from: &str, to: &str) -> Option<usize> {
    let matches = match from.is_empty() {
        true => value.chars().count() + 1,
        false => value.matches(from).count(),
    };
    let removed = matches.checked_mul(from.len())?;
    let added = matches.checked_mul(to.len())?;
    value.len().checked_sub(removed)?.checked_add(added)
}

/// The `replace` filter, refusing a result longer than [`MAX_TEXT`].
fn replace(value: String, from: String, to: String) -> Result<String, Error> {
    check_len(replaced_len(&value, &from, &to), "replace")?;
    Ok(value.replace(&from, &to))
}

/// The widths a format string asks for (`%10s`, `%-*.3f` aside; `{:>10}`, `{0:^10}`), to refuse
/// a padding past [`MAX_TEXT`] before it is made.
fn format_widths(format: &str) -> impl Iterator<Item = Option<usize>> + '_ {
    static WIDTHS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"%[-+ #0]*(\d+)|\{[^{}:]*:[^{}\d]*(\d+)")
            .unwrap_or_else(|e| unreachable!("a valid pattern: {e}"))
    });
    WIDTHS.captures_iter(format).map(|c| {
        c.get(1)
            .or_else(|| c.get(2))
            .and_then(|digits| digits.as_str().parse().ok())
    })
}

fn check_format(format: &str, what: &str) -> Result<(), Error> {
    for width in format_widths(format) {
        check_len(width, what)?;
    }
    Ok(())
}

/// Registers the size-checked filters over minijinja's own.
pub(super) fn register(env: &mut Environment<'static>) {
    env.add_filter("replace", replace);
    guard(
        env,
        "indent",
        Value::from_function(minijinja::filters::indent),
        |args| {
            let Some(text) = args.first().and_then(Value::as_str) else {
                return Ok(());
            };
            let width = match args.get(1) {
                Some(width) if width.kind() == ValueKind::Number => width.as_usize(),
                Some(width) => width.as_str().map(str::len),
                None => Some(4),
            };
            let added = width.and_then(|width| width.checked_mul(text.lines().count() + 1));
            check_len(
                added.and_then(|added| added.checked_add(text.len())),
                "indent",
            )
        },
    );
    guard(
        env,
        "format",
        Value::from_function(minijinja::filters::format),
        |args| match args.first().and_then(Value::as_str) {
            Some(format) => check_format(format, "format"),
            None => Ok(()),
        },
    );
}

/// Replaces filter `name` with `original` preceded by `check` of its arguments.
fn guard(
    env: &mut Environment<'static>,
    name: &'static str,
    original: Value,
    check: fn(&[Value]) -> Result<(), Error>,
) {
    env.add_filter(name, move |state: &mut State, args: Rest<Value>| {
        check(&args)?;
        original.call(state, &args)
    });
}

/// Checks a Python string method call that pycompat would answer, before it runs: `replace`,
/// and `format`'s widths.
pub(super) fn check_string_method(
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<(), Error> {
    let Some(text) = value.as_str() else {
        return Ok(());
    };
    match method {
        "replace" => match (
            args.first().and_then(Value::as_str),
            args.get(1).and_then(Value::as_str),
        ) {
            (Some(from), Some(to)) => check_len(replaced_len(text, from, to), "replace"),
            _ => Ok(()),
        },
        "format" => check_format(text, "format"),
        _ => Ok(()),
    }
}

/// pycompat's method callback, with [`check_string_method`] first.
pub(super) fn unknown_method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    check_string_method(value, method, args)?;
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaced_lengths_are_exact() {
        for (value, from, to) in [
            ("abcabc", "b", "xyz"),
            ("abcabc", "", "-"),
            ("", "", "-"),
            ("aaaa", "aa", ""),
            ("héllo", "", "é"),
            ("abc", "z", "long"),
        ] {
            assert_eq!(
                replaced_len(value, from, to),
                Some(value.replace(from, to).len()),
                "{value:?} {from:?} {to:?}"
            );
        }
    }

    #[test]
    fn output_past_the_limit_is_refused() {
        use std::io::Write;
        let mut output = BoundedOutput::default();
        let chunk = vec![b'x'; MAX_TEXT / 2];
        assert!((&mut output).write(&chunk).is_ok());
        assert!((&mut output).write(&chunk).is_ok());
        assert!(!output.exceeded());
        assert!((&mut output).write(b"x").is_err());
        assert!(output.exceeded());
        assert_eq!(output.into_string().len(), MAX_TEXT);
    }
}
