#!/usr/bin/env bash
# Generate docs/ with tfplugindocs (pinned in the tools/ module).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

if [[ ! -f tools/go.mod ]]; then
	echo "docs: tools/ module missing (tools/go.mod pins tfplugindocs)" >&2
	exit 1
fi

# tfplugindocs runs `terraform providers schema`; give it our terraform so it
# does not try to download one.
tf=$(bash scripts/ensure-terraform.sh)
tfdir=$(dirname "$tf")
export PATH="$tfdir:$PATH"
export CHECKPOINT_DISABLE=1

cd tools
exec go run github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs generate \
	--provider-dir .. --provider-name ipam
