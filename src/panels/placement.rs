//! Where a widget goes: inline in the conversation, into a named panel (for a while, or
//! until it is replaced or removed), and the rules for panel names and lifetimes.

use std::time::Duration;

use super::widget::Widget;

/// The longest panel name, in characters.
pub const MAX_NAME: usize = 32;
/// The longest time to live a panel may be given: a day. A panel that should stay is
/// placed without one.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// What a script asked for, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// The widget flows inline in the conversation.
    Inline(Widget),
    /// The widget fills the panel `name` (made when missing), for `ttl` when given.
    Panel {
        /// The panel.
        name: PanelName,
        /// What it shows.
        widget: Widget,
        /// How long it lives; `None` until it is replaced or removed.
        ttl: Option<Duration>,
    },
    /// The panel goes away (nothing happens when there is none).
    Remove(PanelName),
    /// Every panel goes away.
    Clear,
}

/// A panel's name: 1 to [`MAX_NAME`] letters, digits, spaces, `-`, `_` or `.`, not blank.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PanelName(String);

impl PanelName {
    /// Checks `name`.
    ///
    /// # Errors
    /// An empty or blank name, one that is too long, or one with other characters.
    pub fn parse(name: &str) -> Result<Self, String> {
        if name.trim().is_empty() {
            return Err("a panel name is empty; name it (e.g. \"metrics\")".to_owned());
        }
        let chars = name.chars().count();
        if chars > MAX_NAME {
            return Err(format!(
                "the panel name is {chars} characters long; the most is {MAX_NAME}"
            ));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.')))
        {
            return Err(format!(
                "the panel name {name:?} holds {c:?}; use letters, digits, spaces, `-`, `_` \
                 and `.`"
            ));
        }
        Ok(Self(name.trim().to_owned()))
    }

    /// The name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for PanelName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A time to live of `seconds`: more than 0, at most [`MAX_TTL`].
///
/// # Errors
/// Zero, negative, not a number, or more than a day.
pub fn ttl(seconds: f64) -> Result<Duration, String> {
    if seconds.is_nan() || seconds <= 0.0 {
        return Err(format!(
            "a panel's ttl of {seconds} seconds is not more than 0; use remove_panel to take \
             a panel away now"
        ));
    }
    if seconds > MAX_TTL.as_secs_f64() {
        return Err(format!(
            "a panel's ttl of {seconds} seconds is more than the most, {} (a day); use \
             render_to for a panel that stays",
            MAX_TTL.as_secs()
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(PanelName::parse("metrics").unwrap().as_str(), "metrics");
        assert_eq!(
            PanelName::parse("build 2.1-rc_1").unwrap().as_str(),
            "build 2.1-rc_1"
        );
        assert!(PanelName::parse("漢字").is_ok());
        for bad in ["", "   ", "a/b", "x\u{1b}[2J", &"n".repeat(MAX_NAME + 1)] {
            assert!(PanelName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_ttl_is_more_than_zero_and_at_most_a_day() {
        assert_eq!(ttl(30.0).unwrap(), Duration::from_secs(30));
        assert_eq!(ttl(0.5).unwrap(), Duration::from_millis(500));
        assert!(ttl(86_400.0).is_ok());
        for bad in [0.0, -1.0, f64::NAN, 86_401.0, 3.0e9, f64::INFINITY] {
            assert!(ttl(bad).is_err(), "{bad}");
        }
    }
}
