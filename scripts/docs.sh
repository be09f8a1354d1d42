#!/usr/bin/env bash
# Generate docs/ with tfplugindocs (pinned in the tools/ module), offline.
#
# docs/ is rendered from the provider's schema descriptions, templates/ and
# examples/. tfplugindocs would normally build the provider and run
# `terraform providers schema -json` itself, finding terraform with hc-install,
# which falls back to downloading the latest release from
# releases.hashicorp.com. To keep this offline and deterministic we export the
# schema ourselves and hand it over with --providers-schema, so tfplugindocs
# never looks for (or downloads) terraform:
#
#  1. build the provider into a temporary directory;
#  2. point a temporary CLI config (dev_overrides, no installation methods) at
#     it and run `terraform providers schema -json` with the terraform from
#     scripts/ensure-terraform.sh, without `terraform init` (no network);
#  3. add the resource identity and list resource schemas when the CLI did
#     not export them
#     (internal/docsschema asks the provider, served in-process);
#  4. run tfplugindocs generate --providers-schema on that JSON, then
#     tfplugindocs validate on the result.
#
# The override is for registry.terraform.io/hashicorp/ipam (what the bare
# `provider "ipam" {}` below implies): tfplugindocs looks the schema up under
# "ipam" or "registry.terraform.io/hashicorp/ipam" only. The provider binary
# does not care under which address it is launched, so the schema is the same
# one users of overlayipam/ipam get.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

say() { printf 'docs: %s\n' "$*" >&2; }

if [[ ! -f tools/go.mod ]]; then
	say "tools/ module missing (tools/go.mod pins tfplugindocs)"
	exit 1
fi

tf=$(bash scripts/ensure-terraform.sh)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ipam-docs.XXXXXX")
# shellcheck disable=SC2317 # invoked by trap
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "building the provider"
mkdir -p "$tmp/bin" "$tmp/work"
go build -o "$tmp/bin/terraform-provider-ipam" .

cat >"$tmp/terraformrc" <<RC
# Written by scripts/docs.sh: use the provider built above; install nothing.
provider_installation {
  dev_overrides {
    "registry.terraform.io/hashicorp/ipam" = "$tmp/bin"
  }
}
RC
printf 'provider "ipam" {}\n' >"$tmp/work/main.tf"

say "exporting the provider schema with $tf"
# A clean environment for terraform: only our CLI config, no checkpoint calls,
# no inherited TF_* settings (TF_DATA_DIR, TF_LOG, ...) that could change the
# outcome.
tf_env=(env)
while IFS= read -r name; do
	tf_env+=(-u "$name")
done < <(compgen -e | grep '^TF_' || true)
tf_env+=(TF_CLI_CONFIG_FILE="$tmp/terraformrc" TF_IN_AUTOMATION=1 CHECKPOINT_DISABLE=1)
if ! "${tf_env[@]}" "$tf" -chdir="$tmp/work" providers schema -json >"$tmp/schema.json" 2>"$tmp/terraform.err"; then
	cat "$tmp/terraform.err" >&2
	say "terraform providers schema -json failed"
	exit 1
fi
if ! grep -q '"registry.terraform.io/hashicorp/ipam"' "$tmp/schema.json"; then
	cat "$tmp/terraform.err" >&2
	say "the exported schema has no ipam provider in it"
	exit 1
fi

# A CLI older than 1.12 exports no resource identity schemas, one older than
# 1.14 no list resource schemas: ask the provider for what is missing.
go run ./internal/docsschema "$tmp/schema.json"

say "building tfplugindocs (tools/go.mod) unless cached"
tfplugindocs=$(go -C tools tool -n tfplugindocs)

# With --providers-schema tfplugindocs neither builds the provider nor runs (or
# installs) terraform. CHECKPOINT_DISABLE is belt and braces.
say "rendering docs/ with tfplugindocs"
CHECKPOINT_DISABLE=1 "$tfplugindocs" generate \
	--provider-dir "$root" \
	--provider-name ipam \
	--providers-schema "$tmp/schema.json"

# Check the result the way the registry would (frontmatter, file layout, a
# page for every resource and data source). Quiet unless it fails.
say "validating docs/"
if ! CHECKPOINT_DISABLE=1 "$tfplugindocs" validate \
	--provider-dir "$root" \
	--provider-name ipam \
	--providers-schema "$tmp/schema.json" >"$tmp/validate.log" 2>&1; then
	cat "$tmp/validate.log" >&2
	say "tfplugindocs validate failed"
	exit 1
fi
say "docs/ is up to date"
