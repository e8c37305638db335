#!/usr/bin/env bash
# The README's first command: set up, build, and run gadgets through the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
gadget=target/release/gadget
set -x
"$gadget" list
"$gadget" describe Calculator
"$gadget" call Calculator --params '{"operation": "add", "a": 15, "b": 23}'
"$gadget" call TextStats --params '{"text": "one two three\nfour five"}' --json
# The main job: a model's response, streamed as a model would write it.
"$gadget" run --replay 10 examples/transcripts/parallel.txt
