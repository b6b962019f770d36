//! `json_query` (Poolboy 1.12 §5.5): JMESPath in the jmespath-community dialect.
//!
//! The `jmespath_community` crate (0.1) parses the whole dialect but ships only some functions
//! (`keys`, `items`, `from_items`, `length`, `contains`, `min_by`, …); the rest of the standard
//! set and the community functions templates use (`values`, `zip`, `merge`, `map`, `sort_by`,
//! `group_by`, `join`, `to_string`, …) are registered here. Its `<`, `<=`, `>`, `>=` compare only
//! numbers, while the community dialect also orders strings (Poolboy templates compare timestamps
//! as strings): ordering comparisons are rewritten into calls of functions that do both.

use std::sync::LazyLock;

use jmespath_community::errors::Kind;
use jmespath_community::functions::{DataType, Function, ParamTypes, Parameter, ReturnValue};
use jmespath_community::{
    AST, Error, FunctionContext, FunctionRegistrar, Map, NodeType, Runtime, Value,
};

type Body = fn(&Extra, &[Value], &dyn FunctionContext) -> ReturnValue;

struct Extra {
    name: &'static str,
    signature: Vec<Parameter>,
    body: Body,
}

impl Function for Extra {
    fn get_name(&self) -> &str {
        self.name
    }

    fn get_signature(&self) -> &Vec<Parameter> {
        &self.signature
    }

    fn execute(&self, args: &Vec<Value>, context: &dyn FunctionContext) -> ReturnValue {
        (self.body)(self, args, context)
    }
}

fn error(kind: Kind, message: String) -> Error {
    Error {
        kind,
        message,
        position: None,
    }
}

fn arg(args: &[Value], index: usize) -> Result<&Value, Error> {
    args.get(index).ok_or_else(|| {
        error(
            Kind::InvalidArity,
            format!("missing argument {}", index + 1),
        )
    })
}

fn array(args: &[Value], index: usize) -> Result<&Vec<Value>, Error> {
    arg(args, index)?.as_array().ok_or_else(|| {
        error(
            Kind::InvalidType,
            format!("argument {} must be an array", index + 1),
        )
    })
}

fn string(args: &[Value], index: usize) -> Result<&str, Error> {
    arg(args, index)?.as_str().ok_or_else(|| {
        error(
            Kind::InvalidType,
            format!("argument {} must be a string", index + 1),
        )
    })
}

fn number(value: &Value) -> Option<f64> {
    value.as_f64()
}

fn from_f64(f: f64) -> ReturnValue {
    Value::from_f64(f)
}

/// Numbers and strings compare among themselves; anything else is a type error.
fn ordered(values: &[Value]) -> Result<Vec<(Value, Value)>, Error> {
    let all_numbers = values.iter().all(|v| number(v).is_some());
    let all_strings = values.iter().all(|v| v.as_str().is_some());
    if !all_numbers && !all_strings {
        return Err(error(
            Kind::InvalidType,
            "expected an array of numbers or of strings".into(),
        ));
    }
    Ok(values.iter().map(|v| (v.clone(), v.clone())).collect())
}

fn compare(a: &Value, b: &Value) -> std::cmp::Ordering {
    match (number(a), number(b), a.as_str(), b.as_str()) {
        (Some(x), Some(y), _, _) => x.total_cmp(&y),
        (_, _, Some(x), Some(y)) => x.cmp(y),
        _ => std::cmp::Ordering::Equal,
    }
}

fn keyed(
    me: &Extra,
    args: &[Value],
    context: &dyn FunctionContext,
    key_types: Vec<DataType>,
) -> Result<Vec<(Value, Value)>, Error> {
    let items = array(args, 0)?;
    let ast = arg(args, 1)?.as_expref().ok_or_else(|| {
        error(
            Kind::InvalidType,
            "argument 2 must be an &expression".into(),
        )
    })?;
    let params = vec![ParamTypes::Any(key_types)];
    let key = context.create_by_function(ast, &params, me, 1)?;
    items
        .iter()
        .map(|item| Ok((key(item)?, item.clone())))
        .collect()
}

fn sort_pairs(pairs: &mut [(Value, Value)]) -> Result<(), Error> {
    let keys: Vec<Value> = pairs.iter().map(|(k, _)| k.clone()).collect();
    ordered(&keys)?;
    pairs.sort_by(|(a, _), (b, _)| compare(a, b));
    Ok(())
}

fn to_json_text(value: &Value) -> String {
    crate::core::python::json::dumps(&to_json(value))
        .replace(", ", ",")
        .replace(": ", ":")
}

/// The community dialect's ordering: numbers with numbers, strings with strings, else null.
fn order(args: &[Value], accept: fn(std::cmp::Ordering) -> bool) -> ReturnValue {
    let (a, b) = (arg(args, 0)?, arg(args, 1)?);
    let ordering = match (number(a), number(b), a.as_str(), b.as_str()) {
        (Some(x), Some(y), _, _) => x.partial_cmp(&y),
        (_, _, Some(x), Some(y)) => Some(x.cmp(y)),
        _ => None,
    };
    Ok(ordering.map_or(Value::Null, |o| Value::Boolean(accept(o))))
}

const LESS_THAN: &str = "__poolboy_lt";
const LESS_EQUAL: &str = "__poolboy_le";
const GREATER_THAN: &str = "__poolboy_gt";
const GREATER_EQUAL: &str = "__poolboy_ge";

/// Replaces every ordering comparison by a call of the matching function above.
fn rewrite_comparisons(ast: &mut AST) {
    use NodeType as N;
    let mut replacement = None;
    match &mut ast.node_type {
        N::ComparatorExpression(nodes) => {
            nodes.iter_mut().for_each(rewrite_comparisons);
            let name = match nodes.get(1).map(|op| &op.node_type) {
                Some(N::LessThan) => Some(LESS_THAN),
                Some(N::LessThanOrEqual) => Some(LESS_EQUAL),
                Some(N::GreaterThan) => Some(GREATER_THAN),
                Some(N::GreaterThanOrEqual) => Some(GREATER_EQUAL),
                _ => None,
            };
            if let (Some(name), 3) = (name, nodes.len()) {
                let rhs = nodes.remove(2);
                let lhs = nodes.remove(0);
                let position = ast.position;
                replacement = Some(N::FunctionExpression(vec![
                    AST::make(N::UnquotedIdentifier(name.to_owned()), position),
                    AST::make(N::FunctionArguments(vec![lhs, rhs]), position),
                ]));
            }
        }
        N::Filter(nodes)
        | N::Expression(nodes)
        | N::ParenExpression(nodes)
        | N::PipeExpression(nodes)
        | N::SubExpression(nodes)
        | N::Projection(nodes)
        | N::HashWildcardProjection(nodes)
        | N::ArithmeticExpression(nodes)
        | N::FunctionExpression(nodes)
        | N::FunctionArguments(nodes)
        | N::IndexExpression(nodes)
        | N::Index(nodes)
        | N::LetExpression(nodes)
        | N::LetBindings(nodes)
        | N::LogicalExpression(nodes)
        | N::MultiSelectList(nodes) => nodes.iter_mut().for_each(rewrite_comparisons),
        N::MultiSelectHash(map) => map.values_mut().for_each(rewrite_comparisons),
        _ => {}
    }
    if let Some(node_type) = replacement {
        ast.node_type = node_type;
    }
}

fn extras() -> Vec<Extra> {
    use DataType::*;
    use Parameter::{Optional, Required, Variadic};
    let of = ParamTypes::Of;
    let any2 = || vec![Required(ParamTypes::Of(Any)), Required(ParamTypes::Of(Any))];
    vec![
        Extra {
            name: LESS_THAN,
            signature: any2(),
            body: |_, args, _| order(args, |o| o.is_lt()),
        },
        Extra {
            name: LESS_EQUAL,
            signature: any2(),
            body: |_, args, _| order(args, |o| o.is_le()),
        },
        Extra {
            name: GREATER_THAN,
            signature: any2(),
            body: |_, args, _| order(args, |o| o.is_gt()),
        },
        Extra {
            name: GREATER_EQUAL,
            signature: any2(),
            body: |_, args, _| order(args, |o| o.is_ge()),
        },
        Extra {
            name: "values",
            signature: vec![Required(of(Object))],
            body: |_, args, _| {
                let object = arg(args, 0)?.as_object().cloned().unwrap_or_default();
                Ok(Value::Array(object.into_iter().map(|(_, v)| v).collect()))
            },
        },
        Extra {
            name: "zip",
            signature: vec![Required(of(Array)), Variadic(of(Array))],
            body: |_, args, _| {
                let arrays: Vec<&Vec<Value>> = (0..args.len())
                    .map(|i| array(args, i))
                    .collect::<Result<_, _>>()?;
                let len = arrays.iter().map(|a| a.len()).min().unwrap_or(0);
                Ok(Value::Array(
                    (0..len)
                        .map(|i| Value::Array(arrays.iter().map(|a| a[i].clone()).collect()))
                        .collect(),
                ))
            },
        },
        Extra {
            name: "merge",
            signature: vec![Required(of(Object)), Variadic(of(Object))],
            body: |_, args, _| {
                let mut merged = Map::new();
                for value in args {
                    merged.extend(value.as_object().cloned().unwrap_or_default());
                }
                Ok(Value::Object(merged))
            },
        },
        Extra {
            name: "join",
            signature: vec![Required(of(String)), Required(of(Array))],
            body: |_, args, _| {
                let glue = string(args, 0)?;
                let parts: Vec<&str> = array(args, 1)?
                    .iter()
                    .map(|v| {
                        v.as_str().ok_or_else(|| {
                            error(
                                Kind::InvalidType,
                                "join: the array must contain only strings".into(),
                            )
                        })
                    })
                    .collect::<Result<_, _>>()?;
                Ok(Value::String(parts.join(glue)))
            },
        },
        Extra {
            name: "max",
            signature: vec![Required(of(Array))],
            body: |_, args, _| {
                let mut pairs = ordered(array(args, 0)?)?;
                pairs.sort_by(|(a, _), (b, _)| compare(a, b));
                Ok(pairs.pop().map_or(Value::Null, |(_, v)| v))
            },
        },
        Extra {
            name: "min",
            signature: vec![Required(of(Array))],
            body: |_, args, _| {
                let mut pairs = ordered(array(args, 0)?)?;
                pairs.sort_by(|(a, _), (b, _)| compare(a, b));
                Ok(pairs.into_iter().next().map_or(Value::Null, |(_, v)| v))
            },
        },
        Extra {
            name: "sum",
            signature: vec![Required(of(Array))],
            body: |_, args, _| {
                let total = array(args, 0)?.iter().try_fold(0.0, |sum, v| {
                    number(v).map(|n| sum + n).ok_or_else(|| {
                        error(
                            Kind::InvalidType,
                            "sum: the array must contain only numbers".into(),
                        )
                    })
                })?;
                from_f64(total)
            },
        },
        Extra {
            name: "sort",
            signature: vec![Required(of(Array))],
            body: |_, args, _| {
                let mut pairs = ordered(array(args, 0)?)?;
                pairs.sort_by(|(a, _), (b, _)| compare(a, b));
                Ok(Value::Array(pairs.into_iter().map(|(_, v)| v).collect()))
            },
        },
        Extra {
            name: "not_null",
            signature: vec![Required(of(Any)), Variadic(of(Any))],
            body: |_, args, _| {
                Ok(args
                    .iter()
                    .find(|v| !v.is_null())
                    .cloned()
                    .unwrap_or(Value::Null))
            },
        },
        Extra {
            name: "to_array",
            signature: vec![Required(of(Any))],
            body: |_, args, _| {
                let value = arg(args, 0)?;
                Ok(if value.is_array() {
                    value.clone()
                } else {
                    Value::Array(vec![value.clone()])
                })
            },
        },
        Extra {
            name: "to_string",
            signature: vec![Required(of(Any))],
            body: |_, args, _| {
                let value = arg(args, 0)?;
                Ok(match value.as_str() {
                    Some(s) => Value::String(s.to_owned()),
                    None => Value::String(to_json_text(value)),
                })
            },
        },
        Extra {
            name: "to_number",
            signature: vec![Required(of(Any))],
            body: |_, args, _| {
                let value = arg(args, 0)?;
                if number(value).is_some() {
                    return Ok(value.clone());
                }
                match value.as_str().and_then(|s| s.trim().parse::<f64>().ok()) {
                    Some(n) if n.is_finite() => from_f64(n),
                    _ => Ok(Value::Null),
                }
            },
        },
        Extra {
            name: "type",
            signature: vec![Required(of(Any))],
            body: |_, args, _| {
                let value = arg(args, 0)?;
                let name = match value {
                    Value::Array(_) => "array",
                    Value::Boolean(_) => "boolean",
                    Value::Null => "null",
                    Value::Number(_) => "number",
                    Value::Object(_) => "object",
                    Value::String(_) => "string",
                    Value::Expression(_) => "expref",
                };
                Ok(Value::String(name.into()))
            },
        },
        Extra {
            name: "map",
            signature: vec![Required(of(ExpRef)), Required(of(Array))],
            body: |me, args, context| {
                let ast = arg(args, 0)?.as_expref().ok_or_else(|| {
                    error(
                        Kind::InvalidType,
                        "map: argument 1 must be an &expression".into(),
                    )
                })?;
                let params = vec![ParamTypes::Of(Any)];
                let apply = context.create_by_function(ast, &params, me, 0)?;
                let items = array(args, 1)?;
                Ok(Value::Array(
                    items.iter().map(&*apply).collect::<Result<_, _>>()?,
                ))
            },
        },
        Extra {
            name: "sort_by",
            signature: vec![Required(of(Array)), Required(of(ExpRef))],
            body: |me, args, context| {
                let mut pairs = keyed(me, args, context, vec![Number, String])?;
                sort_pairs(&mut pairs)?;
                Ok(Value::Array(pairs.into_iter().map(|(_, v)| v).collect()))
            },
        },
        Extra {
            name: "max_by",
            signature: vec![Required(of(Array)), Required(of(ExpRef))],
            body: |me, args, context| {
                let mut pairs = keyed(me, args, context, vec![Number, String])?;
                sort_pairs(&mut pairs)?;
                Ok(pairs.pop().map_or(Value::Null, |(_, v)| v))
            },
        },
        Extra {
            name: "group_by",
            signature: vec![Required(of(Array)), Required(of(ExpRef))],
            body: |me, args, context| {
                let mut groups: Map<std::string::String, Value> = Map::new();
                for (key, item) in keyed(me, args, context, vec![String, Null])? {
                    let Some(key) = key.as_str() else { continue };
                    let entry = groups
                        .entry(key.to_owned())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Value::Array(items) = entry {
                        items.push(item);
                    }
                }
                Ok(Value::Object(groups))
            },
        },
        Extra {
            name: "lower",
            signature: vec![Required(of(String))],
            body: |_, args, _| Ok(Value::String(string(args, 0)?.to_lowercase())),
        },
        Extra {
            name: "upper",
            signature: vec![Required(of(String))],
            body: |_, args, _| Ok(Value::String(string(args, 0)?.to_uppercase())),
        },
        Extra {
            name: "trim",
            signature: vec![Required(of(String)), Optional(of(String))],
            body: |_, args, _| {
                let text = string(args, 0)?;
                Ok(Value::String(match args.get(1).and_then(Value::as_str) {
                    Some(chars) if !chars.is_empty() => {
                        text.trim_matches(|c| chars.contains(c)).to_owned()
                    }
                    _ => text.trim().to_owned(),
                }))
            },
        },
        Extra {
            name: "split",
            signature: vec![Required(of(String)), Required(of(String))],
            body: |_, args, _| {
                let (text, separator) = (string(args, 0)?, string(args, 1)?);
                if separator.is_empty() {
                    return Err(error(
                        Kind::InvalidValue,
                        "split: the separator must not be empty".into(),
                    ));
                }
                Ok(Value::Array(
                    text.split(separator)
                        .map(|s| Value::String(s.to_owned()))
                        .collect(),
                ))
            },
        },
        Extra {
            name: "replace",
            signature: vec![
                Required(of(String)),
                Required(of(String)),
                Required(of(String)),
            ],
            body: |_, args, _| {
                let (text, old, new) = (string(args, 0)?, string(args, 1)?, string(args, 2)?);
                Ok(Value::String(text.replace(old, new)))
            },
        },
    ]
}

static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    let mut runtime = Runtime::create_runtime();
    for extra in extras() {
        if runtime.get(extra.name).is_none() {
            runtime.register(Box::new(extra));
        }
    }
    runtime
});

/// JMESPath numbers are floats; integral ones go back to JSON as integers, as Python's jmespath
/// keeps them (an integral float such as `2.0` in the input also comes back as `2`).
fn to_json(value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Value::Null | Value::Expression(_) => J::Null,
        Value::Boolean(b) => J::Bool(*b),
        Value::Number(_) => match value.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => J::from(f as i64),
            Some(f) => serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
            None => J::Null,
        },
        Value::String(s) => J::String(s.clone()),
        Value::Array(items) => J::Array(items.iter().map(to_json).collect()),
        Value::Object(map) => J::Object(map.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()),
    }
}

/// Runs `query` against `input`.
pub(super) fn search(query: &str, input: &serde_json::Value) -> Result<serde_json::Value, Error> {
    let mut ast = jmespath_community::parse(query)?;
    rewrite_comparisons(&mut ast);
    let root = Value::map_from_json(input);
    RUNTIME
        .search_ast(&ast, &root)
        .map(|result| to_json(&result))
}
