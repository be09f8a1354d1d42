#!/usr/bin/env bash
# List every Go test and fuzz target of the module as a Markdown table:
# file, name, and what it proves: the first sentence of the doc comment above
# the function, or of a comment in its first lines, or else its name in words
# (marked "by name").
#
#   scripts/list-tests.sh                 print the table
#   scripts/list-tests.sh --update FILE   replace the table between the lines
#                                         <!-- tests:begin --> and <!-- tests:end --> of FILE
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

table() {
	echo "| file | test | what it proves |"
	echo "|---|---|---|"
	find . -name '*_test.go' -not -path './.tools/*' -not -path './vendor/*' -not -path './.demo/*' | sort |
		while IFS= read -r f; do
			awk -v file="${f#./}" '
				function words(name,   w, i, c, out) {
					w = name; sub(/^(Test|Fuzz)/, "", w); sub(/^Acc/, "", w)
					out = ""
					for (i = 1; i <= length(w); i++) {
						c = substr(w, i, 1)
						if (c == "_") { out = out ":"; continue }
						if (c ~ /[A-Z]/ && i > 1) out = out " "
						out = out tolower(c)
					}
					return out " (by name)"
				}
				function flush(name, text,   i) {
					gsub(/[ \t]+/, " ", text)
					sub(/^ /, "", text)
					if (text == "") text = words(name)
					i = index(text, ". ")
					if (i > 0) text = substr(text, 1, i)
					if (length(text) > 320) text = substr(text, 1, 317) "..."
					gsub(/\|/, "\\|", text)
					printf "| %s | %s | %s |\n", file, name, text
				}
				/^\/\// { line = $0; sub(/^\/\/ ?/, "", line); doc = doc " " line; next }
				/^func (Test|Fuzz)[A-Za-z0-9_]*\(/ {
					name = $2; sub(/\(.*/, "", name)
					if (name == "TestMain") { doc = ""; next }
					if (doc == "") { pending = name; inner = ""; depth = 0; next }
					flush(name, doc); doc = ""; next
				}
				pending != "" {
					if ($0 ~ /^\t\/\//) { l = $0; sub(/^\t\/\/ ?/, "", l); inner = inner " " l; next }
					if (inner != "" || $0 ~ /^}/ || ++depth > 3) { flush(pending, inner); pending = "" }
				}
				{ doc = "" }
				END { if (pending != "") flush(pending, inner) }
			' "$f"
		done
}

if [[ "${1:-}" == --update ]]; then
	file=${2:?usage: scripts/list-tests.sh --update FILE}
	if ! grep -q '^<!-- tests:begin -->$' "$file" || ! grep -q '^<!-- tests:end -->$' "$file"; then
		echo "list-tests.sh: $file has no <!-- tests:begin --> / <!-- tests:end --> lines" >&2
		exit 1
	fi
	tmp=$(mktemp)
	table >"$tmp.table"
	awk -v tablefile="$tmp.table" '
		/^<!-- tests:begin -->$/ { print; while ((getline l < tablefile) > 0) print l; skip = 1; next }
		/^<!-- tests:end -->$/ { skip = 0 }
		!skip { print }
	' "$file" >"$tmp"
	mv "$tmp" "$file"
	echo "list-tests.sh: $(($(wc -l <"$tmp.table") - 2)) tests listed in $file" >&2
	rm -f "$tmp.table"
else
	table
fi
