//! Contract 0.3.0 through the SDKs, end to end: a Rust gadget
//! (examples/palette, gadget-sdk), a Python gadget
//! (examples/python-palette, the Python SDK), a C gadget
//! (examples/c-palette, the C SDK) and a Go gadget (examples/go-palette,
//! the Go SDK) that ask twice (a form, then a
//! text question) and return an image, under `gadget run` (answers from a
//! file), `gadget mcp` (the official Python MCP client answering
//! elicitations mid-call) and `gadget serve` (protocol 2026-07-28: the call
//! ends `input_required` twice and the client calls again with the answers,
//! so the gadget is replayed). Plus each example's numeric progress and
//! catalog through the SDK.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::common;
use crate::languages::built;
use crate::mcp::run_client;
use crate::serve::Server;

/// The examples: plugin directory and the swatch gadget's name.
fn examples() -> [(PathBuf, &'static str); 4] {
    common::guests();
    [
        (common::workspace().join("examples/palette"), "Swatch"),
        (
            built(&common::workspace().join("examples/python-palette")),
            "PySwatch",
        ),
        (
            built(&common::workspace().join("examples/c-palette")),
            "CSwatch",
        ),
        (
            built(&common::workspace().join("examples/go-palette")),
            "GoSwatch",
        ),
    ]
}

/// What a client saw: the text, one green 8x8 PNG, the structured result,
/// and both questions.
fn check_swatch(report: &Value, gadget: &str) {
    assert_eq!(report["is_error"], false, "{gadget}: {report}");
    assert_eq!(report["text"], "A 8x8 green swatch.", "{gadget}: {report}");
    let images = report["images"].as_array().unwrap();
    assert_eq!(images.len(), 1, "{gadget}: {report}");
    assert_eq!(images[0]["mime"], "image/png");
    assert_eq!(images[0]["png"], true, "{gadget}: {report}");
    assert_eq!(
        report["structured"],
        serde_json::json!({"colour": "green", "side": 8}),
        "{gadget}: {report}"
    );
    let shown: Vec<&str> = report["shown"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(shown.len(), 2, "asked twice: {gadget}: {report}");
    assert!(shown[0].contains("Which colour"), "{gadget}: {report}");
    assert!(shown[1].contains("How many pixels"), "{gadget}: {report}");
}

#[test]
fn sdk_gadgets_ask_twice_and_return_an_image_under_run() {
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("answers.txt");
    std::fs::write(&answers, "{\"colour\": \"green\"}\n8\n").unwrap();
    for (plugins, gadget) in examples() {
        let response = dir.path().join("response.txt");
        std::fs::write(
            &response,
            format!("Here it is.\n!!!GADGET_START:{gadget}:s\n!!!GADGET_END\n"),
        )
        .unwrap();
        let out = Command::new(common::gadget_bin())
            .arg("--plugins")
            .arg(&plugins)
            .arg("run")
            .arg("--answers")
            .arg(&answers)
            .arg(&response)
            .env("XDG_CACHE_HOME", dir.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{gadget}: {text}");
        assert!(text.contains("A 8x8 green swatch."), "{gadget}: {text}");
        // An image is shown as its type and size.
        assert!(text.contains("[image: image/png, "), "{gadget}: {text}");
    }
}

#[test]
fn sdk_gadgets_ask_twice_and_return_an_image_under_gadget_mcp() {
    for (plugins, gadget) in examples() {
        let report = run_client(&[
            "swatch-stdio",
            common::gadget_bin().to_str().unwrap(),
            plugins.to_str().unwrap(),
            gadget,
        ]);
        check_swatch(&report, gadget);
    }
}

#[test]
fn sdk_gadgets_ask_twice_and_return_an_image_under_gadget_serve() {
    for (plugins, gadget) in examples() {
        let server = Server::start_plugins(&plugins, &[], "s3cret", &[]);
        let report = run_client(&["swatch-http", &server.url(), "s3cret", gadget]);
        assert_eq!(report["protocol"], "2026-07-28", "{report}");
        check_swatch(&report, gadget);
        // Two rounds ended asking; the third finished.
        let metrics = server.metrics();
        for (outcome, n) in [("input-required", 2), ("ok", 1)] {
            assert!(
                metrics.contains(&format!(
                    "gadget_calls_total{{gadget=\"{gadget}\",outcome=\"{outcome}\"}} {n}"
                )),
                "{gadget} {outcome}: {metrics}"
            );
        }
    }
}

#[test]
fn sdk_gadgets_report_progress_and_serve_their_catalog() {
    for ((plugins, _), (blend, prefix, prompt)) in examples().into_iter().zip([
        ("Blend", "palette", "paint"),
        ("PyBlend", "pypalette", "py-paint"),
        ("CBlend", "cpalette", "c-paint"),
        ("GoBlend", "gopalette", "go-paint"),
    ]) {
        let out = Command::new(common::gadget_bin())
            .arg("--plugins")
            .arg(&plugins)
            .args(["call", blend, "--json", "--params"])
            .arg(r#"{"from": "black", "to": "white", "steps": 3}"#)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{blend}: {text}");
        assert!(text.contains("#000000 #7f7f7f #ffffff"), "{blend}: {text}");
        assert!(text.contains("\"3/3: step 3 of 3\""), "{blend}: {text}");
        let report = run_client(&[
            "catalog-stdio",
            common::gadget_bin().to_str().unwrap(),
            plugins.to_str().unwrap(),
            &format!("{prefix}://colours"),
            &format!("{prefix}://swatch/blue"),
            prompt,
        ]);
        assert_eq!(
            report["resources"][0],
            format!("{prefix}://colours"),
            "{report}"
        );
        assert_eq!(
            report["templates"][0],
            format!("{prefix}://swatch/{{colour}}"),
            "{report}"
        );
        assert_eq!(report["colours"]["blue"], "#1c71d8", "{report}");
        assert_eq!(report["swatch"]["mime"], "image/png", "{report}");
        assert_eq!(report["swatch"]["png"], true, "{report}");
        assert_eq!(
            report["prompt"]["text"], "Describe, in two sentences, a quiet room painted red.",
            "{report}"
        );
        assert_eq!(report["prompt"]["image"], "image/png", "{report}");
        assert!(
            report["completion"]
                .as_array()
                .unwrap()
                .contains(&"blue".into()),
            "{report}"
        );
    }
}
