#!/usr/bin/env bash
# The README's test command (and CI's): set up, build, lint, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

cargo fmt --all --check
cargo clippy --quiet --release -p gadget-host -p example-embed --all-targets -- -D warnings
cargo clippy --quiet --target wasm32-wasip2 --profile guest \
    -p gadget-sdk -p example-hello-gadget \
    $(for d in plugins/*/ tests/fixtures/*/; do printf -- '-p %s ' "$(sed -n 's/^name = "\(.*\)"/\1/p' "$d/Cargo.toml" | head -1)"; done) \
    -- -D warnings

# Release profile: the same build the benchmarks and the CLI use, and the
# containment tests (memory bombs, floods) run faster optimised.
cargo test --release -p gadget-host

# The embedding example must keep compiling and running against the library.
cargo run --quiet --release -p example-embed > /dev/null
