#!/usr/bin/env bash
# Builds every guest component (shipped plugins, the hello-gadget example,
# test fixtures; with --shipped, the shipped plugins alone) for wasm32-wasip2 and copies each shipped component next to
# its plugin.toml, under the file name the manifest gives.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="${CARGO_TARGET_DIR:-target}"
# --shipped: the shipped plugins only (what the README's demo runs).
built=(plugins/*/ examples/hello-gadget/ examples/palette/ tests/fixtures/*/)
[ "${1:-}" = --shipped ] && built=(plugins/*/)
packages=()
# A plugin copied into plugins/ that is not a workspace member (another
# language, or a Rust one with its own [workspace]) is built by `gadget
# build`, not here.
member() { [ -f "$1/Cargo.toml" ] && ! grep -q '^\[workspace\]' "$1/Cargo.toml"; }
for dir in "${built[@]}"; do
    member "$dir" || continue
    packages+=(-p "$(sed -n 's/^name = "\(.*\)"/\1/p' "$dir/Cargo.toml" | head -1)")
done
cargo build --quiet --target wasm32-wasip2 --profile guest "${packages[@]}"

for dir in "${built[@]}"; do
    [ -f "$dir/plugin.toml" ] && member "$dir" || continue
    crate="$(sed -n 's/^name = "\(.*\)"/\1/p' "$dir/Cargo.toml" | head -1)"
    component="$(sed -n 's/^component = "\(.*\)"/\1/p' "$dir/plugin.toml" | head -1)"
    cp "$target_dir/wasm32-wasip2/guest/${crate//-/_}.wasm" "$dir/$component"
done
echo "built guest components: $(( ${#packages[@]} / 2 )) crates"
