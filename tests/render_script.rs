//! The render tool's script API: what a script builds and places, and how every kind of bad
//! input is stopped and reported (with its line and column) rather than hanging, growing
//! without bound or crashing bee.

use std::time::{Duration, Instant};

use bee::panels::script::{self, MAX_PLACEMENTS};
use bee::panels::{Outbox, Placement, RenderTool, ScriptError, ScriptLimits, Surface, Widget};
use bee::tools::{Context, Tool, ToolLimits, ToolState};

fn run(src: &str) -> Result<Vec<Placement>, ScriptError> {
    script::run(src, &ScriptLimits::default())
}

fn err(src: &str) -> ScriptError {
    let result = run(src);
    assert!(result.is_err(), "the script should fail: {result:?}");
    result.err().unwrap_or_else(|| ScriptError {
        message: String::new(),
        line: None,
        column: None,
    })
}

#[test]
fn every_widget_and_placement_is_built() {
    let p = run(r##"
        render(text("hello"));
        render(markdown("# Title"));
        render(code("rust", "fn main() {}"));
        render_to("metrics", table(["name", "n"], [["a", 1], ["b", 2.5]]));
        render_to("todo", list(["one", "two"]));
        render_to("kv", kv(#{ model: "m", turns: 3 }));
        render_to("kv2", kv([["b", 1], ["a", 2]]));
        render_to("bars", bar_chart(#{ a: 1, b: 2 }));
        render_to("bars2", bar_chart([["x", 3]]));
        render_to_ttl("spark", sparkline([1, 2.5, 3]), 30);
        render_to_ttl("cpu", gauge("cpu", 0.25), 0.5);
        render(gauge(0.5));
        render(gauge("done", 1));
        remove_panel("todo");
        clear_panels();
    "##)
    .unwrap();
    assert_eq!(p.len(), 15);
    assert_eq!(p[0], Placement::Inline(Widget::Text("hello".into())));
    match &p[3] {
        Placement::Panel { name, widget, ttl } => {
            assert_eq!(name.as_str(), "metrics");
            assert_eq!(*ttl, None);
            assert_eq!(
                *widget,
                Widget::Table {
                    header: vec!["name".into(), "n".into()],
                    rows: vec![vec!["a".into(), "1".into()], vec!["b".into(), "2.5".into()]],
                }
            );
        }
        other => panic!("{other:?}"),
    }
    // An array of pairs keeps its order; a map is in key order.
    assert!(matches!(&p[6], Placement::Panel { widget: Widget::Kv(kv), .. } if kv[0].0 == "b"));
    match &p[9] {
        Placement::Panel { ttl, widget, .. } => {
            assert_eq!(*ttl, Some(Duration::from_secs(30)));
            assert_eq!(*widget, Widget::Sparkline(vec![1.0, 2.5, 3.0]));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(p[14], Placement::Clear);
}

#[test]
fn a_loop_that_never_ends_is_stopped() {
    let started = Instant::now();
    let e = err("let x = 0;\nloop { x += 1; }");
    assert!(e.message.contains("more than 100000 operations"), "{e}");
    assert_eq!(e.line, Some(2));
    assert!(started.elapsed() < Duration::from_secs(5));
    // Recursion without end hits the call depth.
    let e = err("fn f(n) { f(n + 1) }\nf(0);");
    assert!(e.to_string().contains("line"), "{e}");
}

#[test]
fn unbounded_allocation_is_stopped() {
    for src in [
        "let s = \"xxxxxxxx\";\nloop { s += s; }",
        "let a = [];\nloop { a.push(1); }",
        "let m = #{};\nlet i = 0;\nloop { m[`k${i}`] = i; i += 1; }",
        "let a = [];\nfor i in 0..100000 { a.push(\"x\".pad(16000, \"x\")); }",
    ] {
        let e = err(src);
        assert!(
            e.message.contains("larger than a render script may make")
                || e.message.contains("operations")
                || e.message.contains("longer than 2 s"),
            "{src}: {e}"
        );
        assert!(e.line.is_some(), "{src}: {e}");
    }
}

#[test]
fn deep_nesting_is_refused() {
    let deep = format!("let x = {}1{};", "(".repeat(200), ")".repeat(200));
    let e = err(&deep);
    assert_eq!(e.line, Some(1), "{e}");
    // A value nested deep (an array in an array …) stops at the size limit.
    let e = err("let a = [];\nfor i in 0..100000 { a = [a]; }");
    assert!(e.line.is_some(), "{e}");
}

#[test]
fn an_unknown_function_names_itself_and_its_place() {
    let e = err("render(text(\"a\"));\n  render(chart([1, 2]));");
    assert!(e.message.contains("chart"), "{e}");
    assert_eq!((e.line, e.column), (Some(2), Some(10)), "{e}");
    // No I/O: there is no module system, no eval, nothing to open a file with.
    assert!(err("import \"fs\" as fs;").line.is_some());
    assert!(err("eval(\"1\")").line.is_some());
    assert!(err("open(\"/etc/passwd\")").message.contains("open"));
}

#[test]
fn a_syntax_error_has_its_line_and_column() {
    let e = err("let x = ;");
    assert_eq!(e.line, Some(1));
    assert!(e.column.is_some());
}

#[test]
fn bad_panel_names_are_clear_errors() {
    let e = err("render_to(\"\", text(\"a\"));");
    assert!(e.message.contains("panel name is empty"), "{e}");
    assert_eq!(e.line, Some(1));
    let e = err(&format!("render_to(\"{}\", text(\"a\"));", "n".repeat(33)));
    assert!(e.message.contains("the most is 32"), "{e}");
    let e = err("remove_panel(\"a/b\");");
    assert!(e.message.contains("'/'"), "{e}");
}

#[test]
fn ragged_tables_and_gauges_outside_0_to_1_are_clear_errors() {
    let e = err("let t = table([\"a\", \"b\"], [[1, 2], [3]]);");
    assert!(
        e.message
            .contains("row 2 has 1 cell(s) but the header has 2"),
        "{e}"
    );
    let e = err("render(gauge(\"cpu\", 1.5));");
    assert!(e.message.contains("1.5 is outside 0..1"), "{e}");
    let e = err("render(gauge(-1.0));");
    assert!(e.message.contains("outside 0..1"), "{e}");
    let e = err("render(sparkline([1, \"two\"]));");
    assert!(e.message.contains("point 2 must be a number"), "{e}");
}

#[test]
fn ttls_of_zero_or_years_are_clear_errors() {
    let e = err("render_to_ttl(\"m\", text(\"a\"), 0);");
    assert!(e.message.contains("not more than 0"), "{e}");
    let e = err("render_to_ttl(\"m\", text(\"a\"), 3.0e8);");
    assert!(e.message.contains("a day"), "{e}");
    let e = err("render_to_ttl(\"m\", text(\"a\"), \"soon\");");
    assert!(e.message.contains("must be a number"), "{e}");
}

#[test]
fn placements_are_bounded() {
    let e = err("for i in 0..1000 { render(text(\"x\")); }");
    assert!(e.message.contains(&MAX_PLACEMENTS.to_string()), "{e}");
}

#[test]
fn an_oversized_script_is_refused_before_it_runs() {
    let e = err(&format!("// {}", "x".repeat(20_000)));
    assert!(e.message.contains("bytes; the most is"), "{e}");
}

#[test]
fn wide_unicode_goes_through_whole() {
    let p =
        run("render_to(\"漢字\", table([\"名前\", \"😀\"], [[\"e\\u0301\", \"שלום\"]]));").unwrap();
    match &p[0] {
        Placement::Panel { widget, .. } => {
            assert_eq!(
                *widget,
                Widget::Table {
                    header: vec!["名前".into(), "😀".into()],
                    rows: vec![vec!["e\u{301}".into(), "שלום".into()]],
                }
            );
        }
        other => panic!("{other:?}"),
    }
}

fn call(tool: &RenderTool, args: serde_json::Value) -> (ToolState, String) {
    let limits = ToolLimits::default();
    let ctx = Context {
        sandbox: None,
        limits: &limits,
        stop: &|| false,
    };
    let a = tool.call(&args, &ctx);
    (a.state, a.body)
}

#[test]
fn the_tool_reports_failures_as_failed_with_the_place() {
    let outbox = Outbox::default();
    let tool = RenderTool::new(Surface::Panels, outbox.clone());
    let (state, body) = call(&tool, serde_json::json!({"script": "render(nope());"}));
    assert_eq!(state, ToolState::Failed);
    assert!(
        body.starts_with("the script failed at line 1, column 8:"),
        "{body}"
    );
    assert!(outbox.take().is_empty());
    let (state, body) = call(&tool, serde_json::json!({"src": "x"}));
    assert_eq!(state, ToolState::CouldNotRun);
    assert!(body.contains("`script`"), "{body}");
}

#[test]
fn the_tool_hands_placements_over_and_keeps_the_panels() {
    let outbox = Outbox::default();
    let tool = RenderTool::new(Surface::Inline, outbox.clone());
    let (state, body) = call(
        &tool,
        serde_json::json!({"script": "render(text(\"a\")); render_to_ttl(\"metrics\", sparkline([1, 2]), 30);"}),
    );
    assert_eq!(state, ToolState::Completed, "{body}");
    assert!(
        body.contains("panels now: metrics (expires in 30 s)"),
        "{body}"
    );
    assert!(body.contains("inline REPL"), "{body}");
    assert_eq!(outbox.take().len(), 2);
    assert!(outbox.take().is_empty());
    let (_, body) = call(
        &tool,
        serde_json::json!({"script": "remove_panel(\"metrics\");"}),
    );
    assert!(body.contains("panels now: no panels"), "{body}");
}

#[test]
fn too_many_panels_fail_the_whole_script() {
    let outbox = Outbox::default();
    let tool = RenderTool::new(Surface::Panels, outbox.clone());
    let src = "for i in 0..13 { render_to(`p${i}`, text(\"x\")); }";
    let (state, body) = call(&tool, serde_json::json!({ "script": src }));
    assert_eq!(state, ToolState::Failed);
    assert!(body.contains("remove_panel one first"), "{body}");
    assert!(
        outbox.take().is_empty(),
        "nothing is shown of a failed script"
    );
}
