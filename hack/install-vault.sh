#!/usr/bin/env bash
# Installs the Vault server the Vault test tier runs (tests/vaultenv, the
# Vault provider's tests): HashiCorp Vault, built once from the Go module
# proxy by the helper module hack/vault, into
#
#   $KEYMOUNT_CACHE/vault/<version>/vault
#
# <version> is the github.com/hashicorp/vault version hack/vault/go.mod
# requires: v1.14.2, the newest MPL-2.0 release (later ones are BUSL-1.1).
#
# Why a patched sdk: Vault v1.14.2 requires github.com/hashicorp/vault/sdk
# v0.9.2, whose framework.Backend checks on its first request that no path
# defines a CreateOperation without an ExistenceCheck — and Vault's own
# managed-keys paths of that release do, so `vault server -dev` panics on its
# first request ("Pattern managed-keys/... defines a CreateOperation but no
# ExistenceCheck"). Vault's release builds never hit it because they build the
# sdk from their own tree, not the tagged module. This script copies the sdk
# module exactly as the module proxy served it (checksummed against
# hack/vault/go.sum) into a scratch directory, drops that one consistency check
# from sdk/framework/backend.go, and builds the helper module with a `replace`
# pointing at the copy. Nothing of Vault is committed to this repository: only
# the helper module's go.mod/go.sum and this script.
#
# The build goes to a scratch directory under the cache (with its own
# GOTMPDIR) and the binary is renamed into place only once it runs and reports
# the right version, so an interrupted build is never taken as done. When the
# binary exists the build is skipped, so running this again is cheap. The Go
# build cache is the default one and shared.
#
# Usage: hack/install-vault.sh   (normally through `make vault-env`)
#        hack/install-vault.sh --print-path
# Environment: KEYMOUNT_CACHE (default ~/.cache/keymount), GO (default go).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KEYMOUNT_CACHE:-$HOME/.cache/keymount}
go=${GO:-go}
mod=$root/hack/vault

die() {
	echo "install-vault: $*" >&2
	exit 1
}

# The Vault version hack/vault builds.
version=$(cd "$mod" && GOWORK=off "$go" list -m -f '{{.Version}}' github.com/hashicorp/vault) ||
	die "cannot read the github.com/hashicorp/vault version from $mod/go.mod"
[[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "unexpected github.com/hashicorp/vault version '$version' in $mod/go.mod"
bin=$cache/vault/$version/vault

if [[ "${1:-}" == --print-path ]]; then
	echo "$bin"
	exit 0
fi
[[ $# -eq 0 ]] || die "usage: $0 [--print-path]"

if [[ -x $bin ]]; then
	echo "install-vault: VAULT_BIN=$bin"
	exit 0
fi

mkdir -p "$cache/tmp"
# Scratch directories of builds killed hard (no EXIT trap) pile up: drop
# those untouched for a day.
find "$cache/tmp" -maxdepth 1 -name 'vault-build.*' -mmin +1440 -exec rm -rf {} + 2>/dev/null || true
tmp=$(mktemp -d "$cache/tmp/vault-build.XXXXXX")
# shellcheck disable=SC2064 # expand $tmp now
trap "rm -rf '$tmp'" EXIT
mkdir -p "$tmp/gotmp" "$tmp/mod"
cp "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "$tmp/mod/"

# The sdk version Vault requires, downloaded (and verified against go.sum)
# through the module proxy.
sdk_version=$(cd "$tmp/mod" && GOWORK=off "$go" list -m -f '{{.Version}}' github.com/hashicorp/vault/sdk) ||
	die "cannot read the github.com/hashicorp/vault/sdk version"
sdk_dir=$(cd "$tmp/mod" && GOWORK=off "$go" mod download -json "github.com/hashicorp/vault/sdk@$sdk_version" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d "$sdk_dir" ]] || die "cannot download github.com/hashicorp/vault/sdk@$sdk_version"
cp -r "$sdk_dir" "$tmp/sdk"
chmod -R u+w "$tmp/sdk"

# Drop the CreateOperation/ExistenceCheck consistency check (see above): the
# whole `if p.ExistenceCheck == nil { ... }` block after its comment.
backend=$tmp/sdk/framework/backend.go
perl -0pi -e 's{\n[ \t]*// Detect the coding error of attempting to define a CreateOperation without defining an ExistenceCheck\n[ \t]*if p\.ExistenceCheck == nil \{\n.*?\n\t\t\}\n}{\n}s' "$backend"
if grep -q 'defines a CreateOperation but no ExistenceCheck' "$backend"; then
	die "could not drop the ExistenceCheck panic from $backend (sdk $sdk_version changed shape: update this script)"
fi
(cd "$tmp/mod" && GOWORK=off "$go" mod edit -replace "github.com/hashicorp/vault/sdk=$tmp/sdk")

echo "install-vault: building Vault $version (sdk $sdk_version patched) into $bin (a cold build takes about 4 minutes or more)" >&2
start=$SECONDS
CGO_ENABLED=0 GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" GOTMPDIR="$tmp/gotmp" \
	"$go" build -C "$tmp/mod" -trimpath -ldflags="-s -w" -o "$tmp/vault" github.com/hashicorp/vault
got=$("$tmp/vault" version) || die "the built vault does not run"
[[ "$got" == "Vault $version"* ]] || die "the built vault reports '$got', want 'Vault $version'"
mkdir -p "$(dirname "$bin")"
mv -f "$tmp/vault" "$bin"
echo "install-vault: built Vault $version in $((SECONDS - start))s" >&2
echo "install-vault: VAULT_BIN=$bin"
