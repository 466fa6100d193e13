//! Rendering a 2,000-line Markdown answer (paragraphs, nested lists, quotes, code blocks,
//! tables) for the REPL, with the dark theme and with plain, at 100 columns.
//!
//! `cargo bench -p bee --bench render`
//!
//! No bench framework: each case runs a few warm-up iterations, then `ITERATIONS` timed
//! ones, and prints the median and the fastest and slowest.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bee::render::{Theme, render_markdown};

const ITERATIONS: usize = 41;
const WARM_UP: usize = 3;

/// One section of the answer, 19 source lines.
const SECTION: &str = "\
## Step {n}: what the change does

The store keeps one connection per writer and retries a busy write with a backoff that
grows from *two* to **two hundred** milliseconds; see `BUSY_TIMEOUT` and the
[SQLite locking notes](https://sqlite.org/lockingv3.html) for why this is needed.

1. Open the store with `Store::open` and check the schema version.
2. Start a transaction:
   - take the write lock first;
   - then read the current totals.
3. Commit, or roll back and retry on `SQLITE_BUSY`.

> A checkpoint can hold the lock for longer than one backoff step under heavy load.

```rust
fn retry<T>(mut f: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    loop { match f() { Err(e) if e.is_busy() => sleep(BACKOFF), r => return r } }
}
```
";

fn answer(lines: usize) -> String {
    let per = SECTION.lines().count() + 1; // and the blank line between sections
    (0..lines.div_ceil(per))
        .map(|n| SECTION.replace("{n}", &n.to_string()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn measure(name: &str, text: &str, theme: &Theme, width: usize) {
    for _ in 0..WARM_UP {
        black_box(render_markdown(black_box(text), theme, width));
    }
    let mut times: Vec<Duration> = (0..ITERATIONS)
        .map(|_| {
            let start = Instant::now();
            black_box(render_markdown(black_box(text), theme, width));
            start.elapsed()
        })
        .collect();
    times.sort_unstable();
    let at = |i: usize| times.get(i).copied().unwrap_or_default();
    let out = render_markdown(text, theme, width);
    println!(
        "{name}: median {:.2?} (min {:.2?}, max {:.2?}; {ITERATIONS} runs), {} lines in, {} lines / {} KiB out",
        at(ITERATIONS / 2),
        at(0),
        at(ITERATIONS - 1),
        text.lines().count(),
        out.lines().count(),
        out.len() / 1024,
    );
}

fn main() {
    let text = answer(2_000);
    measure(
        "render 2,000 lines, dark, 100 columns",
        &text,
        &Theme::dark(),
        100,
    );
    measure(
        "render 2,000 lines, plain, 100 columns",
        &text,
        &Theme::plain(),
        100,
    );
}
