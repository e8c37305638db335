//! Every loaded gadget, by name: the [`Registry`] the loader fills and the
//! executor, `gadget call` and the servers look tools up in. Names are
//! unique across all plugins, compared case-insensitively as llmist does.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use gadget_core::params::ValidationFailure;
use gadget_core::render;
use gadget_core::tool::{Tool, Tools};

use crate::gadget::WasmGadget;
use crate::plugin::{LoadError, LoadFailure, LoadedGadget, Plugin, Standing};
use crate::policy::DenyRule;
use crate::{CallObserver, CallReport};

/// Why a call was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallRejected {
    #[error("{}{}", render::unknown_gadget(name, available), failed_note(*failed_plugins))]
    UnknownGadget {
        name: String,
        available: Vec<String>,
        /// Plugins that failed to load: one of them may have served it.
        failed_plugins: usize,
    },
    #[error("gadget '{name}' is {rule}")]
    Denied { name: String, rule: DenyRule },
    #[error("{0}")]
    InvalidParameters(ValidationFailure),
}

fn failed_note(failed_plugins: usize) -> String {
    match failed_plugins {
        0 => String::new(),
        n => format!(
            "\n\n{n} plugin(s) failed to load (their errors were reported at start-up): one of them may serve it."
        ),
    }
}

/// Every loaded gadget, by name.
#[derive(Debug, Default)]
pub struct Registry {
    plugins: Vec<Arc<Plugin>>,
    /// Keyed by the lower-cased name.
    gadgets: BTreeMap<String, Arc<WasmGadget>>,
    /// Gadgets the operator's rules do not serve, and names more than one
    /// plugin claims, by lower-cased name: the served name and the rule.
    denied: BTreeMap<String, (String, DenyRule)>,
    /// Names more than one plugin claims, by lower-cased name: the plugins,
    /// and the standing they share (a stronger claim takes the name).
    contested: BTreeMap<String, (Vec<String>, Standing)>,
    /// Every plugin name added, with where it came from (also of plugins
    /// that lost all their gadgets to collisions).
    plugin_names: BTreeMap<String, std::path::PathBuf>,
    /// Plugins found that did not load.
    failed_plugins: usize,
    /// What a plugin serves of its catalog when another plugin lists some
    /// of the same entries (`claims.rs`), by plugin name; a plugin absent
    /// here serves its whole catalog.
    catalog_served: std::collections::HashMap<String, gadget_core::catalog::CatalogSpecs>,
}

impl Registry {
    pub fn plugins(&self) -> &[Arc<Plugin>] {
        &self.plugins
    }

    /// Settles which plugin serves each resource, template and prompt
    /// that more than one lists: one error per entry a plugin lost.
    pub(crate) fn resolve_catalog_claims(&mut self) -> Vec<LoadError> {
        let (served, errors) = crate::claims::resolve(&self.plugins);
        self.catalog_served = served;
        errors
    }

    /// Notes how many plugins were found but did not load.
    pub(crate) fn set_failed_plugins(&mut self, count: usize) {
        self.failed_plugins = count;
    }

    /// How many plugins were found but did not load.
    pub fn failed_plugins(&self) -> usize {
        self.failed_plugins
    }

    /// Whether a plugin of this name was loaded (even one that lost every
    /// gadget to a name collision).
    pub fn has_plugin(&self, name: &str) -> bool {
        self.plugin_names.contains_key(name)
    }

    /// Gadgets in name order.
    pub fn gadgets(&self) -> impl Iterator<Item = &Arc<WasmGadget>> {
        self.gadgets.values()
    }

    /// Finds a gadget, case-insensitively.
    pub fn get(&self, name: &str) -> Option<&Arc<WasmGadget>> {
        // Every call looks its gadget up: a short ASCII name is lower-cased
        // on the stack (the same as `to_lowercase` for ASCII).
        let mut buffer = [0u8; 64];
        if name.is_ascii() && name.len() <= buffer.len() {
            let lowered = &mut buffer[..name.len()];
            lowered.copy_from_slice(name.as_bytes());
            lowered.make_ascii_lowercase();
            if let Ok(lowered) = std::str::from_utf8(lowered) {
                return self.gadgets.get(lowered);
            }
        }
        self.gadgets.get(&name.to_lowercase())
    }

    /// The names offered to models and clients (available gadgets), in
    /// name order: what the prompt, `tools/list` and "not found" list.
    pub fn names(&self) -> Vec<String> {
        self.available().map(|g| g.card.spec.name.clone()).collect()
    }

    /// Gadgets that can be called now (loaded, and their plugin has every
    /// grant it asks for), in name order: what models and clients are offered.
    pub fn available(&self) -> impl Iterator<Item = &Arc<WasmGadget>> {
        self.gadgets.values().filter(|g| g.plugin.is_available())
    }

    /// Why `name` cannot be called: denied by the operator, or unknown.
    pub fn rejection(&self, name: &str) -> CallRejected {
        match self.denied.get(&name.to_lowercase()) {
            Some((name, rule)) => CallRejected::Denied {
                name: name.clone(),
                rule: rule.clone(),
            },
            None => CallRejected::UnknownGadget {
                name: name.to_string(),
                available: self.names(),
                failed_plugins: self.failed_plugins,
            },
        }
    }

    /// Looks the gadget up and validates the parameters (defaults filled in).
    pub fn prepare(
        &self,
        name: &str,
        params: Value,
    ) -> Result<(Arc<WasmGadget>, Value), CallRejected> {
        let gadget = self.get(name).ok_or_else(|| self.rejection(name))?;
        let params = gadget_core::tool::prepare(&**gadget, params)
            .map_err(CallRejected::InvalidParameters)?;
        Ok((gadget.clone(), params))
    }

    /// Validates and runs one call in a fresh instance.
    pub async fn call(
        &self,
        name: &str,
        params: Value,
        invocation_id: &str,
        observer: Option<CallObserver>,
    ) -> Result<CallReport, CallRejected> {
        let (gadget, params) = self.prepare(name, params)?;
        Ok(gadget
            .invoke(params.to_string(), invocation_id, observer)
            .await)
    }

    /// Adds a plugin and its gadgets. A plugin whose name is taken is
    /// refused whole. A gadget name two plugins claim is served by neither:
    /// whichever sorts first must not silently answer for the other (a
    /// third-party plugin would take a shipped gadget's name, and its
    /// calls). Each refusal is one error naming both sides and the way out
    /// (a prefix in the policy); the rest of each plugin loads, and a call
    /// to the name says why it is not served.
    pub(crate) fn insert(
        &mut self,
        plugin: Arc<Plugin>,
        gadgets: Vec<LoadedGadget>,
    ) -> Vec<LoadError> {
        if let Some(other) = self.plugin_names.get(&plugin.identity.name) {
            return vec![LoadError::new(
                plugin.artifact.source.path(),
                LoadFailure::PluginNameTaken {
                    plugin: plugin.identity.name.clone(),
                    other: other.clone(),
                },
            )];
        }
        self.plugin_names.insert(
            plugin.identity.name.clone(),
            plugin.artifact.source.path().to_path_buf(),
        );
        for (name, rule) in &plugin.report.denied {
            self.denied
                .insert(name.to_lowercase(), (name.clone(), rule.clone()));
        }
        let mut errors = Vec::new();
        let mut took_from_earlier = false;
        for LoadedGadget {
            card,
            component_name,
            limits,
        } in gadgets
        {
            let key = card.spec.name.to_lowercase();
            let gadget = WasmGadget {
                card,
                component_name,
                plugin: plugin.clone(),
                limits,
            };
            took_from_earlier |= self.place(key, gadget, &plugin, &mut errors);
        }
        // A plugin none of whose gadgets could be served is not loaded (an
        // earlier one may have lost its last gadget to a collision).
        if took_from_earlier {
            let gadgets = &self.gadgets;
            self.plugins
                .retain(|p| gadgets.values().any(|g| Arc::ptr_eq(&g.plugin, p)));
        }
        if self
            .gadgets
            .values()
            .any(|g| Arc::ptr_eq(&g.plugin, &plugin))
        {
            self.plugins.push(plugin);
        }
        errors
    }

    /// Places one gadget of `plugin` under `key`: a stronger claim
    /// (signed by a trusted signer, or named by the policy) takes the name
    /// from weaker ones; equals share it, so neither serves it. Whether it
    /// took the name from an earlier plugin.
    fn place(
        &mut self,
        key: String,
        gadget: WasmGadget,
        plugin: &Arc<Plugin>,
        errors: &mut Vec<LoadError>,
    ) -> bool {
        let mut took = false;
        // A stronger claim (signed by a trusted signer, or named by the
        // policy) takes the name from weaker ones; equals share it, so
        // neither serves it.
        let held = self.gadgets.get(&key).map(|g| g.plugin.clone());
        let contested = self.contested.get(&key).map(|(_, standing)| *standing);
        let strongest = held.as_ref().map(|p| p.standing).or(contested);
        match strongest {
            None => {
                self.gadgets.insert(key, Arc::new(gadget));
                return false;
            }
            Some(other) if plugin.standing > other => {
                if let Some(held) = held {
                    errors.push(held_error(&gadget.card.spec.name, &held, plugin));
                    took = true;
                }
                if let Some((claimants, _)) = self.contested.remove(&key) {
                    for claimant in claimants {
                        errors.push(LoadError::new(
                            plugin.artifact.source.path(),
                            LoadFailure::NameHeld {
                                gadget: gadget.card.spec.name.clone(),
                                plugin: claimant,
                                winner: plugin.identity.name.clone(),
                                winner_standing: plugin.standing.describe(),
                            },
                        ));
                    }
                    self.denied.remove(&key);
                }
                self.gadgets.insert(key, Arc::new(gadget));
                return took;
            }
            Some(other) if plugin.standing < other => {
                match &held {
                    Some(held) => errors.push(held_error(&gadget.card.spec.name, plugin, held)),
                    // A contested name stays contested among its equals.
                    None => errors.push(LoadError::new(
                        plugin.artifact.source.path(),
                        LoadFailure::GadgetRefused(crate::plugin::RefusedGadget {
                            gadget: gadget.card.spec.name.clone(),
                            reason: format!(
                                "plugins {} claim the name, each {}, which plugin '{}' is not",
                                self.contested
                                    .get(&key)
                                    .map(|(c, _)| c.join(", "))
                                    .unwrap_or_default(),
                                other.describe(),
                                plugin.identity.name
                            ),
                        }),
                    )),
                }
                return false;
            }
            Some(_) => {}
        }
        let spec = gadget.card.spec;
        let first = self.gadgets.remove(&key).map(|g| g.plugin.clone());
        let (claimants, _) = self
            .contested
            .entry(key.clone())
            .or_insert_with(|| (Vec::new(), plugin.standing));
        if let Some(first) = &first {
            claimants.push(first.identity.name.clone());
            took = true;
        }
        claimants.push(plugin.identity.name.clone());
        let rule = DenyRule::Contested {
            plugins: claimants.clone(),
        };
        let reason = LoadFailure::NameContested {
            gadget: spec.name.clone(),
            first: first.as_ref().map(|first| {
                Box::new((
                    first.identity.name.clone(),
                    first.artifact.source.path().to_path_buf(),
                ))
            }),
            plugin: plugin.identity.name.clone(),
            claimants: claimants.clone(),
        };
        errors.push(LoadError::new(plugin.artifact.source.path(), reason));
        self.denied.insert(key, (spec.name, rule));
        took
    }
}

/// The gadget `name` of `loser` is not served: `winner` has the stronger claim.
fn held_error(name: &str, loser: &Plugin, winner: &Plugin) -> LoadError {
    LoadError::new(
        loser.artifact.source.path(),
        LoadFailure::NameHeld {
            gadget: name.to_string(),
            plugin: loser.identity.name.clone(),
            winner: winner.identity.name.clone(),
            winner_standing: winner.standing.describe(),
        },
    )
}

impl Tools for Registry {
    /// Any loaded gadget, offered or not: a direct call (`gadget call`,
    /// a client that knows the name) runs it, and fails at the door it
    /// lacks, saying what to grant.
    fn find(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.get(name).map(|g| g.clone() as Arc<dyn Tool>)
    }

    /// What models and clients are offered: available gadgets only.
    fn all(&self) -> Vec<Arc<dyn Tool>> {
        self.available()
            .map(|g| g.clone() as Arc<dyn Tool>)
            .collect()
    }

    fn names(&self) -> Vec<String> {
        Registry::names(self)
    }

    fn refusal(&self, name: &str) -> String {
        self.rejection(name).to_string()
    }

    /// The catalogs of the plugins that are offered (granted what they
    /// ask for), in load order.
    fn catalogs(&self) -> Vec<Arc<dyn gadget_core::catalog::Catalog>> {
        self.plugins
            .iter()
            .filter(|p| !p.catalog.is_empty() && p.is_available())
            .map(|p| {
                let gadgets = self
                    .gadgets
                    .values()
                    .filter(|g| Arc::ptr_eq(&g.plugin, p))
                    .map(|g| g.card.spec.name.clone())
                    .collect();
                let specs = self
                    .catalog_served
                    .get(&p.identity.name)
                    .unwrap_or(&p.catalog)
                    .clone();
                Arc::new(crate::catalog::PluginCatalog {
                    plugin: p.clone(),
                    specs,
                    gadgets,
                }) as Arc<dyn gadget_core::catalog::Catalog>
            })
            .collect()
    }
}
