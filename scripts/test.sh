#!/usr/bin/env bash
# The README's test command (and CI's): set up, build, lint, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's wall time, printed at the end (a failed run included), so a
# step that grew slow shows.
steps=()
step() {
    local name=$1 start=$SECONDS
    shift
    if ! "$@"; then
        steps+=("$(printf '%6d s  %s (failed)' $((SECONDS - start)) "$name")")
        exit 1
    fi
    steps+=("$(printf '%6d s  %s' $((SECONDS - start)) "$name")")
}
report() {
    echo "test.sh: wall time by step"
    printf '  %s\n' "${steps[@]}"
    printf '%8d s  in all\n' "$SECONDS"
}
trap report EXIT

step "set up (setup.sh)" ./scripts/setup.sh                   # what the demo needs
step "set up the tests (setup-tests.sh)" ./scripts/setup-tests.sh  # and what the tests need besides

# The host's crates, always selected together so that features unify the
# same way in every command (another selection rebuilds wasmtime).
host=(-p gadget-core -p gadget-exec -p gadget-runtime -p gadget-agent -p gadget-upstream -p gadget-mcp -p gadget-host)

# The pure crate stays pure: the compiler enforces the one-way flow only
# while gadget-core depends on none of the runtime's machinery.
if cargo tree --quiet -p gadget-core -e normal --prefix none | grep -E '^(wasmtime|tokio|reqwest|clap)( |$)'; then
    echo "error: gadget-core must not depend on wasmtime, tokio, reqwest or clap (above)" >&2
    exit 1
fi

# The MCP front end serves tools, whatever runs them: it knows no
# WebAssembly runtime (the CLI hands it the tools and a reload closure).
if cargo tree --quiet -p gadget-mcp -e normal --prefix none | grep -E '^(wasmtime|gadget-runtime)( |$)'; then
    echo "error: gadget-mcp must not depend on wasmtime or gadget-runtime (above)" >&2
    exit 1
fi

step "format" cargo fmt --all --check
step "clippy (host)" cargo clippy --quiet --release "${host[@]}" -p example-embed -p example-agent --all-targets -- -D warnings
step "clippy (guests)" cargo clippy --quiet --target wasm32-wasip2 --profile guest \
    -p gadget-sdk -p example-hello-gadget \
    $(for d in plugins/*/ tests/fixtures/*/; do [ -f "$d/Cargo.toml" ] && printf -- '-p %s ' "$(sed -n 's/^name = "\(.*\)"/\1/p' "$d/Cargo.toml" | head -1)"; done) \
    -- -D warnings

# Release profile: the same build the benchmarks and the CLI use, and the
# containment tests (memory bombs, floods) run faster optimised.
step "tests (host)" cargo test --release "${host[@]}"
# The Rust SDK's own tests, natively: its unit-test helper (`testing`) runs a
# gadget's function with the host's imports recorded instead.
step "tests (Rust SDK)" cargo test --release -p gadget-sdk

# The docs: every relative link and anchor in README.md and docs/ resolves.
step "docs" python3 scripts/check-docs.py
# Rooms and walls: no file over 800 lines, no function over 120 in host/*/src,
# no import circle between a crate's files.
step "structure" python3 scripts/check-structure.py

# The official MCP conformance suite against `gadget serve`, each requirement
# set against its baseline of what still fails (tests/conformance/), which can
# only shrink: a new failure or a baselined check that now passes fails here.
step "MCP conformance" python3 scripts/conformance.py

# The deployment: manifests against Kubernetes' schemas, and the image's
# layout run as its numeric user, without Docker or a cluster.
step "deployment" .tools/k8s/bin/python scripts/check-deploy.py

# The embedding example must keep compiling and running against the library.
step "example-embed" cargo run --quiet --release -p example-embed > /dev/null

# So must the agent example (its scripted provider checks its own answer).
step "example-agent" cargo run --quiet --release -p example-agent > /dev/null

# Every benchmark runs once, so one that no longer runs against the current
# code, components or contracts fails here rather than when someone needs
# its figures. The figures are printed, not judged: a machine shared with
# the rest of CI is no place for that (README, "Benchmarks").
step "benchmarks, once each" cargo bench --quiet "${host[@]}" \
    --bench executor --bench runtime --bench agent --bench mcp --bench languages --bench parser
