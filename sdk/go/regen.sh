#!/usr/bin/env bash
# Regenerates the Go bindings in sdk/go/gen/ for the SDK's world (sdk/wit/world.wit: the
# contract in wit/gadget@0.2.0/gadget.wit plus wasi:http's outgoing handler). They are
# committed (the generator is wit-bindgen-cli 0.63.0, a 13-minute install),
# so only a change to the WIT needs this. sdk/go/gopkg is the
# go.bytecodealliance.org/pkg module that release vendors (src/pkg of the
# wit-bindgen-go 0.63.0 crate). Install the generator with:
#   cargo install --locked wit-bindgen-cli@0.63.0
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
wit=$(mktemp -d)
cp -r sdk/wit/. "$wit"/
# Both contract versions: the SDK's worlds include them by version.
for version in 0.2.0 0.3.0; do
    mkdir -p "$wit/deps/gadget-plugin-$version"
    cp "wit/gadget@$version/gadget.wit" "$wit/deps/gadget-plugin-$version/"
done
wit-bindgen go "$wit" --world plugin-http-v3 --out-dir "$out"
rm -rf sdk/go/gen && mkdir -p sdk/go/gen
cp -r "$out"/gadget_plugin_* "$out"/wasi_* "$out"/wit_exports.go sdk/go/gen/
rm -rf "$out" "$wit"
echo "regenerated sdk/go/gen from sdk/wit/ (world plugin-http-v3, contract 0.3.0)"
