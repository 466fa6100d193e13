//! Every screen state as a snapshot: the frame ratatui would put on a terminal, drawn into a
//! `TestBackend` of a fixed size.

use std::time::{Duration, Instant};

use insta::assert_snapshot;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::{App, FromSession, Status};
use super::draw::draw;
use crate::app::harness::conversation::Input;
use crate::panels::{PanelName, Placement, Widget};
use crate::provider;
use crate::records::{
    Denial, DenialTarget, EventBody, GrantKind, Message, Role as Author, ToolResult, ToolState,
};
use crate::render::Theme;

fn app(theme: Theme) -> App {
    App::new(
        theme,
        Status {
            model: "replay-model".into(),
            confinement: "dev.toml (kernel-enforced)".into(),
        },
    )
}

fn frame(app: &mut App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw(f, app)).unwrap();
    t
}

fn key(app: &mut App, code: KeyCode) -> Option<Input> {
    app.key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

fn said(app: &mut App, text: &str) {
    type_text(app, text);
    assert_eq!(key(app, KeyCode::Enter), Some(Input::Send(text.to_owned())));
}

fn answer(app: &mut App, text: &str) {
    app.session(FromSession::Recorded(Box::new(EventBody::Message(
        Message {
            role: Author::Assistant,
            text: text.into(),
        },
    ))));
}

fn tool(app: &mut App, id: &str, name: &str, args: &str, output: Option<&str>) {
    app.session(FromSession::ToolStarted(provider::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }));
    if let Some(out) = output {
        app.session(FromSession::Recorded(Box::new(EventBody::ToolResult(
            ToolResult {
                call_id: id.into(),
                state: ToolState::Completed,
                output: out.into(),
                truncated: None,
                exit: None,
                duration_ms: 12,
                lost_records: 0,
            },
        ))));
    }
}

fn end_turn(app: &mut App) {
    app.session(FromSession::TurnEnded(crate::session::TurnEnd::Done));
}

fn panel(name: &str, widget: Widget, ttl: Option<u64>) -> Placement {
    Placement::Panel {
        name: PanelName::parse(name).unwrap(),
        widget,
        ttl: ttl.map(Duration::from_secs),
    }
}

fn metrics() -> Vec<Placement> {
    vec![
        panel(
            "metrics",
            Widget::table(
                vec!["file".into(), "lines".into()],
                vec![
                    vec!["main.rs".into(), "120".into()],
                    vec!["漢字.rs".into(), "7".into()],
                ],
            )
            .unwrap(),
            None,
        ),
        panel(
            "load",
            Widget::Sparkline(vec![1.0, 5.0, 3.0, 8.0, 2.0]),
            None,
        ),
    ]
}

#[test]
fn empty() {
    let mut a = app(Theme::plain());
    assert_snapshot!(frame(&mut a, 60, 12).backend());
}

#[test]
fn streaming() {
    let mut a = app(Theme::plain());
    said(&mut a, "what do my notes say?");
    for d in [
        "The notes ",
        "say: **remember** the milk, and 漢字 and 😀 ",
        "and more",
    ] {
        a.session(FromSession::Stream(provider::Event::TextDelta {
            text: d.into(),
        }));
    }
    assert_snapshot!(frame(&mut a, 60, 12).backend());
}

#[test]
fn a_finished_answer_is_markdown() {
    let mut a = app(Theme::plain());
    said(&mut a, "hi");
    a.session(FromSession::Stream(provider::Event::TextDelta {
        text: "# Done".into(),
    }));
    answer(&mut a, "# Done\n\n- **one**\n- `two`");
    end_turn(&mut a);
    assert_snapshot!(frame(&mut a, 60, 12).backend());
}

#[test]
fn tool_cell_expanded() {
    let mut a = app(Theme::plain());
    said(&mut a, "list it");
    tool(
        &mut a,
        "c1",
        "shell",
        r#"{"command": "ls"}"#,
        Some("a.rs\nb.rs\nc.rs"),
    );
    end_turn(&mut a);
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Enter);
    assert_snapshot!(frame(&mut a, 60, 12).backend());
}

/// The set-up commands are asked of the session thread (which has the skills, roles and
/// policy, and loads a skill into the conversation); what it shows becomes a cell.
#[test]
fn slash_commands_about_the_set_up() {
    use super::super::harness::conversation::commands::Shown;
    use super::super::harness::conversation::slash::Slash;
    let mut a = app(Theme::plain());
    for (typed, asked) in [
        ("/skills", Slash::Skills),
        ("/skill review", Slash::Skill("review".into())),
        ("/agents", Slash::Agents),
        ("/policy", Slash::Policy),
    ] {
        type_text(&mut a, typed);
        assert_eq!(key(&mut a, KeyCode::Enter), Some(Input::Command(asked)));
    }
    // An unknown command gets the inline REPL's hint, never the model.
    type_text(&mut a, "/polcy");
    assert_eq!(key(&mut a, KeyCode::Enter), None);
    // `//` sends the rest with one `/`.
    said_as(&mut a, "//etc is a path", "/etc is a path");
    // While a turn runs, the session thread is busy: a hint, not a queued command.
    type_text(&mut a, "/agents");
    assert_eq!(key(&mut a, KeyCode::Enter), None);
    end_turn(&mut a);
    a.session(FromSession::Shown(vec![
        Shown::Item(
            "reviewer".into(),
            "reads the code and reports (.bee/policies/review.toml)".into(),
        ),
        Shown::Item(
            "tool shell".into(),
            "runs in a scope of its own under shell.toml".into(),
        ),
        Shown::Unconfined("no policy: --host runs tools with NO kernel scope".into()),
    ]));
    assert_snapshot!(frame(&mut a, 70, 14).backend());
}

fn said_as(app: &mut App, typed: &str, sent: &str) {
    type_text(app, typed);
    assert_eq!(key(app, KeyCode::Enter), Some(Input::Send(sent.to_owned())));
}

#[test]
fn denial() {
    let mut a = app(Theme::plain());
    said(&mut a, "read my key");
    tool(
        &mut a,
        "c1",
        "read_file",
        r#"{"path": "/home/u/.ssh/id_rsa"}"#,
        None,
    );
    a.session(FromSession::Recorded(Box::new(EventBody::Denial(Denial {
        call_id: "c1".into(),
        hook: bee_common::Hook::FileOpen.into(),
        explanation: "open /home/u/.ssh/id_rsa for read: no fs.read grant covers it".into(),
        target: DenialTarget::Path("/home/u/.ssh/id_rsa".into()),
        missing: GrantKind::FsRead,
        learn: false,
    }))));
    assert_snapshot!(frame(&mut a, 70, 12).backend());
}

#[test]
fn panels_beside_the_conversation() {
    let mut a = app(Theme::plain());
    said(&mut a, "show the metrics");
    a.session(FromSession::Placements(metrics()));
    end_turn(&mut a);
    assert_snapshot!(frame(&mut a, 100, 16).backend());
}

#[test]
fn panels_overlay_on_a_narrow_terminal() {
    let mut a = app(Theme::plain());
    said(&mut a, "show the metrics");
    a.session(FromSession::Placements(metrics()));
    end_turn(&mut a);
    // Narrow: the column is hidden, the status line says how to see the panels.
    assert_snapshot!("narrow_without_overlay", frame(&mut a, 60, 14).backend());
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Char('p'));
    assert_snapshot!(frame(&mut a, 60, 14).backend());
}

#[test]
fn help() {
    let mut a = app(Theme::plain());
    a.key(KeyEvent::new(KeyCode::F(1), KeyModifiers::NONE));
    assert_snapshot!(frame(&mut a, 100, 24).backend());
}

#[test]
fn too_small() {
    let mut a = app(Theme::plain());
    assert_snapshot!(frame(&mut a, 39, 9).backend());
}

#[test]
fn each_theme_styles_the_roles() {
    for name in crate::render::BUILTIN_THEMES {
        let mut a = app(Theme::builtin(name).unwrap());
        said(&mut a, "hi");
        tool(&mut a, "c1", "shell", r#"{"command": "ls"}"#, Some("a.rs"));
        answer(&mut a, "**bold** and `code`");
        end_turn(&mut a);
        let t = frame(&mut a, 40, 10);
        // The buffer with its styles: the theme's colours, cell by cell.
        insta::assert_debug_snapshot!(format!("theme_{name}"), t.backend().buffer());
    }
}

#[test]
fn panels_expire_after_their_ttl() {
    let mut a = app(Theme::plain());
    a.session(FromSession::Placements(vec![panel(
        "metrics",
        Widget::Text("soon gone".into()),
        Some(30),
    )]));
    assert_eq!(a.board.panels().len(), 1);
    assert!(!a.tick(Instant::now()));
    assert!(a.tick(Instant::now() + Duration::from_secs(31)));
    assert!(a.board.is_empty());
}

#[test]
fn a_long_conversation_scrolls_by_pages_and_jumps_to_the_ends() {
    let mut a = app(Theme::plain());
    for i in 0..200 {
        a.session(FromSession::Recorded(Box::new(EventBody::Message(
            Message {
                role: Author::Assistant,
                text: format!("message {i}"),
            },
        ))));
    }
    frame(&mut a, 60, 12);
    key(&mut a, KeyCode::PageUp);
    let t = frame(&mut a, 60, 12);
    let shown = format!("{}", t.backend());
    assert!(shown.contains("message 195"), "{shown}");
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Char('g'));
    key(&mut a, KeyCode::Char('g'));
    let shown = format!("{}", frame(&mut a, 60, 12).backend());
    assert!(shown.contains("▌message 0"), "{shown}");
    a.key(KeyEvent::new(KeyCode::Char('G'), KeyModifiers::SHIFT));
    let shown = format!("{}", frame(&mut a, 60, 12).backend());
    assert!(shown.contains("▌message 199"), "{shown}");
    // The mouse wheel scrolls too.
    key(&mut a, KeyCode::Esc);
    a.wheel(true);
    assert_eq!(a.scroll, 3);
}

#[test]
fn yank_takes_the_selected_message() {
    let mut a = app(Theme::plain());
    said(&mut a, "hi");
    answer(&mut a, "the **answer**");
    end_turn(&mut a);
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Char('y'));
    assert_eq!(a.yank.as_deref(), Some("the **answer**"));
}

#[test]
fn history_walks_with_ctrl_p_and_ctrl_n() {
    let mut a = app(Theme::plain());
    said(&mut a, "first");
    end_turn(&mut a);
    said(&mut a, "second");
    end_turn(&mut a);
    let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
    a.key(ctrl('p'));
    assert_eq!(a.input.lines(), ["second"]);
    a.key(ctrl('p'));
    assert_eq!(a.input.lines(), ["first"]);
    a.key(ctrl('n'));
    assert_eq!(a.input.lines(), ["second"]);
    a.key(ctrl('n'));
    assert_eq!(a.input.lines(), [""]);
}

#[test]
fn shift_enter_makes_a_multi_line_message() {
    let mut a = app(Theme::plain());
    type_text(&mut a, "one");
    a.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT));
    type_text(&mut a, "two");
    assert_eq!(
        key(&mut a, KeyCode::Enter),
        Some(Input::Send("one\ntwo".into()))
    );
}

#[test]
fn q_quits_from_the_conversation_and_types_in_the_input() {
    let mut a = app(Theme::plain());
    type_text(&mut a, "q");
    assert!(!a.quit);
    assert_eq!(a.input.lines(), ["q"]);
    a.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    said(&mut a, "x");
    end_turn(&mut a);
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Char('q'));
    assert!(a.quit);
}

/// The status line names the policy by its `name`, by its file when it has none, and says
/// `--host` when there is no policy.
#[test]
fn the_status_line_names_the_policy() {
    use std::path::Path;
    let options = bee_core::CompileOptions {
        base: "/w".into(),
        home: None,
    };
    let named = bee_core::compile_str("p.toml", "version = 1\nname = \"dev\"\n", &options)
        .unwrap()
        .policy;
    let unnamed = bee_core::compile_str("p.toml", "version = 1\n", &options)
        .unwrap()
        .policy;
    let file = Path::new("/w/.bee/policy.toml");
    assert_eq!(
        super::confinement(Some(file), Some(&named)),
        "policy dev (kernel-enforced)"
    );
    assert_eq!(
        super::confinement(Some(file), Some(&unnamed)),
        "policy policy.toml (kernel-enforced)"
    );
    assert_eq!(super::confinement(None, None), "--host (not enforced)");
}

/// `/allow` is asked of the session thread; its question makes the next line typed the
/// answer (never a message for the model), and an answer is asked for only once.
#[test]
fn allow_asks_and_the_next_line_answers() {
    use super::super::harness::conversation::slash::Slash;
    let mut a = app(Theme::plain());
    type_text(&mut a, "/allow 2");
    assert_eq!(
        key(&mut a, KeyCode::Enter),
        Some(Input::Command(Slash::Allow(2)))
    );
    a.session(FromSession::Ask("apply this change? [y/N]".into()));
    type_text(&mut a, "y");
    assert_eq!(key(&mut a, KeyCode::Enter), Some(Input::Answer(true)));
    // The next line is a message again.
    type_text(&mut a, "y");
    assert_eq!(key(&mut a, KeyCode::Enter), Some(Input::Send("y".into())));
    end_turn(&mut a);
    a.session(FromSession::Ask("apply this change? [y/N]".into()));
    type_text(&mut a, "fix the bug");
    assert_eq!(key(&mut a, KeyCode::Enter), Some(Input::Answer(false)));
}

/// `/show N` expands the N-th tool call (`/show`, the last), its long lines wrapped, never
/// cut; a number with no call gets a hint.
#[test]
fn show_expands_a_tool_call_with_its_lines_wrapped() {
    let mut a = app(Theme::plain());
    said(&mut a, "run both");
    let long = "a long line of output that ends with THE-END-OF-IT";
    tool(&mut a, "c1", "shell", r#"{"command": "one"}"#, Some(long));
    tool(
        &mut a,
        "c2",
        "shell",
        r#"{"command": "two"}"#,
        Some("short"),
    );
    end_turn(&mut a);
    type_text(&mut a, "/show 1");
    assert_eq!(key(&mut a, KeyCode::Enter), None);
    let screen = frame(&mut a, 44, 16).backend().to_string();
    // The output's rows, wrapped at a word: the whole line is there.
    assert!(
        screen.contains("     a long line of output that ends with"),
        "{screen}"
    );
    assert!(screen.contains("     THE-END-OF-IT"), "{screen}");
    type_text(&mut a, "/show 9");
    assert_eq!(key(&mut a, KeyCode::Enter), None);
    let screen = frame(&mut a, 44, 16).backend().to_string();
    assert!(screen.contains("there is no tool call 9"), "{screen}");
}

/// A running tool call counts its seconds and says that Ctrl-C stops it.
#[test]
fn a_running_tool_counts_its_seconds() {
    let mut a = app(Theme::plain());
    said(&mut a, "wait");
    tool(&mut a, "c1", "shell", r#"{"command": "sleep 30"}"#, None);
    let screen = frame(&mut a, 60, 12).backend().to_string();
    assert!(
        screen.contains("… running 0 s · Ctrl-C stops it"),
        "{screen}"
    );
    assert!(a.tick(Instant::now() + Duration::from_secs(3)));
    let screen = frame(&mut a, 60, 12).backend().to_string();
    assert!(
        screen.contains("… running 3 s · Ctrl-C stops it"),
        "{screen}"
    );
}

/// A narrow status line drops its least important fields whole instead of cutting the last
/// one: at 60 columns the confinement and the denials stay, no field is cut short.
#[test]
fn a_narrow_status_line_drops_fields_whole() {
    let mut a = app(Theme::plain());
    let status = |a: &mut App, w: u16| {
        let t = frame(a, w, 12);
        let buf = t.backend().buffer();
        let y = buf.area.height - 1;
        (0..buf.area.width)
            .map(|x| buf[(x, y)].symbol().to_owned())
            .collect::<String>()
            .trim_end()
            .to_owned()
    };
    let wide = status(&mut a, 120);
    assert!(wide.contains("replay-model"), "{wide}");
    assert!(wide.contains("tokens"), "{wide}");
    let narrow = status(&mut a, 60);
    assert!(
        narrow.starts_with(" dev.toml (kernel-enforced) · 0 denial(s)"),
        "{narrow}"
    );
    // Each field is there whole or not at all.
    for field in narrow.split(" · ").skip(1) {
        assert!(wide.contains(field), "`{field}` is cut: {narrow}");
    }
    assert!(
        !narrow.contains("repla") || narrow.contains("replay-model"),
        "{narrow}"
    );
}
