//! The instant extraction: what a render records about the clock, through the engine,
//! with `now` pinned.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use serde_json::{Value as J, json};

use super::*;
use crate::core::template::{RenderContext, TemplateEngine};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 5, 1, 12, 0, 0).unwrap()
}

fn after(seconds: i64) -> Option<DateTime<Utc>> {
    Some(now() + TimeDelta::seconds(seconds))
}

/// `now()` plus `seconds`, as the `%FT%TZ` text a claim would hold.
fn stamp(seconds: i64) -> String {
    (now() + TimeDelta::seconds(seconds))
        .format("%FT%TZ")
        .to_string()
}

/// Renders `source` with `variables` through a watching engine: the output and the reading.
fn render(source: &str, variables: J) -> (J, ClockReading) {
    let engine = TemplateEngine::new().watching();
    let context = RenderContext::new(now(), variables.as_object().unwrap());
    let output = engine
        .render(&J::String(source.to_owned()), &context)
        .unwrap_or_else(|e| panic!("{source}: {e}"));
    (output, engine.clock_reading())
}

/// Only the next flip of `source`, which must stay predictable.
fn flip(source: &str, variables: J) -> Option<DateTime<Utc>> {
    let (output, reading) = render(source, variables);
    assert!(
        !reading.unpredictable,
        "{source} gave {output} unpredictably"
    );
    reading.next_flip
}

fn unpredictable(source: &str, variables: J) -> bool {
    render(source, variables).1.unpredictable
}

#[test]
fn a_comparison_with_a_later_instant_flips_when_the_clock_reaches_it() {
    let vars = json!({"start": stamp(30), "stop": stamp(-30)});
    // Before: true until start.
    assert_eq!(
        flip("{{ timestamp(start) > timestamp.utcnow }}", vars.clone()),
        after(30)
    );
    // The operands either way round.
    assert_eq!(
        flip("{{ timestamp.utcnow < timestamp(start) }}", vars.clone()),
        after(30)
    );
    // After: an instant already passed never flips back.
    assert_eq!(
        flip("{{ timestamp(stop) < timestamp.utcnow }}", vars.clone()),
        None
    );
    // `timestamp` itself is now.
    assert_eq!(flip("{{ timestamp >= timestamp(start) }}", vars), after(30));
}

#[test]
fn equality_with_the_clock_changes_at_the_instant_and_right_after_it() {
    let vars = json!({"start": stamp(45)});
    assert_eq!(
        flip("{{ timestamp(start) == timestamp.utcnow }}", vars),
        after(45)
    );
    // Equal now: different from the next microsecond on.
    assert_eq!(
        flip(
            "{{ now(true) == datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc) }}",
            json!({})
        ),
        Some(now() + TimeDelta::microseconds(1))
    );
}

#[test]
fn intervals_added_to_the_clock_shift_the_flip() {
    let vars = json!({"deadline": stamp(50)});
    assert_eq!(
        flip(
            "{{ timestamp.utcnow.add('20s') > timestamp(deadline) }}",
            vars.clone()
        ),
        after(30)
    );
    assert_eq!(
        flip(
            "{{ timestamp(deadline) < now(true) + timedelta(seconds=20) }}",
            vars.clone()
        ),
        after(30)
    );
    assert_eq!(
        flip(
            "{{ timestamp + '20s' - '5s' > timestamp(deadline) }}",
            vars.clone()
        ),
        after(35)
    );
    // Moved back by subtracting: the deadline comes later.
    assert_eq!(
        flip(
            "{{ now(true) - timedelta(minutes=1) > timestamp(deadline) }}",
            vars.clone()
        ),
        after(110)
    );
    // The interval added to a fixed instant instead.
    assert_eq!(
        flip(
            "{{ timestamp(deadline).add('10s') <= timestamp.utcnow }}",
            vars
        ),
        after(60)
    );
}

#[test]
fn timezone_aware_and_naive_times_flip_at_the_same_instant() {
    // 14:00:45+02:00 is 12:00:45 UTC.
    assert_eq!(
        flip(
            "{{ datetime.now(timezone(timedelta(hours=2))) >= \
               datetime.fromisoformat('2024-05-01T14:00:45+02:00') }}",
            json!({})
        ),
        after(45)
    );
    assert_eq!(
        flip(
            "{{ now(true).astimezone(timezone(timedelta(hours=-5))) > timestamp(at) }}",
            json!({"at": stamp(45)})
        ),
        after(45)
    );
    // Naive times are UTC.
    assert_eq!(
        flip(
            "{{ now() > datetime.strptime('2024-05-01 12:01:00', '%Y-%m-%d %H:%M:%S') }}",
            json!({})
        ),
        after(60)
    );
    assert_eq!(
        flip(
            "{{ datetime.utcnow() < '2024-05-01 12:00:15' | to_datetime }}",
            json!({})
        ),
        after(15)
    );
}

#[test]
fn a_timedelta_that_shrinks_with_the_clock_flips_when_it_reaches_the_bound() {
    let vars = json!({"stop": stamp(60)});
    assert_eq!(
        flip(
            "{{ timestamp(stop) - timestamp.utcnow < timedelta(seconds=10) }}",
            vars.clone()
        ),
        after(50)
    );
    assert_eq!(
        flip(
            "{{ timedelta(minutes=2) > now(true) - timestamp(stop) }}",
            vars.clone()
        ),
        after(180)
    );
    assert_eq!(
        flip(
            "{{ 'left' if timestamp(stop) - timestamp else 'none' }}",
            vars
        ),
        after(60)
    );
}

#[test]
fn comparing_the_clock_with_itself_never_flips() {
    assert_eq!(
        flip("{{ now() + timedelta(hours=1) > now() }}", json!({})),
        None
    );
    assert_eq!(
        flip(
            "{{ timestamp.utcnow.add('1h') - timestamp > timedelta(minutes=5) }}",
            json!({})
        ),
        None
    );
}

#[test]
fn templates_that_do_not_read_the_clock_record_nothing() {
    for source in [
        "{{ name }}",
        "{{ timestamp('2024-05-01T12:00:30Z') }}",
        "{{ timestamp(start).add('1h') }}",
        "{{ (timestamp(start) - timestamp('2024-01-01T00:00:00Z')).total_seconds() }}",
        "{{ timedelta(hours=1) }}",
    ] {
        let (_, reading) = render(source, json!({"name": "x", "start": stamp(30)}));
        assert_eq!(reading, ClockReading::default(), "{source}");
    }
}

#[test]
fn any_other_use_of_the_clock_is_unpredictable() {
    let vars = json!({"stop": stamp(60)});
    for source in [
        "{{ now() }}",
        "{{ timestamp }}",
        "{{ timestamp.utcnow.add('5m') }}",
        "{{ now(true, '%FT%TZ') }}",
        "{{ now().strftime('%H') }}",
        "{{ now().year }}",
        "{{ now().isoformat() }}",
        "{{ timestamp.utcnow | string }}",
        "{{ (timestamp(stop) - timestamp.utcnow).total_seconds() < 10 }}",
        "{{ (timestamp(stop) - timestamp.utcnow).seconds }}",
        "{{ timestamp(stop) - now(true) }}",
        "{{ timestamp.utcnow ~ '' }}",
    ] {
        assert!(unpredictable(source, vars.clone()), "{source}");
    }
}

#[test]
fn a_template_variable_that_prints_the_clock_is_unpredictable() {
    let engine = TemplateEngine::new().watching();
    let context = RenderContext::new(now(), &serde_json::Map::new())
        .with_template_variables(json!({"until": "{{ timestamp.utcnow.add('5m') }}"}).as_object());
    engine.render(&json!("{{ until }}"), &context).unwrap();
    assert!(engine.clock_reading().unpredictable);
}

#[test]
fn checks_record_like_renders_and_the_earliest_flip_wins() {
    let engine = TemplateEngine::new().watching();
    let context = RenderContext::new(
        now(),
        json!({"a": stamp(90), "b": stamp(20)}).as_object().unwrap(),
    );
    assert!(
        !engine
            .check("timestamp(a) < timestamp.utcnow", &context)
            .unwrap()
    );
    assert!(
        engine
            .check("timestamp(b) > timestamp.utcnow", &context)
            .unwrap()
    );
    assert_eq!(
        engine.clock_reading(),
        ClockReading {
            next_flip: after(20),
            unpredictable: false
        }
    );
}

#[test]
fn an_engine_that_is_not_watching_records_nothing() {
    let engine = TemplateEngine::new();
    let context = RenderContext::new(now(), &serde_json::Map::new());
    engine.render(&json!("{{ now() }}"), &context).unwrap();
    assert_eq!(engine.clock_reading(), ClockReading::default());
}

/// The start/stop schedule Babylon-style catalogues use.
#[test]
fn the_schedule_flips_at_start_and_at_stop() {
    const DESIRED_STATE: &str = "{%- if timestamp(start) > timestamp.utcnow or \
        timestamp(stop) < timestamp.utcnow -%}stopped{%- else -%}started{%- endif -%}";
    let (state, reading) = render(
        DESIRED_STATE,
        json!({"start": stamp(-10), "stop": stamp(20)}),
    );
    assert_eq!(state, json!("started"));
    assert_eq!(
        reading,
        ClockReading {
            next_flip: after(20),
            unpredictable: false
        }
    );
    let (state, reading) = render(
        DESIRED_STATE,
        json!({"start": stamp(10), "stop": stamp(20)}),
    );
    assert_eq!(state, json!("stopped"));
    assert_eq!(reading.next_flip, after(10));
    let (state, reading) = render(
        DESIRED_STATE,
        json!({"start": stamp(-20), "stop": stamp(-10)}),
    );
    assert_eq!(state, json!("stopped"));
    assert_eq!(reading, ClockReading::default());
}

#[test]
fn a_difference_closing_in_crosses_after_it_has_shrunk_to_zero() {
    assert_eq!(
        crossing(TimeDelta::seconds(-5), 1),
        Some(TimeDelta::seconds(5))
    );
    assert_eq!(
        crossing(TimeDelta::seconds(5), -1),
        Some(TimeDelta::seconds(5))
    );
    // Moving twice as fast: half the time, rounded up.
    assert_eq!(
        crossing(TimeDelta::microseconds(-5), 2),
        Some(TimeDelta::microseconds(3))
    );
}

#[test]
fn a_difference_moving_away_never_crosses() {
    assert_eq!(crossing(TimeDelta::seconds(5), 1), None);
    assert_eq!(crossing(TimeDelta::seconds(-5), -1), None);
    assert_eq!(crossing(TimeDelta::seconds(-5), 0), None);
}

#[test]
fn equal_now_changes_at_the_next_microsecond() {
    assert_eq!(
        crossing(TimeDelta::zero(), 1),
        Some(TimeDelta::microseconds(1))
    );
}

#[test]
fn the_earliest_crossing_and_any_unpredictable_use_are_kept() {
    let now = DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(20_000);
    let watch = Arc::new(ClockWatch::default());
    let clock = RenderClock::new(now, Some(watch.clone()));
    clock.compared(TimeDelta::seconds(-30), 1);
    clock.compared(TimeDelta::seconds(-10), 1);
    clock.compared(TimeDelta::seconds(5), 1);
    assert_eq!(
        watch.reading(),
        ClockReading {
            next_flip: Some(now + TimeDelta::seconds(10)),
            unpredictable: false
        }
    );
    clock.unpredictable();
    assert!(watch.reading().unpredictable);
}

#[test]
fn the_next_render_is_the_flip_or_the_fallback_whichever_is_first() {
    let now = DateTime::<Utc>::UNIX_EPOCH;
    let minute = std::time::Duration::from_secs(60);
    let flip = |seconds| ClockReading {
        next_flip: Some(now + TimeDelta::seconds(seconds)),
        unpredictable: false,
    };
    assert_eq!(ClockReading::default().next_render(now, minute), None);
    assert_eq!(
        flip(90).next_render(now, minute),
        Some(now + TimeDelta::seconds(90))
    );
    let unpredictable = ClockReading {
        next_flip: None,
        unpredictable: true,
    };
    assert_eq!(
        flip(90).merge(unpredictable).next_render(now, minute),
        Some(now + TimeDelta::seconds(60))
    );
    assert_eq!(
        flip(30).merge(unpredictable).next_render(now, minute),
        Some(now + TimeDelta::seconds(30))
    );
}

#[test]
fn a_pin_holds_for_the_same_inputs_until_the_render_it_asked_for() {
    let pin = ClockPin::new(("handle", 1), now(), now() + TimeDelta::seconds(60));
    let at = |inputs: (&str, i32), seconds| {
        ClockPin::render_at(Some(&pin), &inputs, now() + TimeDelta::seconds(seconds))
    };
    assert_eq!(at(("handle", 1), 1), now(), "an echo a second later");
    assert_eq!(at(("handle", 1), 59), now());
    assert_eq!(
        at(("handle", 1), 60),
        now() + TimeDelta::seconds(60),
        "the re-render is due"
    );
    assert_eq!(
        at(("handle", 2), 1),
        now() + TimeDelta::seconds(1),
        "new inputs"
    );
    assert_eq!(
        ClockPin::render_at(None, &("handle", 1), now()),
        now(),
        "nothing pinned"
    );
}

/// Rendered at the pinned instant, a schedule gives what it gives at the clock's time, at
/// every instant before the re-render it asked for, and a printed time does not change.
#[test]
fn a_pinned_render_gives_what_the_clock_would_until_the_re_render() {
    let vars = json!({"start": stamp(30), "stop": stamp(90)});
    let source = "{{ timestamp(start) <= timestamp.utcnow < timestamp(stop) }} \
                  {{ now(true, '%FT%TZ') }}";
    let render_at = |at: DateTime<Utc>| {
        let engine = TemplateEngine::new().watching();
        let context = RenderContext::new(at, vars.as_object().unwrap());
        let output = engine
            .render(&J::String(source.to_owned()), &context)
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        (output, engine.clock_reading())
    };
    let fallback = std::time::Duration::from_secs(60);
    let (first, reading) = render_at(now());
    let until = reading
        .next_render(now(), fallback)
        .expect("a schedule and a printed time ask for a re-render");
    assert_eq!(
        until,
        now() + TimeDelta::seconds(30),
        "the start flips first"
    );
    let pin = ClockPin::new((), now(), until);
    for seconds in [1, 10, 29] {
        let clock = now() + TimeDelta::seconds(seconds);
        let (pinned, _) = render_at(ClockPin::render_at(Some(&pin), &(), clock));
        assert_eq!(pinned, first, "{seconds} s later, before the flip");
        let schedule = |output: &J| {
            output
                .as_str()
                .map(|s| s.split(' ').next().map(str::to_owned))
        };
        assert_eq!(schedule(&pinned), schedule(&render_at(clock).0));
    }
    let (flipped, _) = render_at(ClockPin::render_at(Some(&pin), &(), until));
    assert!(
        flipped.as_str().is_some_and(|s| s.starts_with("True")),
        "{flipped}: at the re-render the schedule has started"
    );
}
