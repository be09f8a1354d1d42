#!/usr/bin/env bash
# Local end-to-end demo of the provider (make demo / make demo-down).
#
#   scripts/demo.sh up     build the provider, start PostgreSQL in .demo/pg
#                          (unless IPAM_DATABASE_URL is set) and apply
#                          examples/quickstart with a dev_overrides CLI config
#   scripts/demo.sh down   destroy the demo resources, stop PostgreSQL and
#                          remove .demo/
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

demo=$root/.demo
pgdir=$demo/pg
work=$demo/work
rc_file=$demo/terraformrc
provider_addr=registry.terraform.io/overlayipam/ipam

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

	say "building the provider into .demo/bin"
	mkdir -p "$demo/bin" "$work"
	go build -ldflags "-X main.version=demo" -o "$demo/bin/terraform-provider-ipam" .

	cat >"$rc_file" <<RC
# Written by scripts/demo.sh: use the locally built provider.
provider_installation {
  dev_overrides {
    "$provider_addr" = "$demo/bin"
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
			say "reusing the demo PostgreSQL in .demo/pg"
		else
			say "starting PostgreSQL in .demo/pg"
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

	echo
	echo "The demo is up. Inspect the allocations with:"
	if ((own_db)); then
		echo "  psql \"\$(cat .demo/pg/url)\" -c 'select * from ipam_nodes'"
	else
		echo "  psql \"\$IPAM_DATABASE_URL\" -c 'select * from ipam_nodes'"
	fi
	echo "Change .demo/work/*.tf and run: TF_CLI_CONFIG_FILE=.demo/terraformrc $tf -chdir=.demo/work apply"
	echo "Tear it down with: make demo-down"
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
