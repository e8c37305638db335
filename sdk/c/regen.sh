#!/usr/bin/env bash
# Regenerates the C bindings in sdk/c/gen/ for the SDK's world (sdk/wit/world.wit:
# world plugin-http-v3: contract 0.3.0 in wit/gadget@0.3.0/gadget.wit plus wasi:http's outgoing handler). They are
# committed (the generator is wit-bindgen-cli 0.63.0, a 13-minute install),
# so only a change to the WIT needs this. Install the generator with:
#   cargo install --locked wit-bindgen-cli@0.63.0
set -euo pipefail
cd "$(dirname "$0")/../.."
wit=$(mktemp -d)
cp -r sdk/wit/. "$wit"/
# Both contract versions: the SDK's worlds include them by version.
for version in 0.2.0 0.3.0; do
    mkdir -p "$wit/deps/gadget-plugin-$version"
    cp "wit/gadget@$version/gadget.wit" "$wit/deps/gadget-plugin-$version/"
done
wit-bindgen c "$wit" --world plugin-http-v3 --out-dir sdk/c/gen
rm -rf "$wit"
echo "regenerated sdk/c/gen from sdk/wit/ (world plugin-http-v3, contract 0.3.0)"
