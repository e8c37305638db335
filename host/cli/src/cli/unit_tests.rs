//! A plugin's own unit tests, run by `gadget test DIR` before its
//! component's cases: Python's `test_*.py` (`python3 -m unittest`, the
//! SDK's `gadget_sdk.testing` on the path) and JavaScript's `*.test.js`
//! (`node --test`, with module hooks that give `gadget-sdk` the SDK the
//! component is built with, `gadget-sdk/testing` the helper, and the
//! component's imports a recording host). They are host code, not a
//! sandboxed component: only for a directory the user names.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use gadget_runtime::plugin::PluginSource;
use gadget_runtime::registry::Registry;

/// The JavaScript test support, written beside each run.
const JS_SUPPORT: &[(&str, &str)] = &[
    (
        "register.mjs",
        include_str!("../../../../sdk/js/testing/register.mjs"),
    ),
    (
        "hooks.mjs",
        include_str!("../../../../sdk/js/testing/hooks.mjs"),
    ),
    (
        "host.mjs",
        include_str!("../../../../sdk/js/testing/host.mjs"),
    ),
    (
        "testing.mjs",
        include_str!("../../../../sdk/js/testing/testing.mjs"),
    ),
];

/// Which language's tests a directory holds.
enum Kind {
    Python,
    JavaScript { files: Vec<PathBuf> },
}

/// A named plugin directory's unit tests.
pub struct UnitTests {
    pub dir: PathBuf,
    kind: Kind,
}

/// The unit tests of the directory the user named, when it is a loaded
/// plugin whose component was built from one language's app (`app.py` or
/// `app.js`, and no other language's sources beside it), so the tests are
/// the author's tests of that code.
pub fn found(registry: &Registry, named: &Path) -> Option<UnitTests> {
    let named = named.canonicalize().ok()?;
    let loaded = registry.plugins().iter().any(|plugin| {
        matches!(&plugin.artifact.source, PluginSource::Dir(dir)
            if dir.canonicalize().is_ok_and(|dir| dir == named))
    });
    let names: Vec<String> = std::fs::read_dir(&named)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let has = |name: &str| names.iter().any(|n| n == name);
    let other_language = ["Cargo.toml", "go.mod", "Makefile"].iter().any(|f| has(f))
        || names.iter().any(|n| n.ends_with(".c"));
    if !loaded || other_language {
        return None;
    }
    let python = has("app.py")
        && !has("package.json")
        && names
            .iter()
            .any(|n| n.starts_with("test_") && n.ends_with(".py"));
    if python {
        return Some(UnitTests {
            dir: named,
            kind: Kind::Python,
        });
    }
    let mut files: Vec<PathBuf> = names
        .iter()
        .filter(|n| n.ends_with(".test.js"))
        .map(|n| named.join(n))
        .collect();
    files.sort();
    (has("app.js") && !files.is_empty()).then_some(UnitTests {
        dir: named,
        kind: Kind::JavaScript { files },
    })
}

impl UnitTests {
    /// What runs them, for the line that says so.
    pub fn runner(&self) -> &'static str {
        match self.kind {
            Kind::Python => "python3 -m unittest",
            Kind::JavaScript { .. } => "node --test",
        }
    }

    /// `Ok` with the runner's summary, `Err` with its output.
    pub fn run(&self) -> Result<Result<String, String>> {
        match &self.kind {
            Kind::Python => python_unit_tests(&self.dir),
            Kind::JavaScript { files } => js_unit_tests(&self.dir, files),
        }
    }
}

/// `node --test` on the plugin's `*.test.js`, with the SDK as the build
/// would give it (the engine the manifest picks: an async `run` fails
/// under QuickJS here as in the component): `Ok` with the counts, `Err`
/// with the test output.
fn js_unit_tests(dir: &Path, files: &[PathBuf]) -> Result<Result<String, String>> {
    let support = super::build::build_dir()?;
    for (name, text) in JS_SUPPORT {
        std::fs::write(support.path().join(name), text)?;
    }
    std::fs::write(
        support.path().join("gadget-sdk.mjs"),
        super::build::js_sdk_module(dir)?,
    )?;
    let out = std::process::Command::new("node")
        .arg("--import")
        .arg(support.path().join("register.mjs"))
        .args(["--test", "--test-reporter=tap"])
        .args(files)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Err(
                "node is not installed: the JavaScript unit tests need Node.js 20 or newer on PATH"
                    .into(),
            ));
        }
        Err(e) => {
            return Err(e).with_context(|| format!("running node --test in {}", dir.display()));
        }
    };
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let count = |what: &str| {
        report
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# {what} ")))
            .unwrap_or("?")
            .to_string()
    };
    if out.status.success() {
        Ok(Ok(format!(
            "node --test: {} tests, {} passed",
            count("tests"),
            count("pass")
        )))
    } else {
        Ok(Err(format!(
            "{report}{}",
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// `python3 -m unittest` in a Python plugin directory, the SDK (with its
/// `testing` helper) on the path: `Ok` with unittest's last line, `Err`
/// with its output.
fn python_unit_tests(dir: &Path) -> Result<Result<String, String>> {
    let support = super::build::build_dir()?;
    super::build::write_python_sdk(support.path())?;
    let path = std::env::join_paths([dir, support.path()]).context("PYTHONPATH")?;
    let out = std::process::Command::new("python3")
        .args(["-m", "unittest", "discover", "-p", "test_*.py"])
        .current_dir(dir)
        .env("PYTHONPATH", path)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running python3 -m unittest in {}", dir.display()))?;
    // unittest reports on stderr: "Ran N tests in ...", then "OK".
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        let ran = report
            .lines()
            .find(|l| l.starts_with("Ran "))
            .map(|l| l.split(" in ").next().unwrap_or(l).to_string())
            .unwrap_or_else(|| "ran".into());
        Ok(Ok(format!("python3 -m unittest: {ran}, OK")))
    } else {
        Ok(Err(format!(
            "{}{report}",
            String::from_utf8_lossy(&out.stdout)
        )))
    }
}
