//! How a request that failed is retried: exponential backoff with jitter,
//! the server's `Retry-After` honoured up to a cap, only for what is worth
//! retrying (rate limits, server errors, connections that failed before
//! the first byte).

use std::time::Duration;

use crate::provider::{ChatRequest, Provider, ProviderError, ResponseStream};

/// How failed requests are retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first backoff; each retry doubles it.
    pub base_delay: Duration,
    /// No backoff is longer.
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured; a server asking for more gets
    /// this (the loop never sleeps for an hour on one header).
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            base_delay: Duration::from_millis(1000),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// The pause before retry `attempt` (1-based) after `error`: the
    /// server's `Retry-After` when it gave one, else exponential backoff
    /// with "full jitter" between half and all of it (so clients that failed
    /// together do not retry together).
    pub fn delay(&self, attempt: u32, error: &ProviderError) -> Duration {
        if let Some(asked) = error.retry_after() {
            return asked.min(self.max_retry_after);
        }
        let exponential = self
            .base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.max_delay);
        exponential.mul_f64(0.5 + 0.5 * jitter())
    }
}

impl RetryPolicy {
    /// Sends `request` through `provider`, retrying what is worth
    /// retrying; `on_retry` hears of each retry (attempt, pause, cause)
    /// before its pause. Dropping the future stops it, pause included.
    pub async fn send(
        &self,
        provider: &dyn Provider,
        request: &ChatRequest,
        mut on_retry: impl FnMut(u32, Duration, &ProviderError),
    ) -> Result<ResponseStream, ProviderError> {
        let mut attempt = 0;
        loop {
            match provider.stream(request).await {
                Ok(stream) => return Ok(stream),
                Err(error) if error.retryable() && attempt < self.max_retries => {
                    attempt += 1;
                    let delay = self.delay(attempt, &error);
                    on_retry(attempt, delay, &error);
                    tokio::time::sleep(delay).await;
                }
                Err(error) => return Err(error),
            }
        }
    }
}

/// A number in [0, 1) that differs between processes and calls.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after_up_to_its_cap() {
        let policy = RetryPolicy::default();
        let busy = ProviderError::Server {
            provider: "p".into(),
            status: 503,
            retry_after: None,
            message: String::new(),
        };
        for attempt in 1..=6 {
            let full = (policy.base_delay * (1 << (attempt - 1))).min(policy.max_delay);
            let delay = policy.delay(attempt, &busy);
            assert!(delay >= full / 2 && delay <= full, "{attempt}: {delay:?}");
        }
        let asked = |secs| ProviderError::RateLimited {
            provider: "p".into(),
            retry_after: Some(Duration::from_secs(secs)),
            message: String::new(),
        };
        assert_eq!(policy.delay(1, &asked(3)), Duration::from_secs(3));
        assert_eq!(policy.delay(1, &asked(3600)), policy.max_retry_after);
    }
}
