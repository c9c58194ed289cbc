#!/usr/bin/env bash
# Builds MAIA's release archive for one target:
#   dist/out/maia-<version>-<target>.tar.gz  holding  maia, README.md, LICENSE
# and prints the path and its SHA-256. The npm packages are made from these
# archives (dist/npm/build.sh); the release workflow
# (.github/workflows/release.yml) runs this script once per platform.
#
# Usage: dist/release.sh [TARGET]
#   MAIA_RELEASE_BINARY=/path/to/maia packs that binary instead of building
#   one (the tests use it); TAR=gtar on macOS (GNU tar is needed).
#   TARGET defaults to the host's (rustc -vV); it must be one of
#   dist/platforms (x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu,
#   aarch64-apple-darwin, x86_64-apple-darwin). Building for another target
#   needs its toolchain (see docs/editors.md, "Releasing").
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

target="${1:-$(rustc -vV | sed -n 's/^host: //p')}"
version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
if [ -z "$version" ]; then
  echo "release.sh: no version in Cargo.toml [workspace.package]" >&2
  exit 1
fi
name="maia-${version}-${target}"
if ! grep -v '^#' dist/platforms | awk '{print $1}' | grep -qx "$target"; then
  echo "release.sh: ${target} is not a release platform (dist/platforms lists them)" >&2
  exit 1
fi

binary="${MAIA_RELEASE_BINARY:-}"
if [ -z "$binary" ]; then
  cargo build --release --locked -p maia-server --bin maia --target "$target"
  binary="target/${target}/release/maia"
fi

out="${MAIA_RELEASE_OUT:-dist/out}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$binary" "$stage/maia"
cp README.md LICENSE "$stage/"
mkdir -p "$out"
# Fixed owner, order and times: the same sources give the same archive.
"${TAR:-tar}" --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime="@${SOURCE_DATE_EPOCH:-0}" \
    -C "$stage" -czf "$out/${name}.tar.gz" LICENSE README.md maia
echo "$out/${name}.tar.gz"
if command -v sha256sum >/dev/null; then
  sha256sum "$out/${name}.tar.gz"
else
  shasum -a 256 "$out/${name}.tar.gz"
fi
