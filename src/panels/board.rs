//! The named panels: what each shows, since when, and until when. The `render` tool keeps a
//! board to check a script's placements and to tell the model which panels exist; the TUI
//! keeps one to draw them.

use std::time::{Duration, Instant};

use super::placement::{PanelName, Placement};
use super::widget::Widget;

/// The most panels at once.
pub const MAX_PANELS: usize = 12;

/// One panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Its name.
    pub name: PanelName,
    /// What it shows.
    pub widget: Widget,
    /// When it goes away by itself, if ever.
    pub expires: Option<Instant>,
}

/// The panels, in the order they were made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Board {
    panels: Vec<Panel>,
}

impl Board {
    /// The panels, oldest first.
    #[must_use]
    pub fn panels(&self) -> &[Panel] {
        &self.panels
    }

    /// True when there is no panel.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.panels.is_empty()
    }

    /// Applies `placement` at `now` (inline widgets leave the board as it is).
    ///
    /// # Errors
    /// A new panel beyond [`MAX_PANELS`].
    pub fn apply(&mut self, placement: &Placement, now: Instant) -> Result<(), String> {
        match placement {
            Placement::Inline(_) => {}
            Placement::Panel { name, widget, ttl } => {
                let expires = ttl.map(|t| now + t);
                let full = self.panels.len() >= MAX_PANELS;
                match self.panels.iter_mut().find(|p| &p.name == name) {
                    Some(p) => {
                        p.widget = widget.clone();
                        p.expires = expires;
                    }
                    None if full => {
                        let names: Vec<&str> =
                            self.panels.iter().map(|p| p.name.as_str()).collect();
                        return Err(format!(
                            "there are {MAX_PANELS} panels already ({}); remove_panel one \
                             first or reuse a name",
                            names.join(", ")
                        ));
                    }
                    None => self.panels.push(Panel {
                        name: name.clone(),
                        widget: widget.clone(),
                        expires,
                    }),
                }
            }
            Placement::Remove(name) => self.panels.retain(|p| &p.name != name),
            Placement::Clear => self.panels.clear(),
        }
        Ok(())
    }

    /// Removes the panels whose time is up at `now`; true when any went.
    pub fn expire(&mut self, now: Instant) -> bool {
        let before = self.panels.len();
        self.panels.retain(|p| p.expires.is_none_or(|e| e > now));
        self.panels.len() != before
    }

    /// How long until the next panel expires, from `now`.
    #[must_use]
    pub fn next_expiry(&self, now: Instant) -> Option<Duration> {
        self.panels
            .iter()
            .filter_map(|p| p.expires)
            .min()
            .map(|e| e.saturating_duration_since(now))
    }

    /// The panels in a line for the model: `metrics (expires in 30 s), todo`.
    #[must_use]
    pub fn summary(&self, now: Instant) -> String {
        if self.panels.is_empty() {
            return "no panels".to_owned();
        }
        self.panels
            .iter()
            .map(|p| match p.expires {
                Some(e) => format!(
                    "{} (expires in {} s)",
                    p.name,
                    e.saturating_duration_since(now).as_secs_f64().ceil()
                ),
                None => p.name.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(name: &str, ttl: Option<u64>) -> Placement {
        Placement::Panel {
            name: PanelName::parse(name).unwrap(),
            widget: Widget::Text(name.into()),
            ttl: ttl.map(Duration::from_secs),
        }
    }

    #[test]
    fn panels_are_replaced_removed_and_expire() {
        let t0 = Instant::now();
        let mut b = Board::default();
        b.apply(&put("a", Some(5)), t0).unwrap();
        b.apply(&put("b", None), t0).unwrap();
        b.apply(&put("a", Some(10)), t0).unwrap();
        assert_eq!(b.panels().len(), 2);
        assert_eq!(b.next_expiry(t0), Some(Duration::from_secs(10)));
        assert_eq!(b.summary(t0), "a (expires in 10 s), b");
        assert!(!b.expire(t0 + Duration::from_secs(9)));
        assert!(b.expire(t0 + Duration::from_secs(10)));
        assert_eq!(b.summary(t0), "b");
        b.apply(&Placement::Remove(PanelName::parse("b").unwrap()), t0)
            .unwrap();
        assert!(b.is_empty());
    }

    #[test]
    fn the_number_of_panels_is_bounded() {
        let t0 = Instant::now();
        let mut b = Board::default();
        for i in 0..MAX_PANELS {
            b.apply(&put(&format!("p{i}"), None), t0).unwrap();
        }
        let e = b.apply(&put("one more", None), t0).unwrap_err();
        assert!(e.contains("remove_panel"), "{e}");
        // Reusing a name is fine.
        b.apply(&put("p0", None), t0).unwrap();
        b.apply(&Placement::Clear, t0).unwrap();
        assert!(b.is_empty());
    }
}
