package engine

import (
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every owner kind has its event types: the allocator names an event by a
// look-up in eventTypes, where a kind missing would write events of type "".
func TestEveryOwnerKindHasItsEventTypes(t *testing.T) {
	for _, kind := range OwnerKinds {
		if e := eventTypes[kind]; e.allocated == "" || e.released == "" {
			t.Errorf("owner kind %q has no event types in eventTypes: %+v", kind, e)
		}
	}
}

// Every event type the package's source spells (a Go string, or an SQL
// literal inside one) is in EventTypes, which ListEvents checks --type
// against and the documentation test checks the docs against.
func TestEventTypesAreListed(t *testing.T) {
	known := EventTypes()
	for old := range eventTypeAliases {
		known = append(known, old) // an older name, in the alias table
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	eventLike := regexp.MustCompile(`^(cluster|pool|allocation|node|instance|env|env_ipv4|set)\.[a-z_]+(\.[a-z_]+)?$`)
	sqlLiteral := regexp.MustCompile(`'([a-z_]+\.[a-z_.]+)'`)
	var sources []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			sources = append(sources, f)
		}
	}
	seen := 0
	eachStringLiteral(t, sources, func(pos token.Position, s string) {
		cands := []string{s}
		for _, m := range sqlLiteral.FindAllStringSubmatch(s, -1) {
			cands = append(cands, m[1])
		}
		for _, c := range cands {
			if !eventLike.MatchString(c) || c == "set.go" {
				continue
			}
			seen++
			if !slices.Contains(known, c) {
				t.Errorf("%s: %q looks like an event type but is not in EventTypes()", pos, c)
			}
		}
	})
	if seen < 15 {
		t.Errorf("found only %d event types in the source: the scan is broken", seen)
	}
	for _, want := range []string{"env.ipv4_addon_allocation_failed", "env.ipv4_addon_relabeled", "instance.allocation_failed", "node.enrolled", "set.released"} {
		if !slices.Contains(EventTypes(), want) {
			t.Errorf("EventTypes() lacks %s", want)
		}
	}
}
