#!/usr/bin/env bash
# Print the version of a release build of this tree (make release, make
# install-mirror):
#
#   VERSION set                   that (X.Y.Z, or X.Y.Z-PRE; a pre-release is
#                                 installed only by a configuration that names
#                                 it exactly)
#   HEAD on tag vX.Y.Z, clean     X.Y.Z
#   any other commit, clean       0.0.YYYYMMDDhhmmss, the commit's time in UTC
#   uncommitted changes (or no    0.0.YYYYMMDDhhmmss, the time now in UTC
#   git)
#
# A build that is not a release is still a plain version, never a pre-release:
# Terraform and OpenTofu never select a pre-release for a configuration that
# does not name it exactly, so `terraform init` of an unmodified configuration
# would not install it. 0.0.x keeps it below every release, and the time makes
# a newer build a newer version (the same version with other contents would be
# refused by every lock file that recorded the old one, or kept in use from
# .terraform/providers).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

semver='^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$'

if [[ -n "${VERSION:-}" ]]; then
	v=${VERSION#v}
	if [[ ! $v =~ $semver ]]; then
		echo "release-version: VERSION=$VERSION is not a version X.Y.Z (or X.Y.Z-PRE)" >&2
		exit 1
	fi
	echo "$v"
	exit 0
fi

if git rev-parse --git-dir >/dev/null 2>&1 && [[ -z "$(git status --porcelain 2>/dev/null)" ]]; then
	if tag=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null) && [[ ${tag#v} =~ $semver ]]; then
		echo "${tag#v}"
		exit 0
	fi
	echo "0.0.$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)"
	exit 0
fi
echo "0.0.$(date -u +%Y%m%d%H%M%S)"
