package main

import (
	"fmt"
	"strings"
	"testing"
)

// hostileIDs are the families of identifier that no create accepts (as in the
// core's and the provider's bad-input tables).
var hostileIDs = []struct{ family, v string }{
	{"129 characters", strings.Repeat("a", 129)},
	{"NUL byte", "c1\x00"},
	{"newline", "c1\nx"},
	{"RTL override", "c1\u202ex"},
	{"SQL", "c1'; DROP TABLE ipam_events; --"},
	{"path", "../../etc/passwd"},
	{"space", "c 1"},
	{"percent (LIKE)", "c1%"},
	{"leading dash", "-c1"},
	{"invalid UTF-8", "c1\xff"},
	{"homoglyph", "с1"},
}

// rowCounts counts the rows of every table of the IPAM's schema.
func (w *world) rowCounts() string {
	w.t.Helper()
	tables := strings.Split(w.query(`SELECT table_name::text FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`), ",")
	var q []string
	for _, tb := range tables {
		q = append(q, fmt.Sprintf("SELECT '%s=' || count(*) FROM %s", tb, tb))
	}
	return w.query(strings.Join(q, " UNION ALL "))
}

// TestBadInputFlags: every identifier flag refuses every hostile id before
// anything is looked up, and every number and duration flag its values out
// of range: exit 2 (a bad command line) with a message naming the flag, and no table's row count
// changes.
func TestBadInputFlags(t *testing.T) {
	w := newWorld(t)
	w.alloc("c1/v4", instance("i1", "acme", "prod"))
	before := w.rowCounts()
	type badLine struct {
		args []string
		flag string // the flag the message must name
	}
	var lines []badLine
	idFlags := [][]string{
		{"scale", "--cluster", "%s"},
		{"scale", "--cluster", "c1", "--node", "%s"},
		{"events", "--cluster", "%s"},
		{"events", "--type", "%s"},
		{"list", "--cluster", "%s"},
		{"list", "--node", "%s"},
		{"list", "--org", "%s"},
		{"list", "--pool", "c1/%s"},
		{"usage", "--cluster", "%s"},
		{"lookup", "198.51.100.1", "--cluster", "%s"},
		{"check", "--cluster", "%s"},
		{"leaks", "--stale-days", "30", "--cluster", "%s"},
		{"--actor", "%s", "usage"},
	}
	for _, f := range idFlags {
		for _, h := range hostileIDs {
			args := make([]string, len(f))
			flag := ""
			for i, a := range f {
				args[i] = strings.ReplaceAll(a, "%s", h.v)
				if strings.Contains(a, "%s") {
					flag = f[i-1]
				}
			}
			lines = append(lines, badLine{args, flag})
		}
	}
	lines = append(lines, []badLine{
		{[]string{"events", "--limit", "-5"}, "--limit"},
		{[]string{"events", "--type", "*"}, "--type"},
		{[]string{"events", "--type", "Instance.Allocated"}, "--type"},
		{[]string{"events", "--interval", "-1s", "--follow"}, "--interval"},
		{[]string{"list", "--limit", "-1"}, "--limit"},
		{[]string{"list", "--state", "free"}, "--state"},
		{[]string{"list", "--kind", "robot"}, "--kind"},
		{[]string{"list", "--owner", "i-1"}, "--owner"},
		{[]string{"list", "--category", "ipv5"}, "--category"},
		{[]string{"leaks", "--stale-days", "-5"}, "--stale-days"},
		{[]string{"leaks", "--stale-days", "1099511627776"}, "--stale-days"},
		{[]string{"leaks", "--stale-days", "30", "--kind", "robot"}, "--kind"},
		{[]string{"scale", "--interval", "-1m"}, "--interval"},
		{[]string{"scale", "--node", "n1"}, "--node"},
		{[]string{"lookup", "fe80::1%eth0"}, "zones"},
		{[]string{"lookup", "::ffff:198.51.100.1"}, "IPv4-mapped"},
		{[]string{"metrics", "--listen", ":0", "--scrape-timeout", "-1s"}, "--scrape-timeout"},
		{[]string{"--statement-timeout", "-1h", "usage"}, "--statement-timeout"},
		{[]string{"--lock-timeout", "-1s", "list"}, "--lock-timeout"},
		{[]string{"--failover-timeout", "-30s", "check"}, "--failover-timeout"},
		{[]string{"--connect-timeout", "-1s", "usage"}, "--connect-timeout"},
		// The flag's value, after the harness's own (the last one counts).
		{[]string{"--database-url", "postgres://ipam:pw@127.0.0.1:notaport/db", "usage"}, "--database-url"},
		{[]string{"--database-url", "postgres://ipam:Sup3r@SecretPw@127.0.0.1:5432/db", "usage"}, "--database-url"},
		{[]string{"--statement-timeout", "-1h", "scale", "--cluster", "c1", "--node", "n1"}, "--statement-timeout"},
	}...)
	refused := 0
	for _, l := range lines {
		r := w.ipamctl("", l.args...)
		if r.code != exitUsage || !strings.Contains(r.err, l.flag) || strings.Contains(r.out+r.err, "SecretPw") {
			t.Errorf("ipamctl %q: exit %d, want %d with a message naming %s:\n%s%s", l.args, r.code, exitUsage, l.flag, r.out, r.err)
		} else {
			refused++
		}
		if after := w.rowCounts(); after != before {
			t.Errorf("ipamctl %q: row counts changed: %s, before %s", l.args, after, before)
			before = after
		}
	}
	t.Logf("%d bad command lines: %d refused with exit %d naming the flag; rows unchanged: %s", len(lines), refused, exitUsage, before)
}
