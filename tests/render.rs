//! The REPL's renderer: Markdown with each built-in theme, wrapping, untrusted escape
//! sequences, the one-line messages, user themes and the colour policy.

use std::collections::BTreeMap;

use anstyle::{AnsiColor, Color, RgbColor, Style};
use bee::records::ToolState;
use bee::render::{Role, Theme, choose, lines, render_markdown, user_theme, width};
use bee_core::error::Source;
use serde::Deserialize;
use toml::Spanned;

const SAMPLE: &str = include_str!("fixtures/render/sample.md");

/// Escape sequences made visible: ESC as `␛`.
fn visible(s: &str) -> String {
    s.replace('\x1b', "␛")
}

/// `s` without the SGR sequences (`ESC [ … m`) a theme writes.
fn strip_sgr(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after.find(|c: char| !(c.is_ascii_digit() || c == ';')) {
            Some(end) if after[end..].starts_with('m') => rest = &after[end + 1..],
            _ => {
                out.push('\x1b');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn sample_with_each_theme() {
    for (name, theme) in [
        ("dark", Theme::dark()),
        ("light", Theme::light()),
        ("ansi16", Theme::ansi16()),
        ("plain", Theme::plain()),
    ] {
        let out = render_markdown(SAMPLE, &theme, 80);
        insta::assert_snapshot!(format!("sample_{name}_80"), visible(&out));
        // Styling changes nothing but the escape sequences (and the backticks that mark
        // inline code when it has no style).
        let plain = render_markdown(SAMPLE, &Theme::plain(), 80);
        if name != "plain" {
            assert_eq!(strip_sgr(&out), plain.replace('`', ""), "{name}");
        }
    }
}

#[test]
fn plain_writes_no_escape_sequence() {
    let out = render_markdown(SAMPLE, &Theme::plain(), 80);
    assert!(!out.contains('\x1b'));
    assert!(out.ends_with('\n') && !out.ends_with("\n\n"));
}

#[test]
fn wraps_to_the_width_except_code_and_long_words() {
    for w in [40, 80] {
        let out = render_markdown(SAMPLE, &Theme::plain(), w);
        insta::assert_snapshot!(format!("sample_plain_{w}"), out);
        for line in out.lines() {
            let is_code = line.starts_with("  ") && !line.trim_start().starts_with(['•', '◦', '▪']);
            let one_word = !line.trim().contains(' ');
            assert!(
                width(line) <= w || is_code || one_word,
                "wider than {w}: {line:?}"
            );
        }
    }
}

#[test]
fn code_blocks_are_never_wrapped() {
    let long = "let x = 1; // ".to_owned() + "words and more words ".repeat(8).as_str();
    let md = format!("Before.\n\n```sh\n{long}\n  indented\tand tabbed\n```\n\nAfter.\n");
    let out = render_markdown(&md, &Theme::plain(), 40);
    insta::assert_snapshot!("code_block_at_40", out);
    assert!(out.contains(&format!("  {}\n", long.trim_end())));
    assert!(out.contains("\n  ── sh\n"));
    // Tabs expand to the next multiple of 4 columns of the code: "  indented" is 10.
    assert!(out.contains("\n    indented  and tabbed\n"));
}

#[test]
fn escape_sequences_in_the_text_never_reach_the_terminal() {
    let md = "Clear \x1b[2J the screen, set the title \x1b]0;pwned\x07, \u{9b}31mred, \r\
              overwrite.\n\n```\n\x1b[31mcode\x1b[0m\n```\n\n[link](http://x/\x1b[1m) `\x1b[5m`\n";
    let plain = render_markdown(md, &Theme::plain(), 80);
    insta::assert_snapshot!("escapes_made_visible", plain);
    assert!(!plain.contains('\x1b') && !plain.contains('\u{9b}') && !plain.contains('\r'));
    assert!(plain.contains("␛[2J") && plain.contains("␛]0;pwned␇"));
    for theme in [Theme::dark(), Theme::light(), Theme::ansi16()] {
        let styled = render_markdown(md, &theme, 80);
        // The only escape sequences are the theme's own SGR sequences.
        assert_eq!(strip_sgr(&styled), plain.replace('`', ""));
        assert!(!strip_sgr(&styled).contains('\x1b'));
    }
}

#[test]
fn odd_inputs_render() {
    let deep = (1..12)
        .map(|d| format!("{}- level {d}\n", "  ".repeat(d - 1)))
        .collect::<String>();
    let quotes = "> > > > > > deep quote with enough words to wrap several times over\n";
    for md in [
        "-\n- \n1.\n",
        "```\nunclosed fence\n",
        "| a |\n|---|\n| 1 | 2 | 3 |\n",
        "<div>\n<b>html</b>\n</div>\n",
        "# \n\n***\n",
        deep.as_str(),
        quotes,
    ] {
        for w in [0, 1, 20, 80] {
            let out = render_markdown(md, &Theme::dark(), w);
            assert!(
                out.ends_with('\n') && !out.ends_with("\n\n"),
                "{md:?} at {w}: {out:?}"
            );
        }
    }
    assert_eq!(
        render_markdown("-\n- \n1.\n", &Theme::plain(), 80),
        "•\n•\n\n1.\n"
    );
}

#[test]
fn links_show_their_url_unless_it_is_the_text() {
    let out = render_markdown(
        "[docs](https://x.org/d), <https://x.org/a>, <me@x.org>, [same](same)",
        &Theme::plain(),
        80,
    );
    assert_eq!(
        out,
        "docs (https://x.org/d), https://x.org/a, me@x.org, same\n"
    );
    let dark = render_markdown("[docs](https://x.org/d)", &Theme::dark(), 80);
    let muted = Theme::dark().style(Role::Muted);
    assert!(dark.contains(&format!("{}(https://x.org/d)", muted.render())));
}

#[test]
fn empty_and_blank_answers_end_with_one_newline() {
    for md in ["", "\n\n", "text\n\n\n"] {
        let out = render_markdown(md, &Theme::dark(), 80);
        assert!(
            out.ends_with('\n') && !out.ends_with("\n\n"),
            "{md:?} → {out:?}"
        );
    }
}

#[test]
fn one_line_messages() {
    let t = Theme::plain();
    let all = [
        lines::tool_call(&t, 60, "read_file", "src/main.rs"),
        lines::tool_result(&t, 60, ToolState::Completed, 12, "fn main() {\n}"),
        lines::tool_result(&t, 60, ToolState::Failed, 2_549, "timed out"),
        lines::tool_result(&t, 60, ToolState::CouldNotRun, 0, ""),
        lines::denial(
            &t,
            80,
            "open /home/u/.ssh/id_rsa for read: no fs.read grant covers it",
        ),
        lines::denial(
            &t,
            40,
            "open /home/u/.ssh/id_rsa for read: no fs.read grant covers it",
        ),
        lines::error(&t, 60, "provider answered 529: overloaded"),
        lines::refusal(&t, 60, "I can't help with that."),
        lines::notice(&t, 60, "session saved"),
        lines::tool_call(&t, 30, "shell\x1b[2J", "rm -rf\n/tmp/x"),
    ];
    insta::assert_snapshot!("one_line_messages", all.join("\n"));
    for line in &all {
        assert!(width(line) <= 80 && !line.contains('\x1b') && !line.contains('\n'));
    }
    assert_eq!(width(&all[5]), 40);
    assert!(all[5].ends_with('…'));

    let dark = Theme::dark();
    let styled = lines::denial(&dark, 80, "open /etc/shadow for read");
    insta::assert_snapshot!("denial_dark", styled.replace('\x1b', "␛"));
    assert_eq!(
        strip_sgr(&styled),
        lines::denial(&t, 80, "open /etc/shadow for read")
    );
    // Cutting counts columns, not bytes or escape sequences.
    assert_eq!(
        width(&strip_sgr(&lines::error(&dark, 20, &"x".repeat(50)))),
        20
    );
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    themes: BTreeMap<String, Spanned<toml::Table>>,
}

fn theme_from(text: &str, name: &str) -> Result<Theme, bee::config::FileDiagnostics> {
    let source = Source::new("bee.toml", text);
    let file: File = match toml::from_str(text) {
        Ok(f) => f,
        Err(e) => unreachable!("the test's TOML does not parse: {e}"),
    };
    let Some(table) = file.themes.get(name) else {
        unreachable!("no theme {name}");
    };
    user_theme(&source, table)
}

#[test]
fn user_theme_sets_roles_over_its_base() {
    let text = "[themes.mine]\nbase = \"ansi16\"\nheading = \"bold #ff8800\"\n\
                link = \"underline bright-blue\"\ncode_block = \"\"\n";
    let theme = match theme_from(text, "mine") {
        Ok(t) => t,
        Err(e) => unreachable!("{e}"),
    };
    assert_eq!(
        theme.style(Role::Heading),
        Style::new()
            .bold()
            .fg_color(Some(Color::Rgb(RgbColor(0xff, 0x88, 0))))
    );
    assert_eq!(
        theme.style(Role::Link),
        Style::new()
            .underline()
            .fg_color(Some(Color::Ansi(AnsiColor::BrightBlue)))
    );
    assert_eq!(theme.style(Role::CodeBlock), Style::new());
    assert_eq!(theme.style(Role::Error), Theme::ansi16().style(Role::Error));
    // Without a base, the theme starts from `dark`.
    let dark = theme_from("[themes.x]\nlink = \"red\"\n", "x");
    assert!(dark.is_ok_and(|t| t.style(Role::Heading) == Theme::dark().style(Role::Heading)));
}

#[test]
fn user_theme_errors_name_file_line_and_key() {
    let text = "\
[repl]
theme = \"mine\"

[themes.mine]
base = \"sepia\"
heding = \"bold\"
link = \"underline bluee\"
code = \"italic #ff88\"
quote = 3
";
    let e = match theme_from(text, "mine") {
        Err(e) => e,
        Ok(_) => unreachable!("the theme has errors"),
    };
    let shown = e.to_string();
    let helps: Vec<String> = e
        .problems
        .iter()
        .map(|p| {
            format!(
                "{}:{}: help: {}",
                p.line,
                p.column,
                p.help.clone().unwrap_or_default()
            )
        })
        .collect();
    insta::assert_snapshot!(
        "user_theme_errors",
        format!("{shown}\n\n{}", helps.join("\n"))
    );
    assert_eq!(e.problems.len(), 5);
    assert!(shown.contains("bee.toml:5:8: themes.mine.base: unknown base theme `sepia`"));
    assert!(shown.contains("bee.toml:6:1: themes.mine.heding: unknown theme key `heding`"));
    assert!(shown.contains("bee.toml:7:19: themes.mine.link: unknown colour or attribute `bluee`"));
    assert!(shown.contains("bee.toml:8:16: themes.mine.code: `#ff88` is not a colour"));
    assert!(shown.contains("bee.toml:9:9: themes.mine.quote: a style is a string"));
    let heding = e
        .problems
        .iter()
        .find(|p| p.key.as_deref() == Some("themes.mine.heding"));
    let help = heding.and_then(|p| p.help.clone()).unwrap_or_default();
    assert!(help.contains("did you mean `heading`?") && help.contains("code_block"));
    let link = e
        .problems
        .iter()
        .find(|p| p.key.as_deref() == Some("themes.mine.link"));
    let help = link.and_then(|p| p.help.clone()).unwrap_or_default();
    assert!(help.contains("bright-white") && help.contains("#rrggbb"));
}

#[test]
fn user_theme_errors_in_an_inline_table() {
    let text = "[themes]\nother = { heading = \"bold\", link = \"blink\" }\n";
    let e = match theme_from(text, "other") {
        Err(e) => e,
        Ok(_) => unreachable!("the theme has an error"),
    };
    assert_eq!(
        e.to_string(),
        "bee.toml:2:37: themes.other.link: unknown colour or attribute `blink`"
    );
}

#[test]
fn user_theme_errors_under_dotted_keys() {
    let text = "[themes]\nmine.heading = \"bold\"\nmine.heding = \"bold\"\n";
    let e = match theme_from(text, "mine") {
        Err(e) => e,
        Ok(_) => unreachable!("the theme has an error"),
    };
    assert_eq!(
        e.to_string(),
        "bee.toml:3:6: themes.mine.heding: unknown theme key `heding`"
    );
}

#[test]
fn choose_turns_colour_off() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let colour = env(&[("TERM", "xterm-256color")]);
    assert_eq!(choose(Theme::dark(), true, &colour), Theme::dark());
    assert_eq!(choose(Theme::dark(), false, &colour), Theme::plain());
    let no_color = env(&[("TERM", "xterm-256color"), ("NO_COLOR", "1")]);
    assert_eq!(choose(Theme::dark(), true, &no_color), Theme::plain());
    // An empty NO_COLOR does not count (no-color.org).
    let empty = env(&[("NO_COLOR", "")]);
    assert_eq!(choose(Theme::light(), true, &empty), Theme::light());
    let dumb = env(&[("TERM", "dumb")]);
    assert_eq!(choose(Theme::ansi16(), true, &dumb), Theme::plain());
    assert_eq!(choose(Theme::ansi16(), true, &env(&[])), Theme::ansi16());
}
