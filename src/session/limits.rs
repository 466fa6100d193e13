//! The hard limits of a session, checked before the step that would pass them.

use std::time::Instant;

use super::{EpisodeLimits, Model};
use crate::records::{Cost, Usage};
use crate::records::{LimitHit, LimitKind};

/// What the episode has spent, for the limit checks.
///
/// An unknown quantity can never be proven under a limit: once a call's price is unknown, a
/// cost limit forbids further calls; once a call's token counts are unknown (the provider
/// reported none), a token or cost limit does.
#[derive(Debug, Default)]
pub(super) struct Spent {
    pub(super) turns: u32,
    pub(super) tokens: u64,
    pub(super) usd: f64,
    /// The first model without a price.
    pub(super) unknown: Option<String>,
    /// The first model call whose token counts are unknown.
    pub(super) unknown_tokens: Option<u32>,
}

impl Spent {
    /// Counts in a call's usage as recorded (its cost already priced): a call whose counts
    /// are not all known adds nothing but makes the tokens unknown.
    pub(super) fn count(&mut self, usage: &Usage) {
        if !usage.is_complete() {
            self.unknown_tokens.get_or_insert(usage.model_call);
            return;
        }
        let total = usage.input_tokens.unwrap_or(0) + usage.output_tokens.unwrap_or(0);
        self.tokens = self.tokens.saturating_add(total);
        match &usage.cost {
            Cost::Known { usd, .. } => self.usd += usd,
            Cost::Unknown { model } => {
                self.unknown.get_or_insert_with(|| model.clone());
            }
            Cost::UnknownTokens => {
                self.unknown_tokens.get_or_insert(usage.model_call);
            }
        }
    }

    fn unknown_tokens_hit(&self, kind: LimitKind, max: &str, tail: &str) -> Option<LimitHit> {
        self.unknown_tokens.map(|n| {
            limit(
                kind,
                format!(
                    "the provider reported no token counts for model call {n}, so the {} \
                     cannot be proven under the limit of {max}: refusing to go on{tail}",
                    kind.as_str()
                ),
            )
        })
    }
}

fn limit(limit: LimitKind, detail: String) -> LimitHit {
    LimitHit { limit, detail }
}

/// The limit that forbids another model call, if any.
pub(super) fn before_call(
    l: &EpisodeLimits,
    model: &Model,
    spent: &Spent,
    deadline: Option<Instant>,
) -> Option<LimitHit> {
    if let Some(max) = l.turns.filter(|m| spent.turns >= *m) {
        return Some(limit(
            LimitKind::Turns,
            format!("{} turns of {max}", spent.turns),
        ));
    }
    if let Some(max) = l.tokens {
        if let Some(hit) = spent.unknown_tokens_hit(LimitKind::Tokens, &max.to_string(), "") {
            return Some(hit);
        }
        if spent.tokens >= max {
            return Some(limit(
                LimitKind::Tokens,
                format!("{} tokens of {max}", spent.tokens),
            ));
        }
    }
    if let (Some(d), Some(wall)) = (deadline, l.wall) {
        if Instant::now() >= d {
            return Some(limit(
                LimitKind::Wall,
                format!("wall time of {} s reached", wall.as_secs_f64()),
            ));
        }
    }
    if let Some(max) = l.cost_usd {
        let model_name = model.provider.model();
        let unknown = spent.unknown.clone().or_else(|| {
            model
                .prices
                .lookup(model_name)
                .is_none()
                .then(|| model_name.to_owned())
        });
        if let Some(m) = unknown {
            return Some(limit(
                LimitKind::Cost,
                format!(
                    "the price of model {m:?} is unknown, so the cost cannot be held under the \
                     limit of ${max}: refusing to call the model (add [prices] to the provider \
                     file, or drop the cost limit)"
                ),
            ));
        }
        if let Some(hit) = spent.unknown_tokens_hit(LimitKind::Cost, &format!("${max}"), "") {
            return Some(hit);
        }
        if spent.usd >= max {
            return Some(limit(
                LimitKind::Cost,
                format!("${:.4} of ${max}", spent.usd),
            ));
        }
    }
    None
}

/// The limit the last model call reached, which forbids running its tool calls.
pub(super) fn after_call(l: &EpisodeLimits, spent: &Spent, pending: usize) -> Option<LimitHit> {
    let not_run = format!("; {pending} tool call(s) of the last turn not run");
    if let Some(max) = l.turns.filter(|m| spent.turns >= *m) {
        return Some(limit(
            LimitKind::Turns,
            format!("{} turns of {max}{not_run}", spent.turns),
        ));
    }
    if let Some(max) = l.tokens {
        if let Some(hit) = spent.unknown_tokens_hit(LimitKind::Tokens, &max.to_string(), &not_run) {
            return Some(hit);
        }
        if spent.tokens >= max {
            return Some(limit(
                LimitKind::Tokens,
                format!("{} tokens of {max}{not_run}", spent.tokens),
            ));
        }
    }
    if let Some(max) = l.cost_usd {
        if let Some(hit) = spent.unknown_tokens_hit(LimitKind::Cost, &format!("${max}"), &not_run) {
            return Some(hit);
        }
        if let Some(m) = &spent.unknown {
            return Some(limit(
                LimitKind::Cost,
                format!(
                    "the price of model {m:?} is unknown and a cost limit of ${max} is set{not_run}"
                ),
            ));
        }
        if spent.usd >= max {
            return Some(limit(
                LimitKind::Cost,
                format!("${:.4} of ${max}{not_run}", spent.usd),
            ));
        }
    }
    None
}

/// Caps the output budget at the tokens left under the token limit.
pub(super) fn output_budget(
    l: &EpisodeLimits,
    max_output_tokens: Option<u32>,
    model: &Model,
    spent: &Spent,
) -> Option<u32> {
    let Some(max) = l.tokens else {
        return max_output_tokens;
    };
    let left = max.saturating_sub(spent.tokens).max(1);
    let asked = u64::from(max_output_tokens.unwrap_or(model.max_output_tokens));
    if left < asked {
        Some(u32::try_from(left).unwrap_or(u32::MAX))
    } else {
        max_output_tokens
    }
}
