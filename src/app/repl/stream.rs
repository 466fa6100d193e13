//! An answer as it streams into the inline REPL, kept as one copy in the scrollback.
//!
//! Each finished block of the answer — a paragraph, a list, a fenced code block, a table,
//! anything that ends at a blank line outside a code fence and is followed by a line that
//! starts a new block — is printed once, rendered as markdown, and is never touched again.
//! Only the unfinished block is live: its raw text is shown below the printed blocks and is
//! erased when the block is finished (and printed rendered in its place). The live region is
//! kept shorter than the screen, so it never scrolls out of reach of the erase: a block taller
//! than that shows only its last lines under a line that says how many are above.
//!
//! [`Answer`] does no I/O: it returns the bytes to write, so it is tested without a terminal.

use crate::render::{sanitize, width as text_width};

/// The size of the terminal the answer is drawn on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Screen {
    /// Columns.
    pub(super) width: usize,
    /// Rows.
    pub(super) height: usize,
}

impl Screen {
    /// The most rows the live region may take: two fewer than the screen, at least three.
    fn live_rows(self) -> usize {
        self.height.saturating_sub(2).max(3)
    }
}

/// One answer being streamed: what came so far, what of it is printed for good, and what
/// the live region shows.
#[derive(Debug, Default)]
pub(super) struct Answer {
    /// Every piece of text so far.
    source: String,
    /// `source[..committed]` is printed, rendered, for good.
    committed: usize,
    /// How many rendered pieces were printed (a blank line goes between two).
    pieces: usize,
    /// `source[..scanned]` is made of whole lines already looked at.
    scanned: usize,
    /// The open code fence: its character and length.
    fence: Option<(char, usize)>,
    /// Where a new block may start: the line after a blank line outside a fence.
    next_block: Option<usize>,
    /// The text the live region shows now, exactly as written.
    shown: String,
}

impl Answer {
    /// Whether nothing was streamed.
    pub(super) fn is_empty(&self) -> bool {
        self.source.is_empty()
    }

    /// Adds `text` as it arrives; returns what to write: finished blocks rendered by
    /// `render` (markdown for the screen's width, ending in one newline) and the live
    /// region brought up to date.
    pub(super) fn push(
        &mut self,
        text: &str,
        screen: Screen,
        render: &dyn Fn(&str) -> String,
    ) -> String {
        self.source.push_str(text);
        let mut out = String::new();
        if let Some(end) = self.scan() {
            out.push_str(&self.erase(screen.width));
            out.push_str(&self.print(end, render));
        }
        out.push_str(&self.draw(screen));
        out
    }

    /// The answer is complete and its whole text is `text` (`None`: what streamed): erases
    /// the live region and prints what is not printed yet, rendered. The answer is then
    /// empty again.
    pub(super) fn finish(
        &mut self,
        text: Option<&str>,
        width: usize,
        render: &dyn Fn(&str) -> String,
    ) -> String {
        let mut out = self.erase(width);
        let printed = &self.source[..self.committed];
        let rest = match text {
            None => &self.source[self.committed..],
            Some(t) => t.strip_prefix(printed).unwrap_or(t),
        };
        if !rest.trim().is_empty() {
            if self.pieces > 0 {
                out.push('\n');
            }
            out.push_str(&render(rest));
        }
        *self = Self::default();
        out
    }

    /// Drops the answer (the provider started over): erases the live region; returns what
    /// to write and whether some of it was already printed for good.
    pub(super) fn restart(&mut self, width: usize) -> (String, bool) {
        let out = self.erase(width);
        let printed = self.pieces > 0;
        *self = Self::default();
        (out, printed)
    }

    /// Looks at the lines that came since the last call; returns the end of the finished
    /// blocks when a new block has started.
    fn scan(&mut self) -> Option<usize> {
        let mut found = None;
        loop {
            let start = self.scanned;
            let rest = &self.source[start..];
            let line_end = rest.find('\n');
            let line = &rest[..line_end.unwrap_or(rest.len())];
            if self.next_block == Some(start) {
                match line.chars().next() {
                    Some(c) if !c.is_whitespace() => {
                        found = Some(start);
                        self.next_block = None;
                    }
                    Some(_) => self.next_block = None,
                    None => {}
                }
            }
            let Some(end) = line_end else { break };
            self.scanned = start + end + 1;
            let trimmed = line.trim_start();
            match self.fence {
                Some(fence) => {
                    if closes(trimmed, fence) {
                        self.fence = None;
                    }
                }
                None => {
                    self.fence = opens(trimmed);
                    let from = found.unwrap_or(self.committed);
                    if line.trim().is_empty() && !self.source[from..start].trim().is_empty() {
                        self.next_block = Some(self.scanned);
                    }
                }
            }
        }
        found
    }

    /// Prints `source[committed..end]` rendered, for good.
    fn print(&mut self, end: usize, render: &dyn Fn(&str) -> String) -> String {
        let mut out = String::new();
        if self.pieces > 0 {
            out.push('\n');
        }
        out.push_str(&render(&self.source[self.committed..end]));
        self.pieces += 1;
        self.committed = end;
        out
    }

    /// Brings the live region up to date: appends when what it shows only grew at its end,
    /// else erases it and draws it again.
    fn draw(&mut self, screen: Screen) -> String {
        let target = window(&self.source[self.committed..], screen);
        let out = match target.strip_prefix(self.shown.as_str()) {
            Some(more) => more.to_owned(),
            None => {
                let mut out = self.erase(screen.width);
                out.push_str(&target);
                out
            }
        };
        self.shown = target;
        out
    }

    /// Erases the live region: the cursor goes back to its first row, and the screen is
    /// cleared from there down.
    fn erase(&mut self, width: usize) -> String {
        let shown = std::mem::take(&mut self.shown);
        if shown.is_empty() {
            return String::new();
        }
        match rows(&shown, width) {
            0 | 1 => "\r\x1b[J".to_owned(),
            n => format!("\x1b[{}A\r\x1b[J", n - 1),
        }
    }
}

/// What the live region shows of an unfinished block: its text made safe (tabs as four
/// spaces, so that its rows can be counted), all of it when it fits, else its last lines
/// under a line that says how many are above. Only the lines that can be shown are looked at,
/// so a block of thousands of lines costs no more per piece than a short one.
fn window(live: &str, screen: Screen) -> String {
    let (max, width) = (screen.live_rows(), screen.width);
    let safe = |l: &str| sanitize(l).replace('\t', "    ");
    // A line of more bytes than this cannot fit: only its end is looked at.
    let cap = (max + 1) * width * 4;
    let mut tail = Vec::new();
    let mut used = 0;
    let mut fits = true;
    for line in live.rsplit('\n') {
        let text = safe(end_of(line, cap));
        let r = line_rows(&text, width);
        if used + r > max {
            fits = false;
            break;
        }
        used += r;
        tail.push(text);
    }
    if fits {
        tail.reverse();
        return tail.join("\n");
    }
    let total = live.matches('\n').count() + 1;
    let header = |n: usize| format!("… {n} line(s) above, printed when the block is complete");
    let budget = max.saturating_sub(line_rows(&header(total), width));
    let mut used = 0;
    let mut shown: Vec<&str> = Vec::new();
    for text in &tail {
        let r = line_rows(text, width);
        if used + r > budget {
            break;
        }
        used += r;
        shown.push(text);
    }
    if shown.is_empty() {
        // The last line alone is taller than the region: its end.
        let last = safe(end_of(live.rsplit('\n').next().unwrap_or(""), cap));
        let room = (budget * width).saturating_sub(1);
        let mut start = last.len();
        let mut taken = 0;
        for (i, c) in last.char_indices().rev() {
            taken += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
            if taken > room {
                break;
            }
            start = i;
        }
        return format!("{}\n{}", header(total - 1), &last[start..]);
    }
    shown.reverse();
    format!("{}\n{}", header(total - shown.len()), shown.join("\n"))
}

/// The last `bytes` bytes of `line` or a little more (from a character's start), or all of
/// it.
fn end_of(line: &str, bytes: usize) -> &str {
    let mut start = line.len().saturating_sub(bytes);
    while !line.is_char_boundary(start) {
        start -= 1;
    }
    &line[start..]
}

/// A fence that a line opens: three or more backticks or tildes.
fn opens(line: &str) -> Option<(char, usize)> {
    let c = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = line.chars().take_while(|x| *x == c).count();
    (n >= 3).then_some((c, n))
}

/// Whether a line closes `fence`: at least as many of its character, then nothing.
fn closes(line: &str, (c, n): (char, usize)) -> bool {
    let run = line.chars().take_while(|x| *x == c).count();
    run >= n && line[run * c.len_utf8()..].trim().is_empty()
}

fn line_rows(line: &str, width: usize) -> usize {
    text_width(line).div_ceil(width.max(1)).max(1)
}

/// How many terminal rows `text` takes at `width` columns.
pub(super) fn rows(text: &str, width: usize) -> usize {
    text.split('\n').map(|l| line_rows(l, width)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCREEN: Screen = Screen {
        width: 40,
        height: 10,
    };

    fn render(text: &str) -> String {
        format!("[{}]\n", text.trim_end())
    }

    /// Streams `text` in pieces of `step` bytes; returns what was written, with the cursor
    /// movements kept.
    fn stream(text: &str, step: usize) -> String {
        let mut a = Answer::default();
        let mut out = String::new();
        let mut i = 0;
        while i < text.len() {
            let mut j = (i + step).min(text.len());
            while !text.is_char_boundary(j) {
                j += 1;
            }
            out.push_str(&a.push(&text[i..j], SCREEN, &render));
            i = j;
        }
        out.push_str(&a.finish(Some(text), SCREEN.width, &render));
        out
    }

    /// What the written bytes leave on a screen that never scrolls out of reach: a tiny
    /// terminal for `\n`, `ESC[nA`, `\r` and `ESC[J`, lines wider than the screen wrapped.
    fn replay(bytes: &str, width: usize) -> Vec<String> {
        let mut screen: Vec<String> = vec![String::new()];
        let mut row = 0;
        let mut chars = bytes.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\n' => {
                    row += 1;
                    if row == screen.len() {
                        screen.push(String::new());
                    }
                }
                '\r' => {}
                '\x1b' => {
                    let mut seq = String::new();
                    for c in chars.by_ref() {
                        seq.push(c);
                        if c.is_ascii_alphabetic() {
                            break;
                        }
                    }
                    if seq == "[J" {
                        screen.truncate(row + 1);
                        screen[row].clear();
                    } else if let Some(n) = seq.strip_prefix('[').and_then(|s| s.strip_suffix('A'))
                    {
                        row -= n.parse::<usize>().unwrap_or(1);
                    }
                }
                c => {
                    if text_width(&screen[row]) == width {
                        row += 1;
                        screen.insert(row, String::new());
                    }
                    screen[row].push(c);
                }
            }
        }
        screen
    }

    #[test]
    fn finished_blocks_are_printed_once_rendered() {
        let text = "First paragraph\nstill first.\n\n- one\n- two\n\nLast.";
        for step in [1, 3, 7] {
            let out = stream(text, step);
            let screen = replay(&out, SCREEN.width);
            assert_eq!(
                screen,
                [
                    "[First paragraph",
                    "still first.]",
                    "",
                    "[- one",
                    "- two]",
                    "",
                    "[Last.]",
                    ""
                ],
                "step {step}: {out:?}"
            );
        }
    }

    #[test]
    fn a_code_fence_keeps_its_blank_lines_and_indented_lines_stay_with_their_block() {
        let text = "```\na\n\nb\n```\n\n1. item\n\n    more of the item\n\nend";
        let out = stream(text, 2);
        let screen = replay(&out, SCREEN.width);
        assert_eq!(
            screen,
            [
                "[```",
                "a",
                "",
                "b",
                "```]",
                "",
                "[1. item",
                "",
                "    more of the item]",
                "",
                "[end]",
                ""
            ],
            "{out:?}"
        );
    }

    #[test]
    fn a_block_taller_than_the_screen_shows_its_last_lines_then_prints_once() {
        let body: Vec<String> = (1..=30).map(|i| format!("line {i}")).collect();
        let text = format!("```\n{}\n```", body.join("\n"));
        let mut a = Answer::default();
        let mut out = String::new();
        for line in text.split_inclusive('\n') {
            out.push_str(&a.push(line, SCREEN, &render));
            // The live region never takes more rows than it may.
            assert!(
                rows(&a.shown, SCREEN.width) <= SCREEN.live_rows(),
                "{:?}",
                a.shown
            );
        }
        assert!(a.shown.starts_with("… "), "{:?}", a.shown);
        out.push_str(&a.finish(None, SCREEN.width, &render));
        let screen = replay(&out, SCREEN.width);
        assert_eq!(screen.len(), 33, "{screen:?}");
        assert_eq!(screen[1], "line 1");
        assert_eq!(screen[30], "line 30");
        assert_eq!(
            screen.iter().filter(|l| l.contains("line 7")).count(),
            1,
            "{screen:?}"
        );
    }

    #[test]
    fn a_line_taller_than_the_region_shows_its_end() {
        let mut a = Answer::default();
        let text = format!("{}THE-END", "x".repeat(5_000));
        let out = a.push(&text, SCREEN, &render);
        assert!(
            rows(&a.shown, SCREEN.width) <= SCREEN.live_rows(),
            "{:?}",
            a.shown
        );
        assert!(a.shown.starts_with("… 0 line(s) above"), "{:?}", a.shown);
        assert!(a.shown.ends_with("xTHE-END"), "{:?}", a.shown);
        let mut all = out;
        all.push_str(&a.finish(None, SCREEN.width, &render));
        let screen = replay(&all, SCREEN.width);
        assert_eq!(screen.concat(), format!("[{text}]"));
    }

    #[test]
    fn a_message_that_differs_from_the_stream_is_printed_whole() {
        let mut a = Answer::default();
        let mut out = a.push("abc", SCREEN, &render);
        out.push_str(&a.finish(Some("something else"), SCREEN.width, &render));
        assert_eq!(replay(&out, SCREEN.width), ["[something else]", ""]);
        assert!(a.is_empty());
    }

    #[test]
    fn rows_count_wrapped_lines() {
        assert_eq!(rows("abc", 80), 1);
        assert_eq!(rows("abc\ndef", 80), 2);
        assert_eq!(rows(&"x".repeat(81), 80), 2);
        assert_eq!(rows("", 80), 1);
    }
}
