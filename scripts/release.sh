#!/usr/bin/env bash
# Build the release into dist/ (make release): for every platform of
# .goreleaser.yml, the files the Terraform Registry and the OpenTofu Registry
# read from a GitHub release,
#
#   terraform-provider-ipam_VERSION_OS_ARCH.zip
#   terraform-provider-ipam_VERSION_SHA256SUMS  (and .sig, with GPG_FINGERPRINT)
#   terraform-provider-ipam_VERSION_manifest.json
#
# plus the ipamctl archives. Nothing is published.
#
# With HEAD on a tag vX.Y.Z and a clean tree, that release (goreleaser release
# --skip=publish); otherwise a snapshot (goreleaser release --snapshot) whose
# version is scripts/release-version.sh's: 0.0.YYYYMMDDhhmmss, a plain version
# that an unmodified configuration installs (a pre-release would need a
# configuration naming it exactly). VERSION=X.Y.Z sets the snapshot's version.
# The checksums are signed when GPG_FINGERPRINT names a key in the gpg agent;
# otherwise signing is skipped.
#
# goreleaser is a `tool` of the tools/ module (tools/go.mod pins it; see
# scripts/release-check.sh): `go tool -n` builds it on first use, from the Go
# module proxy into the build cache (several minutes on 2 cores).
#
# `make install-mirror DIST=dist` lays the result out as a provider mirror.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

say() { printf 'release: %s\n' "$*" >&2; }
die() {
	say "error: $*"
	exit 1
}

command -v go >/dev/null 2>&1 || die "go is needed to build goreleaser and the provider"
name=terraform-provider-ipam

version=$(bash scripts/release-version.sh)
mode=(--snapshot)
if [[ -z "${VERSION:-}" && -z "$(git status --porcelain 2>/dev/null)" ]] &&
	tag=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null) && [[ ${tag#v} == "$version" ]]; then
	mode=()
	say "HEAD is the tag $tag: building the release $version"
else
	say "HEAD is not on a release tag (or the tree has changes): building the snapshot $version"
fi

skip=publish
[[ ${#mode[@]} -eq 0 ]] || skip=
if [[ -z "${GPG_FINGERPRINT:-}" ]]; then
	say "GPG_FINGERPRINT is not set: the SHA256SUMS stay unsigned (a registry needs the signature)"
	skip=${skip:+$skip,}sign
fi
skip_flag=()
[[ -z $skip ]] || skip_flag=(--skip="$skip")

say "building goreleaser (tools/go.mod) unless cached"
gr=$(go -C tools tool -n goreleaser) || die "go tool goreleaser failed to build (see above)"
say "$("$gr" --version 2>/dev/null | grep -m1 GitVersion)"

IPAM_SNAPSHOT_VERSION=$version "$gr" release --clean "${mode[@]}" "${skip_flag[@]}"

# The registry reads the manifest as a release asset named after the version;
# goreleaser hashes it into SHA256SUMS (checksum.extra_files) and uploads it
# (release.extra_files), but leaves no copy in dist/.
manifest=dist/${name}_${version}_manifest.json
[[ -f $manifest ]] || cp terraform-registry-manifest.json "$manifest"

sums=dist/${name}_${version}_SHA256SUMS
[[ -f $sums ]] || die "goreleaser wrote no $sums"
(cd dist && grep -E "  ${name}_${version//./\\.}_(manifest\.json|[a-z0-9]+_[a-z0-9]+\.zip)$" "$(basename "$sums")" | sha256sum -c --quiet -) ||
	die "the provider files in dist/ do not match $sums"

say "dist/ holds the release $version:"
(cd dist && ls -1 "${name}_${version}"_*) | sed 's/^/  /' >&2
say "lay it out as a provider mirror with: make install-mirror DIST=dist"
