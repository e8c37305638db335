//! A new user's first hour, through the real binary: the samples are safe
//! wherever they are copied, shipped plugins that merely lack a grant are
//! quiet until it matters, and a gadget that cannot work is not offered.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use crate::cli::{stderr, stdout};
use crate::common;

/// One compile cache for these tests.
fn cache_dir() -> &'static Path {
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    CACHE.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// `gadget` as a new user runs it: `home` as the home directory, no policy
/// but one the arguments name, this module's compile cache.
fn user_gadget(home: &Path) -> Command {
    let mut command = Command::new(common::gadget_bin());
    command
        .arg("--cache-dir")
        .arg(cache_dir())
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("GADGET_CONFIG");
    command
}

/// `gadget` with the shipped plugins, run in `cwd` (see [`user_gadget`]).
fn gadget_in(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    user_gadget(home)
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("run gadget")
}

/// Raw MCP over `gadget ... mcp`'s stdio: initialize, then `tools/list`;
/// each answer with when it came. Stops at the list's answer.
fn mcp_list(mut command: Command) -> Vec<(std::time::Duration, Value)> {
    use std::io::{BufRead, Write};
    let started = std::time::Instant::now();
    let mut server = command
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    for line in [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    let mut answers = Vec::new();
    for line in std::io::BufReader::new(server.stdout.take().unwrap()).lines() {
        let message: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let last = message["id"] == 1;
        answers.push((started.elapsed(), message));
        if last {
            break;
        }
    }
    drop(stdin);
    let _ = server.kill();
    let _ = server.wait();
    answers
}

/// The tool names in a `tools/list` answer.
fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// A home directory holding a CLI's token, as `gh` keeps it.
fn home_with_a_token() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let gh = home.path().join(".config/gh");
    std::fs::create_dir_all(&gh).unwrap();
    std::fs::write(gh.join("hosts.yml"), "oauth_token: gho_THE_USERS_TOKEN\n").unwrap();
    std::fs::create_dir_all(home.path().join(".config/gadget-host")).unwrap();
    home
}

/// The old sample's grant (`host = ".."`, read-only at /repo) in a policy
/// copied to `~/.config/gadget-host/`: `..` is `~/.config`, and the token
/// must stay out of reach unless the grant says `sensitive = true`.
#[test]
fn a_policy_copied_into_the_config_directory_cannot_grant_it() {
    let home = home_with_a_token();
    let config = home.path().join(".config/gadget-host/config.toml");
    let read_token = |policy: &str| {
        std::fs::write(&config, policy).unwrap();
        gadget_in(
            home.path(),
            home.path(),
            &[
                "call",
                "ReadFile",
                "--json",
                "--params",
                r#"{"path": "/repo/gh/hosts.yml"}"#,
            ],
        )
    };
    let out = read_token(
        "[plugins.files]\nfiles = [{ host = \"..\", guest = \"/repo\", mode = \"ro\" }]\n",
    );
    assert!(!out.status.success());
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!all.contains("gho_THE_USERS_TOKEN"), "{all}");
    // Said once, where it matters: the grant that was refused and how to
    // mean it.
    assert!(all.contains("is refused: it"), "{all}");
    assert!(all.contains("sensitive = true"), "{all}");

    // The current sample, copied there as its header says, fails closed.
    std::fs::copy(common::workspace().join("examples/config.toml"), &config).unwrap();
    let check = gadget_in(home.path(), home.path(), &["check"]);
    let text = stdout(&check);
    assert!(!text.contains("granted files: /"), "{text}");

    // Meant on purpose, it applies.
    let out = read_token(
        "[plugins.files]\nfiles = [{ host = \"..\", guest = \"/repo\", mode = \"ro\", sensitive = true }]\n",
    );
    let call: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(call["ok"], true, "{call}");
}

/// The README's policy demo, on a copy of the checkout's layout: every
/// call succeeds except the write the policy refuses.
#[test]
fn the_readme_policy_demo_succeeds_except_the_refused_write() {
    let home = tempfile::tempdir().unwrap();
    let checkout = tempfile::tempdir().unwrap();
    let examples = checkout.path().join("examples");
    std::fs::create_dir_all(examples.join("transcripts")).unwrap();
    std::fs::create_dir_all(examples.join("scratch")).unwrap();
    let source = common::workspace();
    for file in ["config.toml", "transcripts/files.txt"] {
        std::fs::copy(source.join("examples").join(file), examples.join(file)).unwrap();
    }
    std::os::unix::fs::symlink(source.join("host"), checkout.path().join("host")).unwrap();
    let out = gadget_in(
        home.path(),
        checkout.path(),
        &[
            "--config",
            "examples/config.toml",
            "run",
            "examples/transcripts/files.txt",
            "--json",
        ],
    );
    let finished: Vec<Value> = stdout(&out)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["type"] == "call_finished")
        .collect();
    let outcome = |id: &str| {
        finished
            .iter()
            .find(|e| e["id"] == id)
            .map(|e| e["outcome"].as_str().unwrap_or_default().to_string())
            .unwrap_or_else(|| panic!("no {id} in {}\n{}", stdout(&out), stderr(&out)))
    };
    assert_eq!(outcome("todos"), "result", "{}", stdout(&out));
    assert_eq!(outcome("readme"), "result", "{}", stdout(&out));
    assert_eq!(outcome("sneaky"), "error", "{}", stdout(&out));
    assert_eq!(outcome("notes"), "result", "{}", stdout(&out));
    assert!(examples.join("scratch/notes.md").is_file());
    // The shipped plugins without grants are not warned about.
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

/// Shipped plugins that merely lack a grant: no warning on everyday
/// commands, a status in `list`, not offered to the model, and a call
/// that says what to grant.
#[test]
fn a_plugin_granted_nothing_is_quiet_listed_as_such_and_not_offered() {
    let home = tempfile::tempdir().unwrap();
    let cwd = home.path();
    let list = gadget_in(home.path(), cwd, &["list"]);
    assert!(list.status.success());
    assert!(!stderr(&list).contains("warning"), "{}", stderr(&list));
    let table = stdout(&list);
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {table}"))
            .to_string()
    };
    assert!(table.lines().next().unwrap().contains("STATUS"), "{table}");
    assert!(row("ReadFile").contains("needs files"), "{table}");
    assert!(row("FetchUrl").contains("needs http"), "{table}");
    assert!(row("Summarize").contains("needs llm"), "{table}");
    assert!(row("Calculator").contains("ready"), "{table}");
    // -q: not even the note under the table.
    let quiet = gadget_in(home.path(), cwd, &["-q", "list"]);
    assert_eq!(stderr(&quiet), "");

    let json = gadget_in(home.path(), cwd, &["list", "--json"]);
    let items: Vec<Value> = serde_json::from_str(&stdout(&json)).unwrap();
    let available =
        |name: &str| items.iter().find(|i| i["name"] == name).unwrap()["available"].clone();
    assert_eq!(available("ReadFile"), false);
    assert_eq!(available("Calculator"), true);

    // Not offered to the model.
    let prompt = stdout(&gadget_in(home.path(), cwd, &["prompt"]));
    assert!(prompt.contains("Calculator"), "{prompt}");
    assert!(!prompt.contains("ReadFile"), "{prompt}");

    // "Not found" lists what is offered, as the prompt does.
    let unknown = gadget_in(home.path(), cwd, &["call", "Nope"]);
    let err = stderr(&unknown);
    assert!(err.contains("Available gadgets: AddDays"), "{err}");
    assert!(!err.contains("ReadFile"), "{err}");

    // Called by name anyway, it fails at the door and says what to grant.
    let call = gadget_in(
        home.path(),
        cwd,
        &["call", "ReadFile", "--params", r#"{"path": "/x"}"#],
    );
    assert!(!call.status.success());
    let all = format!("{}{}", stdout(&call), stderr(&call));
    assert!(
        all.contains(
            "plugin 'files' is granted none of what it asks for: asks for files * (rw), not granted"
        ),
        "{all}"
    );
    assert!(all.contains("--grant files:files=DIR:/PATH"), "{all}");

    // Narrowing rw to ro on purpose is not a warning, and the plugin is ready.
    let dir = tempfile::tempdir().unwrap();
    let grant = format!("files:files={}:/data:ro", dir.path().display());
    let narrowed = gadget_in(home.path(), cwd, &["--grant", &grant, "list"]);
    assert!(
        !stderr(&narrowed).contains("warning"),
        "{}",
        stderr(&narrowed)
    );
    assert!(
        stdout(&narrowed)
            .lines()
            .any(|l| l.starts_with("ReadFile ") && l.contains("ready"))
    );
}

/// Reads a child's stdout on a thread: each piece with when it came.
fn timed_reader(
    mut stdout: std::process::ChildStdout,
) -> std::sync::mpsc::Receiver<(std::time::Instant, String)> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        loop {
            match std::io::Read::read(&mut stdout, &mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let piece = String::from_utf8_lossy(&buffer[..n]).into_owned();
                    if tx.send((std::time::Instant::now(), piece)).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// `gadget run` piped: text outside blocks is written as it is read, not
/// when its segment ends (here the segment never ends until stdin does).
#[test]
fn run_shows_text_as_it_arrives_when_piped() {
    use std::io::Write;
    let home = tempfile::tempdir().unwrap();
    let mut child = user_gadget(home.path())
        .arg("--plugins")
        .arg(common::shipped_plugins())
        .args(["run", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let pieces = timed_reader(child.stdout.take().unwrap());
    stdin.write_all(b"Let me think about it").unwrap();
    stdin.flush().unwrap();
    // Generous: the point is that it comes at all before the stream ends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = String::new();
    while !seen.contains("Let me think about it") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match pieces.recv_timeout(left) {
            Ok((_, piece)) => seen.push_str(&piece),
            Err(_) => {
                let _ = child.kill();
                panic!("the text was not shown while the stream was open: {seen:?}");
            }
        }
    }
    stdin
        .write_all(b"... done.\n\n!!!GADGET_START:Calculator:c1\n!!!ARG:operation\nadd\n!!!ARG:a\n1\n!!!ARG:b\n2\n!!!GADGET_END\nAll good.\n")
        .unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    while let Ok((_, piece)) = pieces.recv_timeout(std::time::Duration::from_secs(5)) {
        seen.push_str(&piece);
    }
    assert!(status.success(), "{seen}");
    // The same lines as segments printed whole: each on lines of its own.
    assert!(
        seen.starts_with("Let me think about it... done.\nAll good.\n"),
        "{seen:?}"
    );
    assert!(seen.contains("\n✓ Calculator (c1) in "), "{seen:?}");
    assert!(seen.contains(": 3\n\n1 call: 1 succeeded"), "{seen:?}");
}

/// `gadget agent` piped: a 20-line answer streamed over about two seconds
/// shows its first line long before the last arrives; `--answer-only`
/// prints the answer alone on stdout.
#[test]
fn agent_streams_the_answer_and_can_print_it_alone() {
    use crate::llm_server::{LlmServer, openai_reply};
    let lines: Vec<String> = (1..=20)
        .map(|i| format!("line {i} of the answer\n"))
        .collect();
    let pieces: Vec<(&str, u64)> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| (line.as_str(), if i == 0 { 0 } else { 100 }))
        .collect();
    let home = tempfile::tempdir().unwrap();
    let agent = |server: &LlmServer, extra: &[&str]| {
        let mut command = user_gadget(home.path());
        command
            .arg("--plugins")
            .arg(common::shipped_plugins())
            .env("TEST_LLM_KEY", "sk-test")
            .args(["agent", "--model", "openai:test-model", "--base-url"])
            .arg(server.url() + "/v1")
            .args(["--api-key-env", "TEST_LLM_KEY"])
            .args(extra)
            .arg("Write twenty lines.")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };
    let server = LlmServer::start(vec![openai_reply(&pieces, (10, 20))]);
    let mut child = agent(&server, &[]).spawn().unwrap();
    let started = std::time::Instant::now();
    let reader = timed_reader(child.stdout.take().unwrap());
    let status = child.wait().unwrap();
    let mut first_line_at = None;
    let mut last_at = started;
    let mut seen = String::new();
    while let Ok((at, piece)) = reader.recv_timeout(std::time::Duration::from_secs(5)) {
        seen.push_str(&piece);
        if first_line_at.is_none() && seen.contains("line 1 of the answer") {
            first_line_at = Some(at);
        }
        last_at = at;
    }
    assert!(status.success(), "{seen}");
    let first = first_line_at.unwrap_or_else(|| panic!("no first line in {seen:?}"));
    assert!(seen.contains("line 20 of the answer"), "{seen}");
    // The rest took 19 × 100 ms to arrive; the first line came well before.
    assert!(
        last_at.duration_since(first) >= std::time::Duration::from_millis(1000),
        "the first line came {:?} before the last: not streamed",
        last_at.duration_since(first)
    );

    let server = LlmServer::start(vec![openai_reply(&[("The answer is 42.\n", 0)], (5, 5))]);
    let out = agent(&server, &["--answer-only"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "The answer is 42.\n");
    assert!(
        stderr(&out).contains("The answer is 42."),
        "{}",
        stderr(&out)
    );
}

/// MCP clients are offered what the model is: not a plugin granted nothing.
#[test]
fn mcp_lists_only_gadgets_that_can_work() {
    let home = tempfile::tempdir().unwrap();
    let list = |grants: &[&str]| -> Vec<String> {
        let mut command = user_gadget(home.path());
        command
            .arg("--plugins")
            .arg(common::shipped_plugins())
            .args(grants);
        tool_names(&mcp_list(command).last().unwrap().1)
    };
    let names = list(&[]);
    assert!(names.contains(&"Calculator".to_string()), "{names:?}");
    assert!(!names.contains(&"ReadFile".to_string()), "{names:?}");
    assert!(!names.contains(&"FetchUrl".to_string()), "{names:?}");
    let dir = tempfile::tempdir().unwrap();
    let grant = format!("files:files={}:/data", dir.path().display());
    let names = list(&["--grant", &grant]);
    assert!(names.contains(&"ReadFile".to_string()), "{names:?}");
}

/// `gadget mcp` answers `initialize` while its plugins still compile (a
/// CPython component takes seconds cold), so a client's start-up timeout
/// is not spent on them; the first `tools/list` waits and is complete.
#[test]
fn mcp_initializes_before_cold_compiles_finish() {
    let home = tempfile::tempdir().unwrap();
    let mut command = user_gadget(home.path());
    command
        .arg("--no-cache")
        .arg("--plugins")
        .arg(common::workspace().join("examples/python-gadget"))
        // Granted one of its doors, so its gadgets are offered.
        .args(["--grant", "python-words:http=https://example.com"]);
    let answers = mcp_list(command);
    let at = |id: u64| {
        answers
            .iter()
            .find(|(_, m)| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer {id}: {answers:?}"))
    };
    let (initialized_at, _) = at(0);
    let (listed_at, list) = at(1);
    assert!(
        tool_names(list).contains(&"WordFrequency".to_string()),
        "{list}"
    );
    // The compile took its seconds after initialize was answered.
    assert!(
        *listed_at >= *initialized_at + std::time::Duration::from_millis(500),
        "initialize at {initialized_at:?}, the list at {listed_at:?}: initialize waited for the compile"
    );
}
