//! Issue 10's targets ("Measured, not asserted"), collected from the phases of one boot and
//! printed at the end: as a Markdown table on `kbench|` lines, and as one `kbench-target|`
//! line each, which `cargo xtask bench-kernel` gathers into a table across kernels.

use crate::out;

/// How a measured value compares with its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// At or below the limit.
    Met,
    /// Above it.
    Missed,
    /// No limit: a reference figure (Landlock's ratio, the program-time estimate).
    Reference,
}

/// One figure of the summary.
#[derive(Debug, Clone)]
pub struct Target {
    /// What was measured (a table row label, also the key across kernels).
    pub label: String,
    /// The measured value: a ratio, or a fraction of bwrap's overhead.
    pub value: f64,
    /// The limit, or `None` for a reference figure.
    pub limit: Option<f64>,
}

impl Target {
    /// Whether the value meets its limit.
    pub fn verdict(&self) -> Verdict {
        match self.limit {
            None => Verdict::Reference,
            Some(l) if self.value <= l => Verdict::Met,
            Some(_) => Verdict::Missed,
        }
    }
}

/// The figures of one boot, in the order the phases report them.
#[derive(Debug, Default)]
pub struct Targets(Vec<Target>);

impl Targets {
    /// Records a figure with the limit.
    pub fn limit(&mut self, label: &str, value: f64, limit: f64) {
        self.0.push(Target {
            label: label.to_owned(),
            value,
            limit: Some(limit),
        });
    }

    /// Records a reference figure (no limit).
    pub fn reference(&mut self, label: &str, value: f64) {
        self.0.push(Target {
            label: label.to_owned(),
            value,
            limit: None,
        });
    }

    /// Prints the summary table and the machine-readable lines.
    pub fn print(&self) {
        out("");
        out("### Issue 10's targets in this boot");
        out("");
        out("| Measured | value | target | |");
        out("| --- | ---: | ---: | --- |");
        for t in &self.0 {
            let (limit, verdict) = match (t.limit, t.verdict()) {
                (Some(l), Verdict::Met) => (format!("≤ {l:.2}"), "met"),
                (Some(l), _) => (format!("≤ {l:.2}"), "**missed**"),
                (None, _) => ("—".to_owned(), "reference"),
            };
            out(&format!(
                "| {} | {:.3} | {limit} | {verdict} |",
                t.label, t.value
            ));
        }
        for t in &self.0 {
            let limit = t.limit.map(|l| format!("{l}")).unwrap_or_default();
            println!("kbench-target|{}|{:.4}|{limit}", t.label, t.value);
        }
    }
}
