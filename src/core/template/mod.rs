//! The Jinja2-compatible templating engine (Poolboy 1.12 §5, 1.17 Δ§3.4).
//!
//! Provider templates are written for Python Jinja2 with Poolboy's environment: chainable undefined
//! values that fail only when printed, typed results for strings that end in `| bool`, `| int`,
//! `| float`, `| list` or `| object`, the `omit` placeholder, the `now()`/`timestamp`/`datetime`
//! globals with Python's `+`/`-` on dates and timedeltas, lazily rendered template variables, and a
//! handful of filters. This module reproduces that on minijinja, without file, environment or
//! network access, with fuel and depth limits so a runaway template stops with an error.

mod arithmetic;
mod clock;
mod context;
mod filters;
mod jmespath;
mod nesting;
mod size;
mod strgen;
mod time;
pub(crate) mod view;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use minijinja::{AutoEscape, Environment, Error, ErrorKind, UndefinedBehavior, Value};
use rand::RngExt;
use thiserror::Error;

use clock::ClockWatch;
pub(crate) use clock::{ClockPin, ClockReading};
use context::RootContext;
pub(crate) use context::{RenderContext, TemplateValue};
use filters::{from_json_value, str2bool};

/// Instructions one render may execute (loops, filters, …) before it is stopped.
const FUEL: u64 = 1_000_000;

/// Nesting allowed for blocks, macros and calls within one render.
const RECURSION_LIMIT: usize = 200;

/// Distinct template sources kept compiled; past this the cache starts over.
const CACHE_CAPACITY: usize = 4_096;

/// How much of a template a message quotes.
const QUOTE_LIMIT: usize = 200;

/// A template that cannot be used, with what a provider author needs to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum TemplateError {
    /// The template does not parse.
    #[error("template {template:?}{}: {message}", at(.path))]
    Syntax {
        path: String,
        template: String,
        message: String,
    },
    /// The template parsed but failed while rendering (undefined value printed, bad filter
    /// argument, template variable error, out of fuel, …).
    #[error("template {template:?}{}: {message}", at(.path))]
    Render {
        path: String,
        template: String,
        message: String,
    },
    /// The template ends in a typed filter but its output is not of that type. (Poolboy quietly
    /// gives null here; an error is reported instead.)
    #[error(
        "template {template:?}{} ends in `| {filter}` but rendered {output:?}, which is not {expected}",
        at(.path)
    )]
    TypedOutput {
        path: String,
        template: String,
        filter: &'static str,
        output: String,
        expected: &'static str,
    },
}

fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at {path}")
    }
}

fn quote(source: &str) -> String {
    match source.char_indices().nth(QUOTE_LIMIT) {
        Some((index, _)) => format!("{}…", &source[..index]),
        None => source.to_owned(),
    }
}

/// The trailing filter that makes a template's result typed (Poolboy 1.12 §5.2, 1.17 Δ§3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Typed {
    Bool,
    Float,
    Int,
    List,
    Object,
}

impl Typed {
    fn name(self) -> &'static str {
        match self {
            Typed::Bool => "bool",
            Typed::Float => "float",
            Typed::Int => "int",
            Typed::List => "list",
            Typed::Object => "object",
        }
    }

    /// Poolboy's rule, `^{{(?!.*{{).*\| *(bool|float|int|list|object) *}}$` with Python's `re`:
    /// one line (a single trailing newline allowed), one `{{`, the filter last.
    fn of(source: &str) -> Option<Typed> {
        let line = source.strip_suffix('\n').unwrap_or(source);
        if line.contains('\n') {
            return None;
        }
        let inner = line.strip_prefix("{{")?.strip_suffix("}}")?;
        if inner.contains("{{") {
            return None;
        }
        let inner = inner.trim_end_matches(' ');
        [
            Typed::Bool,
            Typed::Float,
            Typed::Int,
            Typed::List,
            Typed::Object,
        ]
        .into_iter()
        .find(|typed| {
            inner
                .strip_suffix(typed.name())
                .is_some_and(|before| before.trim_end_matches(' ').ends_with('|'))
        })
    }
}

/// One rendered string: text, or a typed value.
enum Rendered {
    Text(String),
    Json(serde_json::Value),
}

impl Rendered {
    fn into_json(self) -> serde_json::Value {
        match self {
            Rendered::Text(text) => serde_json::Value::String(text),
            Rendered::Json(value) => value,
        }
    }

    fn into_value(self) -> Value {
        match self {
            Rendered::Text(text) => Value::from(text),
            Rendered::Json(value) => from_json_value(&value),
        }
    }
}

/// Why one string failed.
enum Failure {
    Jinja {
        prefix: Arc<str>,
        error: Error,
    },
    Typed {
        typed: Typed,
        output: String,
        expected: &'static str,
    },
}

impl Failure {
    fn into_jinja_error(self) -> Error {
        match self {
            Failure::Jinja { error, .. } => error,
            Failure::Typed {
                typed,
                output,
                expected,
            } => Error::new(
                ErrorKind::InvalidOperation,
                format!(
                    "ends in `| {}` but rendered {output:?}, which is not {expected}",
                    typed.name()
                ),
            ),
        }
    }

    fn into_template_error(self, path: &str, source: &str) -> TemplateError {
        let (path, template) = (path.to_owned(), quote(source));
        match self {
            Failure::Jinja { prefix, error } => {
                let message = describe(&error, &prefix);
                if error.kind() == ErrorKind::SyntaxError {
                    TemplateError::Syntax {
                        path,
                        template,
                        message,
                    }
                } else {
                    TemplateError::Render {
                        path,
                        template,
                        message,
                    }
                }
            }
            Failure::Typed {
                typed,
                output,
                expected,
            } => TemplateError::TypedOutput {
                path,
                template,
                filter: typed.name(),
                output,
                expected,
            },
        }
    }
}

/// A minijinja error as a sentence: kind, detail, line and the quoted spot, hints, then its
/// causes. Template names are the engine's internal cache keys, so they are never shown.
fn describe(error: &Error, prefix: &str) -> String {
    let mut message = describe_one(error, prefix);
    if error.kind() == ErrorKind::OutOfFuel {
        message.push_str(" (the template does too much work: look for huge or nested loops)");
    }
    if error
        .detail()
        .is_some_and(|d| d.contains("operator on unsupported types") && d.contains("plain object"))
    {
        message.push_str(
            " (dates and timedeltas support only + and -: datetime ± timedelta, \
             datetime - datetime, timedelta ± timedelta, timestamp ± '8h')",
        );
    }
    let mut cause = std::error::Error::source(error);
    let mut shown = 0;
    while let Some(inner) = cause {
        if shown == 5 {
            message.push_str("; …");
            break;
        }
        message.push_str("; caused by: ");
        match inner.downcast_ref::<Error>() {
            Some(jinja) => {
                if let Some(source) = jinja.name().and_then(|n| n.strip_prefix(prefix)) {
                    message.push_str(&format!("in {:?}: ", quote(source)));
                }
                message.push_str(&describe_one(jinja, prefix));
            }
            None => message.push_str(&inner.to_string()),
        }
        shown += 1;
        cause = inner.source();
    }
    message
}

fn describe_one(error: &Error, prefix: &str) -> String {
    let mut message = match error.detail() {
        Some(detail) => format!("{}: {detail}", error.kind()),
        None => error.kind().to_string(),
    };
    if let Some(line) = error.line() {
        message.push_str(&format!(" (line {line}"));
        let source = error.name().and_then(|name| name.strip_prefix(prefix));
        if let (Some(source), Some(range)) = (source, error.range())
            && let Some(spot) = source.get(arithmetic::original_range(source, range))
        {
            message.push_str(&format!(", at `{}`", quote(spot)));
        }
        message.push(')');
    }
    message
}

/// One generation of the compiled-template cache: an environment whose loader serves template
/// sources named by a secret prefix, so `include`/`import`/`extends` of any other name fail.
struct Generation {
    env: Environment<'static>,
    prefix: Arc<str>,
    loads: Arc<AtomicUsize>,
}

impl Generation {
    fn new(base: &Environment<'static>, prefix: Arc<str>) -> Generation {
        let mut env = base.clone();
        let loads = Arc::new(AtomicUsize::new(0));
        let (counter, key) = (loads.clone(), prefix.clone());
        env.set_loader(move |name| {
            let Some(source) = name.strip_prefix(&*key) else {
                return Ok(None);
            };
            counter.fetch_add(1, Ordering::Relaxed);
            // Before any parse: a chain too long to compile would overflow the stack.
            nesting::check(source)?;
            // Poolboy 1.12 §5.4: `+`/`-` on dates and timedeltas.
            Ok(Some(match arithmetic::rewrite(source) {
                Some(rewritten) => rewritten.text,
                None => source.to_owned(),
            }))
        });
        Generation { env, prefix, loads }
    }
}

fn render_source(
    generation: &Arc<Generation>,
    root: &Value,
    source: &str,
) -> Result<Rendered, Failure> {
    let jinja = |error| Failure::Jinja {
        prefix: generation.prefix.clone(),
        error,
    };
    if !source.contains("{{") && !source.contains("{%") && !source.contains("{#") {
        return Ok(Rendered::Text(source.to_owned()));
    }
    let typed = Typed::of(source);
    // Poolboy JSON-parses the text of `| list`, which fails on Python's list repr; serialising the
    // list as JSON gives the real list (1.17 Δ§3.4).
    let effective: Cow<str> = match typed {
        Some(Typed::List) => {
            let line = source.strip_suffix('\n').unwrap_or(source);
            let body = line.strip_suffix("}}").unwrap_or(line);
            Cow::Owned(format!("{body} | to_json }}}}"))
        }
        _ => Cow::Borrowed(source),
    };
    let template = generation
        .env
        .get_template(&format!("{}{effective}", generation.prefix))
        .map_err(jinja)?;
    let mut output = size::BoundedOutput::default();
    if let Err(error) = template.render_captured_to(root.clone(), &mut output) {
        return Err(jinja(match output.exceeded() {
            true => size::output_too_long(),
            false => error,
        }));
    }
    let text = output.into_string();
    match typed {
        None => Ok(Rendered::Text(text)),
        Some(typed) => convert(typed, text),
    }
}

/// Poolboy 1.12 §5.2: converts the rendered text of a typed template.
fn convert(typed: Typed, text: String) -> Result<Rendered, Failure> {
    let fail = |expected| Failure::Typed {
        typed,
        output: text.clone(),
        expected,
    };
    let value = match typed {
        // Poolboy 1.17 Δ§3.4: str2bool, anything unknown is false.
        Typed::Bool => serde_json::Value::Bool(str2bool(&text) == Some(true)),
        Typed::Int => {
            let digits = text.trim().replace('_', "");
            if let Ok(n) = digits.parse::<i64>() {
                serde_json::Value::from(n)
            } else if let Ok(n) = digits.parse::<u64>() {
                serde_json::Value::from(n)
            } else {
                return Err(fail("an integer"));
            }
        }
        Typed::Float => text
            .trim()
            .replace('_', "")
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(serde_json::Value::Number)
            .ok_or_else(|| fail("a finite number"))?,
        Typed::Object | Typed::List => {
            serde_json::from_str(text.trim()).map_err(|_| fail("JSON"))?
        }
    };
    Ok(Rendered::Json(value))
}

/// Removes every map entry and list item equal to the placeholder (Poolboy 1.12 §5.3).
fn strip_omit(value: serde_json::Value, omit: &str) -> serde_json::Value {
    use serde_json::Value as J;
    let is_omit = |v: &J| v.as_str() == Some(omit);
    match value {
        J::Object(map) => J::Object(
            map.into_iter()
                .filter(|(_, v)| !is_omit(v))
                .map(|(k, v)| (k, strip_omit(v, omit)))
                .collect(),
        ),
        J::Array(items) => J::Array(
            items
                .into_iter()
                .filter(|v| !is_omit(v))
                .map(|v| strip_omit(v, omit))
                .collect(),
        ),
        other => other,
    }
}

/// Poolboy's per-call `omit` placeholder: `__omit_place_holder__` and 40 random hex digits.
fn omit_placeholder() -> String {
    let mut rng = rand::rng();
    let hex: String = (0..40)
        .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
        .collect();
    format!("__omit_place_holder__{hex}")
}

/// The template engine: create one, share it (it is `Send + Sync`) and render through it.
/// Compiled templates are cached by source text, up to a bound. A [`watching`](Self::watching)
/// copy shares the cache and records what its renders make of the clock, and whether they read
/// the claim.
#[derive(Clone)]
pub(crate) struct TemplateEngine {
    shared: Arc<SharedEngine>,
    watch: Option<Arc<ClockWatch>>,
    claim_read: Option<Arc<AtomicBool>>,
}

struct SharedEngine {
    base: Environment<'static>,
    prefix: Arc<str>,
    current: Mutex<Arc<Generation>>,
    capacity: usize,
}

impl std::fmt::Debug for TemplateEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemplateEngine").finish_non_exhaustive()
    }
}

impl Default for TemplateEngine {
    fn default() -> Self {
        TemplateEngine::new()
    }
}

impl TemplateEngine {
    /// An engine with Poolboy's environment (§5.1): chainable undefined that errors only when
    /// printed, Python-like string/dict/list methods, Poolboy's filters, no loader, fuel-limited.
    pub(crate) fn new() -> TemplateEngine {
        TemplateEngine::with_cache_capacity(CACHE_CAPACITY)
    }

    fn with_cache_capacity(capacity: usize) -> TemplateEngine {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Chainable);
        // Poolboy's finalize: printing an undefined value is the error (§5.1).
        env.set_formatter(|out, state, value| {
            if value.is_undefined() {
                return Err(Error::new(
                    ErrorKind::UndefinedError,
                    "an undefined value was printed",
                ));
            }
            minijinja::escape_formatter(out, state, value)
        });
        // Jinja2's default: no escaping, whatever the source text looks like.
        env.set_auto_escape_callback(|_| AutoEscape::None);
        env.set_unknown_method_callback(size::unknown_method);
        env.set_fuel(Some(FUEL));
        env.set_recursion_limit(RECURSION_LIMIT);
        minijinja_contrib::add_to_environment(&mut env);
        filters::register(&mut env);
        size::register(&mut env);
        arithmetic::register(&mut env);
        let prefix: Arc<str> = Arc::from(format!("\u{0}poolboy-{}:", omit_placeholder()));
        let current = Mutex::new(Arc::new(Generation::new(&env, prefix.clone())));
        TemplateEngine {
            shared: Arc::new(SharedEngine {
                base: env,
                prefix,
                current,
                capacity,
            }),
            watch: None,
            claim_read: None,
        }
    }

    /// The same engine, recording what the templates rendered through it make of the clock:
    /// one per reconcile pass, read with [`clock_reading`](Self::clock_reading), and whether
    /// they read the claim ([`claim_read`](Self::claim_read)).
    pub(crate) fn watching(&self) -> TemplateEngine {
        TemplateEngine {
            shared: self.shared.clone(),
            watch: Some(Arc::default()),
            claim_read: Some(Arc::default()),
        }
    }

    /// Where a claim's view notes that a template read it (`view::Subjects::noting`);
    /// `None` for an engine that is not [`watching`](Self::watching).
    pub(crate) fn claim_note(&self) -> Option<Arc<AtomicBool>> {
        self.claim_read.clone()
    }

    /// Notes that the pass read its claim's status itself, not through a template.
    pub(crate) fn note_claim_read(&self) {
        if let Some(read) = &self.claim_read {
            read.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a template rendered through this engine (or the pass itself) read the claim;
    /// `true` for an engine that is not [`watching`](Self::watching): it cannot tell.
    pub(crate) fn claim_read(&self) -> bool {
        self.claim_read
            .as_ref()
            .is_none_or(|read| read.load(Ordering::Relaxed))
    }

    /// What the renders through this engine made of the clock so far: when a result would
    /// change, or that it may change at any time. Nothing for an engine that is not
    /// [`watching`](Self::watching).
    pub(crate) fn clock_reading(&self) -> ClockReading {
        self.watch
            .as_ref()
            .map_or_else(ClockReading::default, |watch| watch.reading())
    }

    /// Adds what the renders through `other` made of the clock to this engine's reading, for
    /// renders done apart whose results turned out to count.
    pub(crate) fn absorb(&self, other: &TemplateEngine) {
        if let Some(watch) = &self.watch {
            watch.absorb(other.clock_reading());
        }
        if other.claim_read.is_some() && other.claim_read() {
            self.note_claim_read();
        }
    }

    fn generation(&self) -> Arc<Generation> {
        let shared = &self.shared;
        let mut current = shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if current.loads.load(Ordering::Relaxed) >= shared.capacity {
            *current = Arc::new(Generation::new(&shared.base, shared.prefix.clone()));
        }
        current.clone()
    }

    fn root(&self, generation: &Arc<Generation>, ctx: &RenderContext, omit: &str) -> Value {
        RootContext::value(generation.clone(), ctx, omit, self.watch.clone())
    }

    /// Renders every string inside `template` (map values and list items, recursively; keys and
    /// non-strings are kept), types the results of `{{ … | bool/int/float/list/object }}`
    /// strings, then drops the entries equal to `omit`. A top-level `omit` gives null.
    pub(crate) fn render(
        &self,
        template: &serde_json::Value,
        ctx: &RenderContext,
    ) -> Result<serde_json::Value, TemplateError> {
        let generation = self.generation();
        let omit = omit_placeholder();
        let root = self.root(&generation, ctx, &omit);
        let mut path = String::new();
        let rendered = walk(&generation, &root, template, &mut path)?;
        Ok(if rendered.as_str() == Some(omit.as_str()) {
            serde_json::Value::Null
        } else {
            strip_omit(rendered, &omit)
        })
    }

    /// Renders one template string, typed like [`render`](Self::render).
    #[cfg(test)]
    pub(crate) fn render_str(
        &self,
        template: &str,
        ctx: &RenderContext,
    ) -> Result<serde_json::Value, TemplateError> {
        self.render(&serde_json::Value::String(template.to_owned()), ctx)
    }

    /// Evaluates a condition (checks, `when`, `waitFor`, autoDelete/autoDetach, health,
    /// readiness) the way Poolboy does: as `{{ (condition) | bool }}` (Poolboy 1.12 §5.6).
    pub(crate) fn check(
        &self,
        condition: &str,
        ctx: &RenderContext,
    ) -> Result<bool, TemplateError> {
        let source = format!("{{{{ ({condition}) | bool }}}}");
        let generation = self.generation();
        let root = self.root(&generation, ctx, &omit_placeholder());
        match render_source(&generation, &root, &source) {
            Ok(Rendered::Json(serde_json::Value::Bool(result))) => Ok(result),
            Ok(other) => Ok(other
                .into_json()
                .as_str()
                .and_then(str2bool)
                .unwrap_or(false)),
            Err(failure) => Err(failure.into_template_error("", condition)),
        }
    }

    /// Checks that a template string parses, so a provider can be rejected up front.
    pub(crate) fn check_syntax(&self, template: &str) -> Result<(), TemplateError> {
        if !template.contains("{{") && !template.contains("{%") && !template.contains("{#") {
            return Ok(());
        }
        let generation = self.generation();
        match generation
            .env
            .get_template(&format!("{}{template}", generation.prefix))
        {
            Ok(_) => Ok(()),
            Err(error) => Err(Failure::Jinja {
                prefix: generation.prefix.clone(),
                error,
            }
            .into_template_error("", template)),
        }
    }
}

fn walk(
    generation: &Arc<Generation>,
    root: &Value,
    template: &serde_json::Value,
    path: &mut String,
) -> Result<serde_json::Value, TemplateError> {
    use serde_json::Value as J;
    Ok(match template {
        J::String(source) => render_source(generation, root, source)
            .map_err(|failure| failure.into_template_error(path, source))?
            .into_json(),
        J::Object(map) => {
            let mut out = serde_json::Map::with_capacity(map.len());
            for (key, value) in map {
                let len = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                out.insert(key.clone(), walk(generation, root, value, path)?);
                path.truncate(len);
            }
            J::Object(out)
        }
        J::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("/{index}"));
                out.push(walk(generation, root, item, path)?);
                path.truncate(len);
            }
            J::Array(out)
        }
        other => other.clone(),
    })
}
