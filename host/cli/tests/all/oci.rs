//! Plugins through OCI registries, against real peers: the CNCF
//! distribution registry (Debian's `docker-registry`, started per test on
//! 127.0.0.1) and `wkg` (wasm-pkg-tools), both installed by the setup
//! script. A component pushed by either tool is pulled and used by the
//! other; a pulled plugin runs offline once cached; a registry that lies
//! about its content leaves nothing behind; credentials come from the
//! environment or the Docker config.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;

/// The distribution registry's binary, from Debian's package.
const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// The test registry's one user, and the bcrypt hash of its password
/// `s3cret` (an htpasswd line, made once with Python's `crypt`).
const USER: &str = "alice";
const PASSWORD: &str = "s3cret";
const HTPASSWD: &str = "alice:$2b$12$wBk7I51BLdsylDb5XCMniefFFcppiHrkX3kvWtdJXLOlGgWjhcIoq";

/// A distribution registry on 127.0.0.1, stopped when dropped.
struct Registry {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start(with_password: bool) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        // A free port, given back just before the registry binds it.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("data").display()
        );
        if with_password {
            std::fs::write(dir.path().join("htpasswd"), format!("{HTPASSWD}\n")).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: test\n    path: {}\n",
                dir.path().join("htpasswd").display()
            ));
        }
        std::fs::write(dir.path().join("config.yml"), config).unwrap();
        let child = Command::new(REGISTRY_BIN)
            .args(["serve", dir.path().join("config.yml").to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{REGISTRY_BIN}: {e} (run scripts/setup-tests.sh)"));
        let registry = Registry {
            child,
            port,
            _dir: dir,
        };
        // Bounded: the registry answers `/v2/` within a second or two.
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            if registry.answers() {
                return registry;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the registry did not start on port {port}");
    }

    fn answers(&self) -> bool {
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let request = format!(
            "GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.port
        );
        let mut reply = String::new();
        stream.write_all(request.as_bytes()).is_ok()
            && stream.read_to_string(&mut reply).is_ok()
            && reply.starts_with("HTTP/1.1 ")
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn reference(&self, repository: &str) -> String {
        format!("oci://{}/{repository}", self.host())
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A place of its own for one test: the cache pulled plugins go to, and
/// an empty Docker config (no one's real credentials).
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let home = Home {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(home.docker()).unwrap();
        home
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn docker(&self) -> PathBuf {
        self.path().join("docker")
    }

    fn cache(&self) -> PathBuf {
        self.path().join("cache")
    }

    fn gadget(&self, args: &[&str]) -> Output {
        self.gadget_with(args, &[])
    }

    fn gadget_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = Command::new(common::gadget_bin());
        command
            .current_dir(self.path())
            .env_remove("GADGET_CONFIG")
            .env_remove("GADGET_PLUGINS")
            .env_remove("GADGET_OCI_USERNAME")
            .env_remove("GADGET_OCI_PASSWORD")
            .env_remove("GADGET_OCI_REGISTRY")
            .env("GADGET_CACHE_DIR", self.cache())
            .env("DOCKER_CONFIG", self.docker())
            .args(args);
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().unwrap()
    }

    /// The manifest digests of the plugins pulled so far.
    fn cached(&self) -> Vec<String> {
        match std::fs::read_dir(self.cache().join("oci/sha256")) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| !name.starts_with('.'))
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

fn said(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// wkg, wasm-pkg-tools' CLI, installed by the setup script.
fn wkg(args: &[&str], dir: &Path) -> Output {
    let bin = common::workspace().join(".tools/wkg/bin/wkg");
    Command::new(&bin)
        .current_dir(dir)
        .env("DOCKER_CONFIG", dir.join("docker"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/setup-tests.sh)", bin.display()))
}

/// The `digest: sha256:...` line `gadget push` prints.
fn pushed_digest(out: &Output) -> String {
    let text = said(out);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("digest: "))
        .unwrap_or_else(|| panic!("no digest in {text}"))
        .to_string()
}

#[test]
fn gadget_and_wkg_each_pull_and_run_what_the_other_pushed() {
    let registry = Registry::start(false);
    let home = Home::new();
    let shipped = common::shipped_plugins();

    // gadget push (manifest and component) -> wkg pull: the very component.
    let calculator = registry.reference("gadgets/calculator:1.0");
    let out = home.gadget(&[
        "push",
        shipped.join("calculator").to_str().unwrap(),
        &calculator,
    ]);
    assert!(out.status.success(), "{}", said(&out));
    let digest = pushed_digest(&out);
    let pulled_by_wkg = home.path().join("by-wkg.wasm");
    let out = wkg(
        &[
            "oci",
            "pull",
            "--insecure",
            &registry.host(),
            &format!("{}/gadgets/calculator:1.0", registry.host()),
            "-o",
            pulled_by_wkg.to_str().unwrap(),
        ],
        home.path(),
    );
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        std::fs::read(&pulled_by_wkg).unwrap(),
        std::fs::read(shipped.join("calculator/calculator.wasm")).unwrap(),
        "wkg pulled another component than gadget pushed"
    );

    // ... and gadget runs it from the registry, its plugin.toml with it
    // (the manifest's own timeout), journalled with where it came from.
    let out = home.gadget(&[
        "--plugins",
        &calculator,
        "--audit",
        "journal.jsonl",
        "call",
        "Calculator",
        "--params",
        r#"{"operation":"add","a":2,"b":3}"#,
    ]);
    assert!(
        out.status.success() && said(&out).contains('5'),
        "{}",
        said(&out)
    );
    assert_eq!(home.cached(), [digest.trim_start_matches("sha256:")]);
    let journal = std::fs::read_to_string(home.path().join("journal.jsonl")).unwrap();
    let started: Value = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["event"] == "call_started")
        .unwrap();
    assert_eq!(started["plugin"], "calculator", "{started}");
    assert_eq!(
        started["detail"]["source"],
        calculator.as_str(),
        "{started}"
    );
    assert_eq!(started["detail"]["signature"], "not checked", "{started}");

    // list --json and the plugin table say where it came from.
    let out = home.gadget(&["--plugins", &calculator, "list", "--json"]);
    let items: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(items[0]["source"], calculator.as_str(), "{items:?}");
    assert_eq!(items[0]["sha256"].as_str().unwrap().len(), 64);
    let out = home.gadget(&["--plugins", &calculator, "list"]);
    let table = said(&out);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("calculator ") && l.ends_with(&calculator)),
        "{table}"
    );

    // wkg push (a bare component, no plugin.toml) -> gadget pull and run:
    // named after the repository, with default limits and nothing granted.
    let out = wkg(
        &[
            "oci",
            "push",
            "--insecure",
            &registry.host(),
            &format!("{}/gadgets/text:wkg", registry.host()),
            shipped.join("text/text.wasm").to_str().unwrap(),
        ],
        home.path(),
    );
    assert!(out.status.success(), "{}", said(&out));
    let text = registry.reference("gadgets/text:wkg");
    let out = home.gadget(&["pull", &text]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("a bare component"), "{}", said(&out));
    let out = home.gadget(&[
        "--plugins",
        &text,
        "call",
        "TextStats",
        "--params",
        r#"{"text":"one two"}"#,
    ]);
    assert!(out.status.success(), "{}", said(&out));
    let out = home.gadget(&["--plugins", &text, "describe", "TextStats"]);
    assert!(
        said(&out).contains(&format!("Plugin: text 0.0.0 ({text})")),
        "{}",
        said(&out)
    );

    // `gadget check` takes a reference too.
    let out = home.gadget(&["check", &calculator]);
    assert!(
        out.status.success() && said(&out).contains(&format!("from {calculator}")),
        "{}",
        said(&out)
    );
}

#[test]
fn a_pulled_plugin_runs_offline_by_tag_and_by_digest() {
    let mut registry = Registry::start(false);
    let home = Home::new();
    let tag = registry.reference("gadgets/calculator:1");
    let out = home.gadget(&[
        "push",
        common::shipped_plugins()
            .join("calculator")
            .to_str()
            .unwrap(),
        &tag,
    ]);
    assert!(out.status.success(), "{}", said(&out));
    let digest = pushed_digest(&out);
    let pinned = registry.reference(&format!("gadgets/calculator@{digest}"));
    let out = home.gadget(&["pull", &tag]);
    assert!(out.status.success(), "{}", said(&out));
    let never_pulled = registry.reference("gadgets/other:1");
    registry.stop();

    let add = |plugin: &str| {
        home.gadget(&[
            "--plugins",
            plugin,
            "call",
            "Calculator",
            "--params",
            r#"{"operation":"add","a":1,"b":2}"#,
        ])
    };
    // The tag: the registry cannot be asked what it names now, so the
    // digest it named last is used, and the operator is told.
    let out = add(&tag);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("the registry cannot be reached") && said(&out).contains(&digest),
        "{}",
        said(&out)
    );
    // The digest: nothing to ask, nothing to say.
    let out = add(&pinned);
    assert!(out.status.success(), "{}", said(&out));
    assert!(!said(&out).contains("warning"), "{}", said(&out));
    // Never pulled: a load error that says what to do.
    let out = home.gadget(&["--strict", "--plugins", &never_pulled, "list"]);
    assert!(!out.status.success());
    assert!(
        said(&out).contains("nothing is cached for it; pull it once"),
        "{}",
        said(&out)
    );
}

#[test]
fn registry_credentials_come_from_the_environment_or_the_docker_config() {
    let registry = Registry::start(true);
    let home = Home::new();
    let reference = registry.reference("private/calculator:1");
    let calculator = common::shipped_plugins().join("calculator");
    let push = |env: &[(&str, &str)]| {
        home.gadget_with(&["push", calculator.to_str().unwrap(), &reference], env)
    };
    // None: refused, and told where credentials come from.
    let out = push(&[]);
    assert!(!out.status.success());
    assert!(
        said(&out).contains("GADGET_OCI_USERNAME") && said(&out).contains("docker login"),
        "{}",
        said(&out)
    );
    // The environment, without saying which registry it is for: refused,
    // not sent to whichever registry is named.
    let out = push(&[
        ("GADGET_OCI_USERNAME", USER),
        ("GADGET_OCI_PASSWORD", PASSWORD),
    ]);
    assert!(!out.status.success());
    assert!(said(&out).contains("GADGET_OCI_REGISTRY"), "{}", said(&out));
    // For another registry: not sent here (anonymous, refused).
    let out = push(&[
        ("GADGET_OCI_USERNAME", USER),
        ("GADGET_OCI_PASSWORD", PASSWORD),
        ("GADGET_OCI_REGISTRY", "registry.example:5000"),
    ]);
    assert!(!out.status.success(), "{}", said(&out));
    // For this one.
    let out = push(&[
        ("GADGET_OCI_USERNAME", USER),
        ("GADGET_OCI_PASSWORD", PASSWORD),
        ("GADGET_OCI_REGISTRY", &registry.host()),
    ]);
    assert!(out.status.success(), "{}", said(&out));
    // A pull with them, through the host's own manifest fetch.
    let out = home.gadget_with(
        &["pull", &reference],
        &[
            ("GADGET_OCI_USERNAME", USER),
            ("GADGET_OCI_PASSWORD", PASSWORD),
            ("GADGET_OCI_REGISTRY", &registry.host()),
        ],
    );
    assert!(out.status.success(), "{}", said(&out));
    // The Docker config (`docker login` writes `auths`).
    let auth = base64_encode(format!("{USER}:{PASSWORD}").as_bytes());
    std::fs::write(
        home.docker().join("config.json"),
        format!(
            r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#,
            registry.host()
        ),
    )
    .unwrap();
    let out = home.gadget(&["pull", &reference]);
    assert!(out.status.success(), "{}", said(&out));
}

fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                text.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                text.push('=');
            }
        }
    }
    text
}

/// A registry that lies: it serves whatever manifest and blob the test
/// gives it, for every request (bounded: a minute, or until dropped).
struct LyingRegistry {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LyingRegistry {
    fn start(manifest: Vec<u8>, blob: Vec<u8>) -> LyingRegistry {
        use std::io::{BufRead, BufReader};
        use std::sync::atomic::Ordering;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stopping.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                stream.set_nonblocking(false).unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                let _ = reader.read_line(&mut request);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                let (content_type, body): (&str, &[u8]) = if path.contains("/manifests/") {
                    ("application/vnd.oci.image.manifest.v1+json", &manifest)
                } else if path.contains("/blobs/") {
                    ("application/octet-stream", &blob)
                } else {
                    ("application/json", b"{}")
                };
                let mut stream = stream;
                let _ = stream.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    )
                    .as_bytes(),
                );
                let _ = stream.write_all(body);
            }
        });
        LyingRegistry { port, stop }
    }
}

impl Drop for LyingRegistry {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn manifest_with(layers: &[(&str, &str, usize)]) -> Vec<u8> {
    let layers: Vec<Value> = layers
        .iter()
        .map(|(media_type, digest, size)| {
            serde_json::json!({"mediaType": media_type, "digest": digest, "size": size})
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.wasm.config.v0+json",
            "digest": format!("sha256:{}", "0".repeat(64)),
            "size": 2
        },
        "layers": layers,
    }))
    .unwrap()
}

#[test]
fn a_registry_that_lies_about_its_content_leaves_nothing_behind() {
    let home = Home::new();
    let blob = b"\0asm\x0d\0\x01\0 not the component the manifest names".to_vec();
    let claimed = format!("sha256:{}", "ab".repeat(32));
    let cases: [(Vec<u8>, &str); 4] = [
        // The blob is not what the manifest's digest names.
        (
            manifest_with(&[("application/wasm", &claimed, blob.len())]),
            "the registry sent content whose digest is sha256:",
        ),
        // More bytes than the manifest declares.
        (
            manifest_with(&[("application/wasm", &claimed, 4)]),
            "more than the 4 bytes",
        ),
        // Not a component artifact.
        (
            manifest_with(&[
                ("application/wasm", &claimed, 4),
                ("application/wasm", &claimed, 4),
            ]),
            "it has 2 layers",
        ),
        (
            manifest_with(&[("application/vnd.oci.image.layer.v1.tar", &claimed, 4)]),
            "its layer is application/vnd.oci.image.layer.v1.tar",
        ),
    ];
    for (manifest, says) in cases {
        let registry = LyingRegistry::start(manifest, blob.clone());
        let reference = format!("oci://127.0.0.1:{}/evil/plugin:1", registry.port);
        let out = home.gadget(&["pull", &reference]);
        assert!(!out.status.success(), "{}", said(&out));
        assert!(said(&out).contains(says), "{says}: {}", said(&out));
        assert!(home.cached().is_empty(), "{:?}", home.cached());
    }
    // Asked for a digest, served something else: refused.
    let manifest = manifest_with(&[("application/wasm", &claimed, blob.len())]);
    let registry = LyingRegistry::start(manifest, blob);
    let wanted = format!("sha256:{}", "cd".repeat(32));
    let out = home.gadget(&[
        "pull",
        &format!("oci://127.0.0.1:{}/evil/plugin@{wanted}", registry.port),
    ]);
    assert!(!out.status.success());
    assert!(
        said(&out).contains(&format!("not {wanted}")),
        "{}",
        said(&out)
    );
    assert!(home.cached().is_empty());
}
