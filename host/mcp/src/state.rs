//! The state replicas of `gadget serve` share (`--state redis://...`):
//! MCP tasks ([`crate::tasks`]) and the operator's rate-limit windows, in
//! one Redis, so that any replica answers for a task and a limit is one
//! count for all of them. Without it, each replica keeps its own in memory,
//! which is all a single machine needs.
//!
//! - Every request to the store is bounded ([`STORE_REQUEST_TIMEOUT`]);
//!   the connection is made lazily and remade after a failure (redis-rs's
//!   connection manager), so a store that comes back is used again with no
//!   restart. While it cannot be reached, `/readyz` says not ready, a call
//!   a rate limit counts is refused (fail closed), and a task request
//!   fails with an error naming the store.
//! - A replica holds a lease ([`LEASE_TTL`], renewed every
//!   [`LEASE_RENEWAL`]); a task whose replica's lease lapsed is failed,
//!   with a message saying so, by the next request that reads it.
//! - A task's cancel and answers reach the replica that runs it on a
//!   pub/sub channel, and each lease renewal looks again (a message lost
//!   while the connection was down is not a lost cancel).
//! - Nothing secret is written: no token, key or password; a task's owner
//!   and a rate window's caller are digests. The store's URL is shown
//!   without its password.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{Client, RedisResult, Script};

use gadget_core::rate::{SharedWindow, SharedWindows, WindowsFuture};

/// The longest one request to the store may take, connecting included: a
/// call waits at most this long for its rate limit, a probe for its answer.
pub const STORE_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a replica's lease lasts without renewal: a replica that died
/// leaves its tasks failed within this bound.
pub const LEASE_TTL: Duration = Duration::from_secs(15);

/// How often a replica renews its lease (and looks for cancels and answers
/// its running tasks may have missed): three renewals per lease, so two
/// lost in a row do not lose it.
pub const LEASE_RENEWAL: Duration = Duration::from_secs(5);

/// The environment variable a store password may come from, so that it
/// need not be written in the URL (or the command line that carries it).
pub const STATE_PASSWORD_ENV: &str = "GADGET_STATE_PASSWORD";

/// The prefix of every key this host writes: another application may share
/// the database.
pub(crate) const PREFIX: &str = "gadget-host:";

/// The channel cancels and answers of tasks are published on.
pub(crate) const TASK_CHANNEL: &str = "gadget-host:tasks";

/// Why the store cannot be used.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum StateError {
    #[error("--state: '{0}' is not a store URL (redis://HOST:PORT/DB, or rediss:// for TLS)")]
    NotAUrl(String),
    #[error("the shared state store at {store} cannot be reached: {why}")]
    Unreachable { store: String, why: String },
}

/// A connection to the shared store, and who this replica is in it.
pub struct StateStore {
    manager: ConnectionManager,
    client: Client,
    /// The store's URL as it may be shown: no password.
    shown: String,
    /// This replica's name in the store: its host name and a random part.
    replica: String,
    rate_script: Script,
    /// Numbers the calls a rate window counts (members must differ).
    counted: AtomicU64,
}

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateStore")
            .field("store", &self.shown)
            .field("replica", &self.replica)
            .finish()
    }
}

impl StateStore {
    /// The store at `url` (`redis://[USER[:PASSWORD]@]HOST:PORT/DB`, or
    /// `rediss://` for TLS); a password in `password` (from
    /// [`STATE_PASSWORD_ENV`]) is used when the URL has none. Nothing is
    /// connected yet: the first request connects. Within a tokio runtime.
    pub fn open(url: &str, password: Option<&str>) -> Result<StateStore, StateError> {
        let mut parsed =
            url::Url::parse(url).map_err(|_| StateError::NotAUrl(shown_of_raw(url)))?;
        if !matches!(parsed.scheme(), "redis" | "rediss") || parsed.host_str().is_none() {
            return Err(StateError::NotAUrl(shown_of(&parsed)));
        }
        if parsed.password().is_none()
            && let Some(password) = password.filter(|p| !p.is_empty())
        {
            parsed
                .set_password(Some(password))
                .map_err(|()| StateError::NotAUrl(shown_of(&parsed)))?;
        }
        let shown = shown_of(&parsed);
        let client = Client::open(parsed.as_str()).map_err(|e| StateError::Unreachable {
            store: shown.clone(),
            why: e.to_string(),
        })?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(STORE_REQUEST_TIMEOUT))
            .set_response_timeout(Some(STORE_REQUEST_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let manager =
            ConnectionManager::new_lazy_with_config(client.clone(), config).map_err(|e| {
                StateError::Unreachable {
                    store: shown.clone(),
                    why: e.to_string(),
                }
            })?;
        Ok(StateStore {
            manager,
            client,
            shown,
            replica: replica_name(),
            rate_script: Script::new(RATE_WINDOWS),
            counted: AtomicU64::new(0),
        })
    }

    /// The store's URL without its password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// This replica's name in the store.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// A connection (cheap: the manager multiplexes one).
    pub(crate) fn connection(&self) -> ConnectionManager {
        self.manager.clone()
    }

    /// `request`, bounded by [`STORE_REQUEST_TIMEOUT`]; its failure named
    /// with the store.
    pub(crate) async fn bounded<T>(
        &self,
        request: impl Future<Output = RedisResult<T>>,
    ) -> Result<T, StateError> {
        match tokio::time::timeout(STORE_REQUEST_TIMEOUT, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.unreachable(e.to_string())),
            Err(_) => Err(self.unreachable(format!(
                "no answer within {} ms",
                STORE_REQUEST_TIMEOUT.as_millis()
            ))),
        }
    }

    /// A script's answer, bounded like every request.
    pub(crate) async fn script<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T, StateError> {
        let mut connection = self.connection();
        self.bounded(invocation.invoke_async(&mut connection)).await
    }

    pub(crate) fn unreachable(&self, why: String) -> StateError {
        StateError::Unreachable {
            store: self.shown.clone(),
            why,
        }
    }

    /// Whether the store answers now (`/readyz`).
    pub async fn ping(&self) -> Result<(), StateError> {
        let mut connection = self.connection();
        self.bounded(async move {
            redis::cmd("PING")
                .query_async::<String>(&mut connection)
                .await
        })
        .await
        .map(|_| ())
    }

    /// The key of this replica's lease.
    pub(crate) fn lease_key(&self) -> String {
        format!("{PREFIX}lease:{}", self.replica)
    }

    /// Takes or renews this replica's lease.
    pub(crate) async fn renew_lease(&self) -> Result<(), StateError> {
        let mut connection = self.connection();
        let key = self.lease_key();
        self.bounded(async move {
            redis::cmd("SET")
                .arg(&key)
                .arg(1)
                .arg("PX")
                .arg(LEASE_TTL.as_millis() as u64)
                .query_async::<()>(&mut connection)
                .await
        })
        .await
    }

    /// Gives the lease back (a replica that stops cleanly): its tasks
    /// ended or were cancelled first.
    pub(crate) async fn release_lease(&self) {
        let mut connection = self.connection();
        let key = self.lease_key();
        let _ = self
            .bounded(async move {
                redis::cmd("DEL")
                    .arg(&key)
                    .query_async::<()>(&mut connection)
                    .await
            })
            .await;
    }

    /// A subscription to the tasks' channel, on a connection of its own.
    pub(crate) async fn subscribe(&self) -> Result<redis::aio::PubSub, StateError> {
        let client = self.client.clone();
        self.bounded(async move {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(TASK_CHANNEL).await?;
            Ok(pubsub)
        })
        .await
    }
}

impl SharedWindows for StateStore {
    fn admit<'a>(&'a self, windows: &'a [SharedWindow], count: bool) -> WindowsFuture<'a> {
        Box::pin(async move {
            let member = format!(
                "{}:{}",
                self.replica,
                self.counted.fetch_add(1, Ordering::Relaxed)
            );
            let mut invocation = self.rate_script.prepare_invoke();
            invocation.arg(u8::from(count)).arg(&member);
            for window in windows {
                invocation
                    .key(format!("{PREFIX}{}", window.key))
                    .arg(window.calls)
                    .arg(window.period.as_micros() as u64);
            }
            let (index, wait_us): (usize, u64) =
                self.script(&invocation).await.map_err(|e| match e {
                    StateError::Unreachable { why, .. } => format!("{}: {why}", self.shown),
                    other => other.to_string(),
                })?;
            Ok((index > 0).then(|| (index - 1, Duration::from_micros(wait_us))))
        })
    }
}

/// Checks and counts a call in every window it meets, atomically, by the
/// store's clock (one clock for all replicas). A window is a sorted set of
/// the times of the calls it admitted within its period; a call is
/// admitted when every window holds fewer than its `calls` once the calls a
/// whole period old are dropped, exactly as the in-memory windows do. The
/// answer is `{0, 0}` (admitted) or `{n, wait}`: window n (1-based) waits
/// longest, `wait` µs.
///
/// KEYS: the windows. ARGV: count (0/1), a member unique to this call, then
/// per window its calls and its period in µs.
const RATE_WINDOWS: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local count = ARGV[1] == '1'
local worst, longest = 0, -1
for i, key in ipairs(KEYS) do
  local calls = tonumber(ARGV[1 + 2 * i])
  local period = tonumber(ARGV[2 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
  local held = redis.call('ZCARD', key)
  if held >= calls then
    local oldest = redis.call('ZRANGE', key, held - calls, held - calls, 'WITHSCORES')
    local wait = tonumber(oldest[2]) + period - now
    if wait > longest then worst, longest = i, wait end
  end
end
if worst > 0 then return {worst, longest} end
if count then
  for i, key in ipairs(KEYS) do
    redis.call('ZADD', key, now, ARGV[2] .. ':' .. i)
    redis.call('PEXPIRE', key, math.ceil(tonumber(ARGV[2 + 2 * i]) / 1000))
  end
end
return {0, 0}
";

/// This replica's name: its host name (a pod's name, in a cluster) and a
/// random part, in characters safe in a key and a JSON string.
fn replica_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(63)
        .collect();
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    let random: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    match host.is_empty() {
        true => format!("replica-{random}"),
        false => format!("{host}-{random}"),
    }
}

/// A store URL as it may be shown: scheme, host, port and database, no
/// user or password.
fn shown_of(url: &url::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_password(None);
    let _ = shown.set_username("");
    shown.to_string()
}

/// What may be shown of a URL that does not parse: its scheme, if any.
fn shown_of_raw(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, _)) => format!("{scheme}://…"),
        None => "…".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_store_url_is_shown_without_its_password_and_a_bad_one_is_refused() {
        let store = StateStore::open("redis://app:hunter2@127.0.0.1:6390/3", None).unwrap();
        assert_eq!(store.shown(), "redis://127.0.0.1:6390/3");
        assert!(!format!("{store:?}").contains("hunter2"));
        let from_env = StateStore::open("rediss://cache.internal:6380/0", Some("s3cret")).unwrap();
        assert_eq!(from_env.shown(), "rediss://cache.internal:6380/0");
        for bad in [
            "http://127.0.0.1/",
            "redis:///0",
            "nonsense",
            "redis://u:p@[::1",
        ] {
            let refused = StateStore::open(bad, None).unwrap_err();
            assert!(matches!(refused, StateError::NotAUrl(_)), "{bad}");
            assert!(!refused.to_string().contains(":p@"), "{refused}");
        }
    }

    #[test]
    fn a_replicas_name_is_safe_in_a_key_and_a_json_string() {
        let name = replica_name();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')),
            "{name}"
        );
        assert_ne!(
            name,
            replica_name(),
            "two replicas on one host share a name"
        );
    }
}
