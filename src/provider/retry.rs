//! Retrying transient failures (429, 5xx, no connection): exponential backoff with full
//! jitter, honouring the provider's `Retry-After` (RFC 9110 §10.2.3: delay-seconds or an
//! HTTP-date).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// The backoff before the second attempt; it doubles per attempt.
    pub base_backoff: Duration,
    /// The longest wait between attempts. A `Retry-After` longer than this ends the retries
    /// instead of blocking that long.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 4 attempts, 500 ms base, 30 s cap.
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `attempt + 1`, after attempt `attempt` (1-based) failed:
    /// `Retry-After` when the provider sent one, else a uniformly random duration in
    /// `[0, min(max_backoff, base_backoff × 2^(attempt-1))]` ("full jitter"). `None` means
    /// stop: no attempts left, or `Retry-After` exceeds `max_backoff`.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        if let Some(wait) = retry_after {
            return (wait <= self.max_backoff).then_some(wait);
        }
        let exp = self
            .base_backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let cap = exp.min(self.max_backoff);
        let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return Some(Duration::ZERO);
        }
        Some(Duration::from_nanos(random() % (nanos + 1)))
    }
}

/// A random number from the standard library's per-process hash seed (no RNG dependency;
/// jitter needs no quality, only spread between clients).
fn random() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// Parses a `Retry-After` value: delay-seconds (`120`) or an HTTP-date
/// (`Wed, 21 Oct 2015 07:28:00 GMT`, taken relative to `now`; a past date means 0).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 07:28:00
        assert_eq!(parse_retry_after("1", now), Some(Duration::from_secs(1)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn backoff_is_bounded_and_stops() {
        let p = RetryPolicy {
            max_attempts: 5,
            base_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(300),
        };
        for attempt in 1..5 {
            for _ in 0..50 {
                let d = p.delay(attempt, None).unwrap();
                let cap = Duration::from_millis(100 << (attempt - 1)).min(p.max_backoff);
                assert!(d <= cap, "{d:?} > {cap:?}");
            }
        }
        assert_eq!(p.delay(5, None), None);
        assert_eq!(
            p.delay(1, Some(Duration::from_millis(200))),
            Some(Duration::from_millis(200))
        );
        assert_eq!(p.delay(1, Some(Duration::from_secs(1))), None);
    }
}
