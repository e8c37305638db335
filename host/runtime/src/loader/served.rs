//! Which of a plugin's gadgets are served, and how: each spec's name
//! (with the operator's prefix), its schema and examples, the operator's
//! rules by the served name, its own limits, and the exclusive group.

use std::collections::HashSet;
use std::sync::Arc;

use gadget_core::limits::{LimitCeilings, Limits};
use gadget_core::tool::ToolCard;

use crate::GadgetSpec;
use crate::manifest::Manifest;
use crate::plugin::{LoadFailure, LoadedGadget, RefusedGadget};
use crate::policy::GadgetRules;
use crate::specs::{
    MAX_GADGET_NAME_BYTES, MAX_GADGETS_PER_COMPONENT, MAX_SPECS_TOTAL_BYTES, check_spec,
    spec_text_bytes,
};

/// What decides which of a plugin's gadgets are served, and how.
pub(super) struct Served<'a> {
    pub(super) manifest: &'a Manifest,
    pub(super) limits: &'a Limits,
    pub(super) prefix: Option<&'a str>,
    pub(super) run_exclusive: bool,
    pub(super) gadget_rules: &'a GadgetRules,
    pub(super) ceilings: &'a LimitCeilings,
}

/// The gadgets served, those refused, those the operator denies.
type Gadgets = (
    Vec<LoadedGadget>,
    Vec<RefusedGadget>,
    Vec<(String, crate::policy::DenyRule)>,
);

impl Served<'_> {
    /// Checks the specs as a whole, then each: its name (prefixed), its
    /// schema and examples, the operator's rules, its own limits.
    pub(super) fn gadgets(
        &self,
        specs: Vec<GadgetSpec>,
        warnings: &mut Vec<String>,
    ) -> Result<Gadgets, LoadFailure> {
        if specs.is_empty() {
            return Err(LoadFailure::NoGadgets);
        }
        if specs.len() > MAX_GADGETS_PER_COMPONENT {
            return Err(LoadFailure::TooManyGadgets { count: specs.len() });
        }
        let total: usize = specs.iter().map(spec_text_bytes).sum();
        if total > MAX_SPECS_TOTAL_BYTES {
            return Err(LoadFailure::SpecsTooLarge { bytes: total });
        }
        let mut gadgets: Vec<LoadedGadget> = Vec::new();
        let mut refused = Vec::new();
        let mut denied = Vec::new();
        let mut seen = HashSet::new();
        for mut spec in specs {
            let component_name = spec.name.clone();
            if let Some(prefix) = self.prefix {
                spec.name = format!("{prefix}{}", spec.name);
            }
            let checked = check_spec(&spec).and_then(|schema| {
                if gadget_core::viewer::is_reserved(&spec.name) {
                    return Err(format!(
                        "'{}' is the name of a tool built into the host; a plugin cannot serve it",
                        spec.name
                    ));
                }
                if !seen.insert(spec.name.to_lowercase()) {
                    return Err("the component declares this name twice (names are compared case-insensitively)".into());
                }
                Ok(schema)
            });
            // The operator's rules, by the name the gadget is served under.
            if checked.is_ok()
                && let Err(rule) = self.gadget_rules.check(&spec.name)
            {
                denied.push((spec.name.clone(), rule));
                continue;
            }
            match checked {
                Ok(schema) => {
                    gadgets.push(self.gadget(spec, component_name, schema, warnings));
                }
                Err(reason) => refused.push(refusal(&spec.name, reason)),
            }
        }
        // `[tasks]` names gadgets by the component's own names.
        let tasks = &self.manifest.tasks;
        for name in tasks.optional.iter().chain(&tasks.required) {
            if !gadgets
                .iter()
                .any(|g| g.component_name.eq_ignore_ascii_case(name))
            {
                warnings.push(format!(
                    "the manifest's [tasks] names '{name}', which this plugin does not serve"
                ));
            }
        }
        // A plugin whose every gadget the operator denies still loads (with
        // nothing to serve): that is the operator's choice, not an error.
        if gadgets.is_empty() && denied.is_empty() {
            return Err(LoadFailure::EveryGadgetRefused(refused));
        }
        // A plugin with an exclusive gadget has its calls counted as a
        // group, so that gadget waits for (and holds) the plugin's calls
        // only.
        if !self.run_exclusive && gadgets.iter().any(|g| g.card.spec.exclusive) {
            let group: Arc<str> = self.manifest.name.as_str().into();
            for gadget in &mut gadgets {
                gadget.card.group = Some(group.clone());
            }
        }
        Ok((gadgets, refused, denied))
    }

    /// One served gadget, with its own limits.
    fn gadget(
        &self,
        spec: GadgetSpec,
        component_name: String,
        schema: gadget_core::params::ParamSchema,
        warnings: &mut Vec<String>,
    ) -> LoadedGadget {
        let own_timeout = self.ceilings.own_timeout(
            self.limits,
            self.manifest.limits.timeout_ms,
            spec.timeout_ms,
        );
        let gadget_limits = Limits {
            timeout: own_timeout.duration().unwrap_or(self.limits.timeout),
            ..self.limits.clone()
        };
        // An exclusive gadget the operator lets hold the whole run is
        // bounded only by its timeout, so one that chose a long one is
        // worth a word.
        if spec.exclusive
            && self.run_exclusive
            && gadget_limits.timeout > gadget_core::limits::DEFAULT_TIMEOUT
        {
            warnings.push(format!(
                "gadget '{}' is exclusive: while it runs, no other call starts, for up to its timeout of {} ms",
                spec.name,
                gadget_limits.timeout.as_millis()
            ));
        }
        LoadedGadget {
            card: ToolCard::new(spec, schema, own_timeout),
            component_name,
            limits: gadget_limits,
        }
    }
}

/// A gadget refused, its name shown bounded.
fn refusal(name: &str, reason: String) -> RefusedGadget {
    let shown: String = name.chars().take(MAX_GADGET_NAME_BYTES).collect();
    let cut = if shown.len() < name.len() { "…" } else { "" };
    RefusedGadget {
        gadget: format!("{shown}{cut}"),
        reason,
    }
}
