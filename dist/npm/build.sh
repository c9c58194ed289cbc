#!/usr/bin/env bash
# Builds MAIA's npm packages from dist/release.sh's archives, the way
# ACP agents are shipped on npm: one package per platform carrying the
# binary (`os`/`cpu` set, so npm installs only the one that fits), and a
# small launcher package, @maia-editors/maia, whose `maia` command runs it
# and which lists every platform package as an optional dependency. Then
# `npx -y @maia-editors/maia acp` needs Node and nothing else.
#
# Usage: dist/npm/build.sh ARCHIVE_DIR OUT_DIR
#   ARCHIVE_DIR holds maia-<version>-<target>.tar.gz for the targets of
#   dist/platforms (a missing one is an error unless MAIA_NPM_PARTIAL=1,
#   which the tests use to pack the host's alone). OUT_DIR receives one
#   folder per package and, from `npm pack`, its tarball; the tarballs'
#   names and sizes are printed. Publishing them (`npm publish <tarball>`,
#   platform packages first) is done by hand or by the release workflow.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
archives="$(cd "${1:?usage: build.sh ARCHIVE_DIR OUT_DIR}" && pwd)"
out="${2:?usage: build.sh ARCHIVE_DIR OUT_DIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$root/Cargo.toml")"
repository="$(sed -n '/^\[workspace.package\]/,/^\[/s/^repository = "\(.*\)"/\1/p' "$root/Cargo.toml")"
license="$(sed -n '/^\[workspace.package\]/,/^\[/s/^license = "\(.*\)"/\1/p' "$root/Cargo.toml")"
scope="@maia-editors"
if [ -z "$version" ] || [ -z "$repository" ] || [ -z "$license" ]; then
  echo "build.sh: no version, repository or license in Cargo.toml [workspace.package]" >&2
  exit 1
fi

# package.json text from key=value pairs; JSON quoting by Node itself.
manifest() {
  node -e '
    const [kind, name, version, repository, license, extra] = process.argv.slice(1);
    const m = {
      name, version, license,
      description: kind === "launcher"
        ? "MAIA, a coding agent for editors (ACP and LSP) on any model behind a LiteLLM proxy"
        : `The maia binary of ${name.replace(/^.*\/maia-/, "")} for the MAIA launcher package`,
      homepage: repository,
      repository: { type: "git", url: `git+${repository}.git` },
      files: ["bin", "README.md", "LICENSE"],
      ...JSON.parse(extra),
    };
    process.stdout.write(JSON.stringify(m, null, 2) + "\n");
  ' "$@"
}

platforms_json="{"
optional="{"
built=0
while read -r target os cpu _runner; do
  case "$target" in ''|'#'*) continue ;; esac
  name="${scope}/maia-${os}-${cpu}"
  platforms_json="${platforms_json}\"${os}-${cpu}\":\"${name}\","
  optional="${optional}\"${name}\":\"${version}\","
  archive="$archives/maia-${version}-${target}.tar.gz"
  if [ ! -f "$archive" ]; then
    if [ "${MAIA_NPM_PARTIAL:-}" = 1 ]; then
      continue
    fi
    echo "build.sh: no archive for ${target}: ${archive}" >&2
    exit 1
  fi
  dir="$out/maia-${os}-${cpu}"
  rm -rf "$dir"
  mkdir -p "$dir/bin"
  tar -xzf "$archive" -C "$dir/bin" maia
  chmod 755 "$dir/bin/maia"
  tar -xzf "$archive" -C "$dir" README.md LICENSE
  manifest platform "$name" "$version" "$repository" "$license" \
    "{\"os\":[\"${os}\"],\"cpu\":[\"${cpu}\"],\"preferUnplugged\":true}" > "$dir/package.json"
  built=$((built + 1))
done < "$root/dist/platforms"
platforms_json="${platforms_json%,}}"
optional="${optional%,}}"
if [ "$built" = 0 ]; then
  echo "build.sh: no archive of version ${version} in ${archives}" >&2
  exit 1
fi

dir="$out/maia"
rm -rf "$dir"
mkdir -p "$dir/bin"
cp "$root/dist/npm/launcher/bin/maia.js" "$dir/bin/maia.js"
chmod 755 "$dir/bin/maia.js"
node -e 'process.stdout.write(JSON.stringify(JSON.parse(process.argv[1]), null, 2) + "\n")' \
  "$platforms_json" > "$dir/bin/platforms.json"
cp "$root/README.md" "$root/LICENSE" "$dir/"
manifest launcher "${scope}/maia" "$version" "$repository" "$license" \
  "{\"bin\":{\"maia\":\"bin/maia.js\"},\"engines\":{\"node\":\">=18\"},\"optionalDependencies\":${optional}}" \
  > "$dir/package.json"

# Platform packages first: the order they must be published in.
for dir in "$out"/maia-*/ "$out/maia/"; do
  (cd "$dir" && npm pack --silent --pack-destination "$out" >/dev/null)
done
for tarball in "$out"/*.tgz; do
  printf '%s\t%s bytes\n' "$tarball" "$(wc -c < "$tarball" | tr -d ' ')"
done
