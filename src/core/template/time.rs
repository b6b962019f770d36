//! The date and time values templates see (Poolboy 1.12 §5.4): `timestamp`, `now()`, and small
//! stand-ins for Python's `datetime`, `timedelta` and `timezone` covering what provider templates
//! use in practice. The clock is never read here: "now" is the render context's pinned instant.
//! Every date and timedelta knows how it moves with that clock, so that comparisons with the
//! current time tell when their outcome changes (see `clock.rs`).

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use chrono::format::{Item, StrftimeItems};
use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, TimeDelta, Utc};
use minijinja::value::{DynObject, Kwargs, Object, ObjectRepr, from_args};
use minijinja::{Error, ErrorKind, State, Value};

use super::clock::RenderClock;
use crate::core::lifespan::interval::parse_interval;

/// Separates trailing keyword arguments from the positional ones.
fn split_kwargs(args: &[Value]) -> Result<(&[Value], Kwargs), Error> {
    match args.split_last() {
        Some((last, rest)) if last.is_kwargs() => {
            let (kwargs,): (Kwargs,) = from_args(std::slice::from_ref(last))?;
            Ok((rest, kwargs))
        }
        _ => {
            let (kwargs,): (Kwargs,) = from_args(&[])?;
            Ok((args, kwargs))
        }
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// How a moment prints and which methods it has: Poolboy's `TimeStamp` wrapper or a Python
/// `datetime`. Both compare with each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    TimeStamp,
    DateTime,
}

/// A point in time: a wall-clock value plus an optional UTC offset (Python's naive/aware split).
/// "Local" time is UTC: the broker runs without a time zone.
#[derive(Debug, Clone)]
pub(super) struct Moment {
    wall: NaiveDateTime,
    offset: Option<FixedOffset>,
    flavor: Flavor,
    /// The render's clock: `timestamp(...).utcnow` reads it, and what the template does with a
    /// moment that moves records there. `None` only for fixed moments made without one.
    clock: Option<Arc<RenderClock>>,
    /// How far the moment moves per unit of clock time: 1 for now and what is derived from it
    /// by adding intervals, 0 for a fixed instant.
    rate: i64,
}

impl Moment {
    /// Poolboy's `timestamp` global: the render's "now", printed as `%FT%TZ`.
    pub(super) fn timestamp(clock: &Arc<RenderClock>) -> Value {
        Value::from_object(Moment {
            wall: clock.now_naive(),
            offset: Some(utc()),
            flavor: Flavor::TimeStamp,
            clock: Some(clock.clone()),
            rate: 1,
        })
    }

    fn datetime(wall: NaiveDateTime, offset: Option<FixedOffset>) -> Moment {
        Moment {
            wall,
            offset,
            flavor: Flavor::DateTime,
            clock: None,
            rate: 0,
        }
    }

    /// The fixed instant `instant`, in `tz` (naive UTC without).
    fn at(instant: DateTime<Utc>, tz: Option<FixedOffset>) -> Moment {
        match tz {
            Some(offset) => {
                Moment::datetime(instant.with_timezone(&offset).naive_local(), Some(offset))
            }
            None => Moment::datetime(instant.naive_utc(), None),
        }
    }

    /// The render's now as a `datetime`, in `tz` (naive UTC without): it moves with the clock.
    fn now_datetime(clock: &Arc<RenderClock>, tz: Option<FixedOffset>) -> Moment {
        Moment {
            clock: Some(clock.clone()),
            rate: 1,
            ..Moment::at(clock.now, tz)
        }
    }

    /// The moment's value is used in a way no instant can be derived from (printed, formatted,
    /// split into fields): when it moves with the clock, the result is unpredictable.
    fn used(&self) {
        if let (true, Some(clock)) = (self.rate != 0, &self.clock) {
            clock.unpredictable();
        }
    }

    /// The instant in UTC; naive values are taken as UTC.
    pub(super) fn utc(&self) -> NaiveDateTime {
        match self.offset {
            Some(offset) => self.wall - offset,
            None => self.wall,
        }
    }

    /// The moment plus `interval`, which may itself move with the clock.
    pub(super) fn shifted(&self, interval: &Duration) -> Result<Moment, Error> {
        let overflow = || invalid("date/time arithmetic overflowed");
        let wall = self
            .wall
            .checked_add_signed(interval.delta)
            .ok_or_else(overflow)?;
        Ok(Moment {
            wall,
            rate: self.rate.checked_add(interval.rate).ok_or_else(overflow)?,
            clock: self.clock.clone().or_else(|| interval.clock.clone()),
            ..self.clone()
        })
    }

    /// `self - other`, a timedelta that moves as the two moments move apart.
    pub(super) fn minus(&self, other: &Moment) -> Result<Duration, Error> {
        Ok(Duration {
            delta: self.utc() - other.utc(),
            rate: self
                .rate
                .checked_sub(other.rate)
                .ok_or_else(|| invalid("date/time arithmetic overflowed"))?,
            clock: self.clock.clone().or_else(|| other.clock.clone()),
        })
    }

    fn strftime(&self, format: &str) -> Result<String, Error> {
        self.used();
        let format = python_format(format, self.offset.is_some());
        let items = StrftimeItems::new(&format)
            .parse()
            .map_err(|_| invalid(format!("invalid strftime format {format:?}")))?;
        if items.iter().any(|item| matches!(item, Item::Error)) {
            return Err(invalid(format!("invalid strftime format {format:?}")));
        }
        let offset = self.offset.unwrap_or(utc());
        let aware = self
            .wall
            .and_local_timezone(offset)
            .single()
            .ok_or_else(|| invalid("invalid local time"))?;
        Ok(aware.format_with_items(items.iter()).to_string())
    }

    fn as_datetime(&self) -> Moment {
        Moment {
            flavor: Flavor::DateTime,
            ..self.clone()
        }
    }

    fn method(&self, state: &State, name: &str, args: &[Value]) -> Result<Value, Error> {
        match name {
            "add" | "sub" => {
                let (operand,): (Value,) = from_args(args)?;
                if name == "sub"
                    && let Some(other) = operand.downcast_object_ref::<Moment>()
                {
                    return Ok(Value::from_object(self.minus(other)?));
                }
                let interval = to_interval(&operand)?;
                let interval = if name == "sub" {
                    interval.negated()?
                } else {
                    interval
                };
                Ok(Value::from_object(self.shifted(&interval)?))
            }
            "strftime" => {
                let (format,): (String,) = from_args(args)?;
                Ok(Value::from(self.strftime(&format)?))
            }
            "isoformat" => {
                let (sep,): (Option<String>,) = from_args(args)?;
                self.used();
                Ok(Value::from(
                    self.as_datetime().python_str(sep.as_deref().unwrap_or("T")),
                ))
            }
            "timestamp" => {
                let () = from_args(args)?;
                self.used();
                let utc = self.utc().and_utc();
                Ok(Value::from(
                    utc.timestamp() as f64 + f64::from(utc.timestamp_subsec_micros()) / 1e6,
                ))
            }
            "utcoffset" => {
                let () = from_args(args)?;
                Ok(self.offset.map_or(Value::from(()), |o| {
                    Duration::value(TimeDelta::seconds(o.local_minus_utc().into()))
                }))
            }
            "astimezone" => {
                let (tz,): (Option<Value>,) = from_args(args)?;
                let offset = match tz {
                    Some(tz) => zone_offset(&tz)?,
                    None => utc(),
                };
                let wall = self.utc() + offset;
                Ok(Value::from_object(Moment {
                    wall,
                    offset: Some(offset),
                    ..self.clone()
                }))
            }
            "replace" => {
                let (kwargs,): (Kwargs,) = from_args(args)?;
                let mut out = self.clone();
                if kwargs.has("tzinfo") {
                    let tz: Value = kwargs.get("tzinfo")?;
                    out.offset = if tz.is_none() {
                        None
                    } else {
                        Some(zone_offset(&tz)?)
                    };
                }
                kwargs.assert_all_used()?;
                Ok(Value::from_object(out))
            }
            "date" => {
                let () = from_args(args)?;
                self.used();
                Ok(Value::from(self.wall.date().format("%Y-%m-%d").to_string()))
            }
            _ => {
                let _ = state;
                Err(Error::from(ErrorKind::UnknownMethod))
            }
        }
    }

    /// Python's `str(datetime)`: `YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM]`.
    fn python_str(&self, sep: &str) -> String {
        let mut out = self
            .wall
            .format(&format!("%Y-%m-%d{sep}%H:%M:%S"))
            .to_string();
        let micros = self.wall.and_utc().timestamp_subsec_micros();
        if micros != 0 {
            out.push_str(&format!(".{micros:06}"));
        }
        if let Some(offset) = self.offset {
            out.push_str(&format_offset(offset, true));
        }
        out
    }
}

impl fmt::Display for Moment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.used();
        match self.flavor {
            // Poolboy 1.12 §5.4: str(timestamp) is %FT%TZ, in UTC.
            Flavor::TimeStamp => write!(f, "{}", self.utc().format("%FT%TZ")),
            Flavor::DateTime => f.write_str(&self.python_str(" ")),
        }
    }
}

impl Object for Moment {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let wall = &self.wall;
        use chrono::{Datelike, Timelike};
        let key = key.as_str()?;
        Some(match key {
            // TimeStamp properties (§5.4); `utcnow` is the render's pinned now.
            "utcnow" if self.flavor == Flavor::TimeStamp => {
                let clock = self.clock.as_ref()?;
                Value::from_object(Moment {
                    wall: clock.now_naive(),
                    offset: Some(utc()),
                    rate: 1,
                    ..(**self).clone()
                })
            }
            "datetime" if self.flavor == Flavor::TimeStamp => {
                Value::from_object(self.as_datetime())
            }
            "tzinfo" => self.offset.map_or(Value::from(()), Zone::value),
            "year" | "month" | "day" | "hour" | "minute" | "second" | "microsecond" => {
                self.used();
                match key {
                    "year" => Value::from(wall.year()),
                    "month" => Value::from(wall.month()),
                    "day" => Value::from(wall.day()),
                    "hour" => Value::from(wall.hour()),
                    "minute" => Value::from(wall.minute()),
                    "second" => Value::from(wall.second()),
                    _ => Value::from(wall.and_utc().timestamp_subsec_micros()),
                }
            }
            _ => return None,
        })
    }

    fn call(self: &Arc<Self>, _state: &mut State<'_, '_>, args: &[Value]) -> Result<Value, Error> {
        if self.flavor != Flavor::TimeStamp {
            return Err(invalid("datetime value is not callable"));
        }
        // `timestamp("2021-05-01T12:30:00Z")` or `timestamp(some_datetime)`.
        let (arg,): (Value,) = from_args(args)?;
        if let Some(moment) = arg.downcast_object_ref::<Moment>() {
            return Ok(Value::from_object(Moment {
                flavor: Flavor::TimeStamp,
                clock: self.clock.clone().or_else(|| moment.clock.clone()),
                ..moment.clone()
            }));
        }
        let text = arg.to_string();
        let parsed = parse_datetime(&text, "%Y-%m-%dT%H:%M:%S%z")?;
        Ok(Value::from_object(Moment {
            flavor: Flavor::TimeStamp,
            clock: self.clock.clone(),
            ..parsed
        }))
    }

    fn call_method(
        self: &Arc<Self>,
        state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        // Arithmetic keeps the flavor: `timestamp.add('3h')` still prints as %FT%TZ.
        self.method(state, method, args)
    }

    fn custom_cmp(self: &Arc<Self>, other: &DynObject) -> Option<Ordering> {
        let other = other.downcast_ref::<Moment>()?;
        // A comparison with the clock records when its outcome changes.
        if let Ok(difference) = self.minus(other)
            && let Some(clock) = &difference.clock
        {
            clock.compared(difference.delta, difference.rate);
        }
        Some(self.utc().cmp(&other.utc()))
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// Python's `timedelta`.
#[derive(Debug, Clone)]
pub(super) struct Duration {
    pub(super) delta: TimeDelta,
    /// How far it changes per unit of clock time: `stop - now()` shrinks (-1), `now() - start`
    /// grows (1), a fixed interval stays (0).
    rate: i64,
    /// The render's clock, where what the template does with a changing timedelta is recorded;
    /// `None` only when it is fixed.
    clock: Option<Arc<RenderClock>>,
}

impl Duration {
    /// A fixed timedelta.
    pub(super) fn fixed(delta: TimeDelta) -> Duration {
        Duration {
            delta,
            rate: 0,
            clock: None,
        }
    }

    pub(super) fn value(delta: TimeDelta) -> Value {
        Value::from_object(Duration::fixed(delta))
    }

    pub(super) fn negated(&self) -> Result<Duration, Error> {
        let overflow = || invalid("timedelta out of range");
        Ok(Duration {
            delta: TimeDelta::zero()
                .checked_sub(&self.delta)
                .ok_or_else(overflow)?,
            rate: self.rate.checked_neg().ok_or_else(overflow)?,
            clock: self.clock.clone(),
        })
    }

    /// `self + other`, or `self - other` when `subtract`.
    pub(super) fn combined(&self, other: &Duration, subtract: bool) -> Result<Duration, Error> {
        let overflow = || invalid("timedelta out of range");
        let (delta, rate) = if subtract {
            (
                self.delta.checked_sub(&other.delta),
                self.rate.checked_sub(other.rate),
            )
        } else {
            (
                self.delta.checked_add(&other.delta),
                self.rate.checked_add(other.rate),
            )
        };
        Ok(Duration {
            delta: delta.ok_or_else(overflow)?,
            rate: rate.ok_or_else(overflow)?,
            clock: self.clock.clone().or_else(|| other.clock.clone()),
        })
    }

    /// The timedelta's value is used in a way no instant can be derived from: when it changes
    /// with the clock, the result is unpredictable.
    pub(super) fn used(&self) -> TimeDelta {
        if let (true, Some(clock)) = (self.rate != 0, &self.clock) {
            clock.unpredictable();
        }
        self.delta
    }
}

impl fmt::Display for Duration {
    /// Python's `str(timedelta)`: `[-N day[s], ]H:MM:SS[.ffffff]`, days floored.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let micros = self.used().num_microseconds().unwrap_or(i64::MAX);
        let days = micros.div_euclid(86_400_000_000);
        let rest = micros.rem_euclid(86_400_000_000);
        if days != 0 {
            write!(f, "{days} day{}, ", if days.abs() == 1 { "" } else { "s" })?;
        }
        let seconds = rest / 1_000_000;
        write!(
            f,
            "{}:{:02}:{:02}",
            seconds / 3600,
            seconds % 3600 / 60,
            seconds % 60
        )?;
        if rest % 1_000_000 != 0 {
            write!(f, ".{:06}", rest % 1_000_000)?;
        }
        Ok(())
    }
}

impl Object for Duration {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let key = key.as_str()?;
        if !matches!(key, "days" | "seconds" | "microseconds") {
            return None;
        }
        let micros = self.used().num_microseconds()?;
        Some(match key {
            "days" => Value::from(micros.div_euclid(86_400_000_000)),
            "seconds" => Value::from(micros.rem_euclid(86_400_000_000) / 1_000_000),
            _ => Value::from(micros.rem_euclid(1_000_000)),
        })
    }

    fn is_true(self: &Arc<Self>) -> bool {
        // True unless zero: a changing timedelta is zero for an instant, when it crosses.
        if let Some(clock) = &self.clock {
            clock.compared(self.delta, self.rate);
        }
        !self.delta.is_zero()
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        match method {
            "total_seconds" => {
                let () = from_args(args)?;
                let micros = self
                    .used()
                    .num_microseconds()
                    .ok_or_else(|| invalid("timedelta out of range"))?;
                Ok(Value::from(micros as f64 / 1e6))
            }
            "add" | "sub" => {
                let (operand,): (Value,) = from_args(args)?;
                let other = to_interval(&operand)?;
                Ok(Value::from_object(self.combined(&other, method == "sub")?))
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    fn custom_cmp(self: &Arc<Self>, other: &DynObject) -> Option<Ordering> {
        let other = other.downcast_ref::<Duration>()?;
        // A comparison with a timedelta that changes with the clock records when its
        // outcome changes.
        if let Ok(difference) = self.combined(other, true)
            && let Some(clock) = &difference.clock
        {
            clock.compared(difference.delta, difference.rate);
        }
        Some(self.delta.cmp(&other.delta))
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// What `.add()` accepts: a timedelta, a pytimeparse string such as `'8h'`, or a number of
/// seconds (Poolboy 1.12 §5.4; its number case crashes, fixed here).
pub(super) fn to_interval(value: &Value) -> Result<Duration, Error> {
    if let Some(duration) = value.downcast_object_ref::<Duration>() {
        return Ok(duration.clone());
    }
    to_delta(value).map(Duration::fixed)
}

/// [`to_interval`] where only the interval's value counts (not how it changes with the clock).
pub(super) fn to_delta(value: &Value) -> Result<TimeDelta, Error> {
    if let Some(duration) = value.downcast_object_ref::<Duration>() {
        return Ok(duration.used());
    }
    if let Some(text) = value.as_str() {
        return parse_interval(text).map_err(|e| invalid(e.to_string()));
    }
    if value.is_number() {
        let seconds = f64::try_from(value.clone())?;
        return seconds_delta(seconds);
    }
    Err(invalid(format!(
        "cannot add {} to a date/time: expected a timedelta, an interval string like '8h' or a number of seconds",
        value.kind()
    )))
}

fn seconds_delta(seconds: f64) -> Result<TimeDelta, Error> {
    let micros = (seconds * 1e6).round();
    if !micros.is_finite() || micros.abs() > 9.0e18 {
        return Err(invalid("time interval out of range"));
    }
    Ok(TimeDelta::microseconds(micros as i64))
}

/// Python's `timezone`: a fixed UTC offset.
#[derive(Debug, Clone, Copy)]
struct Zone(FixedOffset);

impl Zone {
    fn value(offset: FixedOffset) -> Value {
        Value::from_object(Zone(offset))
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.local_minus_utc() == 0 {
            f.write_str("UTC")
        } else {
            write!(f, "UTC{}", format_offset(self.0, true))
        }
    }
}

impl Object for Zone {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

fn zone_offset(value: &Value) -> Result<FixedOffset, Error> {
    value
        .downcast_object_ref::<Zone>()
        .map(|zone| zone.0)
        .ok_or_else(|| {
            invalid(format!(
                "expected a timezone (e.g. timezone.utc), got {}",
                value.kind()
            ))
        })
}

fn utc() -> FixedOffset {
    FixedOffset::east_opt(0).unwrap_or_else(|| unreachable!("zero offset is valid"))
}

fn format_offset(offset: FixedOffset, colon: bool) -> String {
    let seconds = offset.local_minus_utc();
    let sign = if seconds < 0 { '-' } else { '+' };
    let seconds = seconds.abs();
    let sep = if colon { ":" } else { "" };
    format!("{sign}{:02}{sep}{:02}", seconds / 3600, seconds % 3600 / 60)
}

/// Python strftime codes that chrono spells differently: `%f` is six digits in Python; `%z`
/// and `%Z` are empty for naive values.
fn python_format(format: &str, aware: bool) -> String {
    let mut out = String::with_capacity(format.len());
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('f') => out.push_str("%6f"),
            Some('z' | 'Z') if !aware => {}
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Python's `strptime`: aware when the format has `%z` (which also accepts `Z`), naive otherwise;
/// a date-only format gives midnight.
pub(super) fn parse_datetime(text: &str, format: &str) -> Result<Moment, Error> {
    let fail = |e: chrono::ParseError| {
        invalid(format!(
            "time data {text:?} does not match format {format:?}: {e}"
        ))
    };
    if format.contains("%z") {
        let text = match text.strip_suffix('Z') {
            Some(rest) => format!("{rest}+0000"),
            None => text.to_owned(),
        };
        let parsed = DateTime::parse_from_str(&text, format).map_err(fail)?;
        return Ok(Moment::datetime(
            parsed.naive_local(),
            Some(*parsed.offset()),
        ));
    }
    match NaiveDateTime::parse_from_str(text, format) {
        Ok(wall) => Ok(Moment::datetime(wall, None)),
        Err(err) => match NaiveDate::parse_from_str(text, format) {
            Ok(date) => Ok(Moment::datetime(
                date.and_time(chrono::NaiveTime::MIN),
                None,
            )),
            Err(_) => Err(fail(err)),
        },
    }
}

/// Python's `datetime` class: `datetime.now(tz)`, `datetime.utcnow()`, `datetime.strptime(s, f)`,
/// `datetime.fromisoformat(s)`, `datetime.fromtimestamp(n, tz)` and `datetime(y, m, d, …, tzinfo=)`.
#[derive(Debug)]
pub(super) struct DateTimeClass {
    pub(super) clock: Arc<RenderClock>,
}

impl Object for DateTimeClass {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn call(self: &Arc<Self>, _state: &mut State<'_, '_>, args: &[Value]) -> Result<Value, Error> {
        let (args, kwargs) = split_kwargs(args)?;
        let (year, month, day, rest): (i32, u32, u32, &[Value]) = from_args(args)?;
        let mut parts = [0u32; 4];
        for (slot, value) in parts.iter_mut().zip(rest) {
            *slot = u32::try_from(value.clone())?;
        }
        let [hour, minute, second, micro] = parts;
        let tz: Option<Value> = kwargs.get("tzinfo")?;
        kwargs.assert_all_used()?;
        let wall = NaiveDate::from_ymd_opt(year, month, day)
            .and_then(|d| d.and_hms_micro_opt(hour, minute, second, micro))
            .ok_or_else(|| invalid("datetime(): date or time out of range"))?;
        let offset = match tz {
            Some(tz) if !tz.is_none() => Some(zone_offset(&tz)?),
            _ => None,
        };
        Ok(Value::from_object(Moment::datetime(wall, offset)))
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        match method {
            "now" => {
                let (args, kwargs) = split_kwargs(args)?;
                let (tz,): (Option<Value>,) = from_args(args)?;
                let tz = tz.or(kwargs.get("tz")?);
                kwargs.assert_all_used()?;
                let tz = match tz {
                    Some(tz) if !tz.is_none() => Some(zone_offset(&tz)?),
                    _ => None,
                };
                Ok(Value::from_object(Moment::now_datetime(&self.clock, tz)))
            }
            "utcnow" => {
                let () = from_args(args)?;
                Ok(Value::from_object(Moment::now_datetime(&self.clock, None)))
            }
            "strptime" => {
                let (text, format): (String, String) = from_args(args)?;
                Ok(Value::from_object(parse_datetime(&text, &format)?))
            }
            "fromisoformat" => {
                let (text,): (String,) = from_args(args)?;
                let text = text.replace('Z', "+00:00");
                if let Ok(aware) = DateTime::parse_from_rfc3339(&text.replace(' ', "T")) {
                    return Ok(Value::from_object(Moment::datetime(
                        aware.naive_local(),
                        Some(*aware.offset()),
                    )));
                }
                for format in [
                    "%Y-%m-%dT%H:%M:%S%.f",
                    "%Y-%m-%d %H:%M:%S%.f",
                    "%Y-%m-%dT%H:%M",
                    "%Y-%m-%d",
                ] {
                    if let Ok(moment) = parse_datetime(&text, format) {
                        return Ok(Value::from_object(moment));
                    }
                }
                Err(invalid(format!("invalid isoformat string: {text:?}")))
            }
            "fromtimestamp" => {
                let (seconds, tz): (f64, Option<Value>) = from_args(args)?;
                let instant = DateTime::<Utc>::UNIX_EPOCH
                    .checked_add_signed(seconds_delta(seconds)?)
                    .ok_or_else(|| invalid("timestamp out of range"))?;
                let tz = match tz {
                    Some(tz) if !tz.is_none() => Some(zone_offset(&tz)?),
                    _ => None,
                };
                Ok(Value::from_object(Moment::at(instant, tz)))
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<class 'datetime.datetime'>")
    }
}

/// Python's `timezone` class: `timezone.utc` and `timezone(timedelta(hours=2))`.
#[derive(Debug)]
pub(super) struct TimeZoneClass;

impl Object for TimeZoneClass {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        (key.as_str()? == "utc").then(|| Zone::value(utc()))
    }

    fn call(self: &Arc<Self>, _state: &mut State<'_, '_>, args: &[Value]) -> Result<Value, Error> {
        let (offset,): (Value,) = from_args(args)?;
        let delta = to_delta(&offset)?;
        let seconds = i32::try_from(delta.num_seconds())
            .map_err(|_| invalid("timezone offset out of range"))?;
        FixedOffset::east_opt(seconds)
            .map(Zone::value)
            .ok_or_else(|| invalid("timezone offset must be strictly between -24h and 24h"))
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<class 'datetime.timezone'>")
    }
}

/// Python's `timedelta(days=0, seconds=0, microseconds=0, milliseconds=0, minutes=0, hours=0,
/// weeks=0)`, positional or keyword. (The README's `timedelta("10m")` is stale, §5.4; use
/// `'10m' | parse_time_interval`.)
pub(super) fn timedelta(positional: &[Value], kwargs: Kwargs) -> Result<Value, Error> {
    const NAMES: [(&str, f64); 7] = [
        ("days", 86_400.0),
        ("seconds", 1.0),
        ("microseconds", 1e-6),
        ("milliseconds", 1e-3),
        ("minutes", 60.0),
        ("hours", 3_600.0),
        ("weeks", 604_800.0),
    ];
    if positional.len() > NAMES.len() {
        return Err(invalid("timedelta() takes at most 7 arguments"));
    }
    let mut seconds = 0.0;
    for (value, (_, factor)) in positional.iter().zip(NAMES) {
        seconds += f64::try_from(value.clone())? * factor;
    }
    for (name, factor) in NAMES {
        if let Some(value) = kwargs.get::<Option<f64>>(name)? {
            seconds += value * factor;
        }
    }
    kwargs.assert_all_used()?;
    Ok(Duration::value(seconds_delta(seconds)?))
}

/// Poolboy's `now(utc=False, fmt=None)`: a datetime (naive unless `utc`), or a string when
/// `fmt` is given, e.g. `now(True, '%FT%TZ')`.
pub(super) fn now(
    clock: &Arc<RenderClock>,
    args: &[Value],
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let (utc_flag, format): (Option<Value>, Option<String>) = from_args(args)?;
    let utc_flag = match utc_flag {
        Some(flag) => flag.is_true(),
        None => kwargs
            .get::<Option<Value>>("utc")?
            .is_some_and(|v| v.is_true()),
    };
    let format = match format {
        Some(format) => Some(format),
        None => kwargs.get::<Option<String>>("fmt")?,
    };
    kwargs.assert_all_used()?;
    let moment = Moment::now_datetime(clock, utc_flag.then(utc));
    match format {
        Some(format) => Ok(Value::from(moment.strftime(&format)?)),
        None => Ok(Value::from_object(moment)),
    }
}

/// The `to_datetime(fmt='%Y-%m-%d %H:%M:%S')` filter: strptime of the stringified input.
pub(super) fn to_datetime(value: &Value, format: Option<&str>) -> Result<Value, Error> {
    let format = format.unwrap_or("%Y-%m-%d %H:%M:%S");
    Ok(Value::from_object(parse_datetime(
        &value.to_string(),
        format,
    )?))
}
