#!/usr/bin/env bash
# Install the provider into a provider mirror that `terraform init` and
# `tofu init` read (make install-mirror), and print the CLI configuration
# that uses it.
#
#   MIRROR_DIR  the mirror (default ~/.terraform.d/plugins; created)
#   DIST        a directory with a release's files (make release's dist/, or
#               the files of a GitHub release): lay out its provider zips,
#               checked against its SHA256SUMS, for every platform, instead of
#               building the provider for this machine
#   VERSION     the version of the build (default: scripts/release-version.sh)
#
# Relative directories are taken from the repository root.
#
# For registry.terraform.io/overlayipam/ipam (Terraform's address of
# `source = "overlayipam/ipam"`) and registry.opentofu.org/overlayipam/ipam
# (OpenTofu's), the mirror holds
#
#   HOST/overlayipam/ipam/terraform-provider-ipam_VERSION_OS_ARCH.zip
#       the packed layout of a filesystem mirror (the release's zip files);
#   HOST/overlayipam/ipam/index.json and VERSION.json
#       the provider network mirror protocol: the versions, and each version's
#       zips with their zh: (SHA-256) checksums,
#
# so that the same directory, copied to a static HTTPS site, is a network
# mirror. Versions installed before stay; index.json lists them all.
#
# The CLI configuration is printed on stdout, everything else on stderr.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

say() { printf 'install-mirror: %s\n' "$*" >&2; }
die() {
	say "error: $*"
	exit 1
}

hosts=(registry.terraform.io registry.opentofu.org)
namespace=overlayipam
type=ipam
name=terraform-provider-$type

sha256() { # FILE: print its SHA-256 in hex
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" | cut -d' ' -f1
	else
		shasum -a 256 "$1" | cut -d' ' -f1
	fi
}

# zip_one ZIP DIR FILE: a zip holding DIR/FILE as FILE, as goreleaser makes them
# (its time in UTC, no extra attributes: the same file gives the same zip).
zip_one() {
	rm -f "$1"
	if command -v zip >/dev/null 2>&1; then
		(cd "$2" && TZ=UTC zip -q -X "$1" "$3")
	elif command -v python3 >/dev/null 2>&1; then
		(cd "$2" && TZ=UTC python3 -m zipfile -c "$1" "$3")
	else
		die "neither zip nor python3 is installed: one of them is needed to pack the provider"
	fi
}

mirror=${MIRROR_DIR:-$HOME/.terraform.d/plugins}
mkdir -p "$mirror"
mirror=$(cd "$mirror" && pwd -P)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ipam-mirror.XXXXXX")
# shellcheck disable=SC2317 # invoked by trap
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT

zips=() # the zips to install, in $tmp
if [[ -n "${DIST:-}" ]]; then
	[[ -d $DIST ]] || die "DIST=$DIST is not a directory"
	shopt -s nullglob
	sums=("$DIST"/"$name"_*_SHA256SUMS)
	shopt -u nullglob
	((${#sums[@]} == 1)) || die "DIST=$DIST must hold exactly one ${name}_VERSION_SHA256SUMS (make release writes it), found ${#sums[@]}"
	version=$(basename "${sums[0]}")
	version=${version#"$name"_}
	version=${version%_SHA256SUMS}
	if [[ -n "${VERSION:-}" && ${VERSION#v} != "$version" ]]; then
		die "DIST holds version $version, not VERSION=$VERSION"
	fi
	while read -r sum file; do
		file=${file#\*}
		[[ $file =~ ^${name}_${version//./\\.}_[a-z0-9]+_[a-z0-9]+\.zip$ ]] || continue
		[[ -f $DIST/$file ]] || die "$file is listed in $(basename "${sums[0]}") but not in $DIST"
		[[ $(sha256 "$DIST/$file") == "$sum" ]] || die "$DIST/$file does not match its checksum in $(basename "${sums[0]}")"
		cp "$DIST/$file" "$tmp/"
		zips+=("$tmp/$file")
	done <"${sums[0]}"
	((${#zips[@]} > 0)) || die "$(basename "${sums[0]}") lists no provider zip ${name}_${version}_OS_ARCH.zip"
	say "the release $version from $DIST: ${#zips[@]} platforms, checked against its SHA256SUMS"
else
	command -v go >/dev/null 2>&1 || die "go is needed to build the provider"
	version=$(bash scripts/release-version.sh)
	goos=$(go env GOOS)
	goarch=$(go env GOARCH)
	exe=""
	[[ $goos == windows ]] && exe=.exe
	commit=$(git rev-parse HEAD 2>/dev/null || true)
	say "building $name $version for ${goos}_$goarch"
	# A build for this machine with make release's flags (static, -trimpath,
	# stripped, no VCS stamp whatever GOFLAGS or go env say, its version
	# stamps) and its file time (the commit's), packed in UTC: two clones of
	# one clean commit build the same zip byte for byte, so that the lock file
	# one teammate commits holds for every other.
	mkdir "$tmp/build"
	bin="$tmp/build/${name}_v$version$exe"
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=$version -X main.commit=$commit" -o "$bin" .
	stamp=$(git log -1 --format=%ct 2>/dev/null || date +%s)
	[[ -z "$(git status --porcelain 2>/dev/null)" ]] || stamp=$(date +%s) # uncommitted changes: a version of now
	chmod 0755 "$bin"
	touch -d "@$stamp" "$bin"
	zip_one "$tmp/${name}_${version}_${goos}_$goarch.zip" "$tmp/build" "${name}_v$version$exe"
	zips+=("$tmp/${name}_${version}_${goos}_$goarch.zip")
fi

for host in "${hosts[@]}"; do
	dir=$mirror/$host/$namespace/$type
	mkdir -p "$dir"
	for z in "${zips[@]}"; do
		f=$(basename "$z")
		if [[ -f $dir/$f ]] && ! cmp -s "$z" "$dir/$f"; then
			say "warning: replacing $dir/$f, a different build of the same version: a lock file that recorded the old one refuses it"
		fi
		cp "$z" "$dir/$f.tmp"
		mv "$dir/$f.tmp" "$dir/$f"
	done
	# The network mirror protocol's documents, for every version in the directory.
	shopt -s nullglob
	all=("$dir"/"$name"_*_*_*.zip)
	shopt -u nullglob
	mapfile -t versions < <(for z in "${all[@]}"; do
		f=$(basename "$z" .zip)
		f=${f#"$name"_}
		echo "${f%_*_*}"
	done | sort -u -V)
	{
		printf '{\n  "versions": {'
		sep=""
		for v in "${versions[@]}"; do
			printf '%s\n    "%s": {}' "$sep" "$v"
			sep=,
		done
		printf '\n  }\n}\n'
	} >"$dir/index.json"
	for v in "${versions[@]}"; do
		{
			printf '{\n  "archives": {'
			sep=""
			for z in "$dir/${name}_${v}"_*_*.zip; do
				f=$(basename "$z")
				platform=${f#"${name}_${v}"_}
				platform=${platform%.zip}
				printf '%s\n    "%s": {\n      "url": "%s",\n      "hashes": ["zh:%s"]\n    }' "$sep" "$platform" "$f" "$(sha256 "$z")"
				sep=,
			done
			printf '\n  }\n}\n'
		} >"$dir/$v.json"
	done
done

platforms=()
for z in "${zips[@]}"; do
	f=$(basename "$z" .zip)
	platforms+=("${f#"${name}_${version}"_}")
done
say "installed $name $version (${platforms[*]}) into $mirror, for ${hosts[*]}"
say "add this to your CLI configuration: ~/.terraformrc (Terraform), ~/.tofurc (OpenTofu), or the file TF_CLI_CONFIG_FILE names (both):"

hcl_path=${mirror//\\/\\\\}
hcl_path=${hcl_path//\"/\\\"}
includes="\"${hosts[0]}/$namespace/$type\", \"${hosts[1]}/$namespace/$type\""
cat <<EOF
provider_installation {
  filesystem_mirror {
    path    = "$hcl_path"
    include = [$includes]
  }
  direct {
    exclude = [$includes]
  }
}
EOF
