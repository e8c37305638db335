//! Sub-agents as gadgets (agentsm's `as_tool`): an agent the operator
//! defines (`[agents.NAME]`: description, model, system text, the gadgets
//! it may call) is served as a gadget whose one parameter is the task. A
//! call runs a nested [`Agent`] loop over those gadgets only; its LLM and
//! gadget costs are the call's cost (llmist's tree total); its events are
//! the call's nested events; the call's deadline and abort signal stop it;
//! its answer is the call's result. Agents may call agents, down to
//! [`MAX_AGENT_DEPTH`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use gadget_core::call::{CallError, CallReport, GadgetSpec, Outcome};
use gadget_core::ledger::{CallEvent, Nested};
use gadget_core::limits::OwnTimeout;
use gadget_core::params::ParamSchema;
use gadget_core::render::Markers;
use gadget_core::scope::CallScope;
use gadget_core::tool::{BoxFuture, Tool, ToolCall, ToolCard, Toolbox, Tools, glob_matches};
use gadget_exec::{ExecConfig, Executor};

use crate::agent::{Agent, AgentConfig, AgentEvent, RetryPolicy, StopReason};
use crate::backend::Providers;
use crate::models::ModelTable;

/// How deep agents may nest: the loop the user runs is level 0, an agent
/// it calls level 1, and so on. Each level multiplies cost and time; three
/// is more than any sensible delegation needs, and it stops an agent that
/// calls itself long before it spends much.
pub const MAX_AGENT_DEPTH: usize = 3;

/// Requests one sub-agent call makes unless its definition says.
pub const DEFAULT_SUBAGENT_ITERATIONS: usize = 5;

/// How long one sub-agent call may take unless its definition says: a
/// few LLM round trips and their gadgets.
pub const DEFAULT_SUBAGENT_TIMEOUT: Duration = Duration::from_secs(300);

/// One agent definition.
#[derive(Debug, Clone)]
pub struct SubAgentDefinition {
    /// The gadget name it is served under.
    pub name: String,
    pub description: String,
    /// `provider:model`.
    pub model: String,
    pub system: Option<String>,
    /// Names or globs (`*`, `?`) of the gadgets it may call.
    pub gadgets: Vec<String>,
    pub max_iterations: usize,
    pub timeout: Duration,
}

/// Everything sub-agents are made from: the definitions, the gadgets they
/// may draw from, the providers and the prices.
pub struct SubAgents {
    definitions: Vec<SubAgentDefinition>,
    base: Arc<dyn Tools>,
    providers: Arc<Providers>,
    table: ModelTable,
}

impl SubAgents {
    pub fn new(
        definitions: Vec<SubAgentDefinition>,
        base: Arc<dyn Tools>,
        providers: Arc<Providers>,
        table: ModelTable,
    ) -> Arc<SubAgents> {
        Arc::new(SubAgents {
            definitions,
            base,
            providers,
            table,
        })
    }

    /// The tools of the loop the user runs: the base gadgets plus every
    /// agent (called from level 0, so running at level 1).
    pub fn top_level(self: &Arc<Self>) -> Arc<dyn Tools> {
        Arc::new(gadget_core::tool::Layered {
            first: self.base.clone(),
            then: Arc::new(self.agents_at_level_one()),
        })
    }

    /// Every agent alone, as called from level 0 (for servers that keep
    /// the base gadgets apart).
    pub fn agents(self: &Arc<Self>) -> Arc<dyn Tools> {
        Arc::new(self.agents_at_level_one())
    }

    fn agents_at_level_one(self: &Arc<Self>) -> Toolbox {
        let mut agents = Toolbox::new();
        for index in 0..self.definitions.len() {
            let _ = agents.insert(Arc::new(SubAgentTool::new(self.clone(), index, 1)));
        }
        agents
    }

    /// What an agent at `depth` may call: its gadgets, and the agents its
    /// list names (at `depth + 1`).
    fn tools_for(self: &Arc<Self>, definition: &SubAgentDefinition, depth: usize) -> Toolbox {
        let allowed = |name: &str| {
            definition
                .gadgets
                .iter()
                .any(|pattern| glob_matches(pattern, name))
        };
        let mut tools = Toolbox::new();
        for (index, other) in self.definitions.iter().enumerate() {
            if allowed(&other.name) {
                let _ = tools.insert(Arc::new(SubAgentTool::new(self.clone(), index, depth + 1)));
            }
        }
        for tool in self.base.all() {
            if allowed(tool.name()) {
                let _ = tools.insert(tool);
            }
        }
        tools
    }
}

/// One agent, served as a gadget at a depth.
struct SubAgentTool {
    agents: Arc<SubAgents>,
    index: usize,
    depth: usize,
    card: ToolCard,
}

/// The one parameter every agent takes.
const TASK_SCHEMA: &str = r#"{"type":"object","properties":{"task":{"type":"string","description":"The task, written so the agent can do it without the rest of the conversation."}},"required":["task"]}"#;

impl SubAgentTool {
    fn new(agents: Arc<SubAgents>, index: usize, depth: usize) -> SubAgentTool {
        let definition = &agents.definitions[index];
        let spec = GadgetSpec {
            name: definition.name.clone(),
            label: None,
            description: definition.description.clone(),
            parameters_schema: TASK_SCHEMA.to_string(),
            examples: Vec::new(),
            timeout_ms: Some(definition.timeout.as_millis().min(u32::MAX as u128) as u32),
            exclusive: false,
            max_concurrent: None,
        };
        let schema = ParamSchema::compile(TASK_SCHEMA).expect("the task schema compiles");
        let own_timeout = OwnTimeout::Declared(definition.timeout);
        SubAgentTool {
            card: ToolCard::new(spec, schema, own_timeout),
            agents,
            index,
            depth,
        }
    }

    async fn run_nested(&self, call: ToolCall) -> CallReport {
        let started = Instant::now();
        let definition = &self.agents.definitions[self.index];
        let name = definition.name.clone();
        let failed =
            |message: String| CallReport::of(Err(CallError::Failed { message }), started.elapsed());
        if self.depth > MAX_AGENT_DEPTH {
            return failed(format!(
                "agent '{name}' would run at depth {}, past the limit of {MAX_AGENT_DEPTH} nested agents: do this part of the task without it",
                self.depth
            ));
        }
        let Some(task) = call.params["task"].as_str().map(str::to_string) else {
            return CallReport::of(
                Err(CallError::InvalidArguments {
                    message: "task must be a string".into(),
                }),
                started.elapsed(),
            );
        };
        let (provider, model) = match self.agents.providers.for_model(&definition.model) {
            Ok(found) => found,
            Err(why) => return failed(format!("agent '{name}' cannot reach its model: {why}")),
        };
        let tools = self.agents.tools_for(definition, self.depth);
        let mut executor = match Executor::new(Arc::new(tools), ExecConfig::default()) {
            Ok(executor) => executor,
            Err(e) => return failed(format!("agent '{name}': {e}")),
        };
        // Its calls are checked against the same rules and asked of the
        // same person as the session's own, and recorded in the same
        // journal (the inner calls are the operator's to audit as much as
        // any). Its spans hang under its own session's (below).
        executor = executor.with_scope(Arc::new(CallScope {
            approvals: call.scope.approvals.clone(),
            recorder: call.scope.recorder.clone(),
            trace: None,
            human: None,
            rates: call.scope.rates.clone(),
            client: call.scope.client.clone(),
        }));
        let (provider_name, model_name) = definition.model.split_once(':').unwrap_or_default();
        let config = AgentConfig {
            model,
            max_iterations: definition.max_iterations,
            max_cost: None,
            max_tokens: crate::agent::DEFAULT_MAX_TOKENS,
            system: definition.system.clone(),
            model_info: self.agents.table.lookup(provider_name, model_name),
            retry: RetryPolicy::default(),
            tool_format: Default::default(),
        };
        // The nested loop's events, except its raw text (the parsed text
        // and the calls say the same, once), as the call's nested events.
        let observer = call.observer.clone();
        let forward: crate::agent::Observer = Arc::new(move |event: &AgentEvent| {
            if matches!(event, AgentEvent::Text { .. }) {
                return;
            }
            if let Some(observer) = &observer {
                observer(&CallEvent::Nested(Nested::new(event.clone())));
            }
        });
        let mut agent = Agent::new(provider, executor, Markers::default(), config, forward);
        // The inner session's spans belong to the call's trace.
        agent.set_trace_parent(
            call.scope
                .trace
                .as_ref()
                .and_then(|parent| gadget_exec::telemetry::context_from(&parent.traceparent, None)),
        );
        let stop = agent.stop_handle();
        let timeout = call.deadline.unwrap_or(definition.timeout);
        // The call's deadline and abort signal stop the nested loop (its
        // stream, its running calls, its next request), which then ends.
        let run = agent.run(&task);
        tokio::pin!(run);
        let stopped = tokio::select! {
            outcome = &mut run => Ok(outcome),
            _ = tokio::time::sleep(timeout) => Err(true),
            _ = gadget_core::signal::raised(call.signal.as_ref()) => Err(false),
        };
        let (outcome, timed_out) = match stopped {
            Ok(outcome) => (outcome, false),
            Err(timed_out) => {
                stop.stop();
                (run.await, timed_out)
            }
        };
        let result = result_of(&name, &outcome, timeout, timed_out);
        let mut report = CallReport::of(result, started.elapsed());
        // LLM and gadget costs alike, whatever the outcome (the work was done).
        report.cost = outcome.total_cost;
        report
    }
}

/// The call's outcome of a nested session that ended as `outcome`.
fn result_of(
    name: &str,
    outcome: &crate::agent::AgentOutcome,
    timeout: Duration,
    timed_out: bool,
) -> Result<Outcome, CallError> {
    match outcome.stop {
        StopReason::Answered | StopReason::Finished => Ok(Outcome::Result {
            result: outcome.answer.clone().unwrap_or_default(),
            details: Some(serde_json::json!({
                "iterations": outcome.iterations.len(),
                "input_tokens": outcome.input_tokens,
                "output_tokens": outcome.output_tokens,
                "llm_cost": outcome.llm_cost,
                "gadget_cost": outcome.gadget_cost,
            })),
            rich: None,
        }),
        StopReason::Interrupted if timed_out => Err(CallError::Timeout {
            gadget: name.to_string(),
            timeout_ms: timeout.as_millis() as u64,
        }),
        StopReason::Interrupted => Err(CallError::Cancelled {
            gadget: name.to_string(),
        }),
        StopReason::MaxIterations => Err(CallError::Failed {
            message: format!(
                "agent '{name}' gave no answer in {} iterations",
                outcome.iterations.len()
            ),
        }),
        StopReason::MaxCost => Err(CallError::Failed {
            message: format!("agent '{name}' stopped at its cost cap"),
        }),
        StopReason::Failed => Err(CallError::Failed {
            message: format!(
                "agent '{name}': {}",
                outcome
                    .error
                    .as_ref()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "failed".into())
            ),
        }),
    }
}

impl Tool for SubAgentTool {
    fn card(&self) -> &ToolCard {
        &self.card
    }

    /// It completes with its model (what its gadgets touch is theirs, and
    /// shown with them).
    fn access(&self) -> gadget_core::access::Access {
        gadget_core::access::Access {
            llm: vec![self.agents.definitions[self.index].model.clone()],
            ..Default::default()
        }
    }

    fn run(&self, call: ToolCall) -> BoxFuture<'_, CallReport> {
        Box::pin(self.run_nested(call))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn globs_match_whole_names_case_insensitively() {
        use gadget_core::tool::glob_matches;
        assert!(glob_matches("Calc*", "calculator"));
        assert!(glob_matches("*", "Anything"));
        assert!(glob_matches("Json?uery", "JsonQuery"));
        assert!(!glob_matches("Calc", "Calculator"));
        assert!(!glob_matches("*x", "Calculator"));
    }
}
