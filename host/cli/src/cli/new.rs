//! `gadget new NAME --lang L`: start a plugin directory for a gadget in a
//! language; it builds (`gadget build`) and passes `gadget check` as
//! created.

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
    let write = |file: &str, text: String| -> Result<()> {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write(
        "plugin.toml",
        format!(
            "name = \"{plugin}\"\nversion = \"0.1.0\"\ndescription = \"{gadget}: describe what it does\"\ncomponent = \"{plugin}.wasm\"\n\n[limits]\ntimeout-ms = 5000\n"
        ),
    )?;
    write(".gitignore", "*.wasm\ntarget/\n__pycache__/\n".into())?;
    match lang {
        Lang::Python => write("app.py", python_template(&gadget))?,
        Lang::C => write("main.c", c_template(&gadget))?,
        Lang::Js => write("app.js", js_template(&gadget))?,
        Lang::Go => write("app.go", go_template(&gadget))?,
        Lang::Rust => {
            write("Cargo.toml", rust_manifest(&plugin)?)?;
            write("src/lib.rs", rust_template(&gadget))?;
        }
    }
    println!(
        "created {} ({lang:?} plugin `{plugin}`, gadget `{gadget}`)\nnext:\n  gadget build {0}\n  gadget check {0}\n  gadget --plugins {0} call {gadget} --params '{{\"text\": \"hello world\"}}'",
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

fn python_template(gadget: &str) -> String {
    format!(
        r#""""{gadget}: a gadget for gadget-host, in Python.

Build: gadget build .    Check: gadget check .
Import every module you use at the top of this file: the component keeps
only the modules imported while it is built.
"""

from gadget_sdk import Context, InvalidArguments, Result, export, gadget


@gadget(
    description="Counts the words of a text. Describe here, for the model, what the gadget does.",
    schema={{
        "type": "object",
        "properties": {{
            "text": {{"type": "string", "description": "The text to count the words of."}},
        }},
        "required": ["text"],
    }},
    examples=[({{"text": "hello world"}}, "2 words")],
)
def {gadget}(params: dict, ctx: Context) -> Result:
    words = params["text"].split()
    if not words:
        raise InvalidArguments("text has no words")
    ctx.info("counted", words=len(words))
    return Result(f"{{len(words)}} words", details={{"words": len(words)}})


Gadget = export({gadget})
"#
    )
}

fn c_template(gadget: &str) -> String {
    format!(
        r#"/*
 * {gadget}: a gadget for gadget-host, in C.
 * Build: gadget build .    Check: gadget check .
 */
#include <ctype.h>

#include "gadget.h"

/* The longest text accepted, in bytes (the schema says so too). */
#define MAX_TEXT_BYTES 65536

static char text[MAX_TEXT_BYTES + 1];

static gadget_status count_words(gadget_call *call) {{
    if (!gadget_param_string(call, "text", text, sizeof text))
        return gadget_invalid_arguments(call, "text must be a string of at most %d bytes", MAX_TEXT_BYTES);
    int words = 0;
    for (const char *p = text; *p; p++)
        if (!isspace((unsigned char)*p) && (p == text || isspace((unsigned char)p[-1]))) words++;
    if (words == 0) return gadget_invalid_arguments(call, "text has no words");
    gadget_info("counted");
    return gadget_result(call, "%d words", words);
}}

static const gadget_example examples[] = {{
    {{.params = "{{\"text\": \"hello world\"}}", .output = "2 words"}},
}};

static const gadget_def gadgets[] = {{{{
    .name = "{gadget}",
    .description = "Counts the words of a text. Describe here, for the model, what the gadget does.",
    .schema = "{{\"type\":\"object\",\"properties\":{{\"text\":{{\"type\":\"string\",\"maxLength\":65536,"
              "\"description\":\"The text to count the words of.\"}}}},\"required\":[\"text\"]}}",
    .examples = examples,
    .example_count = 1,
    .invoke = count_words,
}}}};

GADGET_EXPORT(gadgets)
"#
    )
}

fn js_template(gadget: &str) -> String {
    format!(
        r#"// {gadget}: a gadget for gadget-host, in JavaScript.
// Build: gadget build .    Check: gadget check .
import {{ defineGadget, exportGadgets, InvalidArguments, result }} from 'gadget-sdk';

const {gadget} = defineGadget({{
  name: '{gadget}',
  description: 'Counts the words of a text. Describe here, for the model, what the gadget does.',
  schema: {{
    type: 'object',
    properties: {{ text: {{ type: 'string', description: 'The text to count the words of.' }} }},
    required: ['text'],
  }},
  examples: [{{ params: {{ text: 'hello world' }}, output: '2 words' }}],
  run(params, ctx) {{
    const words = params.text.split(/\s+/).filter(Boolean).length;
    if (words === 0) throw new InvalidArguments('text has no words');
    ctx.info('counted', {{ words }});
    return result(`${{words}} words`, {{ details: {{ words }} }});
  }},
}});

export const gadget = exportGadgets({gadget});
"#
    )
}

fn go_template(gadget: &str) -> String {
    format!(
        r#"// {gadget}: a gadget for gadget-host, in Go.
// Build: gadget build .    Check: gadget check .
package app

import (
	"fmt"
	"strings"

	"wit_component/gadget"
)

func init() {{
	gadget.Register(gadget.Def{{
		Name:        "{gadget}",
		Description: "Counts the words of a text. Describe here, for the model, what the gadget does.",
		Schema:      `{{"type":"object","properties":{{"text":{{"type":"string","description":"The text to count the words of."}}}},"required":["text"]}}`,
		Examples:    []gadget.Example{{{{Params: `{{"text": "hello world"}}`, Output: "2 words"}}}},
		Run: func(params map[string]any, ctx *gadget.Context) (gadget.Result, error) {{
			words := len(strings.Fields(params["text"].(string)))
			if words == 0 {{
				return gadget.Result{{}}, gadget.Invalid("text has no words")
			}}
			ctx.Info("counted", map[string]any{{"words": words}})
			return gadget.Text(fmt.Sprintf("%d words", words)), nil
		}},
	}})
}}
"#
    )
}

fn rust_manifest(plugin: &str) -> Result<String> {
    // The SDK of the gadget-host checkout this binary was built from.
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/rust");
    let sdk = std::fs::canonicalize(&sdk).with_context(|| {
        format!(
            "the Rust SDK is not at {}: `gadget new --lang rust` needs the gadget-host checkout it was built from",
            sdk.display()
        )
    })?;
    Ok(format!(
        r#"[package]
name = "{plugin}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
gadget-sdk = {{ path = "{}" }}
serde = {{ version = "1", features = ["derive"] }}
schemars = "1.2"

[profile.release]
opt-level = "s"
lto = true
strip = true

# A workspace of its own, wherever it is created.
[workspace]
"#,
        sdk.display()
    ))
}

fn rust_template(gadget: &str) -> String {
    format!(
        r#"//! {gadget}: a gadget for gadget-host, in Rust.
//!
//! Build: gadget build .    Check: gadget check .

use gadget_sdk::{{Context, Example, Gadget, GadgetError, Outcome, json}};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
struct Params {{
    /// The text to count the words of.
    text: String,
}}

struct {gadget};

impl Gadget for {gadget} {{
    type Params = Params;
    const NAME: &'static str = "{gadget}";
    const DESCRIPTION: &'static str =
        "Counts the words of a text. Describe here, for the model, what the gadget does.";

    fn examples() -> Vec<Example> {{
        vec![Example::new(json!({{ "text": "hello world" }})).output("2 words")]
    }}

    fn invoke(params: Params, ctx: &Context) -> Result<Outcome, GadgetError> {{
        let words = params.text.split_whitespace().count();
        if words == 0 {{
            return Err(GadgetError::invalid_arguments("text has no words"));
        }}
        ctx.info(format!("counted {{words}} words"));
        Ok(format!("{{words}} words").into())
    }}
}}

gadget_sdk::export_gadgets!({gadget});
"#
    )
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
