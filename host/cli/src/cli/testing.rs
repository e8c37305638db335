//! `gadget test [PLUGIN|NAME]`: a gadget author's test loop. Every example
//! of every gadget's spec runs against the real component, through the one
//! call path every front end uses, and is compared with its expected
//! output (an example without one must at least succeed: the model is
//! shown it as a call that works). A plugin directory's `tests.toml` adds
//! cases the model is not shown, including expected errors. Every case
//! runs in the scope `gadget call` builds: the operator's rules (nobody is
//! asked, so a call that needs approval is denied), rate limits and the
//! journal; a downloaded plugin's cases get nothing its calls would not.
//!
//! A Python or JavaScript plugin's own unit tests ([`super::unit_tests`])
//! are host code, not a sandboxed component: they run only for a plugin
//! directory the user names on the command line, never for plugins merely
//! loaded, and the line before them says so. Each result
//! is one line; a `N passed, N failed` line ends the run; a failure exits
//! 1.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result};
use serde::Deserialize;
use serde_json::Value;

use gadget_core::call::{CallReport, Outcome};
use gadget_core::scope::CallScope;
use gadget_core::tool::{ToolCall, Tools};
use gadget_runtime::plugin::PluginSource;
use gadget_runtime::registry::Registry;

use super::EXIT_FAILED;
use super::safe::safe;

/// The file of extra cases in a plugin directory.
pub const TESTS_FILE: &str = "tests.toml";

/// Bytes of a tests file read, at most (cases are small; a larger file
/// is a mistake, not a test suite).
const MAX_TESTS_FILE_BYTES: u64 = 1 << 20;

/// Characters of an expected or actual text shown in a failure line.
const SHOWN_CHARS: usize = 400;

/// `tests.toml`: cases besides the spec's examples.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct TestsFile {
    /// Gadgets whose examples' outputs are illustrations (the time now, a
    /// random pick): their examples must succeed, their outputs are not
    /// compared.
    #[serde(default)]
    output_varies: Vec<String>,
    #[serde(default, rename = "case")]
    cases: Vec<Case>,
}

/// One case: a gadget, its parameters and what must come of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Case {
    gadget: String,
    /// What the case shows (printed on its line).
    name: Option<String>,
    #[serde(default = "empty_object")]
    params: toml::Table,
    /// The result, exactly (ends trimmed).
    output: Option<String>,
    /// Text the result contains.
    contains: Option<String>,
    /// The call fails and its message contains this.
    error: Option<String>,
    /// The call fails with this kind (`invalid-arguments`, `failed`, ...).
    error_kind: Option<String>,
}

fn empty_object() -> toml::Table {
    toml::Table::new()
}

/// What a case expects.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// Success, whatever the result.
    Succeeds,
    Output(String),
    Contains(String),
    Error {
        contains: Option<String>,
        kind: Option<String>,
    },
}

/// One case to run: which gadget, where it came from, what it expects.
#[derive(Debug)]
struct Planned {
    gadget: String,
    label: String,
    params: Value,
    expect: Expect,
}

/// What one `gadget test` runs.
pub struct TestRun<'a> {
    /// A gadget's name, a plugin's name, or nothing (every loaded gadget).
    pub target: Option<&'a str>,
    /// The plugin directory the user named, if any: the only one whose
    /// host-side unit tests may run.
    pub named_dir: Option<&'a Path>,
    /// What surrounds every case's call.
    pub scope: Arc<CallScope>,
}

/// `gadget test`: the registry holds what `--plugins` (or the directory
/// given on the command line) loaded.
pub async fn test(registry: &Registry, tools: &dyn Tools, run: TestRun<'_>) -> Result<ExitCode> {
    let TestRun {
        target,
        named_dir,
        scope,
    } = run;
    let (planned, skipped) = match plan(registry, target)? {
        Ok(planned) => planned,
        Err(why) => {
            eprintln!("error: {why}");
            return Ok(ExitCode::from(super::EXIT_BAD_INPUT));
        }
    };
    // Written, not printed: `gadget test | head` ends the run quietly.
    let mut out = std::io::stdout();
    for (gadget, why) in &skipped {
        writeln!(out, "  - {gadget} skipped: {}", safe(why))?;
    }
    if planned.is_empty() && !skipped.is_empty() {
        writeln!(out, "0 passed, 0 failed, {} skipped", skipped.len())?;
        return Ok(ExitCode::SUCCESS);
    }
    if planned.is_empty() {
        println!(
            "nothing to test: no gadget has an example, and no {TESTS_FILE} has a case (add examples to the spec, or [[case]] entries to {TESTS_FILE})"
        );
        return Ok(ExitCode::from(EXIT_FAILED));
    }
    let (mut passed, mut failed) = (0usize, 0usize);
    if let Some(units) = named_dir.and_then(|dir| super::unit_tests::found(registry, dir)) {
        writeln!(
            out,
            "  running host code, not sandboxed: {} in {}",
            units.runner(),
            units.dir.display()
        )?;
        match units.run()? {
            Ok(summary) => {
                passed += 1;
                writeln!(out, "  ✓ {}: unit tests ({summary})", units.dir.display())?;
            }
            Err(output) => {
                failed += 1;
                writeln!(out, "  ✗ {}: unit tests", units.dir.display())?;
                for line in output.lines() {
                    writeln!(out, "      {}", safe(line))?;
                }
            }
        }
    }
    for case in &planned {
        let started = Instant::now();
        let verdict = run_case(tools, case, &scope).await;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        match verdict {
            Ok(what) => {
                passed += 1;
                writeln!(out, "  ✓ {} ({ms:.1} ms): {}", case.label, safe(&what))?;
            }
            Err(why) => {
                failed += 1;
                writeln!(out, "  ✗ {} ({ms:.1} ms)", case.label)?;
                for line in why.lines() {
                    writeln!(out, "      {}", safe(line))?;
                }
            }
        }
    }
    match skipped.len() {
        0 => writeln!(out, "{passed} passed, {failed} failed")?,
        n => writeln!(out, "{passed} passed, {failed} failed, {n} skipped")?,
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

/// `target` names the gadget or its plugin (nothing: every gadget).
fn is_target(gadget: &gadget_runtime::WasmGadget, target: Option<&str>) -> bool {
    target.is_none_or(|name| {
        gadget.card.spec.name.eq_ignore_ascii_case(name)
            || gadget.plugin.name().eq_ignore_ascii_case(name)
    })
}

/// The cases to run, and the gadgets skipped with why.
type Plan = (Vec<Planned>, Vec<(String, String)>);

/// Every case of the gadgets `target` names, in load order: the spec's
/// examples, then the plugin directory's cases. `Ok(Err)`: the target
/// names nothing, or a tests file is unusable. With no target, a gadget
/// whose plugin the policy grants none of what it asks for could only
/// fail, so it is skipped, naming the grant (a gadget or plugin named on
/// the command line runs, and fails saying so).
fn plan(registry: &Registry, target: Option<&str>) -> Result<Result<Plan, String>> {
    let mut skipped = Vec::new();
    let chosen: Vec<_> = registry
        .gadgets()
        .filter(|gadget| is_target(gadget, target))
        .filter(|gadget| {
            if target.is_some() || gadget.plugin.is_available() {
                return true;
            }
            let needs: Vec<String> = gadget
                .plugin
                .missing_grants()
                .map(ToString::to_string)
                .collect();
            skipped.push((gadget.card.spec.name.clone(), needs.join("; ")));
            false
        })
        .collect();
    if chosen.is_empty() && !skipped.is_empty() {
        return Ok(Ok((Vec::new(), skipped)));
    }
    if chosen.is_empty() {
        let loaded: Vec<&str> = registry
            .gadgets()
            .map(|g| g.card.spec.name.as_str())
            .collect();
        return Ok(Err(match target {
            Some(name) => format!(
                "no loaded gadget or plugin is named '{name}' (loaded: {}); a plugin directory is tested with `gadget test DIR`",
                loaded.join(", ")
            ),
            None => "no gadgets are loaded".into(),
        }));
    }
    // Each plugin directory's tests file once, for the gadgets chosen.
    let mut files: Vec<(PathBuf, String, TestsFile)> = Vec::new();
    for gadget in &chosen {
        if let PluginSource::Dir(dir) = &gadget.plugin.artifact.source
            && !files.iter().any(|(d, _, _)| d == dir)
        {
            match read_tests(dir)? {
                Ok(file) => files.push((dir.clone(), gadget.plugin.name().to_string(), file)),
                Err(why) => return Ok(Err(why)),
            }
        }
    }
    let varies = |name: &str| {
        files
            .iter()
            .any(|(_, _, f)| f.output_varies.iter().any(|v| v.eq_ignore_ascii_case(name)))
    };
    let mut planned = Vec::new();
    for gadget in &chosen {
        let name = &gadget.card.spec.name;
        for (i, example) in gadget.card.spec.examples.iter().enumerate() {
            // Checked to be a JSON object against the schema at load time.
            let params: Value = serde_json::from_str(&example.params).unwrap_or(Value::Null);
            let comment = example
                .comment
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            planned.push(Planned {
                gadget: name.clone(),
                label: format!("{name} example {}{comment}", i + 1),
                params,
                expect: match &example.output {
                    Some(output) if !varies(name) => Expect::Output(output.clone()),
                    _ => Expect::Succeeds,
                },
            });
        }
    }
    for (dir, plugin, file) in files {
        for (i, case) in file.cases.into_iter().enumerate() {
            let Some(gadget) = registry.get(&case.gadget) else {
                return Ok(Err(format!(
                    "{}: case {}: no loaded gadget is named '{}'",
                    dir.join(TESTS_FILE).display(),
                    i + 1,
                    case.gadget
                )));
            };
            if gadget.plugin.name() != plugin || !chosen.iter().any(|c| Arc::ptr_eq(c, gadget)) {
                continue;
            }
            match planned_case(&dir, i, case) {
                Ok(case) => planned.push(case),
                Err(why) => return Ok(Err(why)),
            }
        }
    }
    Ok(Ok((planned, skipped)))
}

/// `dir/tests.toml` (empty when there is no such file).
fn read_tests(dir: &Path) -> Result<Result<TestsFile, String>> {
    let path = dir.join(TESTS_FILE);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Ok(TestsFile {
                output_varies: Vec::new(),
                cases: Vec::new(),
            }));
        }
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(file, MAX_TESTS_FILE_BYTES + 1),
        &mut text,
    )
    .with_context(|| format!("reading {}", path.display()))?;
    if text.len() as u64 > MAX_TESTS_FILE_BYTES {
        return Ok(Err(format!(
            "{}: over {MAX_TESTS_FILE_BYTES} bytes",
            path.display()
        )));
    }
    Ok(toml::from_str::<TestsFile>(&text).map_err(|e| format!("{}: {e}", path.display())))
}

/// A case of a tests file, checked: one kind of expectation.
fn planned_case(dir: &Path, index: usize, case: Case) -> Result<Planned, String> {
    let file = dir.join(TESTS_FILE);
    let where_ = format!("{}: case {}", file.display(), index + 1);
    let expect = match (&case.output, &case.contains, &case.error, &case.error_kind) {
        (Some(output), None, None, None) => Expect::Output(output.clone()),
        (None, Some(text), None, None) => Expect::Contains(text.clone()),
        (None, None, error, kind) if error.is_some() || kind.is_some() => Expect::Error {
            contains: error.clone(),
            kind: kind.clone(),
        },
        (None, None, None, None) => Expect::Succeeds,
        _ => {
            return Err(format!(
                "{where_}: give one of output, contains, or error (with error-kind)"
            ));
        }
    };
    let params = serde_json::to_value(&case.params).map_err(|e| format!("{where_}: {e}"))?;
    let name = case.name.map(|n| format!(" ({n})")).unwrap_or_default();
    Ok(Planned {
        label: format!("{} {TESTS_FILE} case {}{name}", case.gadget, index + 1),
        gadget: case.gadget,
        params,
        expect,
    })
}

/// Runs one case; `Ok`: what passed, `Err`: why it did not.
async fn run_case(
    tools: &dyn Tools,
    case: &Planned,
    scope: &Arc<CallScope>,
) -> Result<String, String> {
    let Some(tool) = tools.find(&case.gadget) else {
        return Err(format!("the gadget '{}' is not served", case.gadget));
    };
    let params = match gadget_exec::call::prepare(&*tool, case.params.clone()) {
        Ok(params) => params,
        Err(failure) => {
            return judge_refusal(&case.expect, &failure.to_string());
        }
    };
    let mut call = ToolCall::new("gadget_test", params);
    call.scope = scope.clone();
    let report = gadget_exec::call::run(tool, call).await.report;
    judge(&case.expect, &report)
}

/// Parameters the schema refused: only an expected invalid-arguments
/// error passes.
fn judge_refusal(expect: &Expect, message: &str) -> Result<String, String> {
    match expect {
        Expect::Error { contains, kind } => {
            if kind.as_deref().is_some_and(|k| k != "invalid-arguments") {
                return Err(format!(
                    "expected a {} error, but the parameters do not fit the schema: {message}",
                    kind.as_deref().unwrap_or_default()
                ));
            }
            match contains {
                Some(text) if !message.contains(text.as_str()) => Err(format!(
                    "expected an error containing: {}\nthe parameters do not fit the schema: {message}",
                    cut(text)
                )),
                _ => Ok(format!("refused as expected: {}", cut(message))),
            }
        }
        _ => Err(format!("the parameters do not fit the schema: {message}")),
    }
}

/// A finished call against what the case expects.
fn judge(expect: &Expect, report: &CallReport) -> Result<String, String> {
    let text = match &report.outcome {
        Ok(Outcome::Result { result, .. } | Outcome::Finish { result, .. }) => Ok(result.as_str()),
        // What a person is asked is what the gadget gives, as its result
        // would be.
        Ok(Outcome::AskHuman { question }) => Ok(question.as_str()),
        Err(error) => Err(format!("{} error: {error}", error.kind())),
    };
    match (expect, text) {
        (Expect::Succeeds, Ok(text)) => Ok(cut(text)),
        (Expect::Output(expected), Ok(text)) => {
            if text.trim() == expected.trim() {
                Ok(cut(text))
            } else {
                Err(format!(
                    "expected: {}\ngot:      {}",
                    cut(expected),
                    cut(text)
                ))
            }
        }
        (Expect::Contains(part), Ok(text)) => {
            if text.contains(part.as_str()) {
                Ok(cut(text))
            } else {
                Err(format!(
                    "expected a result containing: {}\ngot: {}",
                    cut(part),
                    cut(text)
                ))
            }
        }
        (Expect::Error { .. }, Ok(text)) => Err(format!("expected an error, got: {}", cut(text))),
        (Expect::Error { contains, kind }, Err(message)) => {
            let error = report.outcome.as_ref().err();
            let actual_kind = error.map(|e| e.kind().to_string()).unwrap_or_default();
            if let Some(kind) = kind
                && error.is_none_or(|_| actual_kind != *kind)
            {
                return Err(format!("expected a {kind} error, got: {}", cut(&message)));
            }
            match contains {
                Some(part) if !message.contains(part.as_str()) => Err(format!(
                    "expected an error containing: {}\ngot: {}",
                    cut(part),
                    cut(&message)
                )),
                _ => Ok(format!("fails as expected: {}", cut(&message))),
            }
        }
        (_, Err(message)) => Err(message),
    }
}

/// A text cut to a line's worth, its line breaks shown.
fn cut(text: &str) -> String {
    let one_line = text.trim().replace('\n', "⏎");
    if one_line.chars().count() > SHOWN_CHARS {
        let mut shown: String = one_line.chars().take(SHOWN_CHARS).collect();
        shown.push_str(" …");
        shown
    } else {
        one_line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(toml_text: &str) -> Result<Vec<Planned>, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TESTS_FILE), toml_text).unwrap();
        read_tests(dir.path()).unwrap().and_then(|file| {
            file.cases
                .into_iter()
                .enumerate()
                .map(|(i, c)| planned_case(dir.path(), i, c))
                .collect()
        })
    }

    #[test]
    fn a_case_expects_one_thing() {
        let cases = planned(
            r#"
            [[case]]
            gadget = "WordCount"
            params = { text = "" }
            error = "no words"
            error-kind = "invalid-arguments"

            [[case]]
            gadget = "WordCount"
            params = { text = "a b" }
            output = "2 words"
            "#,
        )
        .unwrap();
        assert_eq!(
            cases[0].expect,
            Expect::Error {
                contains: Some("no words".into()),
                kind: Some("invalid-arguments".into())
            }
        );
        assert_eq!(cases[1].params, serde_json::json!({"text": "a b"}));
        let both = planned("[[case]]\ngadget = \"X\"\noutput = \"a\"\nerror = \"b\"\n");
        assert!(both.unwrap_err().contains("give one of"));
        let typo = planned("[[case]]\ngadget = \"X\"\nouptut = \"a\"\n");
        assert!(typo.unwrap_err().contains("unknown field `ouptut`"));
    }

    #[test]
    fn results_are_judged_by_what_the_case_expects() {
        let report = |outcome| CallReport::of(outcome, std::time::Duration::ZERO);
        let ok = report(Ok(Outcome::Result {
            result: "2 words\n".into(),
            details: None,
            rich: None,
        }));
        assert!(judge(&Expect::Output("2 words".into()), &ok).is_ok());
        let wrong = judge(&Expect::Output("3 words".into()), &ok).unwrap_err();
        assert_eq!(wrong, "expected: 3 words\ngot:      2 words");
        assert!(judge(&Expect::Contains("words".into()), &ok).is_ok());
        let failed = report(Err(gadget_core::call::CallError::InvalidArguments {
            message: "text has no words".into(),
        }));
        let expect = |kind: &str| Expect::Error {
            contains: Some("no words".into()),
            kind: Some(kind.into()),
        };
        assert!(judge(&expect("invalid-arguments"), &failed).is_ok());
        assert!(judge(&expect("failed"), &failed).is_err());
        assert!(judge(&Expect::Succeeds, &failed).is_err());
        assert!(judge(&expect("invalid-arguments"), &ok).is_err());
    }
}
