#!/usr/bin/env bash
# Installs the official ACP SDK clients that protocol-tests/remote_sdk.rs
# drives against `maia serve`, into a cache outside the clone:
#   $MAIA_SDK_CLIENTS (default ~/.cache/maia-sdk-clients)
#     venv/          Python: agent-client-protocol[http] 0.12.1, acpremote 1.10.0
#     node/          npm: @agentclientprotocol/sdk 2.4.0, ws (package-lock.json here)
#     ready          what was installed (the hash of the pins); the test looks for it
# A warm cache (the same pins) downloads nothing. Prints the cache's path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${MAIA_SDK_CLIENTS:-$HOME/.cache/maia-sdk-clients}"
mkdir -p "$cache"

python="${PYTHON:-python3}"
pins=$(cat "$here/requirements.txt" "$here/package.json" "$here/package-lock.json" \
  | sha256sum | cut -d' ' -f1)
stamp="$pins $("$python" -c 'import sys; print("py%d.%d" % sys.version_info[:2])') node$(node --version)"
if [ "$(cat "$cache/ready" 2>/dev/null)" = "$stamp" ]; then
  echo "$cache"
  exit 0
fi
rm -f "$cache/ready"

# Python: a venv with the pinned wheels.
rm -rf "$cache/venv"
"$python" -m venv "$cache/venv"
"$cache/venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
  -r "$here/requirements.txt" >&2
"$cache/venv/bin/pip" check --disable-pip-version-check >&2
"$cache/venv/bin/python" -c 'import acp, acp.ws, acp.http, acpremote' >&2

# Node: the package folder, installed from its lock.
rm -rf "$cache/node"
mkdir -p "$cache/node"
cp "$here/package.json" "$here/package-lock.json" "$cache/node/"
(cd "$cache/node" && npm ci --no-audit --no-fund --silent >&2)

echo "$stamp" >"$cache/ready"
echo "$cache"
