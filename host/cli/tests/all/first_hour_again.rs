//! The first hour, second pass: what a new user meets in the demo, the
//! agent, serve's logs, the image build and writing a gadget.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;

/// One stateless (2026-07-28) `tools/call` of Calculator, as a client sends it.
fn call_calculator(port: u16) {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Calculator","arguments":{"operation":"add","a":1,"b":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer s3cret\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: Calculator\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(
        answer.contains("\"3\"") || answer.contains(": 3"),
        "{answer}"
    );
}

/// `gadget serve` at its default level, with `format`, through three
/// calls and a SIGTERM: what it wrote to stderr.
fn serve_log(format: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr");
    let mut child = Command::new(common::gadget_bin())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .args(["--log-format", format, "serve", "--listen", "127.0.0.1:0"])
        .args(["--auth-token-env", "TEST_TOKEN"])
        .env("TEST_TOKEN", "s3cret")
        .env("XDG_CACHE_HOME", dir.path())
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let port: u16 = loop {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(port) = said
            .split("http://127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split('/').next()?.parse().ok())
        {
            break port;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{said}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for _ in 0..3 {
        call_calculator(port);
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn serve_logs_its_start_and_stop_not_each_call() {
    let text = serve_log("text");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("serving "), "{text}");
    assert!(lines.last().unwrap().contains("stopped"), "{text}");
    // Start, drain, stop: nothing per call.
    assert_eq!(lines.len(), 3, "{text}");
    assert!(!text.contains("serve_inner"), "{text}");

    let json = serve_log("json");
    assert!(json.lines().count() >= 3, "{json}");
    for line in json.lines() {
        let record: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a plain line among the JSON ({e}): {line}"));
        assert!(record["fields"]["message"].is_string(), "{line}");
    }
    assert!(json.contains("serving "), "{json}");
    assert!(!json.contains("serve_inner"), "{json}");
}

/// Removes the directories it names when the test ends, however it ends.
struct Removed(Vec<std::path::PathBuf>);

impl Drop for Removed {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// What the Dockerfile invites: plugins made by `gadget new` copied into
/// the checkout's plugins/, a Python one and a Rust one (with its own
/// `[workspace]`). Cargo at the root still works (it took every folder of
/// plugins/ as a member), and the guest build skips what is not a member.
#[test]
fn any_plugin_copied_into_plugins_leaves_cargo_working() {
    let root = common::workspace();
    let tag = std::process::id();
    let python = root.join(format!("plugins/copied-python-{tag}"));
    let rust = root.join(format!("plugins/copied-rust-{tag}"));
    let _removed = Removed(vec![python.clone(), rust.clone()]);
    for (dir, lang) in [(&python, "python"), (&rust, "rust")] {
        let out = Command::new(common::gadget_bin())
            .args(["new", "copied", "--lang", lang, "--dir"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let metadata = Command::new("cargo")
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        metadata.status.success(),
        "{}",
        String::from_utf8_lossy(&metadata.stderr)
    );
    let members: serde_json::Value = serde_json::from_slice(&metadata.stdout).unwrap();
    let names: Vec<&str> = members["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"gadget-plugin-calculator"), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("copied")), "{names:?}");
}

/// Rows and columns of the test terminal: tall enough that nothing a
/// run prints scrolls off (the screen is read whole at the end).
const TERMINAL_SIZE: (u16, u16) = (400, 160);

/// `command` with its stdout and stderr on a pseudo-terminal (as a person
/// runs it): what the screen shows once it exits, every line a spinner
/// erased gone, as a person would read it.
pub(crate) fn on_a_terminal(mut command: Command) -> String {
    let (master, slave) = open_pty();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave)
        .spawn()
        .unwrap();
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        // Ends with EIO once the child (the last holder of the slave) exits.
        while let Ok(n) = master.read(&mut chunk) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&chunk[..n]);
        }
        seen
    });
    let status = child.wait().unwrap();
    drop(command);
    let shown = screen(&reader.join().unwrap());
    assert!(status.success(), "{status}: {shown}");
    shown
}

/// A pseudo-terminal of [`TERMINAL_SIZE`]: its master and slave sides.
fn open_pty() -> (std::fs::File, std::fs::File) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: TERMINAL_SIZE.0,
        ws_col: TERMINAL_SIZE.1,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty fills two descriptors; no name or termios.
    let opened = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(opened, 0, "openpty");
    // SAFETY: each descriptor is owned by exactly one File from here on.
    unsafe {
        use std::os::fd::FromRawFd;
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    }
}

/// What a terminal shows after `bytes`, row by row (a full row is a row,
/// not the start of a wrapped line), trailing blanks cut.
fn screen(bytes: &[u8]) -> String {
    let mut screen = vt100::Parser::new(
        std::num::NonZero::new(TERMINAL_SIZE.0).unwrap(),
        std::num::NonZero::new(TERMINAL_SIZE.1).unwrap(),
        0,
    );
    screen.process(bytes);
    let rows: Vec<String> = screen
        .screen()
        .rows(0, TERMINAL_SIZE.1)
        .map(|row| row.trim_end().to_string())
        .collect();
    rows.join("\n").trim_end().to_string()
}

/// The README's demo on a terminal: the model's text is streamed while
/// the calls' spinners run, and its last sentence, written across the
/// spinners' lifetime, is shown whole (a spinner used to commit the half
/// written line: "The two wai" / "✓ TextStats ..." / "ts run side by side").
#[test]
fn streamed_text_is_never_cut_by_a_spinner() {
    let mut command = Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .args(["run", "--replay", "10"])
        .arg(common::workspace().join("examples/transcripts/parallel.txt"))
        .env("XDG_CACHE_HOME", tempfile::tempdir().unwrap().keep());
    let shown = on_a_terminal(command);
    for line in [
        "I'll gather everything for the trip at once: none of these depend on each other.",
        "The two waits run side by side, so the whole response takes about 0.8 s, not 1.6.",
    ] {
        assert!(shown.contains(line), "not shown whole: {line}\n{shown}");
    }
}

/// The README's demo piped (as `demo.sh` and CI show it): a call that
/// starts while a sentence is streaming goes before the sentence, not
/// inside it.
#[test]
fn piped_text_is_never_cut_by_a_call() {
    let transcript = common::workspace().join("examples/transcripts/parallel.txt");
    let out = gadget(&[
        "--plugins",
        common::shipped_plugins().to_str().unwrap(),
        "run",
        "--replay",
        "10",
        transcript.to_str().unwrap(),
    ]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    for line in [
        "I'll gather everything for the trip at once: none of these depend on each other.",
        "The two waits run side by side, so the whole response takes about 0.8 s, not 1.6.",
    ] {
        assert!(
            shown.lines().any(|l| l == line),
            "not shown whole: {line}\n{shown}"
        );
    }
}

/// The model's answer, as the scripted model streams it: a whole line,
/// then a last line in two pieces with pauses between (so a terminal shows
/// it growing while the response is still open).
const ANSWER_LINES: [&str; 2] = [
    "Six sevens, worked out step by step.",
    "The answer is 42, and nothing needed a gadget.",
];

fn streamed_answer() -> crate::llm_server::Reply {
    crate::llm_server::openai_reply(
        &[
            ("Six sevens, worked out step by step.\n", 0),
            ("The answer is 42,", 300),
            (" and nothing needed a gadget.", 300),
        ],
        (20, 15),
    )
}

/// `gadget agent` in both tool formats, piped and on a terminal: the
/// answer shows once, whole, with the iteration's line after it (native
/// mode showed no text at all; on a terminal the block format showed the
/// answer twice and could erase the iteration line).
#[test]
fn the_agent_shows_its_answer_once_in_both_formats() {
    use crate::agent::{agent, agent_command};
    use crate::llm_server::LlmServer;
    for format in ["block", "native"] {
        let args = [
            "--model",
            "openai:test-model",
            "--tool-format",
            format,
            "What is six times seven?",
        ];
        let server = LlmServer::start(vec![streamed_answer()]);
        let out = agent(&server, None, &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{format}: {stdout}");
        for line in ANSWER_LINES {
            assert_eq!(stdout.matches(line).count(), 1, "{format}, piped: {stdout}");
        }

        let server = LlmServer::start(vec![streamed_answer()]);
        let (command, _home) = agent_command(&server, None, &args);
        let shown = on_a_terminal(command);
        for line in ANSWER_LINES {
            assert_eq!(
                shown.lines().filter(|l| l.trim_end() == line).count(),
                1,
                "{format}, on a terminal: {line}\n{shown}"
            );
        }
        let answer = shown.find(ANSWER_LINES[1]).unwrap();
        let iteration = shown
            .find("iteration 1: 0 call(s)")
            .unwrap_or_else(|| panic!("{format}: no iteration line\n{shown}"));
        assert!(answer < iteration, "{format}: {shown}");
        assert!(
            shown.contains("── iteration 1: openai:test-model"),
            "{shown}"
        );
    }
}

/// `gadget` with the given arguments, in a cache of its own.
fn gadget(args: &[&str]) -> std::process::Output {
    Command::new(common::gadget_bin())
        .env("XDG_CACHE_HOME", tempfile::tempdir().unwrap().keep())
        .env_remove("GADGET_CONFIG")
        .args(args)
        .output()
        .unwrap()
}

/// `gadget test DIR` runs the spec's examples and the directory's
/// tests.toml against the real component: a wrong expected output fails
/// the run (exit 1) with what was expected and what came; `gadget test
/// NAME` tests one loaded gadget. (`gadget check` never ran an example.)
#[test]
fn gadget_test_runs_every_example_and_case() {
    let dir = tempfile::tempdir().unwrap();
    let shipped = common::shipped_plugins().join("calculator");
    for file in ["plugin.toml", "calculator.wasm"] {
        std::fs::copy(shipped.join(file), dir.path().join(file)).unwrap();
    }
    let plugin = dir.path().to_str().unwrap();
    let cases = r#"
        [[case]]
        gadget = "Calculator"
        params = { operation = "divide", a = 1, b = 0 }
        error = "b must not be 0"
        error-kind = "invalid-arguments"

        [[case]]
        gadget = "Calculator"
        name = "a wrong expectation"
        params = { operation = "add", a = 15, b = 23 }
        output = "39"
    "#;
    std::fs::write(dir.path().join("tests.toml"), cases).unwrap();
    let out = gadget(&["test", plugin]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("✓ Calculator example 1"), "{shown}");
    assert!(
        shown.contains("✓ Calculator tests.toml case 1 (")
            && shown.contains("fails as expected: invalid-arguments error: division by zero"),
        "{shown}"
    );
    assert!(
        shown.contains("✗ Calculator tests.toml case 2 (a wrong expectation)")
            && shown.contains("expected: 39\n")
            && shown.contains("got:      38\n"),
        "{shown}"
    );
    assert!(shown.ends_with("5 passed, 1 failed\n"), "{shown}");

    std::fs::write(
        dir.path().join("tests.toml"),
        cases.replace("\"39\"", "\"38\""),
    )
    .unwrap();
    let out = gadget(&["test", plugin]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.ends_with("6 passed, 0 failed\n"), "{shown}");

    // A loaded gadget by name; a name nothing has is bad input.
    let plugins = common::shipped_plugins();
    let plugins = plugins.to_str().unwrap();
    let out = gadget(&["--plugins", plugins, "test", "AddDays"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("✓ AddDays example 1"), "{shown}");
    assert!(!shown.contains("Calculator"), "{shown}");
    let out = gadget(&["--plugins", plugins, "test", "NoSuchGadget"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `gadget call --dry-run`: the parameters as the gadget would get them,
/// defaults filled in, and nothing run; parameters that do not fit are
/// refused as a call's would be.
#[test]
fn call_dry_run_validates_and_runs_nothing() {
    let plugins = common::shipped_plugins();
    let plugins = plugins.to_str().unwrap();
    let out = gadget(&[
        "--plugins",
        plugins,
        "call",
        "Sequence",
        "--dry-run",
        "--json",
        "--params",
        r#"{"start": 1, "end": 3}"#,
    ]);
    assert!(out.status.success(), "{out:?}");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        shown,
        serde_json::json!({"gadget": "Sequence", "dry_run": true,
                           "params": {"start": 1, "end": 3, "step": 1}})
    );
    let out = gadget(&[
        "--plugins",
        plugins,
        "call",
        "Sequence",
        "--dry-run",
        "--params",
        r#"{"start": 1}"#,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("- end: is required (missing)"),
        "{out:?}"
    );
}

/// `--plugins` takes a component file, as its help says; plugins asked
/// for of which none loads are the command's failure (exit 2), not a
/// warning before an empty "Available gadgets:".
#[test]
fn plugins_take_a_component_and_none_loading_is_an_error() {
    let component = common::shipped_plugins().join("calculator/calculator.wasm");
    let out = gadget(&["--plugins", component.to_str().unwrap(), "list"]);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(listed.contains("Calculator"), "{listed}");

    let transcript = common::workspace().join("examples/transcripts/parallel.txt");
    let out = gadget(&[
        "--plugins",
        "/nonexistent/plugins",
        "run",
        transcript.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("error: no plugin loaded (1 failed"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A model named as people name it: a shortcut or a bare model name gets
/// its provider, and the note says which model that is.
#[test]
fn model_shortcuts_resolve_to_a_provider() {
    use crate::agent::agent;
    use crate::llm_server::LlmServer;
    let server = LlmServer::start(vec![streamed_answer()]);
    let out = agent(
        &server,
        None,
        &["--model", "gpt-4o-mini", "Six times seven?"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("note: --model gpt-4o-mini is openai:gpt-4o-mini"),
        "{err}"
    );
    let out = agent(&server, None, &["--model", "llama3.2", "Six times seven?"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("openai:llama3.2"), "{err}");
}

/// A response the executor stops reading (`--stop-on-error`) never
/// reports its usage: its tokens are estimated from what was sent and
/// received, as for a broken stream, so `--max-cost` does not under-count.
#[test]
fn a_response_cut_by_stop_on_error_still_costs_its_tokens() {
    use crate::agent::{agent, events, summary};
    use crate::llm_server::{LlmServer, block, openai_reply};
    let failing = block(
        "Calculator:bad",
        &[("operation", "divide"), ("a", "1"), ("b", "0")],
    );
    let server = LlmServer::start(vec![openai_reply(
        &[
            ("Dividing now.", 0),
            (&failing, 0),
            ("\nAnd more text the executor no longer reads.", 1500),
        ],
        (500, 300),
    )]);
    let out = agent(
        &server,
        None,
        &[
            "--model",
            "openai:gpt-4o-mini",
            "--stop-on-error",
            "--json",
            "Divide one by zero.",
        ],
    );
    let events = events(&out);
    let summary = summary(&events);
    assert!(summary["input_tokens"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["output_tokens"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["llm_cost"].as_f64().unwrap() > 0.0, "{summary}");
}

/// `command` on a pseudo-terminal that is its controlling terminal (its
/// `/dev/tty`, where prompts ask), typing each answer once the output so
/// far shows its cue; what the screen shows once it exits.
pub(crate) fn answering_on_a_terminal(mut command: Command, answers: &[(&str, &str)]) -> String {
    use std::os::unix::process::CommandExt;
    use std::sync::{Arc, Mutex};
    let (master, slave) = open_pty();
    // SAFETY: setsid and TIOCSCTTY are async-signal-safe; the child makes
    // the pseudo-terminal (its stdin) its controlling terminal.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave)
        .spawn()
        .unwrap();
    drop(command);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut keyboard = master.try_clone().unwrap();
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut master = master;
            let mut chunk = [0u8; 4096];
            while let Ok(n) = master.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                seen.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        })
    };
    for (cue, typed) in answers {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !String::from_utf8_lossy(&seen.lock().unwrap()).contains(cue) {
            if Instant::now() > deadline {
                let _ = child.kill();
                let shown = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
                panic!("never showed {cue:?} before the answer:\n{shown}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        keyboard.write_all(typed.as_bytes()).unwrap();
    }
    let status = child.wait().unwrap();
    drop(keyboard);
    reader.join().unwrap();
    let shown = screen(&seen.lock().unwrap());
    assert!(status.success(), "{status}: {shown}");
    shown
}

/// A call waiting for a person's approval on the terminal holds nothing
/// else back: a call that finishes meanwhile shows its result above the
/// prompt, and the wait is said once (it was said twice, and every result
/// waited for the answer).
#[test]
fn an_approval_prompt_holds_no_result_back() {
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("two.txt");
    std::fs::write(
        &transcript,
        "Checking two things.\n\
         !!!GADGET_START:Calculator:calc\n!!!ARG:operation\nadd\n!!!ARG:a\n1\n!!!ARG:b\n2\n!!!GADGET_END\n\
         !!!GADGET_START:Sleep:nap\n!!!ARG:ms\n300\n!!!GADGET_END\n",
    )
    .unwrap();
    let mut command = Command::new(common::gadget_bin());
    command
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .args(["--approve-gadget", "Calculator", "run"])
        .arg(&transcript)
        .env("XDG_CACHE_HOME", dir.path())
        .env_remove("GADGET_CONFIG");
    let shown = answering_on_a_terminal(command, &[("✓ Sleep (nap)", "y\n")]);
    assert_eq!(
        shown.matches("waits for your approval").count(),
        1,
        "{shown}"
    );
    assert!(!shown.contains("waits for approval:"), "{shown}");
    let slept = shown.find("✓ Sleep (nap)").unwrap();
    let added = shown
        .find("✓ Calculator (calc)")
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(slept < added, "{shown}");
}
