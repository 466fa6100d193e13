//! `bee repl` as a person sees it, timed through a pseudo-terminal (`cargo bench -p bee
//! --bench repl`): the time from a finished 2,000-line answer to its markdown on screen, and
//! keystroke-to-echo latency while a tool runs. Prints medians and p95; the figures go to
//! docs/benchmarks.md ("REPL rendering").

#![expect(
    clippy::unwrap_used,
    reason = "a benchmark that cannot set itself up has nothing to report"
)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::process::unix::{PtyStream, UnixProcess};
use expectrl::{ControlCode, Expect, Session};

type Pty = Session<UnixProcess, PtyStream>;

fn fixture(dir: &Path, turns: &[String]) {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("provider.toml"),
        "kind = \"replay\"\nfile = \"turns.jsonl\"\nmodel = \"bench\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("turns.jsonl"), turns.join("\n")).unwrap();
}

fn spawn(dir: &Path) -> Pty {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bee"));
    c.args([
        "repl",
        "--host",
        "--provider",
        "provider.toml",
        "--workspace",
        "ws",
    ])
    .arg("--records-dir")
    .arg(dir.join("records"))
    .current_dir(dir)
    .env("HOME", dir)
    .env("XDG_STATE_HOME", dir.join("state"))
    .env("TERM", "xterm");
    let mut s = Session::spawn(c).unwrap();
    s.set_expect_timeout(Some(Duration::from_secs(60)));
    s
}

fn answer(lines: usize) -> String {
    let mut text = String::new();
    for i in 0..lines {
        match i % 20 {
            0 => text.push_str(&format!("## Section {i}\n")),
            1..=8 => text.push_str(&format!(
                "Paragraph line {i} with *emphasis*, `code` and a [link](https://example.com/{i}).\n"
            )),
            9..=14 => text.push_str(&format!("- item {i} with **strong** text\n")),
            15 => text.push_str("```rust\n"),
            16..=17 => text.push_str(&format!("let x{i} = {i};\n")),
            18 => text.push_str("```\n"),
            _ => text.push('\n'),
        }
    }
    text.push_str("END-OF-ANSWER\n");
    text
}

fn pct(v: &mut [f64], p: usize) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() * p).div_ceil(100).max(1) - 1]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let runs = 15;
    let turn = serde_json::json!({"text": answer(2000)}).to_string();
    fixture(dir.path(), &vec![turn; runs]);
    let mut s = spawn(dir.path());
    s.expect("› ").unwrap();
    let mut redraw = Vec::new();
    for _ in 0..runs {
        s.send_line("write the long answer").unwrap();
        // The last line appears once streamed, and again when the finished message is drawn
        // as markdown.
        s.expect("END-OF-ANSWER").unwrap();
        let streamed = Instant::now();
        s.expect("END-OF-ANSWER").unwrap();
        redraw.push(streamed.elapsed().as_secs_f64() * 1e3);
        s.expect("› ").unwrap();
    }
    s.send(ControlCode::EndOfTransmission).unwrap();
    println!(
        "finished 2,000-line answer -> markdown on screen: median {:.2} ms, p95 {:.2} ms ({runs} runs)",
        pct(&mut redraw, 50),
        pct(&mut redraw, 95)
    );

    let dir = tempfile::tempdir().unwrap();
    let tool = serde_json::json!({"tool_calls": [{"id": "c1", "name": "shell",
        "arguments": {"command": "sleep 8"}}]})
    .to_string();
    fixture(
        dir.path(),
        &[tool, serde_json::json!({"text": "done"}).to_string()],
    );
    let mut s = spawn(dir.path());
    s.expect("› ").unwrap();
    s.send_line("sleep").unwrap();
    s.expect("sleep 8").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut echo = Vec::new();
    for c in "abcdefghijklmnopqrstuvwxyz0123456789".chars().take(30) {
        let t = Instant::now();
        s.send(c.to_string()).unwrap();
        s.expect(c.to_string()).unwrap();
        echo.push(t.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "keystroke -> echo while a tool runs: median {:.3} ms, p95 {:.3} ms ({} keys)",
        pct(&mut echo, 50),
        pct(&mut echo, 95),
        echo.len()
    );
    s.send(ControlCode::EndOfText).unwrap();
}
