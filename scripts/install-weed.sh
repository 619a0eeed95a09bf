#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (the S3 server and Iceberg REST catalog of the
# lake's end-to-end tests, internal/testweed) from its Go module, fetched
# through the Go module proxy like every other module: no binary download.
# `go install` refuses the module (its go.mod has replace directives), so
# the script builds in a writable copy of the module's directory.
# The version is pinned in internal/testweed/weed.version; the binary goes
# to $ES_WEED_CACHE (default $HOME/.cache/energyscope)/weed-<version>/weed
# and $ES_WEED_CACHE/bin/weed links to it. A version already built is not
# built again. The build takes ~4 minutes and ~2.7 GB of memory.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(tr -d '[:space:]' < internal/testweed/weed.version)
cache=${ES_WEED_CACHE:-$HOME/.cache/energyscope}
dest=$cache/weed-$version
mkdir -p "$cache/bin"
link() {
  ln -sfn "$dest/weed" "$cache/bin/weed.tmp"
  mv -T "$cache/bin/weed.tmp" "$cache/bin/weed"
}
if [ -x "$dest/weed" ]; then
  link
  exit 0
fi

go=${GO:-go}
# Outside any module, so the project's go.mod plays no part.
work=$(mktemp -d "$cache/build-XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
dir=$(cd "$work" && GOFLAGS=-mod=mod "$go" mod download -json "github.com/seaweedfs/seaweedfs@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir/weed" ]; then
  echo "install-weed: go mod download gave no module directory for seaweedfs@$version" >&2
  exit 1
fi
echo "install-weed: building weed $version (a few minutes)" >&2
cp -R "$dir" "$work/src"
chmod -R u+w "$work/src"
(cd "$work/src" && GOFLAGS=-buildvcs=false CGO_ENABLED=0 "$go" build -trimpath -o "$work/weed" ./weed)
"$work/weed" version >/dev/null 2>&1
mkdir -p "$dest"
mv "$work/weed" "$dest/weed.tmp"
mv "$dest/weed.tmp" "$dest/weed"
link
echo "install-weed: $dest/weed" >&2
