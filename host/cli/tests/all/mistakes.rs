//! A new user's mistakes, each answered by one clear line that says what
//! to do, through the real binary and a scripted LLM server.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::cli::stderr;
use crate::common;
use crate::llm_server::{LlmServer, Reply};

/// `gadget agent` against `base_url` with a key in `TEST_LLM_KEY`, in a
/// fresh home.
fn agent(base_url: &str, extra: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    agent_at(home.path(), base_url, extra)
}

/// `gadget agent` with `home` as its home and cache (a home used before
/// holds the compiled plugins, so the run times only the agent).
fn agent_at(home: &std::path::Path, base_url: &str, extra: &[&str]) -> Output {
    Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home)
        .env_remove("GADGET_CONFIG")
        .env_remove("XDG_CONFIG_HOME")
        .env("TEST_LLM_KEY", "sk-test")
        .args(["-q", "agent", "--model", "openai:test-model", "--base-url"])
        .arg(base_url)
        .args(["--api-key-env", "TEST_LLM_KEY"])
        .args(extra)
        .arg("hello")
        .stdin(Stdio::null())
        .output()
        .expect("run gadget agent")
}

/// A plain reply (the scripted server sends it as application/json).
fn status(code: u16, body: &str) -> Reply {
    Reply::Status {
        status: code,
        headers: Vec::new(),
        body: body.to_string(),
    }
}

#[test]
fn provider_mistakes_are_one_clear_line_and_not_retried() {
    // No scheme: refused before anything is sent.
    let out = agent("127.0.0.1:9/v1", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "base URL '127.0.0.1:9/v1' has no scheme: write http://127.0.0.1:9/v1 (or https://)"
        ),
        "{}",
        stderr(&out)
    );

    // Nothing listening on this machine: said at once, not after retries.
    // Four retries would pause at least 0.5 + 1 + 2 + 4 s (the default
    // backoff at its least jitter); the home is warmed first so the
    // bound times the agent, not a cold compile of the plugins on a busy
    // machine.
    let home = tempfile::tempdir().unwrap();
    agent_at(home.path(), "http://127.0.0.1:9/v1", &[]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let out = agent_at(home.path(), &format!("http://127.0.0.1:{port}/v1"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("nothing is listening at http://127.0.0.1:"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("retry"), "{}", stderr(&out));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(6), "took {took:?}");

    // A 404 that is not about the model: the URL it went to, and /v1.
    let server = LlmServer::start(vec![status(404, "404 page not found")]);
    let out = agent(&server.url(), &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("/chat/completions answered 404 Not Found: 404 page not found"),
        "{err}"
    );
    assert!(err.contains("under /v1"), "{err}");
    assert!(!err.contains("unknown model"), "{err}");

    // The body says the model is unknown: then it is.
    let server = LlmServer::start(vec![status(
        404,
        r#"{"error":{"message":"The model `test-model` does not exist","code":"model_not_found"}}"#,
    )]);
    let out = agent(&(server.url() + "/v1"), &[]);
    assert!(
        stderr(&out).contains("unknown model 'test-model'"),
        "{}",
        stderr(&out)
    );

    // A 200 that is not an event stream says what came back.
    let server = LlmServer::start(vec![status(
        200,
        r#"{"choices":[{"message":{"content":"hi"}}]}"#,
    )]);
    let out = agent(&(server.url() + "/v1"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("answered 200 with application/json, not an event stream"),
        "{}",
        stderr(&out)
    );

    // A key variable that is not set is worth a warning (not -q's notes).
    let server = LlmServer::start(vec![status(401, "{}")]);
    let out = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env_remove("GADGET_CONFIG")
        .env_remove("NO_SUCH_KEY_VARIABLE")
        .args(["agent", "--model", "openai:m", "--base-url"])
        .arg(server.url() + "/v1")
        .args(["--api-key-env", "NO_SUCH_KEY_VARIABLE", "hello"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        stderr(&out)
            .contains("warning: --api-key-env NO_SUCH_KEY_VARIABLE: the variable is not set"),
        "{}",
        stderr(&out)
    );
}

/// `gadget` with the shipped plugins and a policy file.
fn gadget(policy: Option<&str>, args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .env("HOME", home.path())
        .env("XDG_CACHE_HOME", home.path())
        .env_remove("GADGET_CONFIG")
        .env_remove("XDG_CONFIG_HOME")
        .stdin(Stdio::null());
    if let Some(policy) = policy {
        let file = home.path().join("policy.toml");
        std::fs::write(&file, policy).unwrap();
        command.arg("--config").arg(file);
    }
    command.args(args).output().expect("run gadget")
}

#[test]
fn policy_and_command_line_mistakes_say_what_to_write() {
    // A type error shows the form expected and the line, not Rust's types.
    let out = gadget(Some("[gadgets]\ndeny = \"Sleep\"\n"), &["list"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("expected a list in brackets, for example [\"first\", \"second\"], found the text \"Sleep\" (line 2: deny = \"Sleep\")"),
        "{err}"
    );
    assert!(!err.contains("sequence"), "{err}");

    // --grant's errors list every form.
    let out = gadget(None, &["--grant", "web:https=x", "list"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    for form in [
        "PLUGIN:http=URL",
        "PLUGIN:files=HOST[:GUEST][:ro|rw]",
        "GUEST defaults to",
        "KEY=env:VAR",
        "KEY=value:TEXT",
        "PLUGIN:llm=PROVIDER:MODEL",
    ] {
        assert!(err.contains(form), "{form}: {err}");
    }

    // A denial by --deny-gadget says so.
    let out = gadget(None, &["--deny-gadget", "Calc*", "call", "Calculator"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("denied for this run (--deny-gadget \"Calc*\")"),
        "{}",
        stderr(&out)
    );

    // A grant the manifest does not ask for: only the manifest can ask.
    let out = gadget(
        Some("[plugins.calculator]\nhttp = [\"https://example.com\"]\n"),
        &["list"],
    );
    let err = stderr(&out);
    assert!(
        err.contains("http https://example.com is granted, but the manifest does not ask for it: not applied (the plugin's plugin.toml must ask for it under [permissions]; granting it again changes nothing)"),
        "{err}"
    );

    // "Not found" after a plugin failed to load says that it did.
    let plugins = tempfile::tempdir().unwrap();
    let broken = plugins.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(
        broken.join("plugin.toml"),
        "name = \"broken\"\nversion = \"0.1.0\"\ndescription = \"x\"\ncomponent = \"missing.wasm\"\n",
    )
    .unwrap();
    let call_broken = || {
        Command::new(common::gadget_bin())
            .arg("--plugins")
            .arg(plugins.path())
            .env_remove("GADGET_CONFIG")
            .args(["call", "Broken"])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // Nothing loaded at all: the command's failure, before any call.
    let out = call_broken();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("error: no plugin loaded (1 failed, the reasons above)"),
        "{}",
        stderr(&out)
    );
    // Another plugin loaded: the call says one failed.
    let calculator = plugins.path().join("calculator");
    std::fs::create_dir(&calculator).unwrap();
    for file in ["plugin.toml", "calculator.wasm"] {
        let shipped = common::shipped_plugins().join("calculator").join(file);
        std::fs::copy(shipped, calculator.join(file)).unwrap();
    }
    let out = call_broken();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("1 plugin(s) failed to load"),
        "{}",
        stderr(&out)
    );
}
