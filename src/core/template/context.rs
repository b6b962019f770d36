//! The variables a template sees: Poolboy's built-ins, the call's plain variables, and the lazily
//! rendered template variables (Poolboy 1.17 Δ§3.4).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use chrono::{DateTime, Utc};
use minijinja::value::{DynObject, Enumerator, Kwargs, Object, ObjectRepr, Rest};
use minijinja::{Error, ErrorKind, Value};

use super::clock::{ClockWatch, RenderClock};
use super::filters::from_json_value;
use super::time::{self, DateTimeClass, Moment, TimeZoneClass};
use super::{Generation, render_source};

/// Poolboy 1.17 Δ§3.4: template variables nest at most this deep (self-reference is an error).
const MAX_DEPTH: usize = 100;

/// When a nested render finds less stack than this left, it continues on a new segment of
/// `STACK_SEGMENT` bytes.
const STACK_RED_ZONE: usize = 256 * 1024;
const STACK_SEGMENT: usize = 2 * 1024 * 1024;

/// A guard against exponential fan-out (`a: "{{ b }}{{ b }}"`, `b: "{{ c }}{{ c }}"`, …): each
/// nested render has its own fuel, so the number of template-variable renders is capped too.
const MAX_EVALUATIONS: usize = 10_000;

/// Starts the messages of the two limits above, so nested renders pass them up unwrapped.
const LIMIT_MARK: &str = "template variable limit";

/// A template variable as given: strings with `{{` or `{%` render when referenced; anything else
/// is a plain value (nested strings inside maps and lists are not rendered).
#[derive(Debug, Clone)]
pub(super) enum TemplateVariable {
    Lazy(Arc<str>),
    Plain(Value),
}

impl TemplateVariable {
    pub(super) fn from_json(value: &serde_json::Value) -> TemplateVariable {
        match value {
            serde_json::Value::String(s) if s.contains("{{") || s.contains("{%") => {
                TemplateVariable::Lazy(Arc::from(s.as_str()))
            }
            other => TemplateVariable::Plain(from_json_value(other)),
        }
    }
}

/// A JSON value converted for templates once, then shared by every context it is added to
/// (a claim or handle view goes into several renders of one pass).
#[derive(Debug, Clone)]
pub(crate) struct TemplateValue(Value);

impl TemplateValue {
    /// The JSON object `build` makes, built and converted only when a template first looks at
    /// it: most renders (a readiness check, a literal template) never read the claim or handle
    /// they could, and building an object's view costs more than such a render.
    pub(crate) fn deferred(
        build: impl FnOnce() -> serde_json::Map<String, serde_json::Value> + Send + 'static,
    ) -> TemplateValue {
        let build: DeferredBuild = Box::new(move || from_json_value(&build().into()));
        TemplateValue(Value::from_object(Deferred(LazyLock::new(build))))
    }

    /// The value back as JSON, for tests to look into.
    #[cfg(test)]
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.0).unwrap_or(serde_json::Value::Null)
    }
}

type DeferredBuild = Box<dyn FnOnce() -> Value + Send>;

/// A map that templates see as the one its build makes: every look at it (an attribute, an
/// iteration, its length, truth or rendering) goes to that map, built on the first.
struct Deferred(LazyLock<Value, DeferredBuild>);

impl Deferred {
    /// The map, built now if this is the first look. (Always a map: it is built from a JSON
    /// object; `None` is only what the conversion's type allows.)
    fn map(&self) -> Option<&DynObject> {
        self.0.as_object()
    }
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl Object for Deferred {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.map()?.get_value(key)
    }

    fn get_value_by_str(self: &Arc<Self>, key: &str) -> Option<Value> {
        self.map()?.get_value_by_str(key)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        self.map().map_or(Enumerator::Empty, DynObject::enumerate)
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        self.map().map_or(Some(0), DynObject::enumerator_len)
    }

    fn is_true(self: &Arc<Self>) -> bool {
        self.map().is_some_and(DynObject::is_true)
    }

    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.map() {
            Some(map) => map.render(f),
            None => std::fmt::Display::fmt(&*self.0, f),
        }
    }
}

/// Poolboy's `None`: what `resource_claim` or `resource_handle` is where there is none.
impl Default for TemplateValue {
    fn default() -> TemplateValue {
        TemplateValue(Value::from(()))
    }
}

/// What [`RenderContext::with_variable`] takes: JSON, converted on the way in, or a
/// [`TemplateValue`], converted already.
pub(crate) trait IntoTemplate {
    fn into_template(self) -> Value;
}

impl IntoTemplate for serde_json::Value {
    fn into_template(self) -> Value {
        from_json_value(&self)
    }
}

impl IntoTemplate for &serde_json::Value {
    fn into_template(self) -> Value {
        from_json_value(self)
    }
}

impl IntoTemplate for &TemplateValue {
    fn into_template(self) -> Value {
        self.0.clone()
    }
}

/// Everything a render call needs besides the engine. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct RenderContext {
    pub(super) now: DateTime<Utc>,
    pub(super) variables: Arc<HashMap<String, Value>>,
    pub(super) template_variables: Arc<HashMap<String, TemplateVariable>>,
}

impl RenderContext {
    /// A context at the instant `now` (what `now()`, `timestamp` and `datetime.now()` give) with
    /// the call's plain variables (`resource_claim`, `resource_handle`, parameter values, …).
    pub(crate) fn new(
        now: DateTime<Utc>,
        variables: &serde_json::Map<String, serde_json::Value>,
    ) -> RenderContext {
        RenderContext {
            now,
            variables: Arc::new(
                variables
                    .iter()
                    .map(|(k, v)| (k.clone(), from_json_value(v)))
                    .collect(),
            ),
            template_variables: Arc::default(),
        }
    }

    /// Adds or replaces one plain variable.
    pub(crate) fn with_variable(mut self, name: &str, value: impl IntoTemplate) -> RenderContext {
        Arc::make_mut(&mut self.variables).insert(name.to_owned(), value.into_template());
        self
    }

    /// Adds every entry of `variables` as plain variables (parameter values, a resource's
    /// top-level keys, …); later calls win.
    pub(crate) fn with_variables(
        mut self,
        variables: &serde_json::Map<String, serde_json::Value>,
    ) -> RenderContext {
        let layer = Arc::make_mut(&mut self.variables);
        for (name, value) in variables {
            layer.insert(name.clone(), from_json_value(value));
        }
        self
    }

    /// Adds a layer of template variables (`vars`, absent is no layer); call it for the
    /// provider's vars first, then the handle's: a later layer wins. Template variables override
    /// plain variables and the built-ins (Poolboy 1.17 Q9, kept for compatibility).
    pub(crate) fn with_template_variables<'a>(
        mut self,
        variables: impl Into<Option<&'a serde_json::Map<String, serde_json::Value>>>,
    ) -> RenderContext {
        let Some(variables) = variables.into() else {
            return self;
        };
        let layer = Arc::make_mut(&mut self.template_variables);
        for (name, value) in variables {
            layer.insert(name.clone(), TemplateVariable::from_json(value));
        }
        self
    }
}

/// The root object a template renders against: one per render call, shared by the nested renders
/// of template variables so that depth and fan-out are counted across them.
pub(super) struct RootContext {
    generation: Arc<Generation>,
    context: RenderContext,
    builtins: HashMap<&'static str, Value>,
    depth: AtomicUsize,
    evaluations: AtomicUsize,
}

impl std::fmt::Debug for RootContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootContext").finish_non_exhaustive()
    }
}

impl RootContext {
    /// The root for one render at the context's now; what the render makes of the clock is
    /// recorded in `watch`.
    pub(super) fn value(
        generation: Arc<Generation>,
        context: &RenderContext,
        omit: &str,
        watch: Option<Arc<ClockWatch>>,
    ) -> Value {
        let clock = RenderClock::new(context.now, watch);
        let now_clock = clock.clone();
        // Poolboy 1.12 §5.4 / 1.17 Δ§3.4: the built-ins.
        let builtins = HashMap::from([
            (
                "datetime",
                Value::from_object(DateTimeClass {
                    clock: clock.clone(),
                }),
            ),
            (
                "now",
                Value::from_function(move |args: Rest<Value>, kwargs: Kwargs| {
                    time::now(&now_clock, &args, kwargs)
                }),
            ),
            ("omit", Value::from(omit)),
            (
                "timedelta",
                Value::from_function(|args: Rest<Value>, kwargs: Kwargs| {
                    time::timedelta(&args, kwargs)
                }),
            ),
            ("timezone", Value::from_object(TimeZoneClass)),
            ("timestamp", Moment::timestamp(&clock)),
        ]);
        Value::from_object(RootContext {
            generation,
            context: context.clone(),
            builtins,
            depth: AtomicUsize::new(0),
            evaluations: AtomicUsize::new(0),
        })
    }

    fn evaluate(self: &Arc<Self>, name: &str, source: &str) -> Value {
        let depth = self.depth.load(Ordering::SeqCst);
        if depth >= MAX_DEPTH {
            return Value::from(Error::new(
                ErrorKind::InvalidOperation,
                format!(
                    "{LIMIT_MARK}: template variable `{name}` nests deeper than {MAX_DEPTH} levels \
                     (does it refer to itself?)"
                ),
            ));
        }
        if self.evaluations.fetch_add(1, Ordering::SeqCst) >= MAX_EVALUATIONS {
            return Value::from(Error::new(
                ErrorKind::InvalidOperation,
                format!(
                    "{LIMIT_MARK}: more than {MAX_EVALUATIONS} template variable renders in one template"
                ),
            ));
        }
        self.depth.fetch_add(1, Ordering::SeqCst);
        // Each level is a whole render on this thread's stack; MAX_DEPTH of them outgrow a
        // 2 MiB thread (tokio's workers) in a debug build, so the stack grows on the heap.
        let result = stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            render_source(
                &self.generation,
                &Value::from_dyn_object(self.clone()),
                source,
            )
        });
        self.depth.fetch_sub(1, Ordering::SeqCst);
        match result {
            Ok(rendered) => rendered.into_value(),
            Err(failure) => {
                let inner = failure.into_jinja_error();
                // A limit error already says what happened; wrapping it a hundred times helps no one.
                if inner.detail().is_some_and(|d| d.contains(LIMIT_MARK)) {
                    return Value::from(inner);
                }
                Value::from(
                    Error::new(
                        ErrorKind::InvalidOperation,
                        format!("template variable `{name}` failed"),
                    )
                    .with_source(inner),
                )
            }
        }
    }
}

impl Object for RootContext {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let name = key.as_str()?;
        // Poolboy 1.17 Δ§3.4 / Q9: template variables, then built-ins, then plain variables.
        if let Some(variable) = self.context.template_variables.get(name) {
            return Some(match variable {
                TemplateVariable::Plain(value) => value.clone(),
                TemplateVariable::Lazy(source) => self.evaluate(name, source),
            });
        }
        if let Some(value) = self.builtins.get(name) {
            return Some(value.clone());
        }
        self.context.variables.get(name).cloned()
    }
}
