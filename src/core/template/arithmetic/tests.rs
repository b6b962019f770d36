//! `+`/`-` on dates and timedeltas, and everything else unchanged (Poolboy 1.12 §5.4).

use super::super::{RenderContext, TemplateEngine};
use super::*;
use chrono::{TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{Value as J, json};

fn ctx() -> RenderContext {
    let now = Utc.with_ymd_and_hms(2021, 5, 1, 12, 30, 0).unwrap();
    let variables = json!({"x": 5, "s": "ab", "l": [1, 2], "start": "2021-05-01T10:00:00Z"});
    RenderContext::new(now, variables.as_object().unwrap())
}

fn render(source: &str) -> J {
    TemplateEngine::new()
        .render_str(source, &ctx())
        .unwrap_or_else(|e| panic!("{source}: {e}"))
}

fn failure(source: &str) -> String {
    match TemplateEngine::new().render_str(source, &ctx()) {
        Ok(value) => panic!("{source} should fail, gave {value}"),
        Err(error) => error.to_string(),
    }
}

fn rewritten(source: &str) -> String {
    rewrite(source).map_or_else(|| source.to_owned(), |r| r.text)
}

#[test]
fn datetime_plus_and_minus_timedelta() {
    for (source, want) in [
        ("{{ now() + timedelta(hours=1) }}", "2021-05-01 13:30:00"),
        ("{{ now() - timedelta(hours=1) }}", "2021-05-01 11:30:00"),
        ("{{ timedelta(days=1) + now() }}", "2021-05-02 12:30:00"),
        ("{{ (now() + timedelta(hours=1)).strftime('%H') }}", "13"),
        (
            "{{ datetime.now(timezone.utc) + timedelta(minutes=5) }}",
            "2021-05-01 12:35:00+00:00",
        ),
        (
            "{{ ('2021-05-01 08:00:00' | to_datetime) + ('3h' | parse_time_interval) }}",
            "2021-05-01 11:00:00",
        ),
        // Like `.add()`: an interval string or a number of seconds.
        ("{{ now() + '1h' }}", "2021-05-01 13:30:00"),
        ("{{ now() - 60 }}", "2021-05-01 12:29:00"),
    ] {
        assert_eq!(render(source), json!(want), "{source}");
    }
}

#[test]
fn datetime_minus_datetime_is_a_timedelta() {
    assert_eq!(
        render("{{ now() - (now() - timedelta(hours=1, minutes=30)) }}"),
        json!("1:30:00")
    );
    assert_eq!(
        render("{{ (now(True) - (start | to_datetime('%Y-%m-%dT%H:%M:%S%z'))).total_seconds() }}"),
        json!("9000.0")
    );
    assert_eq!(
        render("{{ timestamp - timestamp('2021-05-01T12:00:00Z') }}"),
        json!("0:30:00")
    );
}

#[test]
fn timedelta_arithmetic() {
    for (source, want) in [
        (
            "{{ timedelta(hours=1) + timedelta(minutes=30) }}",
            "1:30:00",
        ),
        (
            "{{ timedelta(hours=1) - timedelta(hours=3) }}",
            "-1 day, 22:00:00",
        ),
        ("{{ -timedelta(hours=1) }}", "-1 day, 23:00:00"),
        (
            "{{ (timedelta(hours=1) + '1h').total_seconds() }}",
            "7200.0",
        ),
        (
            "{{ ('1d' | parse_time_interval) - timedelta(days=1) }}",
            "0:00:00",
        ),
    ] {
        assert_eq!(render(source), json!(want), "{source}");
    }
}

#[test]
fn timestamp_plus_and_minus_print_as_timestamps() {
    for (source, want) in [
        ("{{ timestamp + '8h' }}", "2021-05-01T20:30:00Z"),
        (
            "{{ timestamp + timedelta(days=1) }}",
            "2021-05-02T12:30:00Z",
        ),
        ("{{ timestamp + 3600 }}", "2021-05-01T13:30:00Z"),
        ("{{ timestamp + '1h30m' + '30m' }}", "2021-05-01T14:30:00Z"),
        ("{{ timestamp - '1d' }}", "2021-04-30T12:30:00Z"),
        (
            "{{ timedelta(hours=1) + timestamp }}",
            "2021-05-01T13:30:00Z",
        ),
        ("{{ timestamp.utcnow + '1d' }}", "2021-05-02T12:30:00Z"),
    ] {
        assert_eq!(render(source), json!(want), "{source}");
    }
}

#[test]
fn results_compare_and_feed_typed_templates() {
    for (expr, want) in [
        ("timestamp + '1h' > timestamp", true),
        ("timestamp - '1s' >= timestamp", false),
        ("now() + timedelta(hours=1) > now()", true),
        ("now() - now() == timedelta()", true),
        (
            "timedelta(hours=2) - timedelta(hours=1) < timedelta(hours=1, seconds=1)",
            true,
        ),
        (
            "timestamp + '1h' == timestamp('2021-05-01T13:30:00Z')",
            true,
        ),
    ] {
        assert_eq!(
            render(&format!("{{{{ ({expr}) | bool }}}}")),
            json!(want),
            "{expr}"
        );
        assert_eq!(
            TemplateEngine::new().check(expr, &ctx()).unwrap(),
            want,
            "{expr}"
        );
    }
    assert_eq!(
        render("{{ ((now() + timedelta(minutes=90)) - now()).total_seconds() | int }}"),
        json!(5400)
    );
}

#[test]
fn mixed_nesting() {
    assert_eq!(render("{% set _ = now %}{{ 1 + 2 - x }}"), json!("-2"));
    assert_eq!(render("{% set _ = now %}{{ [1] + [2] }}"), json!("[1, 2]"));
    assert_eq!(
        render("{{ 'a' ~ (now() + timedelta(days=1)) }}"),
        json!("a2021-05-02 12:30:00")
    );
    assert_eq!(
        render("{{ (timestamp + '1h' + timedelta(hours=1) - '30m') ~ '|' ~ (2 * 3 - -1) }}"),
        json!("2021-05-01T14:00:00Z|7")
    );
    assert_eq!(
        render("{{ ((timestamp + '1h') | string)[:13] + ':' + s }}"),
        json!("2021-05-01T13:ab")
    );
    assert_eq!(
        render("{{ [now() + '1h', x + 1] | map('string') | join(',') }}"),
        json!("2021-05-01 13:30:00,6")
    );
}

#[test]
fn operators_in_every_statement_kind() {
    for (source, want) in [
        (
            "{% set t = timestamp + '1h' %}{{ t }}",
            "2021-05-01T13:30:00Z",
        ),
        ("{% if timestamp + '1h' > timestamp %}yes{% endif %}", "yes"),
        ("{{ timedelta(hours=1 + 1) }}", "2:00:00"),
        ("{{ now().strftime('%d' + '/' + '%m') }}", "01/05"),
        (
            "{% macro later(h) %}{{ timestamp + timedelta(hours=h - 1) }}{% endmacro %}{{ later(3) }}",
            "2021-05-01T14:30:00Z",
        ),
        (
            "{% macro m(d=timedelta(hours=1) + timedelta(hours=1)) %}{{ d }}{% endmacro %}{{ m() }}",
            "2:00:00",
        ),
        (
            "{% for i in range(x - 3) %}{{ timestamp + i * 60 }} {% endfor %}",
            "2021-05-01T12:30:00Z 2021-05-01T12:31:00Z ",
        ),
        (
            "{% with t = now() - timedelta(days=1) %}{{ t.day }}{% endwith %}",
            "30",
        ),
        (
            "{% set ns = namespace(t=timestamp) %}{% set ns.t = ns.t + '2h' %}{{ ns.t }}",
            "2021-05-01T14:30:00Z",
        ),
        (
            "{% filter replace('Z', '+' ~ 'Z') %}{{ timestamp - '1h' }}{% endfilter %}",
            "2021-05-01T11:30:00+Z",
        ),
        (
            "{{ timestamp + '1h' if x - 5 == 0 else 'no' }}",
            "2021-05-01T13:30:00Z",
        ),
        (
            "{% set t %}{{ now() + '1m' }}{% endset %}{{ t }}",
            "2021-05-01 12:31:00",
        ),
        ("{{ {'a': timestamp + '1s'}['a'] }}", "2021-05-01T12:30:01Z"),
        ("{{ l[x - 4] + 1 }}{{ now is defined }}", "3True"),
        (
            "{%- set t = timestamp - '2h' -%} {{- t -}}",
            "2021-05-01T10:30:00Z",
        ),
    ] {
        assert_eq!(render(source), json!(want), "{source}");
    }
}

#[test]
fn template_variables_and_typed_templates_are_rewritten_too() {
    let context = ctx().with_template_variables(
        json!({"end": "{{ timestamp + '1d' }}", "hours": "{{ (2 + 1) | int }}"})
            .as_object()
            .unwrap(),
    );
    let engine = TemplateEngine::new();
    assert_eq!(
        engine.render_str("{{ end }}", &context).unwrap(),
        json!("2021-05-02T12:30:00Z")
    );
    assert_eq!(
        engine
            .render_str(
                "{{ (now() + timedelta(hours=hours)).hour | int }}",
                &context
            )
            .unwrap(),
        json!(15)
    );
    assert_eq!(
        engine
            .render_str("{{ [timestamp + '1h', 1 + 1] | list }}", &context)
            .unwrap(),
        json!(["2021-05-01T13:30:00Z", 2])
    );
}

#[test]
fn other_operands_behave_and_fail_as_before() {
    let prefix = "{% set _ = now %}";
    for source in [
        "{{ 1 + 2 }}",
        "{{ 1.5 - 2 }}",
        "{{ s + 'c' }}",
        "{{ l + [3] }}",
        "{{ (1, 2) + (3,) }}",
        "{{ -x }}",
        "{{ - -x }}",
        "{{ 9223372036854775807 + 1 }}",
        "{{ x - 0.5 }}",
    ] {
        let plain = render(source);
        let with_name = render(&format!("{prefix}{source}"));
        assert_eq!(plain, with_name, "{source}");
        assert!(rewrite(&format!("{prefix}{source}")).is_some(), "{source}");
    }
    for source in [
        "{{ s + 1 }}",
        "{{ s - 'a' }}",
        "{{ missing + 1 }}",
        "{{ missing.deeper - 1 }}",
        "{{ -s }}",
        "{{ l + 1 }}",
    ] {
        let plain = failure(source);
        let with_name = failure(&format!("{prefix}{source}"));
        // Debug builds name the undefined operand (`missing` is undefined); through the
        // rewrite that note is lost. Release builds never add it.
        let kind = |m: &str| {
            let m = m.split(" (line").next().unwrap_or("");
            m.split(" (`").next().unwrap_or("").to_owned()
        };
        assert!(
            plain.contains("unsupported types") || plain.contains("invalid operation"),
            "{plain}"
        );
        assert_eq!(
            kind(&plain).replace("\"{{", "\"{% set _ = now %}{{"),
            kind(&with_name),
            "{source}"
        );
    }
}

#[test]
fn unsupported_date_combinations_say_what_works() {
    for source in [
        "{{ timedelta(hours=1) - now() }}",
        "{{ 1 + timestamp }}",
        "{{ 'x' - timedelta(hours=1) }}",
        "{{ now() + [1] }}",
        "{{ now() + now() }}",
        "{{ -now() }}",
    ] {
        let message = failure(source);
        assert!(
            message.contains("unsupported operand") || message.contains("bad operand"),
            "{source}: {message}"
        );
        assert!(
            message.contains("datetime ± timedelta"),
            "{source}: {message}"
        );
    }
    assert!(failure("{{ timestamp + 'soon' }}").contains("soon"));
}

#[test]
fn errors_point_at_the_original_source() {
    let message = failure("{{ timestamp }}\n{{ x + s }}");
    assert!(message.contains("line 2"), "{message}");
    assert!(message.contains("at `x + s`"), "{message}");
    assert!(!message.contains("__poolboy"), "{message}");
    let message = failure("{{ now() + undefined_thing.x }}");
    assert!(!message.contains("__poolboy"), "{message}");
    assert!(
        message.contains("at `now() + undefined_thing.x`"),
        "{message}"
    );
}

#[test]
fn syntax_errors_are_reported_on_the_original() {
    let engine = TemplateEngine::new();
    let error = engine.check_syntax("{{ now() + }}").unwrap_err();
    assert!(error.to_string().contains("syntax error"), "{error}");
    assert!(!error.to_string().contains("__poolboy"), "{error}");
    assert!(
        engine
            .check_syntax("{{ now() + timedelta(hours=1) }}")
            .is_ok()
    );
}

#[test]
fn only_templates_naming_a_date_source_are_rewritten() {
    assert!(rewrite("{{ 1 + 2 }}").is_none());
    assert!(rewrite("{{ now() }}").is_none());
    assert!(rewrite("{{ now( }} + 1").is_none());
    assert_eq!(
        rewritten("{{ now() + a - (b + -c) }}"),
        "{{ __poolboy_sub(__poolboy_add(now() , a) , (__poolboy_add(b , __poolboy_neg(c)))) }}"
    );
    assert_eq!(
        rewritten("{{ now() + -1 }}"),
        "{{ __poolboy_add(now() , -1) }}"
    );
    assert_eq!(
        rewritten("{{ (now()) + b | f + c }}"),
        "{{ __poolboy_add(__poolboy_add((now()) , b | f) , c) }}"
    );
}

#[test]
fn rewrites_keep_lines_and_map_spots_back() {
    let source = "{{ now()\n + x }}\n{{ y - 1 }}";
    let rewrite = rewrite(source).unwrap();
    assert_eq!(
        rewrite.text.matches('\n').count(),
        source.matches('\n').count()
    );
    let call = rewrite.text.find("__poolboy_sub").unwrap();
    let end = rewrite.text[call..].find(')').unwrap() + call + 1;
    let original = rewrite.original_range(call..end);
    assert_eq!(&source[original], "y - 1");
}

/// A random integer expression with `+`, `-`, unary minus, parentheses and other operators.
fn arithmetic() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        (-50i64..50).prop_map(|n| n.to_string()),
        Just("x".to_owned()),
        Just("l[0]".to_owned()),
        Just("(l | length)".to_owned()),
    ];
    leaf.prop_recursive(5, 32, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} + {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}-{b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} * {b}")),
            inner.clone().prop_map(|a| format!("({a})")),
            inner.clone().prop_map(|a| format!("-({a})")),
            inner.clone().prop_map(|a| format!("- {a}")),
            inner.clone().prop_map(|a| format!("[{a}][0]")),
            (inner.clone(), inner).prop_map(|(a, b)| format!("({a}) | abs + {b}")),
        ]
    })
}

proptest! {
    #[test]
    fn rewritten_integer_arithmetic_renders_as_before(expr in arithmetic()) {
        let engine = TemplateEngine::new();
        let source = format!("{{{{ {expr} }}}}");
        if expr.contains(" + ") {
            let named = format!("{{% set _ = now %}}{source}");
            prop_assert!(rewrite(&named).is_some());
        }
        let plain = engine.render_str(&source, &ctx()).map_err(|e| e.to_string());
        let with_name = engine
            .render_str(&format!("{{% set _ = now %}}{source}"), &ctx())
            .map_err(|e| e.to_string());
        match (plain, with_name) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(_), Err(_)) => {}
            (a, b) => prop_assert!(false, "{source}: {a:?} vs {b:?}"),
        }
    }
}

#[test]
fn deep_operator_nesting_is_left_alone() {
    let chain = |n: usize| format!("{{% set _ = now %}}{{{{ {} }}}}", vec!["1"; n].join(" + "));
    assert!(rewrite(&chain(MAX_NESTING + 1)).is_some());
    assert!(rewrite(&chain(MAX_NESTING + 2)).is_none());
    // Numbers still add, as before.
    assert_eq!(render(&chain(400)), json!("400"));
    let nested = format!("{{{{ now() {} }}}}", "+ (1 ".repeat(100) + &")".repeat(100));
    assert!(rewrite(&nested).is_none());
}
