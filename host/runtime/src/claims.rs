//! Which plugin serves a resource URI, a URI template or a prompt name
//! that more than one plugin lists: the rule gadget names have
//! (`registry.rs`). The stronger claim serves it (signed by a trusted
//! signer, then named by the policy, [`crate::plugin::Standing`]); between
//! equals neither does. Each entry a plugin loses is a load error naming the other
//! plugins and the way out, so `gadget check` fails on it; the rest of the
//! plugin's catalog is served.
//!
//! Two entries clash when a client could not tell which one it names: the
//! same prompt name, the same URI, a template that matches another
//! plugin's URI, or two templates that overlap (one matches a URI the
//! other's form produces). Resolved once, after every plugin is loaded,
//! so the outcome does not depend on the order plugins load in.

use std::collections::HashMap;
use std::sync::Arc;

use gadget_core::catalog::{CatalogSpecs, match_template};

use crate::plugin::{CatalogClash, LoadError, LoadFailure, Plugin};

/// One entry of a plugin's catalog, as clients name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Entry {
    Resource(String),
    Template(String),
    Prompt(String),
}

impl Entry {
    fn describe(&self) -> String {
        match self {
            Entry::Resource(uri) => format!("resource {uri}"),
            Entry::Template(template) => format!("resource template {template}"),
            Entry::Prompt(name) => format!("prompt '{name}'"),
        }
    }

    fn clashes(&self, other: &Entry) -> bool {
        match (self, other) {
            (Entry::Prompt(a), Entry::Prompt(b)) => a == b,
            (Entry::Resource(a), Entry::Resource(b)) => a == b,
            (Entry::Template(t), Entry::Resource(uri))
            | (Entry::Resource(uri), Entry::Template(t)) => match_template(t, uri).is_some(),
            (Entry::Template(a), Entry::Template(b)) => templates_overlap(a, b),
            _ => false,
        }
    }
}

/// Whether two URI templates can name one URI: the intersection of the
/// two patterns (a variable is any run of characters but `/`, as simple
/// expansion escapes one) is not empty. A walk over pairs of positions,
/// at most `(a.len() + 1) * (b.len() + 1)` of them.
fn templates_overlap(a: &str, b: &str) -> bool {
    let (a, b) = (tokens(a), tokens(b));
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![(0usize, 0usize)];
    while let Some((i, j)) = todo.pop() {
        if !seen.insert((i, j)) {
            continue;
        }
        // A variable may also match nothing more: skip it.
        if a.get(i) == Some(&Token::Var) {
            todo.push((i + 1, j));
        }
        if b.get(j) == Some(&Token::Var) {
            todo.push((i, j + 1));
        }
        if i == a.len() && j == b.len() {
            return true;
        }
        let (Some(x), Some(y)) = (a.get(i), b.get(j)) else {
            continue;
        };
        let next = |token: &Token, at: usize| match token {
            Token::Var => at,
            Token::Lit(_) => at + 1,
        };
        let step = match (x, y) {
            (Token::Lit(p), Token::Lit(q)) => p == q,
            (Token::Lit(c), Token::Var) | (Token::Var, Token::Lit(c)) => *c != '/',
            (Token::Var, Token::Var) => true,
        };
        if step {
            todo.push((next(x, i), next(y, j)));
        }
    }
    false
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Lit(char),
    Var,
}

fn tokens(template: &str) -> Vec<Token> {
    let mut out = Vec::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.extend(rest[..open].chars().map(Token::Lit));
        match rest[open..].find('}') {
            Some(close) => {
                out.push(Token::Var);
                rest = &rest[open + close + 1..];
            }
            None => {
                rest = &rest[open..];
                break;
            }
        }
    }
    out.extend(rest.chars().map(Token::Lit));
    out
}

fn entries(specs: &CatalogSpecs) -> Vec<Entry> {
    let resources = specs
        .resources
        .iter()
        .map(|r| Entry::Resource(r.uri.clone()));
    let templates = specs
        .templates
        .iter()
        .map(|t| Entry::Template(t.uri_template.clone()));
    let prompts = specs.prompts.iter().map(|p| Entry::Prompt(p.name.clone()));
    resources.chain(templates).chain(prompts).collect()
}

/// What each plugin serves of its catalog once clashes are resolved, by
/// plugin name (a plugin that serves it whole is absent), and the load
/// error of each entry a plugin lost.
pub(crate) fn resolve(plugins: &[Arc<Plugin>]) -> (HashMap<String, CatalogSpecs>, Vec<LoadError>) {
    let listed: Vec<(usize, Entry)> = plugins
        .iter()
        .enumerate()
        .flat_map(|(i, p)| entries(&p.catalog).into_iter().map(move |e| (i, e)))
        .collect();
    // Exact names find their rivals by hash; templates (few) are compared
    // with every other entry.
    let mut by_name: HashMap<&Entry, Vec<usize>> = HashMap::new();
    for (i, entry) in &listed {
        if !matches!(entry, Entry::Template(_)) {
            by_name.entry(entry).or_default().push(*i);
        }
    }
    let templates: Vec<&(usize, Entry)> = listed
        .iter()
        .filter(|(_, e)| matches!(e, Entry::Template(_)))
        .collect();
    let mut lost: HashMap<usize, Vec<Entry>> = HashMap::new();
    let mut errors = Vec::new();
    for (i, entry) in &listed {
        let mut rivals: Vec<usize> = by_name.get(entry).cloned().unwrap_or_default();
        // A template is compared with every URI and template, a URI with
        // every template; prompts were found by name.
        let compared: Vec<&(usize, Entry)> = match entry {
            Entry::Template(_) => listed
                .iter()
                .filter(|(_, e)| !matches!(e, Entry::Prompt(_)))
                .collect(),
            Entry::Resource(_) => templates.clone(),
            Entry::Prompt(_) => Vec::new(),
        };
        rivals.extend(
            compared
                .into_iter()
                .filter(|(j, other)| j != i && entry.clashes(other))
                .map(|(j, _)| *j),
        );
        rivals.retain(|j| j != i);
        rivals.sort_unstable();
        rivals.dedup();
        if rivals.is_empty() {
            continue;
        }
        let plugin = &plugins[*i];
        let strongest = rivals.iter().map(|&j| plugins[j].standing).max();
        let Some(strongest) = strongest.filter(|s| *s >= plugin.standing) else {
            continue;
        };
        let others: Vec<String> = rivals
            .iter()
            .filter(|&&j| plugins[j].standing == strongest)
            .map(|&j| plugins[j].identity.name.clone())
            .collect();
        errors.push(LoadError::new(
            plugin.artifact.source.path(),
            LoadFailure::CatalogClash(Box::new(CatalogClash {
                what: entry.describe(),
                plugin: plugin.identity.name.clone(),
                others,
                held: strongest > plugin.standing,
                standing: strongest.describe(),
            })),
        ));
        lost.entry(*i).or_default().push(entry.clone());
    }
    let served = lost
        .into_iter()
        .map(|(i, lost)| {
            let mut specs = plugins[i].catalog.clone();
            specs
                .resources
                .retain(|r| !lost.contains(&Entry::Resource(r.uri.clone())));
            specs
                .templates
                .retain(|t| !lost.contains(&Entry::Template(t.uri_template.clone())));
            specs
                .prompts
                .retain(|p| !lost.contains(&Entry::Prompt(p.name.clone())));
            (plugins[i].identity.name.clone(), specs)
        })
        .collect();
    (served, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_clash_when_a_client_could_not_tell_them_apart() {
        let t = |s: &str| Entry::Template(s.into());
        let r = |s: &str| Entry::Resource(s.into());
        let p = |s: &str| Entry::Prompt(s.into());
        assert!(t("notes://{id}").clashes(&t("notes://{name}")));
        assert!(t("notes://{id}").clashes(&r("notes://today")));
        assert!(r("notes://today").clashes(&t("notes://{id}")));
        assert!(t("x://{a}/b").clashes(&t("x://a/{b}")));
        assert!(p("summarise").clashes(&p("summarise")));
        assert!(!p("summarise").clashes(&r("summarise")));
        assert!(!t("file:///{path}").clashes(&t("file:///docs/{name}")));
        assert!(!t("notes://{id}").clashes(&r("notes://a/b")));
        assert!(!r("a://1").clashes(&r("a://2")));
    }
}
