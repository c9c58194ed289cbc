#!/usr/bin/env bash
# Installs the `maia` release archive for this runner (Linux or macOS,
# x86_64 or arm64) into $RUNNER_TEMP/maia and puts it on the job's PATH,
# after checking the archive against the release's SHA256SUMS.
# MAIA_VERSION: the release (default the version of the Cargo.toml beside
# this action, i.e. the tag the action was used at).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
version="${MAIA_VERSION:-}"
if [ -z "$version" ]; then
  version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$here/../../Cargo.toml")"
fi
version="${version#v}"
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) target=x86_64-unknown-linux-gnu ;;
  Linux-aarch64 | Linux-arm64) target=aarch64-unknown-linux-gnu ;;
  Darwin-arm64) target=aarch64-apple-darwin ;;
  Darwin-x86_64) target=x86_64-apple-darwin ;;
  *)
    echo "::error::MAIA has no release for $(uname -s) $(uname -m) (Linux and macOS, x86_64 and arm64)"
    exit 1
    ;;
esac
base="${MAIA_RELEASE_BASE:-https://github.com/maia-editors/maia/releases/download}/v${version}"
archive="maia-${version}-${target}.tar.gz"
dir="${RUNNER_TEMP:-/tmp}/maia"
mkdir -p "$dir"
curl --fail --silent --show-error --location --retry 3 -o "$dir/$archive" "$base/$archive"
curl --fail --silent --show-error --location --retry 3 -o "$dir/SHA256SUMS" "$base/SHA256SUMS"
want="$(awk -v f="$archive" '$2 == f {print $1}' "$dir/SHA256SUMS")"
if command -v sha256sum >/dev/null; then
  got="$(sha256sum "$dir/$archive" | cut -d' ' -f1)"
else
  got="$(shasum -a 256 "$dir/$archive" | cut -d' ' -f1)"
fi
if [ -z "$want" ] || [ "$want" != "$got" ]; then
  echo "::error::$archive does not match the release's SHA256SUMS (want ${want:-nothing}, got $got)"
  exit 1
fi
tar -xzf "$dir/$archive" -C "$dir" maia
echo "$dir" >> "${GITHUB_PATH:-/dev/null}"
"$dir/maia" --version
