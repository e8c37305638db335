//! `gadget new NAME --lang L`: start a plugin directory for a gadget in a
//! language; it builds (`gadget build`) and passes `gadget check` as
//! created. The files it writes are templates under `sdk/<lang>/template/`
//! (and `sdk/template/` for every language), built into the binary, with
//! `__PLUGIN__` and `__GADGET__` filled in; a Rust plugin gets the SDK
//! written into it (`gadget-sdk/`), so it builds anywhere.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};

use gadget_runtime::manifest::normalize_plugin_name;

/// A language `gadget new` scaffolds and `gadget build` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    C,
    Js,
    Go,
}

/// The language's name as people write it (`Js` is the option's value).
impl std::fmt::Display for Lang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::C => "C",
            Lang::Js => "JavaScript",
            Lang::Go => "Go",
        })
    }
}

/// Every language's plugin files: its manifest and what git ignores.
const COMMON_FILES: &[(&str, &str)] = &[
    (
        "plugin.toml",
        include_str!("../../../../sdk/template/plugin.toml"),
    ),
    (
        ".gitignore",
        include_str!("../../../../sdk/template/gitignore"),
    ),
    (
        "tests.toml",
        include_str!("../../../../sdk/template/tests.toml"),
    ),
];

/// The files of a language's template: where each goes, and its text.
fn template(lang: Lang) -> &'static [(&'static str, &'static str)] {
    match lang {
        Lang::Python => &[
            (
                "app.py",
                include_str!("../../../../sdk/python/template/app.py"),
            ),
            (
                "test_app.py",
                include_str!("../../../../sdk/python/template/test_app.py"),
            ),
        ],
        Lang::C => &[("main.c", include_str!("../../../../sdk/c/template/main.c"))],
        Lang::Js => &[
            ("app.js", include_str!("../../../../sdk/js/template/app.js")),
            (
                "app.test.js",
                include_str!("../../../../sdk/js/template/app.test.js"),
            ),
        ],
        Lang::Go => &[("app.go", include_str!("../../../../sdk/go/template/app.go"))],
        Lang::Rust => &[
            (
                "Cargo.toml",
                include_str!("../../../../sdk/rust/template/Cargo.toml.in"),
            ),
            (
                "src/lib.rs",
                include_str!("../../../../sdk/rust/template/src/lib.rs"),
            ),
        ],
    }
}

/// `gadget new NAME --lang L [--dir DIR]`.
pub fn new(name: &str, lang: Lang, dir: Option<&Path>) -> Result<ExitCode> {
    let plugin = plugin_name(name)?;
    let gadget = gadget_name(name);
    let dir = dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(&plugin));
    if dir.exists() {
        bail!(
            "{} already exists; choose another NAME or --dir",
            dir.display()
        );
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for (file, text) in COMMON_FILES.iter().chain(template(lang)) {
        let text = text
            .replace("__PLUGIN__", &plugin)
            .replace("__GADGET__", &gadget);
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if lang == Lang::Rust {
        super::sdks::write_rust_sdk(&dir)?;
    }
    println!(
        "created {} ({lang} plugin `{plugin}`, gadget `{gadget}`)\nnext:\n  gadget build {0}\n  gadget test {0}\n  gadget --plugins {0} call {gadget} --params '{{\"text\": \"hello world\"}}'",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The plugin name `gadget new` is given, normalised as a bare
/// component's file name is (one normaliser, in the manifest module).
fn plugin_name(name: &str) -> Result<String> {
    normalize_plugin_name(name)
        .map_err(|reason| anyhow::anyhow!("'{name}' does not make a plugin name: {reason}"))
}

/// `word-count` → `WordCount`.
fn gadget_name(name: &str) -> String {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|s| !s.is_empty())
        .map(|s| {
            let mut chars = s.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(plugin_name("Word Count").unwrap(), "word-count");
        assert_eq!(gadget_name("word-count"), "WordCount");
        assert!(plugin_name("9lives").is_err());
    }
}
