//! Reports over the metrics store: tokens, cost, latency percentiles and denials, grouped by
//! run, episode, model or tool.
//!
//! # Percentiles
//!
//! p50 and p95 are exact, by the nearest-rank method: with the `n` samples sorted ascending,
//! the p-th percentile is the sample at 1-based rank `⌈p·n/100⌉` (at least 1). It is always a
//! value that was observed; one sample is its own p50 and p95; of two samples, p50 is the
//! smaller and p95 the larger. No samples give no percentile (`null`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::event::{Cost, CostTotal, PriceSource, SUCCESS_CHECK_CALL_ID};
use super::store::{Store, StoreError, TOKENS_UNKNOWN, sql_error};

/// What the rows of a report are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// One row per run.
    Run,
    /// One row per episode (`<run id>/<episode id>`).
    Episode,
    /// One row per model. Model calls count under the model that answered; tool calls and
    /// denials under their episode's model.
    Model,
    /// One row per tool: tool calls and denials only (model calls have no tool).
    Tool,
    /// One row per agent role: `(main)` for top-level sessions (episodes, `repl`), the role
    /// for subagents (`(inline)` for an inline policy). Each row also counts the `agent`
    /// calls that asked for the role: subagents started and delegations refused.
    Agent,
}

/// The group of top-level sessions in a report by agent.
pub const MAIN_AGENT_GROUP: &str = "(main)";

/// The nearest-rank `pct`-th percentile of `sorted` (ascending); `None` when it is empty.
#[must_use]
pub fn nearest_rank(sorted: &[u64], pct: u32) -> Option<u64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let pct = usize::try_from(pct.min(100)).unwrap_or(100);
    let rank = (pct * n).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// p50 and p95 of a set of durations, milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    /// How many durations.
    pub samples: usize,
    /// The median (nearest rank), milliseconds.
    pub p50: Option<u64>,
    /// The 95th percentile (nearest rank), milliseconds.
    pub p95: Option<u64>,
}

impl Percentiles {
    /// The percentiles of `samples` (in any order).
    #[must_use]
    pub fn of(mut samples: Vec<u64>) -> Self {
        samples.sort_unstable();
        Self {
            samples: samples.len(),
            p50: nearest_rank(&samples, 50),
            p95: nearest_rank(&samples, 95),
        }
    }
}

/// Token counts, tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Input tokens, cached ones included.
    pub input: u64,
    /// Cached input tokens.
    pub cached_input: u64,
    /// Output tokens, reasoning ones included.
    pub output: u64,
    /// Reasoning tokens.
    pub reasoning: u64,
}

/// Model-call figures of a group.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModelStats {
    /// Model calls (with usage, latency or both recorded), failed ones included.
    pub calls: u64,
    /// Tokens the calls reported; a lower bound when `unknown_token_calls` is not 0.
    pub tokens: Tokens,
    /// Calls with a token count the provider did not report (failed calls, mostly).
    pub unknown_token_calls: u64,
    /// Calls by stop reason (`end_turn`, `tool_use`, `max_tokens`, `refusal`, …).
    pub stop_reasons: BTreeMap<String, u64>,
    /// Failed calls by error category (`rate-limit`, `overloaded`, `server`, …).
    pub errors: BTreeMap<String, u64>,
    /// The cost; unknown as a whole when any call's price is unknown. Calls that reported no
    /// usage add nothing.
    pub cost: CostTotal,
    /// Request to end of response, milliseconds.
    pub latency_ms: Percentiles,
    /// Request to first streamed token, milliseconds.
    pub first_token_ms: Percentiles,
}

/// Tool-call figures of a group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolStats {
    /// Tool calls.
    pub calls: u64,
    /// Calls that completed.
    pub completed: u64,
    /// Calls that could not run.
    pub could_not_run: u64,
    /// Calls that failed.
    pub failed: u64,
    /// Calls with no recorded result (interrupted).
    pub unfinished: u64,
    /// Durations of the calls with a result, milliseconds.
    pub duration_ms: Percentiles,
    /// Operations the kernel refused.
    pub denials: u64,
    /// Audit records the kernel lost during the calls: `denials` is then a lower bound.
    /// Left out when none were.
    #[serde(skip_serializing_if = "is_zero")]
    pub lost_records: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The figures of one group, or of the whole report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Episodes in the group.
    pub episodes: u64,
    /// Model calls; `None` in groups by tool.
    pub model: Option<ModelStats>,
    /// Tool calls.
    pub tools: ToolStats,
    /// `agent` calls that asked for this group's role; `None` except in reports by agent
    /// (and their total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegations: Option<Delegations>,
}

/// `agent` calls: subagents started and delegations refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Delegations {
    /// Calls that started a subagent.
    pub started: u64,
    /// Calls that started nothing (a failed proof, an unknown role, …).
    pub refused: u64,
}

/// One row of a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// The run id, `<run id>/<episode id>`, the model or the tool.
    pub key: String,
    /// Its figures.
    #[serde(flatten)]
    pub stats: Stats,
}

/// A metrics report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// What the groups are.
    pub by: GroupBy,
    /// The run the report is restricted to, if any.
    pub run: Option<String>,
    /// The groups, sorted by key.
    pub groups: Vec<Group>,
    /// All of it together (model figures included even in a report by tool).
    pub total: Stats,
}

#[derive(Default)]
struct Acc {
    episodes: BTreeSet<(String, String)>,
    model_calls: u64,
    tokens: Tokens,
    unknown_token_calls: u64,
    stop_reasons: BTreeMap<String, u64>,
    errors: BTreeMap<String, u64>,
    cost: CostTotal,
    latency: Vec<u64>,
    first_token: Vec<u64>,
    tools: ToolStats,
    durations: Vec<u64>,
    delegations: Delegations,
}

impl Acc {
    fn add_model_call(&mut self, row: &ModelRow) {
        self.model_calls += 1;
        let [input, cached, output, reasoning] = row.tokens;
        if row.tokens.iter().any(Option::is_none) {
            self.unknown_token_calls += 1;
        }
        self.tokens.input += input.unwrap_or(0);
        self.tokens.cached_input += cached.unwrap_or(0);
        self.tokens.output += output.unwrap_or(0);
        self.tokens.reasoning += reasoning.unwrap_or(0);
        if let Some(stop) = &row.stop_reason {
            *self.stop_reasons.entry(stop.clone()).or_default() += 1;
        }
        if let Some(error) = &row.error {
            *self.errors.entry(error.clone()).or_default() += 1;
        }
        if let Some(cost) = &row.cost {
            self.cost.add(cost);
        }
        self.latency.extend(row.total_ms);
        self.first_token.extend(row.first_token_ms);
    }

    fn finish(self, with_model: bool, with_delegations: bool) -> Stats {
        let mut tools = self.tools;
        tools.duration_ms = Percentiles::of(self.durations);
        Stats {
            episodes: u64::try_from(self.episodes.len()).unwrap_or(u64::MAX),
            model: with_model.then(|| ModelStats {
                calls: self.model_calls,
                tokens: self.tokens,
                unknown_token_calls: self.unknown_token_calls,
                stop_reasons: self.stop_reasons,
                errors: self.errors,
                cost: self.cost,
                latency_ms: Percentiles::of(self.latency),
                first_token_ms: Percentiles::of(self.first_token),
            }),
            tools,
            delegations: with_delegations.then_some(self.delegations),
        }
    }
}

struct ModelRow {
    run: String,
    episode: String,
    /// The episode's agent role (`(main)` for a top-level session).
    agent: String,
    model: String,
    /// Input, cached input, output and reasoning tokens; `None` where unknown.
    tokens: [Option<u64>; 4],
    cost: Option<Cost>,
    stop_reason: Option<String>,
    error: Option<String>,
    first_token_ms: Option<u64>,
    total_ms: Option<u64>,
}

struct ToolRow {
    run: String,
    episode: String,
    agent: String,
    episode_model: String,
    tool: String,
    state: Option<String>,
    duration_ms: Option<u64>,
    denials: u64,
    lost_records: u64,
    /// The episode's success check, which records denials but is no tool call.
    check: bool,
}

/// The group of success-check denials in a report by tool.
pub const SUCCESS_CHECK_GROUP: &str = "(success check)";

fn u(v: Option<i64>) -> Option<u64> {
    v.map(|v| u64::try_from(v).unwrap_or(0))
}

impl Store {
    /// Counts the episodes in the store (of one run, if given).
    ///
    /// # Errors
    /// When the database cannot be read.
    pub fn episode_count(&self, run: Option<&str>) -> Result<u64, StoreError> {
        self.with_conn(|conn, path| {
            conn.query_row(
                "SELECT count(*) FROM episodes WHERE ?1 IS NULL OR run_id = ?1",
                [run],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(sql_error(path, "counting episodes"))
        })
    }

    /// The report grouped by `by`, over one run or all of them.
    ///
    /// # Errors
    /// When the database cannot be read.
    pub fn report(&self, by: GroupBy, run: Option<&str>) -> Result<Report, StoreError> {
        let rows = self.with_conn(|conn, path| {
            let err = |c| sql_error(path, c);
            let mut st = conn
                .prepare(
                    "SELECT run_id, episode_id, coalesce(model, '?'), coalesce(agent_role, ?2)
                     FROM episodes WHERE ?1 IS NULL OR run_id = ?1",
                )
                .map_err(err("reading episodes"))?;
            let episodes = st
                .query_map(rusqlite::params![run, MAIN_AGENT_GROUP], |r| {
                    Ok(EpisodeRow {
                        run: r.get(0)?,
                        episode: r.get(1)?,
                        model: r.get(2)?,
                        agent: r.get(3)?,
                    })
                })
                .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
                .map_err(err("reading episodes"))?;
            let mut st = conn
                .prepare(
                    "SELECT m.run_id, m.episode_id, coalesce(m.model, e.model, '?'),
                            m.input_tokens, m.cached_input_tokens, m.output_tokens,
                            m.reasoning_tokens, m.cost_usd, m.price_source,
                            m.first_token_ms, m.total_ms, m.stop_reason, m.error,
                            coalesce(e.agent_role, ?2)
                     FROM model_calls m LEFT JOIN episodes e USING (run_id, episode_id)
                     WHERE ?1 IS NULL OR m.run_id = ?1",
                )
                .map_err(err("reading model calls"))?;
            let models = st
                .query_map(rusqlite::params![run, MAIN_AGENT_GROUP], |r| {
                    let model: String = r.get(2)?;
                    let tokens = [u(r.get(3)?), u(r.get(4)?), u(r.get(5)?), u(r.get(6)?)];
                    let usd: Option<f64> = r.get(7)?;
                    let source: Option<String> = r.get(8)?;
                    let cost = match (usd, source.as_deref()) {
                        (_, Some(TOKENS_UNKNOWN)) => Some(Cost::UnknownTokens),
                        (Some(usd), Some(s)) => match s.parse::<PriceSource>() {
                            Ok(source) => Some(Cost::Known { usd, source }),
                            Err(_) => Some(Cost::Unknown {
                                model: model.clone(),
                            }),
                        },
                        (_, Some(_)) => Some(Cost::Unknown {
                            model: model.clone(),
                        }),
                        (_, None) => None,
                    };
                    Ok(ModelRow {
                        run: r.get(0)?,
                        episode: r.get(1)?,
                        agent: r.get(13)?,
                        model,
                        tokens,
                        cost,
                        first_token_ms: u(r.get(9)?),
                        total_ms: u(r.get(10)?),
                        stop_reason: r.get(11)?,
                        error: r.get(12)?,
                    })
                })
                .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
                .map_err(err("reading model calls"))?;
            let mut st = conn
                .prepare(
                    "SELECT t.run_id, t.episode_id, coalesce(e.model, '?'), coalesce(t.tool, '?'),
                            t.state, t.duration_ms, t.denials, t.call_id = ?2,
                            coalesce(e.agent_role, ?3), t.lost_records
                     FROM tool_calls t LEFT JOIN episodes e USING (run_id, episode_id)
                     WHERE ?1 IS NULL OR t.run_id = ?1",
                )
                .map_err(err("reading tool calls"))?;
            let tools = st
                .query_map(
                    rusqlite::params![run, SUCCESS_CHECK_CALL_ID, MAIN_AGENT_GROUP],
                    |r| {
                        let check: bool = r.get(7)?;
                        Ok(ToolRow {
                            run: r.get(0)?,
                            episode: r.get(1)?,
                            agent: r.get(8)?,
                            episode_model: r.get(2)?,
                            tool: if check {
                                SUCCESS_CHECK_GROUP.to_owned()
                            } else {
                                r.get(3)?
                            },
                            state: r.get(4)?,
                            duration_ms: u(r.get(5)?),
                            denials: u(r.get(6)?).unwrap_or(0),
                            lost_records: u(r.get(9)?).unwrap_or(0),
                            check,
                        })
                    },
                )
                .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
                .map_err(err("reading tool calls"))?;
            let mut st = conn
                .prepare(
                    "SELECT role, agent_episode IS NOT NULL FROM subagents
                     WHERE ?1 IS NULL OR run_id = ?1",
                )
                .map_err(err("reading subagents"))?;
            let delegations = st
                .query_map([run], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?))
                })
                .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
                .map_err(err("reading subagents"))?;
            Ok((episodes, models, tools, delegations))
        })?;
        let (episodes, models, tools, delegations) = rows;
        Ok(build_report(
            by,
            run,
            &Rows {
                episodes,
                models,
                tools,
                delegations,
            },
        ))
    }
}

struct EpisodeRow {
    run: String,
    episode: String,
    model: String,
    agent: String,
}

/// What a report is built from.
struct Rows {
    episodes: Vec<EpisodeRow>,
    models: Vec<ModelRow>,
    tools: Vec<ToolRow>,
    /// Each `agent` call: the role asked for, and whether a subagent started.
    delegations: Vec<(String, bool)>,
}

fn build_report(by: GroupBy, run: Option<&str>, rows: &Rows) -> Report {
    let key = |run: &str, episode: &str, model: &str, agent: &str| match by {
        GroupBy::Run => run.to_owned(),
        GroupBy::Episode => format!("{run}/{episode}"),
        GroupBy::Model | GroupBy::Tool => model.to_owned(),
        GroupBy::Agent => agent.to_owned(),
    };
    let mut groups: BTreeMap<String, Acc> = BTreeMap::new();
    let mut total = Acc::default();
    for ep in &rows.episodes {
        let id = (ep.run.clone(), ep.episode.clone());
        if by != GroupBy::Tool {
            groups
                .entry(key(&ep.run, &ep.episode, &ep.model, &ep.agent))
                .or_default()
                .episodes
                .insert(id.clone());
        }
        total.episodes.insert(id);
    }
    if by == GroupBy::Agent {
        for (role, started) in &rows.delegations {
            let group = groups.entry(role.clone()).or_default();
            for acc in [&mut total, group] {
                if *started {
                    acc.delegations.started += 1;
                } else {
                    acc.delegations.refused += 1;
                }
            }
        }
    }
    for row in &rows.models {
        if by != GroupBy::Tool {
            let group = groups
                .entry(key(&row.run, &row.episode, &row.model, &row.agent))
                .or_default();
            group
                .episodes
                .insert((row.run.clone(), row.episode.clone()));
            group.add_model_call(row);
        }
        total.add_model_call(row);
    }
    for row in &rows.tools {
        let k = match by {
            GroupBy::Tool => row.tool.clone(),
            _ => key(&row.run, &row.episode, &row.episode_model, &row.agent),
        };
        let group = groups.entry(k).or_default();
        group
            .episodes
            .insert((row.run.clone(), row.episode.clone()));
        for acc in [&mut total, group] {
            acc.tools.denials += row.denials;
            acc.tools.lost_records += row.lost_records;
            if row.check {
                continue;
            }
            acc.tools.calls += 1;
            match row.state.as_deref() {
                Some("completed") => acc.tools.completed += 1,
                Some("could_not_run") => acc.tools.could_not_run += 1,
                Some("failed") => acc.tools.failed += 1,
                _ => acc.tools.unfinished += 1,
            }
            if row.state.is_some() {
                acc.durations.extend(row.duration_ms);
            }
        }
    }
    Report {
        by,
        run: run.map(str::to_owned),
        groups: groups
            .into_iter()
            .map(|(key, acc)| Group {
                key,
                stats: acc.finish(by != GroupBy::Tool, by == GroupBy::Agent),
            })
            .collect(),
        total: total.finish(true, by == GroupBy::Agent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_small_samples() {
        assert_eq!(nearest_rank(&[], 50), None);
        assert_eq!(nearest_rank(&[7], 50), Some(7));
        assert_eq!(nearest_rank(&[7], 95), Some(7));
        assert_eq!(nearest_rank(&[3, 9], 50), Some(3));
        assert_eq!(nearest_rank(&[3, 9], 95), Some(9));
        assert_eq!(nearest_rank(&[1, 2, 3], 50), Some(2));
    }

    #[test]
    fn nearest_rank_hundred_samples() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 50), Some(50));
        assert_eq!(nearest_rank(&v, 95), Some(95));
        assert_eq!(nearest_rank(&v, 100), Some(100));
        assert_eq!(nearest_rank(&v, 0), Some(1));
        let v: Vec<u64> = (1..=20).collect();
        assert_eq!(nearest_rank(&v, 95), Some(19));
        let v: Vec<u64> = (1..=21).collect();
        assert_eq!(nearest_rank(&v, 95), Some(20));
    }

    #[test]
    fn percentiles_sort_their_input() {
        let p = Percentiles::of(vec![900, 100, 500, 300, 700]);
        assert_eq!(p.samples, 5);
        assert_eq!(p.p50, Some(500));
        assert_eq!(p.p95, Some(900));
    }
}
