//! Time intervals as Poolboy writes them: pytimeparse strings in (`40s`, `1h30m`,
//! `2 days, 4:13:02`, …) and Poolboy's two normalised forms out (Poolboy 1.12 §10.1).

use std::sync::LazyLock;

use chrono::TimeDelta;
use regex::Regex;
use thiserror::Error;

/// An interval string that pytimeparse would not accept either.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum IntervalError {
    /// Nothing matched: not a number, a `1h30m`-style list of units, or a `[d, ]h:mm:ss` clock.
    #[error(
        "invalid time interval {0:?}: expected e.g. `40s`, `30m`, `1h30m`, `1d2h`, `1w 3d`, \
         `5 hours, 34 minutes`, `1.5h`, `4:13`, `4:13:02` or a number of seconds"
    )]
    Invalid(String),
    /// The value parsed but is too large to represent.
    #[error("time interval {0:?} is out of range")]
    OutOfRange(String),
}

// pytimeparse's unit spellings, largest first; units must appear in this order, each at most once.
const UNITS: [(&str, f64); 5] = [
    ("w|wks?|weeks?", 604_800.0),
    ("d|dys?|days?", 86_400.0),
    ("h|hrs?|hours?", 3_600.0),
    ("m|mins?|minutes?", 60.0),
    ("s|secs?|seconds?", 1.0),
];

const NUMBER: &str = r"(?:\d+(?:\.\d*)?|\.\d+)";

static UNIT_LIST: LazyLock<Regex> = LazyLock::new(|| {
    let parts: Vec<String> = UNITS
        .iter()
        .enumerate()
        .map(|(i, (names, _))| format!(r"(?:(?P<u{i}>{NUMBER})\s*(?:{names})\s*,?\s*)?"))
        .collect();
    Regex::new(&format!(r"^{}$", parts.concat())).expect("static regex")
});

// `[N day(s), ]H:MM[:SS[.fff]]` or `M:SS[.fff]` (pytimeparse reads two fields as minutes:seconds).
static CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<m>\d+):(?P<s>\d{2}(?:\.\d+)?)$|^(?:(?P<d>\d+)\s*(?:d|dys?|days?)\s*,?\s*)?(?P<a>\d+):(?P<b>\d{2})(?::(?P<c>\d{2}(?:\.\d+)?))?$",
    )
    .expect("static regex")
});

/// Parses a pytimeparse-style interval: `40s`, `30m`, `1h30m`, `1d2h`, `1w 3d`,
/// `5 hours, 34 minutes`, `1.5h`, `4:13` (minutes:seconds), `4:13:02`, `2 days, 4:13:02`,
/// or a bare number of seconds; an optional leading `+`/`-` sign. Fractions are kept to the
/// microsecond, like Python's `timedelta(seconds=…)`.
pub(crate) fn parse_interval(text: &str) -> Result<TimeDelta, IntervalError> {
    let invalid = || IntervalError::Invalid(text.to_owned());
    let trimmed = text.trim();
    let (sign, body) = match trimmed.strip_prefix('-') {
        Some(rest) => (-1.0, rest.trim_start()),
        None => (
            1.0,
            trimmed.strip_prefix('+').unwrap_or(trimmed).trim_start(),
        ),
    };
    if body.is_empty() {
        return Err(invalid());
    }
    let seconds = if let Some(c) = CLOCK.captures(body) {
        let field = |name: &str| -> Result<f64, IntervalError> {
            c.name(name).map_or(Ok(0.0), |m| {
                m.as_str().parse::<f64>().map_err(|_| invalid())
            })
        };
        if c.name("m").is_some() {
            field("m")? * 60.0 + field("s")?
        } else {
            field("d")? * 86_400.0 + field("a")? * 3_600.0 + field("b")? * 60.0 + field("c")?
        }
    } else if let Ok(number) = body.parse::<f64>() {
        if !body.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            // Rust accepts `inf`, `1e3`, …; pytimeparse does not.
            return Err(invalid());
        }
        number
    } else {
        let c = UNIT_LIST.captures(body).ok_or_else(invalid)?;
        let mut total = 0.0;
        let mut any = false;
        for (i, (_, factor)) in UNITS.iter().enumerate() {
            if let Some(m) = c.name(&format!("u{i}")) {
                total += m.as_str().parse::<f64>().map_err(|_| invalid())? * factor;
                any = true;
            }
        }
        if !any {
            return Err(invalid());
        }
        total
    };
    let micros = (sign * seconds * 1e6).round();
    if !micros.is_finite() || micros.abs() > 9.0e18 {
        return Err(IntervalError::OutOfRange(text.to_owned()));
    }
    Ok(TimeDelta::microseconds(micros as i64))
}

/// Poolboy's `timedelta_to_str` (§10.1): days, hours, minutes and seconds, zero parts left
/// out (`1d2h`, `30m`, `1h30m5s`); sub-second parts are truncated, and zero or a negative
/// duration gives an empty string, as in Poolboy.
pub(crate) fn format_interval(delta: TimeDelta) -> String {
    let total = delta.num_seconds();
    let parts = [
        (total / 86_400, 'd'),
        (total % 86_400 / 3_600, 'h'),
        (total % 3_600 / 60, 'm'),
        (total % 60, 's'),
    ];
    parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect()
}

/// Formats a duration as one number and one unit (`90m`, `2h`, `3d`, `45s`), using the largest
/// unit that divides it exactly, like Poolboy's `seconds_to_interval`. The result always matches
/// `^[0-9]+[smhd]$`, the CRD pattern of the claim status lifespan fields: sub-second parts are
/// truncated and a negative duration (never meaningful there) formats as `0s`.
pub(crate) fn format_simple_interval(delta: TimeDelta) -> String {
    let seconds = delta.num_seconds().max(0);
    if seconds == 0 {
        return "0s".to_owned();
    }
    for (unit, size) in [('d', 86_400), ('h', 3_600), ('m', 60)] {
        if seconds % size == 0 {
            return format!("{}{unit}", seconds / size);
        }
    }
    format!("{seconds}s")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn secs(s: &str) -> i64 {
        parse_interval(s)
            .map(|d| d.num_seconds())
            .unwrap_or(i64::MIN)
    }

    #[test]
    fn accepts_pytimeparse_unit_forms() {
        assert_eq!(secs("40s"), 40);
        assert_eq!(secs("30m"), 1_800);
        assert_eq!(secs("2h"), 7_200);
        assert_eq!(secs("1d"), 86_400);
        assert_eq!(secs("1h30m"), 5_400);
        assert_eq!(secs("1d2h"), 93_600);
        assert_eq!(secs("1w 3d"), 864_000);
        assert_eq!(secs("5 hours, 34 minutes"), 20_040);
        assert_eq!(secs("5hr34m56s"), 20_096);
        assert_eq!(secs("2 days, 5 hours, 34 minutes, 56 seconds"), 192_896);
        assert_eq!(secs("5 hrs, 34 mins, 56 secs"), 20_096);
        assert_eq!(secs("1.5h"), 5_400);
        assert_eq!(secs("1.75 days"), 151_200);
        assert_eq!(secs(" 8h "), 28_800);
    }

    #[test]
    fn accepts_clock_forms_and_bare_numbers() {
        assert_eq!(secs("4:13"), 253);
        assert_eq!(secs("4:13:02"), 15_182);
        assert_eq!(secs("2 days, 4:13:02"), 187_982);
        assert_eq!(secs("3600"), 3_600);
        assert_eq!(
            parse_interval("1.5").unwrap(),
            TimeDelta::milliseconds(1_500)
        );
        assert_eq!(
            parse_interval("4:13:02.5").unwrap(),
            TimeDelta::milliseconds(15_182_500)
        );
    }

    #[test]
    fn accepts_a_sign() {
        assert_eq!(secs("-1h"), -3_600);
        assert_eq!(secs("+ 30m"), 1_800);
        assert_eq!(secs("-90"), -90);
    }

    #[test]
    fn rejects_what_pytimeparse_rejects() {
        for bad in [
            "",
            "  ",
            "h",
            "abc",
            "1x",
            "1h1h",
            "30m1h",
            "1e3",
            "inf",
            "4:1",
            "-",
            "1 h garbage",
        ] {
            assert!(parse_interval(bad).is_err(), "{bad:?} should be rejected");
        }
        let message = parse_interval("soon").unwrap_err().to_string();
        assert!(
            message.contains("\"soon\"") && message.contains("1h30m"),
            "{message}"
        );
    }

    #[test]
    fn formats_the_composite_form_as_poolboy_does() {
        assert_eq!(format_interval(TimeDelta::hours(26)), "1d2h");
        assert_eq!(format_interval(TimeDelta::minutes(30)), "30m");
        assert_eq!(format_interval(TimeDelta::seconds(5_405)), "1h30m5s");
        assert_eq!(format_interval(TimeDelta::milliseconds(1_900)), "1s");
        // Poolboy's `timedelta_to_str` gives an empty string for zero and for negative values.
        assert_eq!(format_interval(TimeDelta::zero()), "");
        assert_eq!(format_interval(-TimeDelta::minutes(90)), "");
    }

    #[test]
    fn formats_the_single_unit_form() {
        let pattern = Regex::new("^[0-9]+[smhd]$").unwrap();
        for (delta, want) in [
            (TimeDelta::minutes(90), "90m"),
            (TimeDelta::hours(2), "2h"),
            (TimeDelta::days(3), "3d"),
            (TimeDelta::hours(48), "2d"),
            (TimeDelta::seconds(61), "61s"),
            (TimeDelta::seconds(600), "10m"),
            (TimeDelta::zero(), "0s"),
            (-TimeDelta::hours(1), "0s"),
        ] {
            let got = format_simple_interval(delta);
            assert_eq!(got, want);
            assert!(pattern.is_match(&got));
        }
    }

    proptest! {
        #[test]
        fn composite_form_round_trips(seconds in 1i64..10_000_000_000) {
            let delta = TimeDelta::seconds(seconds);
            prop_assert_eq!(parse_interval(&format_interval(delta)).unwrap(), delta);
        }

        #[test]
        fn single_unit_form_round_trips(seconds in 0i64..10_000_000_000) {
            let delta = TimeDelta::seconds(seconds);
            prop_assert_eq!(parse_interval(&format_simple_interval(delta)).unwrap(), delta);
        }
    }
}
