//! The widgets a render script builds, each checked when it is made: a table's rows are as
//! wide as its header, a gauge is a fraction in 0..1, and no widget is larger than the
//! limits below (a panel is a glance, not a data dump).

/// Most bytes of text in one widget (a text, markdown or code body, or all cells together).
pub const MAX_TEXT: usize = 16 * 1024;
/// Most rows of a table, items of a list, or pairs of a `kv`.
pub const MAX_ROWS: usize = 500;
/// Most columns of a table.
pub const MAX_COLUMNS: usize = 20;
/// Most bars of a bar chart.
pub const MAX_BARS: usize = 100;
/// Most points of a sparkline.
pub const MAX_POINTS: usize = 1_000;

/// One widget.
#[derive(Debug, Clone, PartialEq)]
pub enum Widget {
    /// Plain text, wrapped at the width.
    Text(String),
    /// Markdown, rendered through the theme as assistant answers are.
    Markdown(String),
    /// A code block with its language.
    Code {
        /// The language, shown above the code (may be empty).
        lang: String,
        /// The code, kept verbatim.
        source: String,
    },
    /// A table with a header row.
    Table {
        /// The header's cells.
        header: Vec<String>,
        /// The rows, each as wide as the header.
        rows: Vec<Vec<String>>,
    },
    /// A bulleted list.
    List(Vec<String>),
    /// Keys and values, in the given order.
    Kv(Vec<(String, String)>),
    /// Labelled bars, scaled to the largest value.
    BarChart(Vec<(String, f64)>),
    /// A series drawn in one row of block characters.
    Sparkline(Vec<f64>),
    /// A labelled fraction in 0..1.
    Gauge {
        /// What is measured (may be empty).
        label: String,
        /// The fraction, 0 to 1.
        ratio: f64,
    },
}

impl Widget {
    /// The widget's kind as scripts spell it (`bar_chart`, `kv`, …).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Text(_) => "text",
            Self::Markdown(_) => "markdown",
            Self::Code { .. } => "code",
            Self::Table { .. } => "table",
            Self::List(_) => "list",
            Self::Kv(_) => "kv",
            Self::BarChart(_) => "bar_chart",
            Self::Sparkline(_) => "sparkline",
            Self::Gauge { .. } => "gauge",
        }
    }

    /// Text of [`MAX_TEXT`] bytes at most.
    ///
    /// # Errors
    /// When the text is longer.
    pub fn text(kind: &str, text: &str) -> Result<String, String> {
        check_text(kind, text.len())?;
        Ok(text.to_owned())
    }

    /// A table; every row has as many cells as the header.
    ///
    /// # Errors
    /// A ragged row, no columns, or too many rows, columns or bytes.
    pub fn table(header: Vec<String>, rows: Vec<Vec<String>>) -> Result<Self, String> {
        if header.is_empty() {
            return Err("table: the header has no cells (pass the column names first)".into());
        }
        if header.len() > MAX_COLUMNS {
            return Err(format!(
                "table: {} columns is more than the most, {MAX_COLUMNS}",
                header.len()
            ));
        }
        check_rows("table", rows.len())?;
        for (i, row) in rows.iter().enumerate() {
            if row.len() != header.len() {
                return Err(format!(
                    "table: row {} has {} cell(s) but the header has {}; every row needs one \
                     cell per column (use \"\" for an empty one)",
                    i + 1,
                    row.len(),
                    header.len()
                ));
            }
        }
        let bytes: usize = header
            .iter()
            .chain(rows.iter().flatten())
            .map(String::len)
            .sum();
        check_text("table", bytes)?;
        Ok(Self::Table { header, rows })
    }

    /// A list.
    ///
    /// # Errors
    /// Too many items or bytes.
    pub fn list(items: Vec<String>) -> Result<Self, String> {
        check_rows("list", items.len())?;
        check_text("list", items.iter().map(String::len).sum())?;
        Ok(Self::List(items))
    }

    /// Keys and values.
    ///
    /// # Errors
    /// Too many pairs or bytes.
    pub fn kv(pairs: Vec<(String, String)>) -> Result<Self, String> {
        check_rows("kv", pairs.len())?;
        check_text("kv", pairs.iter().map(|(k, v)| k.len() + v.len()).sum())?;
        Ok(Self::Kv(pairs))
    }

    /// A bar chart; values are finite and not negative.
    ///
    /// # Errors
    /// A negative or non-finite value, too many bars or bytes.
    pub fn bar_chart(bars: Vec<(String, f64)>) -> Result<Self, String> {
        if bars.len() > MAX_BARS {
            return Err(format!(
                "bar_chart: {} bars is more than the most, {MAX_BARS}",
                bars.len()
            ));
        }
        if let Some((label, v)) = bars.iter().find(|(_, v)| !v.is_finite() || *v < 0.0) {
            return Err(format!(
                "bar_chart: the bar `{label}` is {v}; bars are finite and not negative"
            ));
        }
        check_text("bar_chart", bars.iter().map(|(l, _)| l.len()).sum())?;
        Ok(Self::BarChart(bars))
    }

    /// A sparkline; values are finite.
    ///
    /// # Errors
    /// A non-finite value, or too many points.
    pub fn sparkline(points: Vec<f64>) -> Result<Self, String> {
        if points.len() > MAX_POINTS {
            return Err(format!(
                "sparkline: {} points is more than the most, {MAX_POINTS}",
                points.len()
            ));
        }
        if let Some((i, v)) = points.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(format!(
                "sparkline: point {} is {v}; points are finite",
                i + 1
            ));
        }
        Ok(Self::Sparkline(points))
    }

    /// A gauge of `ratio`, a fraction in 0..1.
    ///
    /// # Errors
    /// A ratio outside 0..1 (or not a number).
    pub fn gauge(label: String, ratio: f64) -> Result<Self, String> {
        if !(0.0..=1.0).contains(&ratio) {
            return Err(format!(
                "gauge: {ratio} is outside 0..1; pass a fraction (0.75 for 75%)"
            ));
        }
        check_text("gauge", label.len())?;
        Ok(Self::Gauge { label, ratio })
    }
}

fn check_text(kind: &str, bytes: usize) -> Result<(), String> {
    if bytes > MAX_TEXT {
        return Err(format!(
            "{kind}: {bytes} bytes of text is more than the most, {MAX_TEXT}"
        ));
    }
    Ok(())
}

fn check_rows(kind: &str, rows: usize) -> Result<(), String> {
    if rows > MAX_ROWS {
        return Err(format!(
            "{kind}: {rows} rows is more than the most, {MAX_ROWS}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn a_ragged_table_names_the_row() {
        let e = Widget::table(s(&["a", "b"]), vec![s(&["1", "2"]), s(&["3"])]).unwrap_err();
        assert!(
            e.contains("row 2 has 1 cell(s) but the header has 2"),
            "{e}"
        );
        assert!(Widget::table(s(&["a"]), vec![s(&["1"])]).is_ok());
        assert!(Widget::table(vec![], vec![]).is_err());
    }

    #[test]
    fn a_gauge_is_a_fraction() {
        assert!(Widget::gauge(String::new(), 0.0).is_ok());
        assert!(Widget::gauge(String::new(), 1.0).is_ok());
        for bad in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
            let e = Widget::gauge("cpu".into(), bad).unwrap_err();
            assert!(e.contains("outside 0..1"), "{e}");
        }
    }

    #[test]
    fn sizes_are_bounded() {
        assert!(Widget::list(vec![String::new(); MAX_ROWS + 1]).is_err());
        assert!(Widget::text("text", &"x".repeat(MAX_TEXT + 1)).is_err());
        assert!(Widget::sparkline(vec![1.0; MAX_POINTS + 1]).is_err());
        assert!(Widget::sparkline(vec![f64::NAN]).is_err());
        assert!(Widget::bar_chart(vec![("a".into(), -1.0)]).is_err());
    }
}
