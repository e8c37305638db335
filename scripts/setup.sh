#!/usr/bin/env bash
# The README's demo needs: the wasm32-wasip2 target, the shipped plugins'
# components and the host (release). Nothing else is installed here: the
# test command's own tools (other languages' toolchains, MCP peers, the
# conformance suite, a registry, signing and packaging CLIs) are
# scripts/setup-tests.sh's. Safe to run again: everything is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
    echo "error: cargo not found; install Rust 1.95 with rustup first" >&2
    exit 1
fi
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi

./scripts/build-guests.sh --shipped
cargo build --quiet --release -p gadget-core -p gadget-exec -p gadget-runtime -p gadget-agent -p gadget-upstream -p gadget-mcp -p gadget-host
echo "host built: target/release/gadget"
