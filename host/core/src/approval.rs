//! Approvals and argument rules: the operator decides, before a call
//! runs, whether it runs at once, waits for a person, or is refused.
//!
//! [`Rules`] are compiled once from the policy (`[gadgets] approve`,
//! `[[rules]]`, `--approve-gadget`) and checked on a call's *validated*
//! parameters (defaults filled in) by the one call path: a deny rule
//! refuses the call with its reason; an approve pattern or rule makes it
//! wait for an [`Approver`], the front end's way of asking a person (the
//! terminal, a decisions file, an MCP client). Nothing a model writes
//! reaches the rules: they come from the operator's files and flags only.
//!
//! Argument rules match a parameter by its meaning as well as its text
//! (a URL or a path also in its normal form, [`normal`]), and a deny rule
//! on a URL holds for the call's requests too ([`RequestDenials`]). A rule
//! on a path is not a file boundary (the grants are).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::access::Access;
use crate::client::ClientId;
use crate::glob::glob_matches;

mod normal;
mod shown;
use normal::kind_in_schema;
pub use normal::{ValueKind, normal_path, normal_url};
pub use shown::{
    ApprovalRequest, MAX_SHOWN_KEYS_BYTES, MAX_SHOWN_PARAMS_BYTES, MIN_SHOWN_VALUE_BYTES, shown,
};

/// How long a call waits for a person before it is denied, unless the
/// policy says `approval-timeout-ms`: long enough to read a call and
/// decide, short enough that a forgotten prompt does not hold a run (or a
/// server's call slot) for ever.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

/// The longest approval wait a policy may set: one day. Past that, an
/// unanswered call is a leak, not a decision.
pub const MAX_APPROVAL_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Longest regex a rule may have, in bytes of compiled program: the
/// `regex` crate matches in linear time whatever the input, and this keeps
/// the compiled form small.
pub const MAX_RULE_REGEX_BYTES: usize = 1 << 20;

/// What a `[[rules]]` entry does when it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleAction {
    /// The call waits for a person's approval.
    Approve,
    /// The call is refused; the model reads the rule's reason.
    Deny,
}

/// One `[[rules]]` entry as the policy file writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RuleSpec {
    /// The gadget, a name or glob (case-insensitive, as `[gadgets]`).
    pub gadget: String,
    /// A JSON pointer into the validated parameters (`/url`,
    /// `/headers/0`); `""` is the whole parameters object.
    pub param: String,
    /// A glob over the parameter's text: `*` any run of characters (`/`
    /// included), `?` one; case-sensitive.
    pub matches: Option<String>,
    /// A regular expression over the parameter's text (unanchored; write
    /// `^...$` for the whole text).
    pub regex: Option<String>,
    pub action: RuleAction,
    /// What the model (on a deny) or the person (on an approve) reads.
    pub reason: Option<String>,
    /// What the parameter is, when the schema's `format` does not say:
    /// its normal form is matched too.
    pub kind: Option<ValueKind>,
    /// Only calls by this caller (an authenticated identity; a glob,
    /// case-sensitive): `None`, everyone's. An anonymous caller is no
    /// client a rule can name.
    #[serde(default)]
    pub client: Option<String>,
}

/// A rule, compiled.
#[derive(Debug, Clone)]
struct Rule {
    spec: RuleSpec,
    regex: Option<regex::Regex>,
    /// 1-based, as the operator counts `[[rules]]` in the file.
    number: usize,
}

/// The operator's approval rules, compiled.
#[derive(Debug)]
pub struct Rules {
    /// Gadgets (names or globs) whose every call waits for a person.
    approve: Vec<String>,
    /// Patterns from `--approve-gadget` (also in `approve`).
    approve_by_flag: Vec<String>,
    rules: Vec<Rule>,
    timeout: Duration,
    /// Per gadget name, what applies to it (filled as calls come).
    by_gadget: Mutex<HashMap<String, Arc<Applicable>>>,
}

/// What the rules say of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Nothing stops it.
    Run,
    /// A deny rule matched: the call is refused with this reason.
    Deny { reason: String },
    /// It waits for a person; why, in the operator's words, and the
    /// parameters (JSON pointers) the matched rules look at, to show first.
    Ask {
        reasons: Vec<String>,
        named: Vec<String>,
    },
}

impl Rules {
    /// Compiles the policy's approval settings; `Err` names the rule
    /// (`rules[N]`) and what is wrong with it.
    pub fn new(
        approve: Vec<String>,
        specs: Vec<RuleSpec>,
        timeout: Option<Duration>,
    ) -> Result<Rules, String> {
        let mut rules = Vec::with_capacity(specs.len());
        for (i, spec) in specs.into_iter().enumerate() {
            let at = format!("rules[{}]", i + 1);
            if spec.gadget.trim().is_empty() {
                return Err(format!("{at}.gadget: name a gadget (or a glob)"));
            }
            if !spec.param.is_empty() && !spec.param.starts_with('/') {
                return Err(format!(
                    "{at}.param: '{}' is not a JSON pointer: write \"/{}\"",
                    spec.param, spec.param
                ));
            }
            let regex = match (&spec.matches, &spec.regex) {
                (Some(_), Some(_)) => {
                    return Err(format!("{at}: give `matches` or `regex`, not both"));
                }
                (None, None) => {
                    return Err(format!(
                        "{at}: say which values it matches, with `matches = \"GLOB\"` or `regex = \"...\"`"
                    ));
                }
                (Some(_), None) => None,
                (None, Some(pattern)) => Some(
                    regex::RegexBuilder::new(pattern)
                        .size_limit(MAX_RULE_REGEX_BYTES)
                        .build()
                        .map_err(|e| format!("{at}.regex: {e}"))?,
                ),
            };
            rules.push(Rule {
                spec,
                regex,
                number: i + 1,
            });
        }
        let timeout = timeout.unwrap_or(DEFAULT_APPROVAL_TIMEOUT);
        if timeout.is_zero() || timeout > MAX_APPROVAL_TIMEOUT {
            return Err(format!(
                "gadgets.approval-timeout-ms: {} is not between 1 and {}",
                timeout.as_millis(),
                MAX_APPROVAL_TIMEOUT.as_millis()
            ));
        }
        Ok(Rules {
            approve,
            approve_by_flag: Vec::new(),
            rules,
            timeout,
            by_gadget: Mutex::new(HashMap::new()),
        })
    }

    /// No rule at all: nothing waits, nothing is refused.
    pub fn none() -> Rules {
        Rules::new(Vec::new(), Vec::new(), None).expect("no rules compile")
    }

    /// `--approve-gadget NAME`: every call of it waits, for this run.
    pub fn approve_gadget(&mut self, pattern: &str) {
        self.approve.push(pattern.to_string());
        self.approve_by_flag.push(pattern.to_string());
        self.by_gadget
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Nothing to check: calls run as if there were no rules (the one call
    /// path then skips the check entirely).
    pub fn is_empty(&self) -> bool {
        self.approve.is_empty() && self.rules.is_empty()
    }

    /// How long a call waits for a person before it is denied.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The approve patterns and rules that name none of `names` (the
    /// gadgets served) and that `elsewhere` does not claim (a pattern
    /// that may name a tool not listed, such as an upstream server's), in
    /// the operator's words: most often a misspelt name, and a rule that
    /// never applies protects nothing.
    pub fn unmatched(&self, names: &[String], elsewhere: impl Fn(&str) -> bool) -> Vec<String> {
        let names_none =
            |pattern: &str| !names.iter().any(|n| glob_matches(pattern, n)) && !elsewhere(pattern);
        let mut found: Vec<String> = self
            .approve
            .iter()
            .filter(|p| names_none(p))
            .map(|p| {
                if self.approve_by_flag.contains(p) {
                    format!("--approve-gadget \"{p}\"")
                } else {
                    format!("[gadgets] approve = \"{p}\"")
                }
            })
            .collect();
        found.extend(
            self.rules
                .iter()
                .filter(|r| names_none(&r.spec.gadget))
                .map(|r| format!("rule {} (gadget = \"{}\")", r.number, r.spec.gadget)),
        );
        found
    }

    /// Every pattern and rule that applies to `gadget`, in the operator's
    /// words (`describe` shows them): what may make its calls wait or
    /// refuse them.
    pub fn rules_for(&self, gadget: &str) -> Vec<String> {
        let mut found: Vec<String> = self
            .approve
            .iter()
            .filter(|p| glob_matches(p, gadget))
            .map(|p| format!("every call waits for approval ([gadgets] approve = \"{p}\")"))
            .collect();
        for rule in self
            .rules
            .iter()
            .filter(|r| glob_matches(&r.spec.gadget, gadget))
        {
            let verb = match rule.spec.action {
                RuleAction::Approve => "waits for approval",
                RuleAction::Deny => "is refused",
            };
            let why = rule
                .spec
                .reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            // A rule for some clients only says whose calls it holds for.
            let whose = match &rule.spec.client {
                Some(client) => format!("a call by client {client}"),
                None => "a call".to_string(),
            };
            found.push(format!(
                "{whose} {verb} when {} (rule {} of the policy{why})",
                rule.condition(),
                rule.number
            ));
        }
        found
    }

    /// What the rules say of a call of `gadget` with validated `params`:
    /// any matching deny rule refuses it (the first one's reason is given);
    /// else any approve pattern or matching approve rule makes it wait.
    /// Which patterns and rules name a gadget is worked out once per name
    /// (the hot path of a gadget no rule names is one map lookup).
    pub fn check(&self, gadget: &str, params: &Value, schema: Option<&Value>) -> Admission {
        self.check_for(gadget, params, schema, &ClientId::Local)
    }

    /// [`Rules::check`] for a call by `client` (its authenticated
    /// identity, or none): the rules naming other clients do not
    /// hold for it.
    pub fn check_for(
        &self,
        gadget: &str,
        params: &Value,
        schema: Option<&Value>,
        client: &ClientId,
    ) -> Admission {
        let applicable = self.applicable(gadget);
        let mut reasons = applicable.approve.clone();
        let mut named = Vec::new();
        for rule in applicable.rules.iter().map(|&i| &self.rules[i]) {
            if !rule.names_client(client) || !rule.matches(params, schema) {
                continue;
            }
            match rule.spec.action {
                RuleAction::Deny => {
                    return Admission::Deny {
                        reason: rule.described(),
                    };
                }
                RuleAction::Approve => {
                    reasons.push(rule.described());
                    named.push(rule.spec.param.clone());
                }
            }
        }
        if reasons.is_empty() {
            Admission::Run
        } else {
            Admission::Ask { reasons, named }
        }
    }

    /// The deny rules on a URL parameter of `gadget` (whose parameters'
    /// schema is `schema`): they hold for every HTTP request its calls make
    /// too, each redirect hop a request of its own. `None` when there are none.
    pub fn request_denials(
        self: &Arc<Self>,
        gadget: &str,
        schema: Option<&Value>,
        client: &ClientId,
    ) -> Option<RequestDenials> {
        let rules: Vec<usize> = self
            .applicable(gadget)
            .rules
            .iter()
            .copied()
            .filter(|&i| {
                let rule = &self.rules[i];
                rule.spec.action == RuleAction::Deny
                    && rule.kind(schema) == Some(ValueKind::Url)
                    && rule.names_client(client)
            })
            .collect();
        (!rules.is_empty()).then(|| RequestDenials {
            rules: self.clone(),
            deny: rules,
        })
    }

    /// The rules whose parameter's kind comes from their pattern alone
    /// (no `kind`, and `schema`, the schema of the gadget they name when
    /// known, declares no format there), in the operator's words: what
    /// `gadget check` shows, so that an operator sees a rule is matched
    /// by meaning.
    pub fn inferred_kinds(&self, gadget: &str, schema: Option<&Value>) -> Vec<String> {
        self.applicable(gadget)
            .rules
            .iter()
            .map(|&i| &self.rules[i])
            .filter(|rule| {
                rule.spec.kind.is_none()
                    && schema
                        .and_then(|s| kind_in_schema(s, &rule.spec.param))
                        .is_none()
            })
            .filter_map(|rule| {
                let kind = match rule.pattern_kind()? {
                    ValueKind::Url => "a URL",
                    ValueKind::Path => "a path",
                };
                Some(format!(
                    "rule {} ({} {}): the pattern is {kind}, so {} is matched as {kind} (its normal form too)",
                    rule.number,
                    rule.spec.gadget,
                    rule.condition(),
                    rule.spec.param
                ))
            })
            .collect()
    }

    /// The approve patterns (as reasons) and rules that name `gadget`.
    fn applicable(&self, gadget: &str) -> Arc<Applicable> {
        let mut cache = self.by_gadget.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = cache.get(gadget) {
            return found.clone();
        }
        let approve = self
            .approve
            .iter()
            .filter(|p| glob_matches(p, gadget))
            .map(|pattern| {
                if self.approve_by_flag.contains(pattern) {
                    format!("--approve-gadget \"{pattern}\"")
                } else {
                    format!("[gadgets] approve = \"{pattern}\"")
                }
            })
            .collect();
        let rules = (0..self.rules.len())
            .filter(|&i| glob_matches(&self.rules[i].spec.gadget, gadget))
            .collect();
        let found = Arc::new(Applicable { approve, rules });
        // Names come from the tools served, a bounded set; the cap keeps a
        // caller that checks arbitrary names from growing it.
        if cache.len() < MAX_CACHED_GADGETS {
            cache.insert(gadget.to_string(), found.clone());
        }
        found
    }
}

/// What applies to one gadget name.
#[derive(Debug)]
struct Applicable {
    approve: Vec<String>,
    rules: Vec<usize>,
}

/// Gadget names whose applicable rules are remembered: far more than any
/// host serves.
const MAX_CACHED_GADGETS: usize = 4096;

impl Rule {
    /// What the rule's parameter is: as the rule says, else as the
    /// schema's `format` says, else as the rule's pattern plainly is (a
    /// URL with a scheme, an absolute path): a gadget that declares no
    /// format is not a way around a rule written for a URL or a path.
    fn kind(&self, schema: Option<&Value>) -> Option<ValueKind> {
        self.spec
            .kind
            .or_else(|| kind_in_schema(schema?, &self.spec.param))
            .or_else(|| self.pattern_kind())
    }

    /// What the rule's pattern plainly is: a URL when it begins with a
    /// scheme (`http://*`), a path when it begins with `/`; a regex's
    /// after its `^`.
    fn pattern_kind(&self) -> Option<ValueKind> {
        let pattern = match (&self.spec.matches, &self.spec.regex) {
            (Some(glob), _) => glob.as_str(),
            (None, Some(regex)) => regex.strip_prefix('^')?,
            (None, None) => return None,
        };
        let scheme = pattern.split_once("://").map(|(scheme, _)| scheme);
        if scheme.is_some_and(|s| {
            s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        }) {
            Some(ValueKind::Url)
        } else if pattern.starts_with('/') {
            Some(ValueKind::Path)
        } else {
            None
        }
    }

    /// Whether the parameter the rule points at has a matching value. An
    /// array matches when any element does (a rule on `/urls` sees each
    /// URL); a parameter that is absent matches nothing. What the value is
    /// (a URL, a path) is worked out only when its text does not match:
    /// the usual call, matched by no rule, pays for no normal form.
    fn matches(&self, params: &Value, schema: Option<&Value>) -> bool {
        let Some(value) = params.pointer(&self.spec.param) else {
            return false;
        };
        let mut kind = None;
        let mut test = |text: &str| {
            self.matches_text(text) || {
                let kind = *kind.get_or_insert_with(|| self.kind(schema));
                kind.is_some_and(|kind| {
                    kind.normal_forms(text)
                        .iter()
                        .any(|form| self.matches_text(form))
                })
            }
        };
        match value {
            Value::Array(items) => items.iter().any(|item| test(&text_of(item))),
            other => test(&text_of(other)),
        }
    }

    /// The text as written, or any normal form of it, matches.
    fn matches_value(&self, text: &str, kind: Option<ValueKind>) -> bool {
        self.matches_text(text)
            || kind.is_some_and(|kind| {
                kind.normal_forms(text)
                    .iter()
                    .any(|form| self.matches_text(form))
            })
    }

    fn matches_text(&self, text: &str) -> bool {
        match (&self.regex, &self.spec.matches) {
            (Some(regex), _) => regex.is_match(text),
            (None, Some(glob)) => glob_matches_exact(glob, text),
            (None, None) => false,
        }
    }

    /// What the rule looks at: `/url matches "http://*"`.
    fn condition(&self) -> String {
        let param = if self.spec.param.is_empty() {
            "the parameters"
        } else {
            &self.spec.param
        };
        match (&self.spec.matches, &self.spec.regex) {
            (Some(glob), _) => format!("{param} matches \"{glob}\""),
            (None, Some(regex)) => format!("{param} matches regex \"{regex}\""),
            (None, None) => param.to_string(),
        }
    }

    /// The rule in the operator's words: its reason, and where it is.
    /// Whether the rule holds for calls by `client`.
    fn names_client(&self, client: &ClientId) -> bool {
        match &self.spec.client {
            None => true,
            Some(pattern) => client
                .subject_name()
                .is_some_and(|client| glob_matches_exact(pattern, client)),
        }
    }

    fn described(&self) -> String {
        let by = match &self.spec.client {
            Some(client) => format!(" for client {client}"),
            None => String::new(),
        };
        let location = format!(
            "rule {} of the policy: {} {}{by}",
            self.number,
            self.spec.gadget,
            self.condition()
        );
        match &self.spec.reason {
            Some(reason) => format!("{reason} ({location})"),
            None => location,
        }
    }
}

/// A parameter's text for a rule: a string as itself, anything else as
/// its JSON text.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Case-sensitive glob for argument values (paths and URLs differ by
/// case): `*` any run of characters, `?` one.
pub fn glob_matches_exact(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    crate::glob::glob_matches_chars(&pattern, &text)
}

/// Who (or what) decided a call's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decider {
    /// The person at the terminal.
    Terminal,
    /// A line of the `--approvals` file.
    File,
    /// `--approve-all`.
    ApproveAll,
    /// The person approved this gadget for the rest of the session.
    Session,
    /// A deny rule of the policy.
    Rule,
    /// The person at an MCP client (elicitation).
    McpClient,
    /// Nobody answered within `approval-timeout-ms`.
    Timeout,
    /// Nobody could be asked (fail closed).
    Nobody,
    /// The run was stopped while the call waited.
    Stopped,
}

impl Decider {
    pub fn as_str(self) -> &'static str {
        match self {
            Decider::Terminal => "terminal",
            Decider::File => "file",
            Decider::ApproveAll => "approve-all",
            Decider::Session => "session",
            Decider::Rule => "rule",
            Decider::McpClient => "mcp-client",
            Decider::Timeout => "timeout",
            Decider::Nobody => "nobody",
            Decider::Stopped => "stopped",
        }
    }
}

impl std::fmt::Display for Decider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Run it; `for_session`: every later call of this gadget too.
    Approved { by: Decider, for_session: bool },
    /// Do not run it; `why` completes "not approved: ...".
    Denied { by: Decider, why: String },
    /// The front end asks out of band and the call ends for now (an MCP
    /// client on protocol 2026-07-28 asks its person, then calls again).
    Deferred,
}

/// A future verdict.
pub type VerdictFuture<'a> = Pin<Box<dyn Future<Output = Verdict> + Send + 'a>>;

/// Asks a person whether a call may run: the front end's handler. The
/// wait is bounded by the caller ([`Rules::timeout`]) and ends when the
/// call's abort signal is raised.
pub trait Approver: Send + Sync {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> VerdictFuture<'a>;
}

/// The rules and the approver a call path checks calls against, shared by
/// a whole session (its sub-agents included), with the gadgets approved
/// for the rest of it.
pub struct Approvals {
    pub rules: Arc<Rules>,
    pub approver: Arc<dyn Approver>,
    /// Lower-cased names approved for the session.
    session: Mutex<BTreeSet<String>>,
}

impl Approvals {
    pub fn new(rules: Arc<Rules>, approver: Arc<dyn Approver>) -> Approvals {
        Approvals {
            rules,
            approver,
            session: Mutex::new(BTreeSet::new()),
        }
    }

    /// Whether the person approved `gadget` for the rest of the session.
    pub fn approved_for_session(&self, gadget: &str) -> bool {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&gadget.to_lowercase())
    }

    /// Remembers a session-wide approval of `gadget`.
    pub fn approve_for_session(&self, gadget: &str) {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(gadget.to_lowercase());
    }
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("rules", &self.rules)
            .finish()
    }
}

/// What a call's observer is told of its approval.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApprovalEvent {
    /// The call waits for a person.
    Requested {
        reasons: Vec<String>,
        access: Access,
    },
    /// Approved or not, by whom; `reason` says why when not.
    Decided {
        approved: bool,
        by: Decider,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// The parameters as one canonical text (object keys sorted at every
/// level): what an approval is bound to, whatever order a client sends
/// the keys in.
pub fn canonical_json(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    write(&map[key], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// The deny rules a call's HTTP requests are held to (see
/// [`Rules::request_denials`]).
#[derive(Debug, Clone)]
pub struct RequestDenials {
    rules: Arc<Rules>,
    deny: Vec<usize>,
}

impl RequestDenials {
    /// The first deny rule the request's URL matches (as sent and in its
    /// normal form), as its reason.
    pub fn refusal(&self, url: &str) -> Option<String> {
        self.deny
            .iter()
            .map(|&i| &self.rules.rules[i])
            .find(|rule| rule.matches_value(url, Some(ValueKind::Url)))
            .map(Rule::described)
    }
}

#[cfg(test)]
mod tests;
