#!/usr/bin/env bash
# Run every Go fuzz target of the module, one target at a time.
#
#   scripts/fuzz.sh [FUZZTIME]
#
# FUZZTIME is per target, in go test -fuzztime syntax (default 3s; also read
# from $FUZZTIME): `make test` runs a short pass, `make fuzz` a long one.
# Targets are found as `func FuzzXxx(` in *_test.go files; go test -fuzz runs
# one target of one package per invocation. FUZZ_PARALLEL sets the number of
# fuzzing workers (default 1: the machine is shared). FUZZ_MATCH, a regexp,
# limits the targets by name.
#
# Every target runs even when one fails; the script fails at the end, naming
# the failures. go test writes a failing input to the package's
# testdata/fuzz/<Target>/ directory; the script moves new ones to a temporary
# directory (printed, with their content) so that a run leaves the tree as it
# found it. Set FUZZ_KEEP=1 to keep them in place as regression seeds.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

fuzztime=${1:-${FUZZTIME:-3s}}
parallel=${FUZZ_PARALLEL:-1}
match=${FUZZ_MATCH:-.}

mapfile -t files < <(grep -rlE '^func Fuzz[A-Za-z0-9_]*\(' --include='*_test.go' \
	--exclude-dir=.tools --exclude-dir=vendor --exclude-dir=.demo --exclude-dir=testdata . | sort)
if ((${#files[@]} == 0)); then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 0
fi

declare -A targets=()
for f in "${files[@]}"; do
	dir=$(dirname "$f")
	while IFS= read -r name; do
		[[ "$name" =~ $match ]] || continue
		targets["$dir"]+="$name "
	done < <(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' "$f")
done

failed=()
ran=0
start=$SECONDS
for dir in $(printf '%s\n' "${!targets[@]}" | sort); do
	for name in ${targets[$dir]}; do
		before=$(find "$dir/testdata/fuzz/$name" -type f 2>/dev/null | sort || true)
		printf '==> fuzz %s %s (%s)\n' "$dir" "$name" "$fuzztime" >&2
		ran=$((ran + 1))
		if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" -parallel="$parallel" "$dir" >&2; then
			after=$(find "$dir/testdata/fuzz/$name" -type f 2>/dev/null | sort || true)
			if [[ "$after" == "$before" ]]; then
				# No failing input was written: the fuzzing engine itself gave up
				# (with a short -fuzztime it may report "context deadline
				# exceeded"). Run the target once more; a real finding repeats
				# from its saved input, an engine hiccup does not.
				printf 'fuzz.sh: %s %s failed without a failing input; running it again\n' "$dir" "$name" >&2
				if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" -parallel="$parallel" "$dir" >&2; then
					failed+=("$dir $name")
				fi
			else
				failed+=("$dir $name")
			fi
		fi
		after=$(find "$dir/testdata/fuzz/$name" -type f 2>/dev/null | sort || true)
		new=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | sed '/^$/d')
		if [[ -n "$new" && "${FUZZ_KEEP:-}" != 1 ]]; then
			keep=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-failures.XXXXXX")
			while IFS= read -r f; do
				printf 'fuzz.sh: failing input %s (moved to %s):\n' "$f" "$keep" >&2
				sed 's/^/    /' "$f" >&2
				mv "$f" "$keep/"
			done <<<"$new"
			rmdir -p "$dir/testdata/fuzz/$name" 2>/dev/null || true
		fi
	done
done

printf 'fuzz.sh: %d targets, %s each, %ds in all\n' "$ran" "$fuzztime" $((SECONDS - start)) >&2
if ((${#failed[@]} > 0)); then
	printf 'fuzz.sh: FAILED: %s\n' "${failed[@]}" >&2
	exit 1
fi
