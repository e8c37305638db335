#!/usr/bin/env bash
# Regenerates the C bindings in sdk/c/gen/ from wit/gadget@0.1.0/gadget.wit. They are
# committed (the generator is wit-bindgen-cli 0.63.0, a 13-minute install),
# so only a change to the WIT needs this. Install the generator with:
#   cargo install --locked wit-bindgen-cli@0.63.0
set -euo pipefail
cd "$(dirname "$0")/../.."
wit-bindgen c wit/gadget@0.1.0 --world plugin --out-dir sdk/c/gen
echo "regenerated sdk/c/gen from wit/gadget@0.1.0/"
