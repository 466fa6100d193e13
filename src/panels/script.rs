//! The render script engine: Rhai, with no I/O (modules, `eval` and printing off), and
//! limits on operations, time, call depth, expression depth and the sizes of strings,
//! arrays and maps, so that a script that loops forever, allocates without bound or nests
//! too deep is stopped and reported with its line and column.
//!
//! The script runs on a thread of its own with a large stack: Rhai walks nested values
//! recursively, and a deep value must not overflow the caller's stack.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rhai::{Array, Dynamic, Engine, EvalAltResult, FLOAT, INT, ImmutableString, Map, Position};

use super::placement::{PanelName, Placement, ttl};
use super::widget::Widget;

/// The most placements one script makes.
pub const MAX_PLACEMENTS: usize = 32;

/// The limits of one script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptLimits {
    /// Longest script, in bytes.
    pub source_bytes: usize,
    /// Most operations (Rhai's count: each statement, call and loop step).
    pub operations: u64,
    /// Longest run.
    pub time: Duration,
    /// Deepest function calls.
    pub call_depth: usize,
    /// Deepest expression nesting (statements and expressions alike).
    pub expr_depth: usize,
    /// Longest string, and most bytes of strings in one value, in bytes.
    pub string_bytes: usize,
    /// Most elements of arrays in one value (nested arrays count).
    pub array_items: usize,
    /// Most entries of maps in one value.
    pub map_items: usize,
}

impl Default for ScriptLimits {
    /// 16 KiB of script, 100,000 operations, 2 s, call depth 16, expression depth 32,
    /// 16 KiB strings (a widget holds no more), 1,024 array elements, 256 map entries.
    /// With at most 64 variables, what a script can hold at once is bounded (64 arrays of
    /// 1,024 strings of 16 KiB, 1 GiB, at the very worst); the operation and time limits
    /// stop it long before it builds that much.
    fn default() -> Self {
        Self {
            source_bytes: 16 * 1024,
            operations: 100_000,
            time: Duration::from_secs(2),
            call_depth: 16,
            expr_depth: 32,
            string_bytes: 16 * 1024,
            array_items: 1_024,
            map_items: 256,
        }
    }
}

/// Why a script failed, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError {
    /// What went wrong.
    pub message: String,
    /// The line, from 1, when known.
    pub line: Option<usize>,
    /// The column, from 1, when known.
    pub column: Option<usize>,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "line {l}, column {c}: {}", self.message),
            (Some(l), None) => write!(f, "line {l}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ScriptError {}

impl ScriptError {
    fn at(message: String, pos: Position) -> Self {
        Self {
            message,
            line: pos.line(),
            column: pos.position(),
        }
    }

    fn whole(message: String) -> Self {
        Self {
            message,
            line: None,
            column: None,
        }
    }
}

/// Runs `source` and returns what it placed, in order.
///
/// # Errors
/// A script that does not parse, calls an unknown function, breaks a limit, or builds a
/// widget or a placement its checks refuse.
pub fn run(source: &str, limits: &ScriptLimits) -> Result<Vec<Placement>, ScriptError> {
    if source.len() > limits.source_bytes {
        return Err(ScriptError::whole(format!(
            "the script is {} bytes; the most is {}",
            source.len(),
            limits.source_bytes
        )));
    }
    let source = source.to_owned();
    let limits = *limits;
    std::thread::Builder::new()
        .name("render-script".to_owned())
        .stack_size(64 * 1024 * 1024)
        .spawn(move || run_here(&source, &limits))
        .map_err(|e| ScriptError::whole(format!("the script could not start: {e}")))?
        .join()
        .unwrap_or_else(|_| Err(ScriptError::whole("the script engine failed".to_owned())))
}

type Out = Rc<RefCell<Vec<Placement>>>;

fn run_here(source: &str, limits: &ScriptLimits) -> Result<Vec<Placement>, ScriptError> {
    let out: Out = Rc::new(RefCell::new(Vec::new()));
    let engine = engine(limits, &out);
    let ast = engine.compile(source).map_err(|e| {
        let pos = e.position();
        ScriptError::at(e.to_string(), pos)
    })?;
    engine
        .run_ast(&ast)
        .map_err(|e| ScriptError::at(describe(&e, limits), e.position()))?;
    let placements = out.borrow().clone();
    Ok(placements)
}

/// An error in the words a model can act on (Rhai's own, with the limit named).
fn describe(e: &EvalAltResult, limits: &ScriptLimits) -> String {
    match e {
        EvalAltResult::ErrorTooManyOperations(_) => format!(
            "the script ran more than {} operations (does a loop never end?)",
            limits.operations
        ),
        EvalAltResult::ErrorTerminated(..) => format!(
            "the script ran longer than {} s (does a loop never end?)",
            limits.time.as_secs_f64()
        ),
        EvalAltResult::ErrorDataTooLarge(what, _) => format!(
            "{what} is larger than a render script may make (strings {} bytes, arrays {} \
             elements, maps {} entries)",
            limits.string_bytes, limits.array_items, limits.map_items
        ),
        EvalAltResult::ErrorRuntime(v, _) => v.to_string(),
        other => {
            // Rhai appends the position itself; it is reported apart.
            let text = other.to_string();
            match text.rfind(" (line ") {
                Some(i) => text[..i].to_owned(),
                None => text,
            }
        }
    }
}

fn fail<T>(message: String) -> Result<T, Box<EvalAltResult>> {
    Err(Box::new(EvalAltResult::ErrorRuntime(
        Dynamic::from(message),
        Position::NONE,
    )))
}

fn engine(limits: &ScriptLimits, out: &Out) -> Engine {
    let mut engine = Engine::new();
    engine
        .set_max_operations(limits.operations)
        .set_max_call_levels(limits.call_depth)
        .set_max_expr_depths(limits.expr_depth, limits.expr_depth)
        .set_max_string_size(limits.string_bytes)
        .set_max_array_size(limits.array_items)
        .set_max_map_size(limits.map_items)
        .set_max_functions(64)
        .set_max_variables(64);
    engine.disable_symbol("eval");
    engine.on_print(|_| {});
    engine.on_debug(|_, _, _| {});
    let started = Instant::now();
    let time = limits.time;
    engine.on_progress(move |_| (started.elapsed() > time).then_some(Dynamic::UNIT));

    engine.register_type_with_name::<Widget>("Widget");
    widgets(&mut engine);
    placements(&mut engine, out);
    engine
}

fn cell(v: &Dynamic) -> String {
    if v.is_string() {
        v.clone().into_string().unwrap_or_default()
    } else {
        v.to_string()
    }
}

fn number(what: &str, v: &Dynamic) -> Result<f64, Box<EvalAltResult>> {
    if let Ok(i) = v.as_int() {
        return Ok(i as f64);
    }
    match v.as_float() {
        Ok(f) => Ok(f),
        Err(t) => fail(format!("{what} must be a number, not {t}")),
    }
}

fn pairs(what: &str, items: Array) -> Result<Vec<(String, Dynamic)>, Box<EvalAltResult>> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item.try_cast::<Array>() {
            Some(pair) if pair.len() == 2 => Ok((cell(&pair[0]), pair[1].clone())),
            _ => fail(format!(
                "{what}: item {} is not a [label, value] pair (pass a map, or an array of \
                 two-element arrays)",
                i + 1
            )),
        })
        .collect()
}

fn from_map(map: Map) -> Vec<(String, Dynamic)> {
    map.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn checked<T>(r: Result<T, String>) -> Result<T, Box<EvalAltResult>> {
    r.or_else(fail)
}

fn kv(pairs: Vec<(String, Dynamic)>) -> Result<Widget, Box<EvalAltResult>> {
    checked(Widget::kv(
        pairs.into_iter().map(|(k, v)| (k, cell(&v))).collect(),
    ))
}

fn bars(pairs: Vec<(String, Dynamic)>) -> Result<Widget, Box<EvalAltResult>> {
    let bars = pairs
        .into_iter()
        .map(|(k, v)| number(&format!("bar_chart: the bar `{k}`"), &v).map(|n| (k, n)))
        .collect::<Result<Vec<_>, _>>()?;
    checked(Widget::bar_chart(bars))
}

fn widgets(engine: &mut Engine) {
    engine.register_fn("text", |t: ImmutableString| {
        checked(Widget::text("text", &t).map(Widget::Text))
    });
    engine.register_fn("markdown", |t: ImmutableString| {
        checked(Widget::text("markdown", &t).map(Widget::Markdown))
    });
    engine.register_fn("code", |lang: ImmutableString, source: ImmutableString| {
        checked(Widget::text("code", &source).map(|source| Widget::Code {
            lang: lang.to_string(),
            source,
        }))
    });
    engine.register_fn("table", |header: Array, rows: Array| {
        let header: Vec<String> = header.iter().map(cell).collect();
        let rows = rows
            .into_iter()
            .enumerate()
            .map(|(i, r)| match r.try_cast::<Array>() {
                Some(r) => Ok(r.iter().map(cell).collect()),
                None => fail(format!("table: row {} is not an array of cells", i + 1)),
            })
            .collect::<Result<Vec<Vec<String>>, _>>()?;
        checked(Widget::table(header, rows))
    });
    engine.register_fn("list", |items: Array| {
        checked(Widget::list(items.iter().map(cell).collect()))
    });
    engine.register_fn("kv", |m: Map| kv(from_map(m)));
    engine.register_fn("kv", |a: Array| kv(pairs("kv", a)?));
    engine.register_fn("bar_chart", |m: Map| bars(from_map(m)));
    engine.register_fn("bar_chart", |a: Array| bars(pairs("bar_chart", a)?));
    engine.register_fn("sparkline", |a: Array| {
        let points = a
            .iter()
            .enumerate()
            .map(|(i, v)| number(&format!("sparkline: point {}", i + 1), v))
            .collect::<Result<Vec<_>, _>>()?;
        checked(Widget::sparkline(points))
    });
    engine.register_fn("gauge", |label: ImmutableString, ratio: FLOAT| {
        checked(Widget::gauge(label.to_string(), ratio))
    });
    engine.register_fn("gauge", |label: ImmutableString, ratio: INT| {
        checked(Widget::gauge(label.to_string(), ratio as f64))
    });
    engine.register_fn("gauge", |ratio: FLOAT| {
        checked(Widget::gauge(String::new(), ratio))
    });
}

fn push(out: &Out, p: Placement) -> Result<(), Box<EvalAltResult>> {
    let mut v = out.borrow_mut();
    if v.len() >= MAX_PLACEMENTS {
        return fail(format!(
            "a script places at most {MAX_PLACEMENTS} widgets and panel changes"
        ));
    }
    v.push(p);
    Ok(())
}

fn name(n: &str) -> Result<PanelName, Box<EvalAltResult>> {
    checked(PanelName::parse(n))
}

fn placements(engine: &mut Engine, out: &Out) {
    let o = Rc::clone(out);
    engine.register_fn("render", move |w: Widget| push(&o, Placement::Inline(w)));
    let o = Rc::clone(out);
    engine.register_fn("render_to", move |n: ImmutableString, w: Widget| {
        let name = name(&n)?;
        push(
            &o,
            Placement::Panel {
                name,
                widget: w,
                ttl: None,
            },
        )
    });
    let o = Rc::clone(out);
    engine.register_fn(
        "render_to_ttl",
        move |n: ImmutableString, w: Widget, seconds: Dynamic| {
            let name = name(&n)?;
            let seconds = number("render_to_ttl: the ttl", &seconds)?;
            let ttl = checked(ttl(seconds))?;
            push(
                &o,
                Placement::Panel {
                    name,
                    widget: w,
                    ttl: Some(ttl),
                },
            )
        },
    );
    let o = Rc::clone(out);
    engine.register_fn("remove_panel", move |n: ImmutableString| {
        let name = name(&n)?;
        push(&o, Placement::Remove(name))
    });
    let o = Rc::clone(out);
    engine.register_fn("clear_panels", move || push(&o, Placement::Clear));
}
