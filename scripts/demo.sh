#!/usr/bin/env bash
# Local end-to-end demo of the provider (make demo / make demo-down).
#
#   scripts/demo.sh up     build the provider and ipamctl, start PostgreSQL in
#                          .demo/pg (unless IPAM_DATABASE_URL is set), apply
#                          examples/quickstart with a dev_overrides CLI config,
#                          show ipamctl usage and print commands to paste
#   scripts/demo.sh down   destroy the demo resources, stop PostgreSQL and
#                          remove .demo/
#
# DEMO_DIR puts the demo somewhere else than .demo/ (the tests do).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

demo=${DEMO_DIR:-$root/.demo}
pgdir=$demo/pg
work=$demo/work
rc_file=$demo/terraformrc

say() { printf '==> %s\n' "$*" >&2; }

export CHECKPOINT_DISABLE=1
export TF_CLI_CONFIG_FILE=$rc_file

# use_database: export IPAM_DATABASE_URL (the caller's or the demo server's).
# Returns 1 if there is no database to talk to.
use_database() {
	if [[ -n "${IPAM_DATABASE_URL:-}" ]]; then
		return 0
	fi
	if bash scripts/pg.sh status "$pgdir" && [[ -s "$pgdir/url" ]]; then
		IPAM_DATABASE_URL=$(cat "$pgdir/url")
		export IPAM_DATABASE_URL
		return 0
	fi
	return 1
}

up() {
	local tf
	tf=$(bash scripts/ensure-terraform.sh)

	say "building the provider and ipamctl into $(shown "$demo/bin")"
	mkdir -p "$demo/bin" "$work"
	# One go build: terraform-provider-ipam and ipamctl, linked in parallel.
	go build -ldflags "-X main.version=demo" -o "$demo/bin/" . ./cmd/ipamctl

	# `source = "overlayipam/ipam"` is registry.terraform.io/overlayipam/ipam
	# under Terraform and registry.opentofu.org/overlayipam/ipam under
	# OpenTofu: the configuration overrides both.
	cat >"$rc_file" <<RC
# Written by scripts/demo.sh: use the locally built provider.
provider_installation {
  dev_overrides {
    "registry.terraform.io/overlayipam/ipam" = "$demo/bin"
    "registry.opentofu.org/overlayipam/ipam" = "$demo/bin"
  }
  direct {}
}
RC

	local own_db=0
	if [[ -n "${IPAM_DATABASE_URL:-}" ]]; then
		say "using the database in IPAM_DATABASE_URL"
	else
		own_db=1
		if bash scripts/pg.sh status "$pgdir"; then
			say "reusing the demo PostgreSQL in $(shown "$pgdir")"
		else
			say "starting PostgreSQL in $(shown "$pgdir")"
			bash scripts/pg.sh start "$pgdir"
		fi
		use_database
	fi

	local color=()
	[[ -t 1 ]] || color=(-no-color)

	rm -f "$work"/*.tf
	cp examples/quickstart/*.tf "$work/"

	# No `terraform init`: with dev_overrides for the only provider, it is not needed.
	say "terraform apply (examples/quickstart)"
	"$tf" -chdir="$work" apply -auto-approve -input=false "${color[@]}"

	say "outputs"
	"$tf" -chdir="$work" output "${color[@]}"

	say "ipamctl usage --cluster demo"
	"$demo/bin/ipamctl" usage --cluster demo

	# Commands to paste, from the directory make demo ran in (the tests paste
	# them): everything they need is spelled out, the database's password
	# excepted (it stays in the URL file or the caller's environment).
	local tfcmd=terraform
	[[ "$(command -v terraform 2>/dev/null || true)" == "$tf" ]] || tfcmd=$tf
	echo
	echo "The demo is up. Paste these to look around (make demo-down removes it all):"
	if ((own_db)); then
		echo "  export IPAM_DATABASE_URL=\"\$(cat $(shown "$pgdir/url"))\""
	else
		echo "  # IPAM_DATABASE_URL: the database you gave make demo (already set in this shell)"
	fi
	echo "  export TF_CLI_CONFIG_FILE=$(absolute "$rc_file")   # the provider built above, no terraform init"
	echo "  $(shown "$demo/bin/ipamctl") list --cluster demo"
	echo "  $(shown "$demo/bin/ipamctl") events --since 1h --type 'node.*'"
	echo "  $tfcmd -chdir=$(shown "$work") plan   # edit $(shown "$work")/*.tf, then apply"
	if command -v psql >/dev/null 2>&1; then
		echo "  psql \"\$IPAM_DATABASE_URL\" -c 'select node_id, overlay_ipv6, state from ipam_nodes'"
	fi
}

# shown prints a path relative to the repository root when it is under it
# (what a user at the root types), else absolute.
shown() {
	case $1 in
	"$root"/*) printf '%s\n' "${1#"$root"/}" ;;
	*) printf '%s\n' "$1" ;;
	esac
}

absolute() {
	case $1 in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s/%s\n' "$root" "$1" ;;
	esac
}

down() {
	if [[ -f "$work/terraform.tfstate" && -f "$rc_file" && -x "$demo/bin/terraform-provider-ipam" ]]; then
		if use_database; then
			local tf
			tf=$(bash scripts/ensure-terraform.sh)
			local color=()
			[[ -t 1 ]] || color=(-no-color)
			say "terraform destroy"
			"$tf" -chdir="$work" destroy -auto-approve -input=false "${color[@]}" ||
				say "terraform destroy failed; continuing"
		else
			say "database not running; skipping terraform destroy"
		fi
	fi
	if [[ -d "$pgdir" ]]; then
		bash scripts/pg.sh stop "$pgdir" || true
	fi
	rm -rf "$demo"
	say "demo removed"
}

case "${1:-}" in
up) up ;;
down) down ;;
*)
	echo "usage: scripts/demo.sh up|down" >&2
	exit 2
	;;
esac
