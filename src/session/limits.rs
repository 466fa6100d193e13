//! The hard limits of a session, checked before the step that would pass them, and the
//! [`Budget`] a session spends from: its own limits and, for a subagent, every ancestor's.

use std::sync::{Arc, Mutex, MutexGuard};
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
    if let (Some(d), Some(wall)) = (deadline, l.wall)
        && Instant::now() >= d
    {
        return Some(limit(
            LimitKind::Wall,
            format!("wall time of {} s reached", wall.as_secs_f64()),
        ));
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

/// What a session may spend: its own limits, and — for a subagent — the limits of every
/// session above it, which its spending counts against too.
///
/// Tokens and cost are shared down the tree: every usage a subagent records is added to its
/// own spending and to each ancestor's, and before each model call the subagent checks its
/// own limits and every ancestor's token, cost and wall-time limits, so a subagent can never
/// outspend its parent (nor two concurrent subagents together). Turns stay each session's
/// own. A subagent's deadline is the earliest of its own and its ancestors'.
#[derive(Debug)]
pub struct Budget {
    /// The session whose limits these are (for messages).
    owner: String,
    limits: EpisodeLimits,
    deadline: Option<Instant>,
    spent: Mutex<Spent>,
    parent: Option<Arc<Budget>>,
}

impl Budget {
    /// The budget of session `owner` with `limits`, its wall time counted from `started`,
    /// spending also from `parent` (and its ancestors) when given.
    pub(super) fn new(
        owner: &str,
        limits: &EpisodeLimits,
        started: Instant,
        parent: Option<Arc<Budget>>,
    ) -> Self {
        let own = limits.wall.map(|w| started + w);
        let inherited = parent.as_ref().and_then(|p| p.deadline);
        let deadline = match (own, inherited) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Self {
            owner: owner.to_owned(),
            limits: limits.clone(),
            deadline,
            spent: Mutex::new(Spent::default()),
            parent,
        }
    }

    /// The instant the session's time is up: the earliest of its own wall-time limit and its
    /// ancestors'; `None` when none has one.
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Tokens spent so far by this session and the subagents below it (input plus output).
    #[must_use]
    pub fn tokens(&self) -> u64 {
        self.lock().tokens
    }

    /// Cost spent so far by this session and the subagents below it, USD (known prices).
    #[must_use]
    pub fn cost_usd(&self) -> f64 {
        self.lock().usd
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Spent> {
        // A poisoned lock only means another thread panicked while counting; the counts are
        // still the best known.
        self.spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn ancestors(&self) -> impl Iterator<Item = &Budget> {
        std::iter::successors(self.parent.as_deref(), |b| b.parent.as_deref())
    }

    /// The limits an ancestor shares with its subagents: all but turns.
    fn shared(&self) -> EpisodeLimits {
        EpisodeLimits {
            turns: None,
            ..self.limits.clone()
        }
    }

    fn as_ancestors(&self, mut hit: LimitHit) -> LimitHit {
        hit.detail = format!(
            "{} (the limit of session {}, which this subagent spends from)",
            hit.detail, self.owner
        );
        hit
    }

    /// Counts one model call's usage here and in every ancestor.
    pub(super) fn count(&self, usage: &Usage) {
        self.lock().count(usage);
        for b in self.ancestors() {
            b.lock().count(usage);
        }
    }

    /// Counts a model call of this session (turns are not shared).
    pub(super) fn next_turn(&self) -> u32 {
        let mut spent = self.lock();
        spent.turns += 1;
        spent.turns
    }

    /// The limit, here or above, that forbids another model call of `model`.
    pub(super) fn before_call(&self, model: &Model) -> Option<LimitHit> {
        let own = before_call(&self.limits, model, &self.lock(), self.deadline);
        own.or_else(|| {
            self.ancestors().find_map(|b| {
                before_call(&b.shared(), model, &b.lock(), b.deadline).map(|h| b.as_ancestors(h))
            })
        })
    }

    /// The limit, here or above, that the last model call reached.
    pub(super) fn after_call(&self, pending: usize) -> Option<LimitHit> {
        let own = after_call(&self.limits, &self.lock(), pending);
        own.or_else(|| {
            self.ancestors().find_map(|b| {
                after_call(&b.shared(), &b.lock(), pending).map(|h| b.as_ancestors(h))
            })
        })
    }

    /// The output budget of the next call: the session's, capped by what every token limit
    /// here and above leaves.
    pub(super) fn output_budget(&self, asked: Option<u32>, model: &Model) -> Option<u32> {
        let mut budget = output_budget(&self.limits, asked, model, &self.lock());
        for b in self.ancestors() {
            budget = output_budget(&b.limits, budget, model, &b.lock());
        }
        budget
    }
}
