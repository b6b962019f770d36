//! `+` and `-` on dates and timedeltas (Poolboy 1.12 §5.4, 1.17 Δ§3.4).
//!
//! minijinja's `+` and `-` only know numbers, strings and sequences, so a template source that
//! mentions a name producing dates or timedeltas is rewritten before it is compiled: `a + b`,
//! `a - b` and `-a` become `__poolboy_add`, `__poolboy_sub` and `__poolboy_neg`, which do date
//! arithmetic when an operand is a date or a timedelta and otherwise evaluate minijinja's own
//! operator. The rewrite keeps every newline, and errors quote the original source
//! (docs/design.md, "core::template::arithmetic").

use std::ops::Range;
use std::sync::LazyLock;

use minijinja::machinery::{ast, parse};
use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, Error, ErrorKind, UndefinedBehavior, Value, context};

use super::time::{Duration, Moment, to_interval};

/// The globals and filters whose values can be dates or timedeltas (`datetime` also covers
/// `to_datetime`). A template that mentions none of them cannot hold one.
const TIME_NAMES: [&str; 5] = [
    "now",
    "timestamp",
    "datetime",
    "timedelta",
    "parse_time_interval",
];

/// What the operators become; names no template uses.
const ADD: &str = "__poolboy_add";
const SUB: &str = "__poolboy_sub";
const NEG: &str = "__poolboy_neg";

/// Deepest nesting of rewritten operators: each becomes a call, and calls nest in the parser and
/// compiler by recursion where a chain like `1 + 1 + …` did not. A deeper template is compiled
/// unchanged (its numbers still add; its dates need `.add()`).
const MAX_NESTING: usize = 48;

/// Deepest expression the rewrite walks, for the same reason.
const MAX_DEPTH: usize = 256;

/// Python's operand rules for the message of an unsupported combination.
const SUPPORTED: &str = "dates support datetime ± timedelta, datetime - datetime, \
                         timedelta ± timedelta and timestamp ± '8h'";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Neg,
}

impl Op {
    fn function(self) -> &'static str {
        match self {
            Op::Add => ADD,
            Op::Sub => SUB,
            Op::Neg => NEG,
        }
    }
}

/// One operator in the source: the whole expression `start..end`, the operator character at
/// `op` (for `-a`, `op == start`).
#[derive(Debug, Clone, Copy)]
struct Node {
    start: usize,
    op: usize,
    end: usize,
    kind: Op,
}

/// A rewritten source, with the pieces copied from the original: `(output offset, original
/// offset, length)`, in order.
#[derive(Debug)]
pub(super) struct Rewrite {
    pub(super) text: String,
    copied: Vec<(usize, usize, usize)>,
}

/// The source with its `+`, `-` and unary `-` turned into calls, or `None` when it needs no
/// rewrite: it mentions no date/time name, has no such operator, or does not parse (the
/// original is then compiled, so a syntax error is reported on it).
pub(super) fn rewrite(source: &str) -> Option<Rewrite> {
    if !source.contains(['+', '-']) || !TIME_NAMES.iter().any(|name| source.contains(name)) {
        return None;
    }
    let template = parse(source, "<template>", SyntaxConfig::default()).ok()?;
    let mut collector = Collector {
        source,
        nodes: Vec::new(),
        consistent: true,
        depth: 0,
        nesting: 0,
    };
    collector.stmt(&template);
    if !collector.consistent || collector.nodes.is_empty() {
        return None;
    }
    let mut nodes = collector.nodes;
    // Outer expressions first: they start where their first operand starts, and end later.
    nodes.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut out = Rewrite {
        text: String::with_capacity(source.len() + nodes.len() * 20),
        copied: Vec::new(),
    };
    let mut next = 0;
    out.emit(source, &nodes, &mut next, 0..source.len())?;
    if next != nodes.len() {
        return None;
    }
    // A rewrite that does not parse would turn a working template into a broken one.
    parse(&out.text, "<template>", SyntaxConfig::default()).ok()?;
    Some(out)
}

/// Where `range` of the rewritten `source` came from in `source`, for quoting an error spot.
pub(super) fn original_range(source: &str, range: Range<usize>) -> Range<usize> {
    match rewrite(source) {
        Some(rewritten) => rewritten.original_range(range),
        None => range,
    }
}

impl Rewrite {
    fn copy(&mut self, source: &str, range: Range<usize>) -> Option<()> {
        let piece = source.get(range.clone())?;
        if !piece.is_empty() {
            self.copied
                .push((self.text.len(), range.start, piece.len()));
            self.text.push_str(piece);
        }
        Some(())
    }

    /// Writes `range` of `source`, turning the nodes that start inside it into calls.
    fn emit(
        &mut self,
        source: &str,
        nodes: &[Node],
        next: &mut usize,
        range: Range<usize>,
    ) -> Option<()> {
        let mut pos = range.start;
        while let Some(node) = nodes.get(*next).copied() {
            if node.start >= range.end {
                break;
            }
            if node.start < pos || node.end > range.end {
                return None;
            }
            *next += 1;
            self.copy(source, pos..node.start)?;
            self.text.push_str(node.kind.function());
            self.text.push('(');
            if node.kind != Op::Neg {
                self.emit(source, nodes, next, node.start..node.op)?;
                self.text.push(',');
            }
            self.emit(source, nodes, next, node.op + 1..node.end)?;
            self.text.push(')');
            pos = node.end;
        }
        self.copy(source, pos..range.end)
    }

    fn original_range(&self, range: Range<usize>) -> Range<usize> {
        // A start inside inserted text moves to the next copied piece, an end to the previous.
        let start = self
            .copied
            .iter()
            .find(|&&(out, _, len)| range.start < out + len)
            .map_or(range.start, |&(out, orig, _)| {
                orig + range.start.saturating_sub(out)
            });
        let end = self
            .copied
            .iter()
            .rev()
            .find(|&&(out, _, _)| range.end > out)
            .map_or(range.end, |&(out, orig, len)| {
                orig + (range.end - out).min(len)
            });
        start..end.max(start)
    }
}

/// Finds the `+`, `-` and unary `-` expressions of a parsed template.
struct Collector<'s> {
    source: &'s str,
    nodes: Vec<Node>,
    /// False when a span did not look as expected or the nesting is too deep; the template is
    /// then left alone.
    consistent: bool,
    /// Expressions and operators being walked.
    depth: usize,
    nesting: usize,
}

impl Collector<'_> {
    fn stmts(&mut self, stmts: &[ast::Stmt<'_>]) {
        for stmt in stmts {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &ast::Stmt<'_>) {
        use ast::Stmt as S;
        match stmt {
            S::Template(t) => self.stmts(&t.children),
            S::EmitExpr(e) => self.expr(&e.expr),
            S::EmitRaw(_) | S::Continue(_) | S::Break(_) => {}
            S::ForLoop(f) => {
                self.expr(&f.target);
                self.expr(&f.iter);
                self.opt(f.filter_expr.as_ref());
                self.stmts(&f.body);
                self.stmts(&f.else_body);
            }
            S::IfCond(i) => {
                self.expr(&i.expr);
                self.stmts(&i.true_body);
                self.stmts(&i.false_body);
            }
            S::WithBlock(w) => {
                for (target, value) in &w.assignments {
                    self.expr(target);
                    self.expr(value);
                }
                self.stmts(&w.body);
            }
            S::Set(s) => {
                self.expr(&s.target);
                self.expr(&s.expr);
            }
            S::SetBlock(s) => {
                self.expr(&s.target);
                self.opt(s.filter.as_ref());
                self.stmts(&s.body);
            }
            S::AutoEscape(a) => {
                self.expr(&a.enabled);
                self.stmts(&a.body);
            }
            S::FilterBlock(f) => {
                self.expr(&f.filter);
                self.stmts(&f.body);
            }
            S::Block(b) => self.stmts(&b.body),
            S::Import(i) => {
                self.expr(&i.expr);
                self.expr(&i.name);
            }
            S::FromImport(f) => {
                self.expr(&f.expr);
                for (name, alias) in &f.names {
                    self.expr(name);
                    self.opt(alias.as_ref());
                }
            }
            S::Extends(e) => self.expr(&e.name),
            S::Include(i) => self.expr(&i.name),
            S::Macro(m) => self.macro_decl(m),
            S::CallBlock(c) => {
                self.call(&c.call);
                self.macro_decl(&c.macro_decl);
            }
            S::Do(d) => self.call(&d.call),
        }
    }

    fn macro_decl(&mut self, decl: &ast::Macro<'_>) {
        self.exprs(&decl.args);
        self.exprs(&decl.defaults);
        self.stmts(&decl.body);
    }

    fn call(&mut self, call: &ast::Call<'_>) {
        self.expr(&call.expr);
        self.args(&call.args);
    }

    fn args(&mut self, args: &[ast::CallArg<'_>]) {
        for arg in args {
            match arg {
                ast::CallArg::Pos(e)
                | ast::CallArg::Kwarg(_, e)
                | ast::CallArg::PosSplat(e)
                | ast::CallArg::KwargSplat(e) => self.expr(e),
            }
        }
    }

    fn exprs(&mut self, exprs: &[ast::Expr<'_>]) {
        for expr in exprs {
            self.expr(expr);
        }
    }

    fn opt(&mut self, expr: Option<&ast::Expr<'_>>) {
        if let Some(expr) = expr {
            self.expr(expr);
        }
    }

    fn expr(&mut self, expr: &ast::Expr<'_>) {
        if !self.consistent {
            return;
        }
        if self.depth >= MAX_DEPTH {
            self.consistent = false;
            return;
        }
        self.depth += 1;
        self.expr_inner(expr);
        self.depth -= 1;
    }

    /// Walks the operands of an expression, one operator deeper when it was rewritten.
    fn operands(&mut self, rewritten: bool, walk: impl FnOnce(&mut Self)) {
        if rewritten {
            self.nesting += 1;
            if self.nesting > MAX_NESTING {
                self.consistent = false;
            }
        }
        walk(self);
        if rewritten {
            self.nesting -= 1;
        }
    }

    fn expr_inner(&mut self, expr: &ast::Expr<'_>) {
        use ast::Expr as E;
        match expr {
            E::Var(_) | E::Const(_) => {}
            E::Slice(s) => {
                self.expr(&s.expr);
                self.opt(s.start.as_ref());
                self.opt(s.stop.as_ref());
                self.opt(s.step.as_ref());
            }
            E::UnaryOp(u) => {
                // `-1` stays a literal; only a computed operand can be a timedelta.
                let rewritten = matches!(u.op, ast::UnaryOpKind::Neg)
                    && !matches!(u.expr, E::Const(_))
                    && self.negation(u.span());
                self.operands(rewritten, |this| this.expr(&u.expr));
            }
            E::BinOp(b) => {
                let kind = match b.op {
                    ast::BinOpKind::Add => Some(Op::Add),
                    ast::BinOpKind::Sub => Some(Op::Sub),
                    _ => None,
                };
                let rewritten =
                    kind.is_some_and(|kind| self.binary(kind, b.span(), b.left.span().end_offset));
                self.operands(rewritten, |this| {
                    this.expr(&b.left);
                    this.expr(&b.right);
                });
            }
            E::Compare(c) => {
                self.expr(&c.expr);
                for op in &c.ops {
                    self.expr(&op.expr);
                }
            }
            E::IfExpr(i) => {
                self.expr(&i.test_expr);
                self.expr(&i.true_expr);
                self.opt(i.false_expr.as_ref());
            }
            E::Filter(f) => {
                self.opt(f.expr.as_ref());
                self.args(&f.args);
            }
            E::Test(t) => {
                self.expr(&t.expr);
                self.args(&t.args);
            }
            E::GetAttr(g) => self.expr(&g.expr),
            E::GetItem(g) => {
                self.expr(&g.expr);
                self.expr(&g.subscript_expr);
            }
            E::Call(c) => self.call(c),
            E::List(l) => self.exprs(&l.items),
            E::Tuple(t) => self.exprs(&t.items),
            E::Map(m) => {
                self.exprs(&m.keys);
                self.exprs(&m.values);
            }
        }
    }

    /// `a + b` / `a - b`. The expression's span starts at its first token and ends at its last;
    /// the left operand's span may stop before closing parentheses, so the operator is the
    /// first character after it that is neither white space nor `)`.
    fn binary(&mut self, kind: Op, span: minijinja::machinery::Span, left_end: u32) -> bool {
        let (start, end, left_end) = (
            span.start_offset as usize,
            span.end_offset as usize,
            left_end as usize,
        );
        let want = if kind == Op::Add { '+' } else { '-' };
        let op = self.source.get(left_end..end).and_then(|rest| {
            rest.char_indices()
                .find(|&(_, c)| !c.is_whitespace() && c != ')')
                .filter(|&(_, c)| c == want)
                .map(|(i, _)| left_end + i)
        });
        match op {
            Some(op) if start < op && self.source.is_char_boundary(start) => {
                self.nodes.push(Node {
                    start,
                    op,
                    end,
                    kind,
                });
                true
            }
            _ => {
                self.consistent = false;
                false
            }
        }
    }

    /// `-a`: the span starts at the `-`.
    fn negation(&mut self, span: minijinja::machinery::Span) -> bool {
        let (start, end) = (span.start_offset as usize, span.end_offset as usize);
        if self
            .source
            .get(start..end)
            .is_some_and(|s| s.starts_with('-'))
        {
            self.nodes.push(Node {
                start,
                op: start,
                end,
                kind: Op::Neg,
            });
            true
        } else {
            self.consistent = false;
            false
        }
    }
}

/// Registers the functions the rewritten operators call.
pub(super) fn register(env: &mut Environment<'static>) {
    env.add_function(ADD, |a: Value, b: Value| add(&a, &b));
    env.add_function(SUB, |a: Value, b: Value| sub(&a, &b));
    env.add_function(NEG, |a: Value| neg(&a));
}

/// An operand as date arithmetic sees it.
enum Operand {
    Moment(Moment),
    Duration(Duration),
    Other,
}

impl Operand {
    fn of(value: &Value) -> Operand {
        if let Some(moment) = value.downcast_object_ref::<Moment>() {
            Operand::Moment(moment.clone())
        } else if let Some(duration) = value.downcast_object_ref::<Duration>() {
            Operand::Duration(duration.clone())
        } else {
            Operand::Other
        }
    }
}

/// Python's name of an operand's type, for messages.
fn type_name(value: &Value) -> String {
    match Operand::of(value) {
        Operand::Moment(_) => "datetime".to_owned(),
        Operand::Duration(_) => "timedelta".to_owned(),
        Operand::Other => value.kind().to_string(),
    }
}

fn unsupported(op: &str, a: &Value, b: &Value) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "unsupported operand types for {op}: {} and {} ({SUPPORTED})",
            type_name(a),
            type_name(b)
        ),
    )
}

/// The interval added to or subtracted from a date: a timedelta, an interval string like `'8h'`
/// or a number of seconds, as `timestamp.add()` takes (Poolboy 1.12 §5.4).
fn interval(op: &str, a: &Value, b: &Value) -> Result<Duration, Error> {
    if matches!(Operand::of(b), Operand::Duration(_)) || b.as_str().is_some() || b.is_number() {
        to_interval(b)
    } else {
        Err(unsupported(op, a, b))
    }
}

fn add(a: &Value, b: &Value) -> Result<Value, Error> {
    match (Operand::of(a), Operand::of(b)) {
        (Operand::Moment(moment), _) => {
            Ok(Value::from_object(moment.shifted(&interval("+", a, b)?)?))
        }
        (Operand::Duration(delta), Operand::Moment(moment)) => {
            Ok(Value::from_object(moment.shifted(&delta)?))
        }
        (Operand::Duration(delta), _) => Ok(Value::from_object(
            delta.combined(&interval("+", a, b)?, false)?,
        )),
        (Operand::Other, Operand::Other) => native(&NATIVE_ADD, a, b),
        (Operand::Other, _) => Err(unsupported("+", a, b)),
    }
}

fn sub(a: &Value, b: &Value) -> Result<Value, Error> {
    match (Operand::of(a), Operand::of(b)) {
        (Operand::Moment(left), Operand::Moment(right)) => {
            Ok(Value::from_object(left.minus(&right)?))
        }
        (Operand::Moment(moment), _) => Ok(Value::from_object(
            moment.shifted(&interval("-", a, b)?.negated()?)?,
        )),
        (Operand::Duration(_), Operand::Moment(_)) => Err(unsupported("-", a, b)),
        (Operand::Duration(delta), _) => Ok(Value::from_object(
            delta.combined(&interval("-", a, b)?, true)?,
        )),
        (Operand::Other, Operand::Other) => native(&NATIVE_SUB, a, b),
        (Operand::Other, _) => Err(unsupported("-", a, b)),
    }
}

fn neg(a: &Value) -> Result<Value, Error> {
    match Operand::of(a) {
        Operand::Duration(delta) => Ok(Value::from_object(delta.negated()?)),
        Operand::Moment(_) => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("bad operand type for unary -: datetime ({SUPPORTED})"),
        )),
        Operand::Other => native(&NATIVE_NEG, a, &Value::UNDEFINED),
    }
}

/// minijinja's own operators, for every operand that is not a date: a tiny environment that
/// evaluates `a + b`, `a - b` or `-a` (its operators do not look at the undefined behaviour).
static NATIVE: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::empty();
    env.set_undefined_behavior(UndefinedBehavior::Chainable);
    env
});

type Native = LazyLock<Option<minijinja::Expression<'static, 'static>>>;

static NATIVE_ADD: Native = LazyLock::new(|| NATIVE.compile_expression("a + b").ok());
static NATIVE_SUB: Native = LazyLock::new(|| NATIVE.compile_expression("a - b").ok());
static NATIVE_NEG: Native = LazyLock::new(|| NATIVE.compile_expression("-a").ok());

fn native(expression: &Native, a: &Value, b: &Value) -> Result<Value, Error> {
    let expression = expression.as_ref().ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidOperation,
            "the built-in operator expression did not compile",
        )
    })?;
    expression
        .eval(context! { a => a.clone(), b => b.clone() })
        // The error is re-made without the inner expression's location, so the template's
        // own location is attached to it.
        .map_err(|error| match error.detail() {
            Some(detail) => Error::new(error.kind(), detail.to_owned()),
            None => Error::from(error.kind()),
        })
}

#[cfg(test)]
mod tests;
