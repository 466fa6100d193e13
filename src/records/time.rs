//! Record timestamps: instants in UTC, written as RFC 3339 with millisecond precision.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An instant, kept to the millisecond and written as RFC 3339 in UTC with exactly three
/// fractional digits (`2026-11-30T06:15:02.118Z`), so that written timestamps sort as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(jiff::Timestamp);

impl Timestamp {
    /// The current instant, truncated to the millisecond.
    #[must_use]
    pub fn now() -> Self {
        let ms = jiff::Timestamp::now().as_millisecond();
        // Truncating a current instant to milliseconds stays within jiff's range.
        Self::from_unix_millis(ms).unwrap_or(Self(jiff::Timestamp::UNIX_EPOCH))
    }

    /// The instant `ms` milliseconds after the Unix epoch, or `None` outside the range
    /// jiff supports (years -9999 to 9999).
    #[must_use]
    pub fn from_unix_millis(ms: i64) -> Option<Self> {
        jiff::Timestamp::from_millisecond(ms).ok().map(Self)
    }

    /// Milliseconds since the Unix epoch.
    #[must_use]
    pub fn as_unix_millis(self) -> i64 {
        self.0.as_millisecond()
    }

    /// Parses an RFC 3339 timestamp (any offset; converted to UTC, truncated to the
    /// millisecond).
    ///
    /// # Errors
    /// When `text` is not an RFC 3339 timestamp.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t: jiff::Timestamp = text
            .parse()
            .map_err(|e: jiff::Error| format!("`{text}` is not an RFC 3339 timestamp: {e}"))?;
        Self::from_unix_millis(t.as_millisecond())
            .ok_or_else(|| format!("`{text}` is out of range"))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.strftime("%Y-%m-%dT%H:%M:%S%.3fZ"))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_width_utc_text() {
        let t = Timestamp::from_unix_millis(1_796_019_302_118).unwrap();
        assert_eq!(t.to_string(), "2026-11-30T06:15:02.118Z");
        let whole = Timestamp::from_unix_millis(1_796_019_302_000).unwrap();
        assert_eq!(whole.to_string(), "2026-11-30T06:15:02.000Z");
    }

    #[test]
    fn parses_offsets_into_utc() {
        let t = Timestamp::parse("2026-11-30T07:15:02.118+01:00").unwrap();
        assert_eq!(t.to_string(), "2026-11-30T06:15:02.118Z");
        assert!(Timestamp::parse("yesterday").is_err());
    }

    #[test]
    fn serde_round_trip() {
        let t = Timestamp::now();
        let json = serde_json::to_string(&t).unwrap();
        let back: Timestamp = serde_json::from_str(&json).unwrap();
        assert_eq!(t, back);
    }
}
