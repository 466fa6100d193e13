//! The hard limits of a session, checked before the step that would pass them, and the
//! [`Budget`] a session spends from: its own limits and, for a subagent, every ancestor's.
//!
//! Its length is its tests: the code is about 510 lines.
//!
//! Token and cost limits are held by reservation: before a model call, its worst case — an
//! upper estimate of its input ([`input_estimate`]) plus its whole output budget — is
//! reserved in its session's budget and every ancestor's, the output budget cut down to
//! what the limits leave; a call that cannot fit even one output token is refused, and a
//! call that would fit once calls in flight (concurrent subagents) are settled waits for
//! them. After the call the reservation is settled to the usage the provider reported.
//! So the limits hold as long as the provider keeps to the output budget it was sent and
//! the request's input is within the estimate; a reported usage past them is still
//! counted and stops the session before its tools run ([`after_call`]).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::{EpisodeLimits, Model};
use crate::provider::Request;
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
    /// Model calls in flight (here and below) holding a reservation, not yet settled.
    in_flight: u32,
    /// Tokens reserved by the calls in flight.
    reserved_tokens: u64,
    /// Cost reserved by the calls in flight, USD.
    reserved_usd: f64,
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

/// Tokens counted for each item and each tool of a request beyond its bytes: the role and
/// delimiter tokens a provider wraps around it.
const FRAMING_TOKENS: u64 = 8;

/// An upper estimate of the input tokens of `request`.
///
/// A byte-level tokenizer never makes more tokens than there are bytes, so an item's JSON
/// length (plus [`FRAMING_TOKENS`]) bounds its tokens. When `last` gives the item count and
/// the reported input tokens of the session's previous request, and that request is a
/// prefix of this one (the conversation only grew), those tokens stand for the prefix and
/// only the items after it are estimated; otherwise every item and tool is.
pub(super) fn input_estimate(request: &Request, last: Option<(usize, u64)>) -> u64 {
    let bytes = |v: Result<String, serde_json::Error>| {
        v.map_or(0, |t| t.len() as u64)
            .saturating_add(FRAMING_TOKENS)
    };
    let items = |from: usize| -> u64 {
        request
            .items
            .iter()
            .skip(from)
            .map(|i| bytes(serde_json::to_string(i)))
            .sum()
    };
    match last {
        Some((n, tokens)) if n <= request.items.len() => tokens.saturating_add(items(n)),
        _ => request
            .tools
            .iter()
            .map(|t| bytes(serde_json::to_string(t)))
            .sum::<u64>()
            .saturating_add(items(0)),
    }
}

/// The most a call of `model` may cost: its price per input token and per output token
/// (the higher of the output and reasoning prices), USD. `None` when the price is unknown.
fn rates(model: &Model) -> Option<(f64, f64)> {
    let (price, _) = model.prices.lookup(model.provider.model())?;
    let per = |per_million: f64| per_million / 1_000_000.0;
    let output = price.output.max(price.reasoning.unwrap_or(price.output));
    Some((per(price.input), per(output)))
}

/// What [`Budget::reserve`] decided.
#[derive(Debug)]
pub(super) enum Reserved {
    /// The call may go, with this reservation (its output budget in [`Reservation::output`]).
    Granted(Reservation),
    /// Calls in flight hold part of what the call needs: try again once they settle.
    Wait,
    /// A limit forbids the call.
    Refused(LimitHit),
}

/// Tokens and cost held for one model call in its session's budget and every ancestor's,
/// from before the call until [`Reservation::settle`] (or until dropped, if the call is
/// never settled).
#[derive(Debug)]
pub(super) struct Reservation {
    budget: Arc<Budget>,
    /// Whether it holds anything (no limit asked for one otherwise), until released.
    held: bool,
    tokens: u64,
    usd: f64,
    output: Option<u32>,
}

impl Reservation {
    /// The output budget to send with the call: capped so that the call fits every limit.
    pub(super) fn output(&self) -> Option<u32> {
        self.output
    }

    /// Releases the reservation and counts the call's actual usage instead, in each budget
    /// under one lock, so that no other call ever sees the room between the two.
    pub(super) fn settle(mut self, usage: &Usage) {
        self.release(Some(usage));
    }

    fn release(&mut self, usage: Option<&Usage>) {
        let held = std::mem::replace(&mut self.held, false);
        for b in std::iter::once(&*self.budget).chain(self.budget.ancestors()) {
            let mut spent = b.lock();
            if held {
                spent.in_flight = spent.in_flight.saturating_sub(1);
                spent.reserved_tokens = spent.reserved_tokens.saturating_sub(self.tokens);
                // With no call in flight nothing is reserved (no rounding left over).
                spent.reserved_usd = if spent.in_flight == 0 {
                    0.0
                } else {
                    (spent.reserved_usd - self.usd).max(0.0)
                };
            }
            if let Some(u) = usage {
                spent.count(u);
            }
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.held {
            self.release(None);
        }
    }
}

/// What a session may spend: its own limits, and — for a subagent — the limits of every
/// session above it, which its spending counts against too.
///
/// Tokens and cost are shared down the tree: every usage a subagent records is added to its
/// own spending and to each ancestor's, and each model call's worst case is reserved against
/// its own limits and every ancestor's token and cost limits before it is sent (its
/// wall-time limits checked too), so a subagent can never outspend its parent, nor
/// concurrent subagents together. Turns stay each session's own. A subagent's deadline is
/// the earliest of its own and its ancestors'.
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

    /// Counts a model call of this session (turns are not shared).
    pub(super) fn next_turn(&self) -> u32 {
        let mut spent = self.lock();
        spent.turns += 1;
        spent.turns
    }

    /// Reserves the worst case of the next model call of `model` — `input` tokens (an upper
    /// estimate of its request) and its output budget, `asked` or the provider file's — here
    /// and in every ancestor, all of them locked together so that concurrent subagents
    /// cannot both take the same room. The output budget is cut to what every token and
    /// cost limit leaves; the call is refused when a limit forbids it or leaves no room for
    /// one output token, and told to wait when calls in flight hold part of what it needs.
    pub(super) fn reserve(
        self: &Arc<Self>,
        model: &Model,
        input: u64,
        asked: Option<u32>,
    ) -> Reserved {
        let chain: Vec<&Budget> = std::iter::once(&**self).chain(self.ancestors()).collect();
        let mut guards: Vec<MutexGuard<'_, Spent>> = chain.iter().map(|b| b.lock()).collect();
        let want = u64::from(asked.unwrap_or(model.max_output_tokens));
        let rates = rates(model);
        let mut output = want;
        let mut limited = false;
        for (i, (b, spent)) in chain.iter().zip(guards.iter()).enumerate() {
            let limits = if i == 0 { b.limits.clone() } else { b.shared() };
            let tag = |hit: LimitHit| if i == 0 { hit } else { b.as_ancestors(hit) };
            if let Some(hit) = before_call(&limits, model, spent, b.deadline) {
                return Reserved::Refused(tag(hit));
            }
            if let Some(max) = limits.tokens {
                limited = true;
                let free = max.saturating_sub(spent.tokens.saturating_add(spent.reserved_tokens));
                if free < input.saturating_add(want) && spent.in_flight > 0 {
                    return Reserved::Wait;
                }
                if free <= input {
                    return Reserved::Refused(tag(limit(
                        LimitKind::Tokens,
                        format!(
                            "{} tokens of {max} spent; the next model call may take up to \
                             {input} input tokens (an upper estimate of its request) and needs \
                             room for at least one output token, but only {free} are left: \
                             refusing to call the model",
                            spent.tokens
                        ),
                    )));
                }
                output = output.min(free - input);
            }
            if let (Some(max), Some((per_in, per_out))) = (limits.cost_usd, rates) {
                limited = true;
                let free = max - spent.usd - spent.reserved_usd;
                let input_cost = per_in * input as f64;
                if free < input_cost + per_out * want as f64 && spent.in_flight > 0 {
                    return Reserved::Wait;
                }
                let room = if per_out > 0.0 {
                    ((free - input_cost) / per_out).floor()
                } else if free >= input_cost {
                    f64::MAX
                } else {
                    0.0
                };
                if room < 1.0 {
                    return Reserved::Refused(tag(limit(
                        LimitKind::Cost,
                        format!(
                            "${:.4} of ${max} spent; the next model call may cost up to \
                             ${input_cost:.4} for its input ({input} tokens, an upper estimate \
                             of its request) plus its output, but only ${:.4} is left: refusing \
                             to call the model",
                            spent.usd,
                            free.max(0.0)
                        ),
                    )));
                }
                // `room` is at least 1 and compared in f64; anything past u64 is no cap.
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "room is finite, ≥ 1, and saturates at u64::MAX"
                )]
                let room = room as u64;
                output = output.min(room);
            }
        }
        if !limited {
            return Reserved::Granted(Reservation {
                budget: Arc::clone(self),
                held: false,
                tokens: 0,
                usd: 0.0,
                output: asked,
            });
        }
        let tokens = input.saturating_add(output);
        let usd = rates.map_or(0.0, |(per_in, per_out)| {
            per_in * input as f64 + per_out * output as f64
        });
        for spent in &mut guards {
            spent.in_flight = spent.in_flight.saturating_add(1);
            spent.reserved_tokens = spent.reserved_tokens.saturating_add(tokens);
            spent.reserved_usd += usd;
        }
        Reserved::Granted(Reservation {
            budget: Arc::clone(self),
            held: true,
            tokens,
            usd,
            output: Some(u32::try_from(output).unwrap_or(u32::MAX)),
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
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::provider::price::{Price, PriceTable};
    use crate::provider::replay::{Recording, Replay};
    use crate::records::Cost;

    fn model(price: f64) -> Model {
        let mut prices = PriceTable::default();
        prices.set(
            "m",
            Price {
                input: price,
                cached_input: None,
                output: price,
                reasoning: None,
            },
        );
        let recording = Recording {
            path: PathBuf::from("none"),
            turns: Vec::new(),
        };
        Model {
            provider: Arc::new(Replay::new(Arc::new(recording), "m")),
            kind: "replay".to_owned(),
            prices: Arc::new(prices),
            max_output_tokens: 8192,
        }
    }

    fn usage(tokens: u64, usd: f64) -> Usage {
        Usage {
            model_call: 1,
            model: "m".to_owned(),
            input_tokens: Some(tokens),
            cached_input_tokens: Some(0),
            output_tokens: Some(0),
            reasoning_tokens: Some(0),
            cost: Cost::Known {
                usd,
                source: crate::records::PriceSource::Override,
            },
        }
    }

    fn granted(r: Reserved) -> Reservation {
        match r {
            Reserved::Granted(r) => r,
            other => panic!("not granted: {other:?}"),
        }
    }

    fn limits(tokens: Option<u64>, cost_usd: Option<f64>) -> EpisodeLimits {
        EpisodeLimits {
            tokens,
            cost_usd,
            ..EpisodeLimits::default()
        }
    }

    #[test]
    fn siblings_share_the_parents_room_and_wait_for_each_other() {
        let m = model(1.0);
        let now = Instant::now();
        let parent = Arc::new(Budget::new("p", &limits(Some(1000), None), now, None));
        let a = Arc::new(Budget::new(
            "p.a",
            &limits(None, None),
            now,
            Some(parent.clone()),
        ));
        let b = Arc::new(Budget::new(
            "p.b",
            &limits(None, None),
            now,
            Some(parent.clone()),
        ));
        // The output budget is cut to what the limit leaves after the input estimate.
        let first = granted(a.reserve(&m, 300, None));
        assert_eq!(first.output(), Some(700));
        // Its sibling cannot take the same room: it waits while the call is in flight.
        assert!(matches!(b.reserve(&m, 300, None), Reserved::Wait));
        first.settle(&usage(350, 0.0));
        assert_eq!(parent.tokens(), 350);
        let second = granted(b.reserve(&m, 300, Some(100)));
        assert_eq!(second.output(), Some(100));
        // A reservation dropped unsettled gives its room back.
        drop(second);
        let third = granted(b.reserve(&m, 300, None));
        assert_eq!(third.output(), Some(350));
        third.settle(&usage(640, 0.0));
        // 10 left: no room for a 300-token input and one output token.
        let Reserved::Refused(hit) = a.reserve(&m, 300, None) else {
            panic!("not refused");
        };
        assert_eq!(hit.limit, LimitKind::Tokens);
        assert!(
            hit.detail.starts_with("990 tokens of 1000 spent")
                && hit.detail.contains("only 10 are left")
                && hit
                    .detail
                    .ends_with("(the limit of session p, which this subagent spends from)"),
            "{}",
            hit.detail
        );
    }

    #[test]
    fn cost_reservations_cap_the_output_and_are_all_released() {
        // $1 per million tokens; a limit of $0.001 is 1000 tokens' worth.
        let m = model(1.0);
        let b = Arc::new(Budget::new(
            "s",
            &limits(None, Some(0.001)),
            Instant::now(),
            None,
        ));
        // Two calls in flight at a time, of sizes whose sums do not round back to zero.
        for i in 0..50 {
            let one = granted(b.reserve(&m, 3, Some(7)));
            let two = granted(b.reserve(&m, 1 + i % 7, Some(11)));
            assert_eq!((one.output(), two.output()), (Some(7), Some(11)));
            one.settle(&usage(1, 0.000_001));
            two.settle(&usage(1, 0.000_001));
        }
        assert_eq!(b.lock().reserved_usd, 0.0);
        // With nothing in flight, nothing is reserved: the call is capped, never told to wait.
        let r = granted(b.reserve(&m, 100, None));
        let cap = r.output().unwrap_or_default();
        assert!((799..=800).contains(&cap), "{cap}");
    }
}
