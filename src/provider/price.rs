//! What a response cost: token counts times prices in USD per million tokens.
//!
//! bee ships a small table ([`SHIPPED`], `src/provider/prices.toml`, each provider's block
//! naming its source and date); a provider file's `[prices]` overrides it for its model. A
//! model with no price has [`Cost::Unknown`] — never $0.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Usage;

/// The shipped price table, TOML.
pub const SHIPPED: &str = include_str!("prices.toml");

/// Prices of one model, in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Prompt tokens read from the prompt cache; the input price when absent.
    pub cached_input: Option<f64>,
    /// Generated tokens.
    pub output: f64,
    /// Reasoning tokens; the output price when absent.
    pub reasoning: Option<f64>,
}

impl Price {
    /// Checks that every price is a finite number ≥ 0.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("input", Some(self.input)),
            ("cached_input", self.cached_input),
            ("output", Some(self.output)),
            ("reasoning", self.reasoning),
        ] {
            if let Some(v) = v
                && (!v.is_finite() || v < 0.0)
            {
                return Err(format!("prices.{name} = {v} is not a price ≥ 0"));
            }
        }
        Ok(())
    }

    /// The cost of `usage` in USD: uncached input × input + cached × cached_input +
    /// (output − reasoning) × output + reasoning × reasoning, each per million tokens.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let m = |tokens: u64, per_million: f64| tokens as f64 * per_million / 1_000_000.0;
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let reasoning = usage.reasoning_tokens.min(usage.output_tokens);
        m(usage.input_tokens - cached, self.input)
            + m(cached, self.cached_input.unwrap_or(self.input))
            + m(usage.output_tokens - reasoning, self.output)
            + m(reasoning, self.reasoning.unwrap_or(self.output))
    }
}

/// The cost of a response.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Cost {
    /// Known, in USD.
    Usd {
        /// The amount in US dollars.
        usd: f64,
    },
    /// No price is known for this model.
    Unknown {
        /// The model that had no price.
        model: String,
    },
}

impl Cost {
    /// The sum of two costs; unknown if either is (naming the first model without a price).
    #[must_use]
    pub fn plus(&self, other: &Cost) -> Cost {
        match (self, other) {
            (Self::Usd { usd: a }, Self::Usd { usd: b }) => Self::Usd { usd: a + b },
            (Self::Unknown { .. }, _) => self.clone(),
            (_, Self::Unknown { .. }) => other.clone(),
        }
    }

    /// The amount, when known.
    pub fn usd(&self) -> Option<f64> {
        match self {
            Self::Usd { usd } => Some(*usd),
            Self::Unknown { .. } => None,
        }
    }
}

impl std::fmt::Display for Cost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Usd { usd } => write!(f, "${usd:.4}"),
            Self::Unknown { model } => write!(f, "unknown (no price for model {model:?})"),
        }
    }
}

/// Where a price came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum PriceSource {
    /// The shipped table: its `source` note and `as_of` date.
    Shipped {
        /// Where the numbers were read.
        source: String,
        /// When (`YYYY-MM`).
        as_of: String,
    },
    /// A provider file's `[prices]`.
    Override,
}

/// Prices by model name.
#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    models: BTreeMap<String, (Price, PriceSource)>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Block {
    source: String,
    as_of: String,
    models: BTreeMap<String, Price>,
}

impl PriceTable {
    /// The shipped table.
    ///
    /// # Errors
    /// The TOML error if the shipped file is malformed (a test keeps it well-formed).
    pub fn shipped() -> Result<Self, toml::de::Error> {
        let blocks: BTreeMap<String, Block> = toml::from_str(SHIPPED)?;
        let mut table = Self::default();
        for block in blocks.into_values() {
            for (model, price) in block.models {
                let source = PriceSource::Shipped {
                    source: block.source.clone(),
                    as_of: block.as_of.clone(),
                };
                table.models.insert(model, (price, source));
            }
        }
        Ok(table)
    }

    /// Sets (or replaces) the price of `model`.
    pub fn set(&mut self, model: &str, price: Price) {
        self.models
            .insert(model.to_owned(), (price, PriceSource::Override));
    }

    /// The price of `model` and where it came from: an exact match, else the entry `model`
    /// is a dated snapshot of (`gpt-4.1-2025-04-14` → `gpt-4.1`,
    /// `claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`).
    pub fn lookup(&self, model: &str) -> Option<&(Price, PriceSource)> {
        if let Some(p) = self.models.get(model) {
            return Some(p);
        }
        self.models.iter().find_map(|(name, p)| {
            let rest = model.strip_prefix(name.as_str())?.strip_prefix('-')?;
            let dated = !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == '-');
            dated.then_some(p)
        })
    }

    /// The cost of `usage` for `model`.
    pub fn cost(&self, model: &str, usage: &Usage) -> Cost {
        match self.lookup(model) {
            Some((price, _)) => Cost::Usd {
                usd: price.cost(usage),
            },
            None => Cost::Unknown {
                model: model.to_owned(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_table_parses_and_prices_are_sane() {
        let t = PriceTable::shipped().unwrap();
        for model in [
            "gpt-5",
            "gpt-4.1-mini",
            "claude-sonnet-4-5",
            "claude-haiku-4-5",
        ] {
            let (p, source) = t.lookup(model).unwrap();
            p.check().unwrap();
            assert!(matches!(source, PriceSource::Shipped { .. }));
        }
    }

    #[test]
    fn cost_splits_cached_and_reasoning() {
        let p = Price {
            input: 2.0,
            cached_input: Some(0.5),
            output: 8.0,
            reasoning: Some(16.0),
        };
        let u = Usage {
            input_tokens: 1_000_000,
            cached_input_tokens: 400_000,
            output_tokens: 100_000,
            reasoning_tokens: 50_000,
        };
        let usd = p.cost(&u);
        // 0.6M×2 + 0.4M×0.5 + 0.05M×8 + 0.05M×16
        assert!((usd - (1.2 + 0.2 + 0.4 + 0.8)).abs() < 1e-9, "{usd}");
    }

    #[test]
    fn an_unknown_cost_absorbs_known_ones() {
        let known = Cost::Usd { usd: 1.5 };
        let unknown = Cost::Unknown { model: "m".into() };
        assert_eq!(known.plus(&known).usd(), Some(3.0));
        assert_eq!(known.plus(&unknown), unknown);
        assert_eq!(unknown.plus(&known), unknown);
    }

    #[test]
    fn dated_snapshots_match_unknown_models_do_not() {
        let mut t = PriceTable::shipped().unwrap();
        assert!(t.lookup("gpt-4.1-2025-04-14").is_some());
        assert!(t.lookup("claude-sonnet-4-5-20250929").is_some());
        assert!(t.lookup("gpt-4.1-turbo").is_none());
        let c = t.cost("llama3.1:8b", &Usage::default());
        assert_eq!(
            c,
            Cost::Unknown {
                model: "llama3.1:8b".into()
            }
        );
        assert!(c.to_string().contains("llama3.1:8b"));
        t.set(
            "llama3.1:8b",
            Price {
                input: 0.0,
                cached_input: None,
                output: 0.0,
                reasoning: None,
            },
        );
        assert_eq!(
            t.cost("llama3.1:8b", &Usage::default()),
            Cost::Usd { usd: 0.0 }
        );
    }
}
