//! What a model costs and how much it reads: a small built-in table
//! (prices in USD per million tokens as the providers published them on
//! [`TABLE_DATE`]), which the policy file's `[llm.models]` overrides or
//! extends. The context window sizes output limiting, as llmist's model
//! registry does.

use serde::Serialize;

/// When the built-in prices were read from the providers' price pages.
pub const TABLE_DATE: &str = "2025-10-01";

/// A model's prices and context window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModelInfo {
    /// USD per million input tokens.
    pub input_per_mtok: f64,
    /// USD per million output tokens.
    pub output_per_mtok: f64,
    /// Tokens the model reads at most.
    pub context_window: u64,
}

impl ModelInfo {
    /// What `usage` cost, in USD.
    pub fn cost(&self, usage: crate::provider::Usage) -> f64 {
        (usage.input_tokens as f64 * self.input_per_mtok
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1e6
    }
}

/// The built-in table: (provider, model name or prefix, info). A model
/// matches the longest name it starts with, so dated snapshots
/// (`claude-sonnet-4-20250514`, `gpt-4o-2024-08-06`) price as their family.
const BUILT_IN: &[(&str, &str, ModelInfo)] = &[
    ("openai", "gpt-4o", info(2.50, 10.00, 128_000)),
    ("openai", "gpt-4o-mini", info(0.15, 0.60, 128_000)),
    ("openai", "gpt-4.1", info(2.00, 8.00, 1_047_576)),
    ("openai", "gpt-4.1-mini", info(0.40, 1.60, 1_047_576)),
    ("openai", "gpt-4.1-nano", info(0.10, 0.40, 1_047_576)),
    ("openai", "gpt-5", info(1.25, 10.00, 400_000)),
    ("openai", "gpt-5-mini", info(0.25, 2.00, 400_000)),
    ("openai", "gpt-5-nano", info(0.05, 0.40, 400_000)),
    ("openai", "o3", info(2.00, 8.00, 200_000)),
    ("openai", "o4-mini", info(1.10, 4.40, 200_000)),
    ("anthropic", "claude-opus-4", info(15.00, 75.00, 200_000)),
    ("anthropic", "claude-sonnet-4", info(3.00, 15.00, 200_000)),
    ("anthropic", "claude-haiku-4-5", info(1.00, 5.00, 200_000)),
    ("anthropic", "claude-3-7-sonnet", info(3.00, 15.00, 200_000)),
    ("anthropic", "claude-3-5-haiku", info(0.80, 4.00, 200_000)),
];

/// Shortcuts a person types for a model (llmist resolves the same kind):
/// a family's name for its current model, at its provider.
const SHORTCUTS: &[(&str, &str)] = &[
    ("haiku", "anthropic:claude-haiku-4-5"),
    ("sonnet", "anthropic:claude-sonnet-4-5"),
    ("opus", "anthropic:claude-opus-4-1"),
    ("gpt4o", "openai:gpt-4o"),
    ("gpt5", "openai:gpt-5"),
    ("mini", "openai:gpt-5-mini"),
    ("nano", "openai:gpt-5-nano"),
];

/// `PROVIDER:MODEL` for what a person typed: a shortcut (`haiku`), a bare
/// model name whose provider its name tells (`gpt-4o-mini`, `o3`,
/// `claude-sonnet-4-5`), or `PROVIDER:MODEL` as given. `None`: a bare name
/// whose provider cannot be told.
pub fn resolve_model(typed: &str) -> Option<String> {
    let typed = typed.trim();
    if typed.contains(':') {
        return Some(typed.to_string());
    }
    let lower = typed.to_ascii_lowercase();
    if let Some((_, model)) = SHORTCUTS.iter().find(|(short, _)| *short == lower) {
        return Some(model.to_string());
    }
    let openai = ["gpt-", "chatgpt-", "o1", "o3", "o4"];
    if openai.iter().any(|prefix| lower.starts_with(prefix)) {
        return Some(format!("openai:{typed}"));
    }
    if lower.starts_with("claude-") {
        return Some(format!("anthropic:{typed}"));
    }
    None
}

const fn info(input_per_mtok: f64, output_per_mtok: f64, context_window: u64) -> ModelInfo {
    ModelInfo {
        input_per_mtok,
        output_per_mtok,
        context_window,
    }
}

/// The table in use: overrides (from the policy file) first, then the
/// built-in rows.
#[derive(Debug, Clone, Default)]
pub struct ModelTable {
    /// Keyed by `provider:model` or `model`, as the policy file writes them.
    overrides: Vec<(String, ModelInfo)>,
}

impl ModelTable {
    pub fn with_overrides(overrides: impl IntoIterator<Item = (String, ModelInfo)>) -> ModelTable {
        ModelTable {
            overrides: overrides.into_iter().collect(),
        }
    }

    /// The info for `model` of `provider`: an override for exactly
    /// `provider:model` or `model`, else the built-in row with the longest
    /// matching prefix, else none (tokens are counted, not priced).
    pub fn lookup(&self, provider: &str, model: &str) -> Option<ModelInfo> {
        let qualified = format!("{provider}:{model}");
        if let Some((_, info)) = self
            .overrides
            .iter()
            .find(|(key, _)| *key == qualified || key == model)
        {
            return Some(*info);
        }
        BUILT_IN
            .iter()
            .filter(|(p, name, _)| *p == provider && matches_family(model, name))
            .max_by_key(|(_, name, _)| name.len())
            .map(|(_, _, info)| *info)
    }
}

/// `model` is `name` or a snapshot of it (`name-2024-08-06`, `name-20250514`,
/// `name-latest`), not a different family that shares a prefix.
fn matches_family(model: &str, name: &str) -> bool {
    match model.strip_prefix(name) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('-')
            .is_some_and(|tail| tail == "latest" || tail.starts_with(|c: char| c.is_ascii_digit())),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortcuts_and_bare_names_resolve_to_a_provider() {
        let resolved = |typed| resolve_model(typed);
        assert_eq!(
            resolved("haiku").as_deref(),
            Some("anthropic:claude-haiku-4-5")
        );
        assert_eq!(
            resolved("Sonnet").as_deref(),
            Some("anthropic:claude-sonnet-4-5")
        );
        assert_eq!(
            resolved("gpt-4o-mini").as_deref(),
            Some("openai:gpt-4o-mini")
        );
        assert_eq!(resolved("o4-mini").as_deref(), Some("openai:o4-mini"));
        assert_eq!(
            resolved("claude-3-5-haiku-20241022").as_deref(),
            Some("anthropic:claude-3-5-haiku-20241022")
        );
        assert_eq!(
            resolved("openai:llama3.2").as_deref(),
            Some("openai:llama3.2")
        );
        assert_eq!(resolved("llama3.2"), None);
        // Every shortcut names a model the table prices.
        for (short, model) in SHORTCUTS {
            let (provider, name) = model.split_once(':').unwrap();
            assert!(
                ModelTable::default().lookup(provider, name).is_some(),
                "{short}"
            );
        }
    }
    use crate::provider::Usage;

    #[test]
    fn snapshots_price_as_their_family_and_overrides_win() {
        let table = ModelTable::default();
        let mini = table.lookup("openai", "gpt-4o-mini-2024-07-18").unwrap();
        assert_eq!(mini.input_per_mtok, 0.15);
        assert_eq!(
            table.lookup("openai", "gpt-4o").unwrap().input_per_mtok,
            2.50
        );
        let sonnet = table
            .lookup("anthropic", "claude-sonnet-4-20250514")
            .unwrap();
        assert_eq!(sonnet.output_per_mtok, 15.0);
        assert_eq!(table.lookup("openai", "llama3.2"), None);
        assert_eq!(table.lookup("anthropic", "gpt-4o"), None);
        let table =
            ModelTable::with_overrides([("openai:llama3.2".to_string(), info(0.0, 0.0, 8192))]);
        assert_eq!(
            table.lookup("openai", "llama3.2").unwrap().context_window,
            8192
        );
        let cost = sonnet.cost(Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
        });
        assert!((cost - 4.5).abs() < 1e-9, "{cost}");
    }
}
