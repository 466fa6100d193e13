//! The full-screen TUI's frame time and memory (`cargo bench -p bee --features tui --bench
//! tui`): an answer streaming into a 10,000-message conversation with 8 live panels, paging
//! up through it, and the memory a conversation takes per 1,000 messages. Prints p50, p99
//! and the bytes each frame sends the terminal; the figures go to docs/benchmarks.md
//! ("Full-screen TUI").

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bee::app::tui_bench;

/// Counts the bytes allocated and not yet freed.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn pct(v: &[Duration], p: usize) -> Duration {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get((s.len() * p / 100).min(s.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn memory(messages: usize, render_all: bool) -> usize {
    let before = LIVE.load(Ordering::Relaxed);
    let mut held = 0;
    tui_bench::hold(messages, render_all, &mut || {
        held = LIVE.load(Ordering::Relaxed).saturating_sub(before);
    });
    held
}

fn main() {
    let (w, h) = (200, 50);
    let run = |label: &str, f: tui_bench::Frames| {
        let mut bytes = f.bytes.clone();
        bytes.sort_unstable();
        let median_bytes = bytes.get(bytes.len() / 2).copied().unwrap_or(0);
        println!(
            "{label}: {} frames, p50 {}, p99 {}, max {}{}",
            f.times.len(),
            ms(pct(&f.times, 50)),
            ms(pct(&f.times, 99)),
            ms(pct(&f.times, 100)),
            if bytes.is_empty() {
                String::new()
            } else {
                format!(", median {median_bytes} bytes to the terminal per frame")
            }
        );
    };
    match tui_bench::streaming(10_000, 2_000, w, h) {
        Ok(f) => run(
            "streaming into 10,000 messages with 8 live panels, 200x50",
            f,
        ),
        Err(e) => eprintln!("streaming: {e}"),
    }
    match tui_bench::streaming(0, 2_000, w, h) {
        Ok(f) => run(
            "streaming into an empty conversation with 8 live panels, 200x50",
            f,
        ),
        Err(e) => eprintln!("streaming: {e}"),
    }
    match tui_bench::paging(10_000, 300, w, h) {
        Ok(f) => run("PgUp through 10,000 messages (first 300 pages), 200x50", f),
        Err(e) => eprintln!("paging: {e}"),
    }
    for render_all in [false, true] {
        let m1 = memory(1_000, render_all);
        let m10 = memory(10_000, render_all);
        println!(
            "memory, {}: 1,000 messages {} KiB, 10,000 messages {} KiB ({} KiB per 1,000)",
            if render_all {
                "every message rendered (after gg)"
            } else {
                "as stored"
            },
            m1 / 1024,
            m10 / 1024,
            m10 / 10 / 1024
        );
    }
}
