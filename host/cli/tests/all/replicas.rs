//! Replicas of `gadget serve` sharing one Redis (`--state`), as an
//! operator runs them behind a balancer: a task made on one is answered by
//! the others and outlives none of them silently, a rate limit is one count
//! for all, a store that goes away refuses what it must and comes back, and
//! nothing secret is written to it. Each test starts its own redis-server
//! (Debian's, installed by scripts/setup-tests.sh) on a free loopback port,
//! persistence off, and stops it.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::identity::{AUDIENCE, ISSUER, Key, key, modern, token};
use crate::serve::Server;

/// The store's password: given to the replicas by environment, never in
/// the URL, and never written to the store.
const STORE_PASSWORD: &str = "store-pass-7f3a";

/// The approval key every replica shares.
const APPROVAL_KEY: &str = "approval-key-0123456789abcdef0123456789abcdef";

/// A redis-server on a free loopback port, stopped when dropped.
struct Redis {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    /// Served over TLS only, with this certificate authority's files.
    tls: Option<PathBuf>,
}

impl Redis {
    fn start() -> Redis {
        Redis::start_with(None)
    }

    /// Over TLS only, its certificate (for 127.0.0.1) signed by a CA made
    /// here: `ca.pem` in the directory returned.
    fn start_tls() -> Redis {
        let dir = tempfile::tempdir().unwrap().keep();
        let openssl = |args: &[&str]| {
            let made = Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .output()
                .expect("openssl is installed (scripts/setup-tests.sh installs it)");
            assert!(
                made.status.success(),
                "{}",
                String::from_utf8_lossy(&made.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=test-ca",
                ],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    "server.key",
                    "-out",
                    "server.csr",
                    "-subj",
                    "/CN=127.0.0.1",
                ],
            ]
            .concat(),
        );
        std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\n").unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ]);
        Redis::start_with(Some(dir))
    }

    fn start_with(tls: Option<PathBuf>) -> Redis {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut redis = Redis {
            child: None,
            port,
            dir: tempfile::tempdir().unwrap(),
            tls,
        };
        redis.resume();
        redis
    }

    /// Starts it (again) on its port.
    fn resume(&mut self) {
        let mut command = Command::new("redis-server");
        match &self.tls {
            None => command.args(["--port", &self.port.to_string()]),
            Some(dir) => command
                .args(["--port", "0", "--tls-port", &self.port.to_string()])
                .args(["--tls-auth-clients", "no"])
                .arg("--tls-cert-file")
                .arg(dir.join("server.pem"))
                .arg("--tls-key-file")
                .arg(dir.join("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(dir.join("ca.pem")),
        };
        let child = command
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--requirepass", STORE_PASSWORD])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/setup-tests.sh installs it)");
        self.child = Some(child);
        let waited = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                waited.elapsed() < Duration::from_secs(10),
                "redis-server did not answer on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops it (SIGKILL: what a lost store looks like).
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The URL the replicas are given: no password in it.
    fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/0", self.port)
    }

    fn connection(&self) -> redis::RedisResult<redis::Connection> {
        let url = format!("redis://:{STORE_PASSWORD}@127.0.0.1:{}/0", self.port);
        redis::Client::open(url)?.get_connection_with_timeout(Duration::from_secs(1))
    }

    /// Every key in the store and everything it holds, as text.
    fn dump(&self) -> String {
        let mut connection = self.connection().unwrap();
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut connection).unwrap();
        let mut dump = String::new();
        for key in keys {
            let kind: String = redis::cmd("TYPE").arg(&key).query(&mut connection).unwrap();
            let value: Vec<String> = match kind.as_str() {
                "hash" => redis::cmd("HGETALL").arg(&key).query(&mut connection),
                "zset" => redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(&mut connection),
                _ => redis::cmd("GET")
                    .arg(&key)
                    .query::<Option<String>>(&mut connection)
                    .map(|v| v.into_iter().collect()),
            }
            .unwrap();
            dump.push_str(&format!("{key} ({kind}): {}\n", value.join(" | ")));
        }
        dump
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the replicas share besides the store: the plugins, the policy, the
/// keys tokens are checked with.
struct Fleet {
    dir: tempfile::TempDir,
    plugins: PathBuf,
    config: PathBuf,
    jwks: PathBuf,
    signer: Key,
}

impl Fleet {
    fn new(policy: &str) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let plugins = crate::content::conformance_plugins(dir.path());
        let config = dir.path().join("policy.toml");
        std::fs::write(&config, policy).unwrap();
        let signer = key("k1");
        let jwks = dir.path().join("jwks.json");
        std::fs::write(&jwks, json!({"keys": [signer.jwk]}).to_string()).unwrap();
        Fleet {
            dir,
            plugins,
            config,
            jwks,
            signer,
        }
    }

    /// One more replica on `redis`.
    fn replica(&self, redis: &Redis, n: usize) -> Server {
        self.replica_with(redis, n, &[])
    }

    /// [`Fleet::replica`] with more environment variables.
    fn replica_with(&self, redis: &Redis, n: usize, env: &[(&str, &str)]) -> Server {
        let journal = self.dir.path().join(format!("audit-{n}.jsonl"));
        let state = redis.url();
        let jwks = self.jwks.to_str().unwrap();
        let serve = [
            "--auth-jwks",
            jwks,
            "--auth-audience",
            AUDIENCE,
            "--auth-issuer",
            ISSUER,
            "--state",
            &state,
        ];
        Server::spawn(
            &self.plugins,
            &self.config,
            &["--audit", journal.to_str().unwrap()],
            &serve,
            &[
                &[
                    ("GADGET_STATE_PASSWORD", STORE_PASSWORD),
                    ("GADGET_APPROVAL_KEY", APPROVAL_KEY),
                ][..],
                env,
            ]
            .concat(),
        )
    }

    fn token(&self, subject: &str) -> String {
        token(&self.signer, "k1", subject, json!({}))
    }
}

/// The task id a `tools/call` answered with.
fn task_of(created: &str) -> String {
    created
        .split("\"taskId\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no task in {created}"))
        .to_string()
}

/// `tasks/get` on `server` until the status is `status` (or `within`
/// passed): the last answer.
fn until_status(server: &Server, token: &str, id: &str, status: &str, within: Duration) -> Value {
    let waited = Instant::now();
    loop {
        let (code, body) = modern(server, token, "tasks/get", json!({"taskId": id}));
        assert_eq!(code, 200, "{body}");
        let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        if answer["result"]["status"] == status || waited.elapsed() > within {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_task_made_on_one_replica_is_answered_by_the_others_and_a_lost_replica_fails_it() {
    let redis = Redis::start();
    let fleet = Fleet::new("");
    let replicas: Vec<Server> = (0..3).map(|n| fleet.replica(&redis, n)).collect();
    let mut dead = fleet.replica(&redis, 3);
    let (alice, mallory) = (fleet.token("alice"), fleet.token("mallory"));
    let call = |server: &Server, tool: &str, arguments: Value| {
        let (status, created) = modern(
            server,
            &alice,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        );
        assert_eq!(status, 200, "{created}");
        task_of(&created)
    };

    // Made on the first, polled on the second, its result read on the third.
    let id = call(
        &replicas[0],
        "slow_compute",
        json!({"seconds": 1, "label": "x"}),
    );
    let (_, seen) = modern(&replicas[1], &alice, "tasks/get", json!({"taskId": id}));
    assert!(seen.contains("\"working\""), "{seen}");
    let done = until_status(
        &replicas[1],
        &alice,
        &id,
        "completed",
        Duration::from_secs(20),
    );
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let (_, read) = modern(&replicas[2], &alice, "tasks/get", json!({"taskId": id}));
    assert!(read.contains("computed 'x' in 1 s"), "{read}");
    let (_, theirs) = modern(&replicas[2], &mallory, "tasks/get", json!({"taskId": id}));
    assert!(theirs.contains("no task '"), "{theirs}");

    // A question asked on the first is shown by the second and answered on
    // the third.
    let asks = json!({
        "name": "test_tool_with_task",
        "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": {"io.modelcontextprotocol/tasks": {}},
                "elicitation": {"form": {}},
            },
        },
    });
    let (status, created) = modern(&replicas[0], &alice, "tools/call", asks);
    assert_eq!(status, 200, "{created}");
    let id = task_of(&created);
    let asking = until_status(
        &replicas[1],
        &alice,
        &id,
        "input_required",
        Duration::from_secs(20),
    );
    assert!(asking.to_string().contains("user_name"), "{asking}");
    let answer = json!({"taskId": id, "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ada"}}}});
    let (status, updated) = modern(&replicas[2], &alice, "tasks/update", answer);
    assert_eq!(status, 200, "{updated}");
    let greeted = until_status(
        &replicas[1],
        &alice,
        &id,
        "completed",
        Duration::from_secs(20),
    );
    assert!(greeted.to_string().contains("Hello, Ada!"), "{greeted}");

    // A cancel sent to another replica ends the task where it runs.
    let id = call(
        &replicas[0],
        "slow_compute",
        json!({"seconds": 60, "label": "long"}),
    );
    let (status, _) = modern(&replicas[1], &alice, "tasks/cancel", json!({"taskId": id}));
    assert_eq!(status, 200);
    let cancelled = until_status(
        &replicas[2],
        &alice,
        &id,
        "cancelled",
        Duration::from_secs(10),
    );
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");

    // A replica killed mid-task leaves it failed, saying so, within the
    // lease (15 s without renewal) and a margin.
    let id = call(
        &dead,
        "slow_compute",
        json!({"seconds": 120, "label": "lost"}),
    );
    let killed = Instant::now();
    dead.kill();
    let failed = until_status(&replicas[0], &alice, &id, "failed", Duration::from_secs(30));
    assert_eq!(failed["result"]["status"], "failed", "{failed}");
    assert!(
        failed
            .to_string()
            .contains("stopped answering: its lease lapsed"),
        "{failed}"
    );
    assert!(
        killed.elapsed() < Duration::from_secs(25),
        "{:?}",
        killed.elapsed()
    );

    // Nothing secret reached the store: no token, no key, no password, not
    // even a caller's name.
    let dump = redis.dump();
    assert!(dump.contains("gadget-host:task:"), "{dump}");
    for secret in [
        alice.as_str(),
        mallory.as_str(),
        APPROVAL_KEY,
        STORE_PASSWORD,
        "alice",
        "mallory",
    ] {
        assert!(!dump.contains(secret), "{secret} is in the store:\n{dump}");
    }
}

/// The calls of `tool` by `token` answered with a result (not refused),
/// sent round robin to `replicas`, `calls` of them.
fn admitted(replicas: &[Server], token: &str, tool: &str, calls: usize) -> usize {
    let bearer = format!("Bearer {token}");
    (0..calls)
        .filter(|i| {
            let (status, _, body) =
                replicas[i % replicas.len()].call_tool(Some(&bearer), tool, "{}");
            status == 200 && !body.contains("rate-limited") && !body.contains("rate-limits[")
        })
        .count()
}

#[test]
fn a_rate_limit_is_one_count_for_every_replica_and_for_each_caller() {
    let redis = Redis::start();
    let fleet = Fleet::new(
        r#"
[[rate-limits]]
gadget = "test_simple_text"
calls = 6
per-seconds = 60

[[rate-limits]]
gadget = "test_image_content"
calls = 2
per-seconds = 60
scope = "client"
"#,
    );
    let replicas: Vec<Server> = (0..3).map(|n| fleet.replica(&redis, n)).collect();
    let (alice, bob) = (fleet.token("alice"), fleet.token("bob"));
    // Six in the minute for everyone, over three replicas: not eighteen.
    assert_eq!(admitted(&replicas, &alice, "test_simple_text", 12), 6);
    assert_eq!(admitted(&replicas, &bob, "test_simple_text", 3), 0);
    // Two each, whichever replica a caller lands on.
    assert_eq!(admitted(&replicas, &alice, "test_image_content", 5), 2);
    assert_eq!(admitted(&replicas, &bob, "test_image_content", 5), 2);
    // An unlimited tool is not counted at all.
    assert_eq!(admitted(&replicas, &alice, "test_audio_content", 4), 4);
    let (status, head, body) =
        replicas[1].call_tool(Some(&format!("Bearer {alice}")), "test_image_content", "{}");
    assert_eq!(status, 429, "{head}{body}");
    assert!(body.contains("for client 'alice'"), "{body}");
    assert!(!redis.dump().contains("alice"));
}

#[test]
fn a_store_that_goes_away_refuses_what_it_counts_and_the_replicas_recover() {
    let mut redis = Redis::start();
    let fleet = Fleet::new(
        "[[rate-limits]]\ngadget = \"test_simple_text\"\ncalls = 100\nper-seconds = 60\n",
    );
    let replicas: Vec<Server> = (0..2).map(|n| fleet.replica(&redis, n)).collect();
    let alice = fleet.token("alice");
    let bearer = format!("Bearer {alice}");
    assert_eq!(admitted(&replicas, &alice, "test_simple_text", 2), 2);
    let id = task_of(
        &modern(
            &replicas[0],
            &alice,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "x"}}),
        )
        .1,
    );

    redis.stop();
    for replica in &replicas {
        let (status, _, body) = replica.request("GET", "/readyz", &[], "");
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("cannot be reached"), "{body}");
        assert!(!body.contains(STORE_PASSWORD), "{body}");
        // A limited call is refused, saying why; never let through.
        let (status, _, body) = replica.call_tool(Some(&bearer), "test_simple_text", "{}");
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains("shared state store cannot be reached"),
            "{body}"
        );
        // A call no limit counts does not need the store.
        let (_, _, body) = replica.call_tool(Some(&bearer), "test_audio_content", "{}");
        assert!(!body.contains("isError\":true"), "{body}");
        let (_, got) = modern(replica, &alice, "tasks/get", json!({"taskId": id}));
        assert!(got.contains("cannot be reached"), "{got}");
    }

    redis.resume();
    let waited = Instant::now();
    for replica in &replicas {
        while replica.request("GET", "/readyz", &[], "").0 != 200 {
            assert!(
                waited.elapsed() < Duration::from_secs(15),
                "not ready again"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    assert_eq!(admitted(&replicas, &alice, "test_simple_text", 2), 2);
}

#[test]
fn a_store_over_tls_is_used_only_when_its_certificate_is_trusted() {
    let redis = Redis::start_tls();
    let fleet = Fleet::new("");
    let ca = redis.tls.as_ref().unwrap().join("ca.pem");
    let trusting = fleet.replica_with(&redis, 0, &[("SSL_CERT_FILE", ca.to_str().unwrap())]);
    let stranger = fleet.replica(&redis, 1);
    let waited = Instant::now();
    while trusting.request("GET", "/readyz", &[], "").0 != 200 {
        assert!(
            waited.elapsed() < Duration::from_secs(15),
            "not ready over TLS"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let alice = fleet.token("alice");
    let (status, created) = modern(
        &trusting,
        &alice,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "tls"}}),
    );
    assert_eq!(status, 200, "{created}");
    let id = task_of(&created);
    let done = until_status(&trusting, &alice, &id, "completed", Duration::from_secs(20));
    assert!(done.to_string().contains("computed 'tls'"), "{done}");
    // A replica that does not trust the store's certificate never talks to it.
    let (status, _, body) = stranger.request("GET", "/readyz", &[], "");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("rediss://127.0.0.1:"), "{body}");
    assert!(body.contains("certificate"), "{body}");
}
