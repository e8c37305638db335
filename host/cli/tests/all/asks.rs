//! A gadget that asks and carries on (contract 0.3.0's `ask` import): the
//! answers reach the same running instance, round after round; the wait
//! is not counted against the call's deadline and has its own bound;
//! nobody to answer, or a kind nobody here answers, is an error the
//! gadget reads; an answerer that suspends the call (a stateless MCP
//! call) ends it waiting for answers. And `gadget run` with `--answers`
//! answers a gadget's forms from a file.

use std::collections::VecDeque;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gadget_host::ask::{AskFailure, InputRequest, Reply};
use gadget_host::loader::PluginSource;
use gadget_host::runtime::{CallError, CallRequest, EpochMode, Outcome};
use gadget_host::tool::{Answer, HumanInput, Replies};

use crate::common;
use crate::content::conformance_plugins;

/// Answers each form with the next scripted JSON, after `delay`; records
/// the questions it was asked.
struct Scripted {
    answers: Mutex<VecDeque<Result<Vec<Reply>, AskFailure>>>,
    asked: Mutex<Vec<Vec<String>>>,
    delay: Duration,
}

impl Scripted {
    fn new(answers: Vec<Result<Vec<Reply>, AskFailure>>, delay: Duration) -> Arc<Scripted> {
        Arc::new(Scripted {
            answers: Mutex::new(answers.into()),
            asked: Mutex::new(Vec::new()),
            delay,
        })
    }
}

impl HumanInput for Scripted {
    fn ask<'a>(&'a self, _: &'a str, _: &'a str, _: &'a str) -> Answer<'a> {
        Box::pin(async { Err("only forms here".to_string()) })
    }

    fn inputs<'a>(&'a self, _: &'a str, _: &'a str, requests: &'a [InputRequest]) -> Replies<'a> {
        self.asked
            .lock()
            .unwrap()
            .push(requests.iter().map(|r| r.key.clone()).collect());
        let next = self.answers.lock().unwrap().pop_front();
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            match next {
                Some(next) => next,
                // Nobody answers: the wait lasts until its bound.
                None => std::future::pending().await,
            }
        })
    }
}

async fn call(
    gadget: &str,
    human: Option<Arc<dyn HumanInput>>,
    adjust: impl FnOnce(&mut gadget_host::runtime::Limits),
) -> Result<Outcome, CallError> {
    let dir = tempfile::tempdir().unwrap();
    let runtime = common::runtime(EpochMode::Ticker);
    let registry = common::load(
        &runtime,
        vec![PluginSource::Dir(
            conformance_plugins(dir.path()).join("conformance"),
        )],
    )
    .await;
    let tool = registry.get(gadget).unwrap();
    let mut limits = tool.limits.clone();
    adjust(&mut limits);
    tool.invoke_request(CallRequest {
        gadget: tool.card.spec.name.clone(),
        component_name: Some(tool.component_name.clone()),
        invocation_id: "ask_1".into(),
        params: "{}".into(),
        limits,
        signal: None,
        observer: None,
        grants: Some(tool.plugin.access.grants.clone()),
        trace_parent: None,
        request_denials: None,
        human,
    })
    .await
    .outcome
}

fn form(value: serde_json::Value) -> Reply {
    Reply::Form(value)
}

#[tokio::test]
async fn answers_reach_the_running_gadget_round_after_round() {
    let human = Scripted::new(
        vec![
            Ok(vec![form(serde_json::json!({"name": "Ada"}))]),
            Ok(vec![form(serde_json::json!({"color": "blue"}))]),
        ],
        Duration::ZERO,
    );
    let outcome = call(
        "test_input_required_result_multi_round",
        Some(human.clone()),
        |_| {},
    )
    .await;
    assert!(
        matches!(&outcome, Ok(Outcome::Result { result, .. }) if result == "Ada likes blue"),
        "{outcome:?}"
    );
    assert_eq!(
        *human.asked.lock().unwrap(),
        vec![vec!["step1".to_string()], vec!["step2".to_string()]]
    );
}

#[tokio::test]
async fn waiting_for_answers_is_not_the_gadgets_time() {
    // A 300 ms deadline, and a person who takes 1.2 s: the call still
    // ends well, since the clocks stop while it waits.
    let human = Scripted::new(
        vec![Ok(vec![form(serde_json::json!({"name": "Ada"}))])],
        Duration::from_millis(1200),
    );
    let started = Instant::now();
    let outcome = call(
        "test_input_required_result_elicitation",
        Some(human),
        |limits| limits.timeout = Duration::from_millis(300),
    )
    .await;
    assert!(
        matches!(&outcome, Ok(Outcome::Result { result, .. }) if result == "Hello, Ada!"),
        "{outcome:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(1200));
}

#[tokio::test]
async fn a_wait_past_its_bound_is_the_gadgets_timeout_error() {
    // Nobody answers; the bound is 200 ms.
    let human = Scripted::new(vec![], Duration::ZERO);
    let started = Instant::now();
    let outcome = call(
        "test_input_required_result_elicitation",
        Some(human),
        |limits| limits.ask_wait = Duration::from_millis(200),
    )
    .await;
    let Err(CallError::Failed { message }) = &outcome else {
        panic!("{outcome:?}")
    };
    assert!(message.contains("Timeout"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn nobody_to_answer_and_unanswerable_kinds_are_errors_the_gadget_reads() {
    let outcome = call("test_input_required_result_elicitation", None, |_| {}).await;
    let Err(CallError::Failed { message }) = &outcome else {
        panic!("{outcome:?}")
    };
    assert!(message.contains("no one answers questions"), "{message}");

    // A person at a terminal answers texts and forms, not samples: the
    // default answerer says so, naming who would.
    struct Person;
    impl HumanInput for Person {
        fn ask<'a>(&'a self, _: &'a str, _: &'a str, _: &'a str) -> Answer<'a> {
            Box::pin(async { Ok("Ada".to_string()) })
        }
    }
    let outcome = call(
        "test_input_required_result_sampling",
        Some(Arc::new(Person)),
        |_| {},
    )
    .await;
    let Err(CallError::Failed { message }) = &outcome else {
        panic!("{outcome:?}")
    };
    assert!(
        message.contains("answered only by an MCP client"),
        "{message}"
    );

    // The same person fills a form from their words.
    let outcome = call(
        "test_input_required_result_elicitation",
        Some(Arc::new(Person)),
        |_| {},
    )
    .await;
    assert!(
        matches!(&outcome, Ok(Outcome::Result { result, .. }) if result == "Hello, Ada!"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_suspended_call_ends_waiting_for_its_answers() {
    let human = Scripted::new(vec![Err(AskFailure::Suspended)], Duration::ZERO);
    let outcome = call(
        "test_input_required_result_multiple_inputs",
        Some(human),
        |_| {},
    )
    .await;
    assert_eq!(
        outcome,
        Err(CallError::AwaitingAnswers {
            gadget: "test_input_required_result_multiple_inputs".into(),
            keys: vec!["user_name".into(), "greeting".into(), "client_roots".into()],
        })
    );
}

#[test]
fn run_answers_a_gadgets_forms_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = conformance_plugins(dir.path());
    let answers = dir.path().join("answers.txt");
    std::fs::write(&answers, "Ada\n{\"color\": \"green\"}\n").unwrap();
    let output = Command::new(common::gadget_bin())
        .env("HOME", dir.path())
        .env("XDG_CACHE_HOME", dir.path())
        .env_remove("GADGET_CONFIG")
        .arg("--plugins")
        .arg(&plugins)
        .args(["run", "--answers"])
        .arg(&answers)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(
                b"!!!GADGET_START:test_input_required_result_multi_round:m1\n!!!GADGET_END\n",
            )?;
            child.wait_with_output()
        })
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("Ada likes green"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
