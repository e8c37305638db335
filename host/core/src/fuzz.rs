//! A small mutational fuzzer for the doors untrusted input comes through
//! (the policy file, a provider's event stream, MCP messages), run by each
//! crate's tests for a bounded time so CI exercises them on every change:
//! inputs grow from real seeds by byte flips, inserted interesting bytes,
//! splices of two inputs, cuts and repeats; a panic is reported with the
//! input and the seed that reproduce it.
//!
//! `GADGET_FUZZ_SECONDS` sets each target's time (default
//! [`DEFAULT_FUZZ_TIME`]) and `GADGET_FUZZ_SEED` replays one run. Not a
//! coverage-guided fuzzer: `fuzz/` has cargo-fuzz targets for long runs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// How long each target runs in a test by default: long enough to reach
/// past the seeds, short enough that CI does not notice.
pub const DEFAULT_FUZZ_TIME: Duration = Duration::from_secs(3);

/// The largest input a mutation may make, bytes: the doors' own limits are
/// tested by their own tests; here the interest is in shapes.
pub const MAX_FUZZ_INPUT_BYTES: usize = 64 << 10;

/// Bytes that tend to matter to parsers.
const INTERESTING: &[&[u8]] = &[
    b"\n",
    b"\r",
    b"\r\n",
    b"\0",
    b"\"",
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"=",
    b" ",
    b"\xff",
    b"\xc3",
    b"\xe2\x80",
    b"\xef\xbb\xbf",
    b"-1",
    b"1e999",
    b"18446744073709551616",
    b"NaN",
    b"null",
    b"true",
    b"data:",
    b"event:",
    b"\"id\":",
    b"[[",
    b"]]",
    b"\"\"\"",
];

/// A tiny deterministic generator (xorshift64*): no dependency, and a seed
/// replays a run exactly.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// One mutation of `input`, using `other` for splices.
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(7) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 => {
                let bytes = INTERESTING[rng.below(INTERESTING.len())];
                out.splice(at..at, bytes.iter().copied());
            }
            2 if !out.is_empty() => {
                let end = (at + rng.below(16) + 1).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 if !other.is_empty() => {
                let from = rng.below(other.len());
                let to = (from + rng.below(64) + 1).min(other.len());
                out.splice(at..at, other[from..to].iter().copied());
            }
            4 if !out.is_empty() => {
                // Repeat a slice: long lines, deep nesting.
                let from = rng.below(out.len());
                let to = (from + rng.below(8) + 1).min(out.len());
                let piece = out[from..to].to_vec();
                for _ in 0..rng.below(64) {
                    out.splice(at..at, piece.iter().copied());
                }
            }
            5 => out.truncate(at),
            _ => {
                let byte = rng.next_u64() as u8;
                out.insert(at, byte);
            }
        }
    }
    out.truncate(MAX_FUZZ_INPUT_BYTES);
    out
}

/// Runs `target` on the seeds, then on mutations of them, for the
/// configured time. A panic fails with the input (escaped) and the seed.
pub fn run(name: &str, seeds: &[&[u8]], mut target: impl FnMut(&[u8])) -> u64 {
    let budget = std::env::var("GADGET_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(DEFAULT_FUZZ_TIME, Duration::from_secs);
    let seed = std::env::var("GADGET_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let mut rng = Rng::new(seed);
    let mut pool: Vec<Vec<u8>> = seeds.iter().map(|s| s.to_vec()).collect();
    if pool.is_empty() {
        pool.push(Vec::new());
    }
    let mut check = |input: &[u8]| {
        if catch_unwind(AssertUnwindSafe(|| target(input))).is_err() {
            panic!(
                "fuzz target {name} panicked (GADGET_FUZZ_SEED={seed}) on {} bytes: {}",
                input.len(),
                String::from_utf8_lossy(input).escape_debug()
            );
        }
    };
    for input in pool.clone() {
        check(&input);
    }
    let started = Instant::now();
    let mut runs = 0u64;
    while started.elapsed() < budget {
        let a = rng.below(pool.len());
        let b = rng.below(pool.len());
        let input = mutate(&mut rng, &pool[a], &pool[b]);
        check(&input);
        runs += 1;
        // Keep some mutants as new starting points, within a bound.
        if rng.below(8) == 0 {
            if pool.len() < 256 {
                pool.push(input);
            } else {
                let slot = rng.below(pool.len());
                pool[slot] = input;
            }
        }
    }
    eprintln!("fuzz target {name}: {runs} inputs in {budget:?} (GADGET_FUZZ_SEED={seed})");
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_stay_bounded_and_a_seed_replays() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..1000 {
            let x = mutate(&mut a, b"hello: world\n", b"{\"id\":1}");
            let y = mutate(&mut b, b"hello: world\n", b"{\"id\":1}");
            assert_eq!(x, y);
            assert!(x.len() <= MAX_FUZZ_INPUT_BYTES);
        }
    }

    #[test]
    #[should_panic(expected = "fuzz target finds-x panicked")]
    fn a_panic_is_reported_with_its_input() {
        run("finds-x", &[b"abc"], |input| {
            assert!(!input.contains(&b'x'), "found");
        });
    }
}
