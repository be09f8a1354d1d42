package engine

// Fuzz targets for the parsers of user input and the address math that the
// ones in netmath_test.go (FuzzParsePrefix, FuzzLayoutOrdinals,
// FuzzParseDuration) do not cover. Each checks a property against an
// independent statement of the rule, not against the code itself.
// scripts/fuzz.sh runs every target; their seeds run as plain tests.

import (
	"context"
	"errors"
	"math"
	"math/big"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
)

// idSpec states the identifier rule of ValidateID independently: 1 to 128
// bytes, ASCII letters and digits first, then letters, digits and . _ : @ -.
func idSpec(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._:@-", rune(c))) {
			return false
		}
	}
	return true
}

// FuzzValidateID: ValidateID accepts exactly what idSpec states, and its
// message stays short whatever the input's length.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"node-a", "a", "", "-a", "a b", "a'; DROP TABLE x; --", "n\x00", "\xff", "сluster",
		strings.Repeat("a", 128), strings.Repeat("a", 129), "c1/node", "org@acme:prod_1.x", "a\n", "ａ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateID("id", s)
		if (err == nil) != idSpec(s) {
			t.Fatalf("ValidateID(%q) = %v, but the rule says valid = %v", s, err, idSpec(s))
		}
		if err != nil {
			msg := err.Error()
			if len(msg) > 300 {
				t.Fatalf("ValidateID's message for a %d-byte input is %d bytes long", len(s), len(msg))
			}
			if !utf8.ValidString(msg) && utf8.ValidString(s) {
				t.Fatalf("ValidateID(%q) gave a message that is not UTF-8: %q", s, msg)
			}
		}
	})
}

// FuzzParseAddr: ParseAddr accepts no zone, prefix length or IPv4 mapping,
// round-trips what it accepts, and refuses no plain address.
func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"2001:db8::1", "192.0.2.1", "::ffff:1.2.3.4", "fe80::1%eth0", "2001:db8::1/128", " ::1",
		"::", "0.0.0.0", "1.2.3", "01.2.3.4", "2001:DB8::1", "::ffff:0:1.2.3.4", "1:2:3:4:5:6:7:8:9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddr(s)
		if err == nil {
			if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
				t.Fatalf("ParseAddr(%q) accepted %v", s, a)
			}
			if b, err := ParseAddr(a.String()); err != nil || b != a {
				t.Fatalf("round trip of %s: %v, %v", a, b, err)
			}
			return
		}
		// Nothing the rule allows is refused: a plain address without zone,
		// prefix length, whitespace or IPv4 mapping.
		if p, perr := netip.ParseAddr(s); perr == nil && p.Zone() == "" && !p.Is4In6() && !strings.ContainsAny(s, " \t\r\n/%") {
			t.Fatalf("ParseAddr(%q) refused a plain address: %v", s, err)
		}
	})
}

// FuzzDefaultSubPrefixes: for every valid cluster prefix, the default node and
// instance sub-prefixes are inside it, of length max(64, bits+1), disjoint,
// and pass ValidateSubPrefixes.
func FuzzDefaultSubPrefixes(f *testing.F) {
	for _, s := range []string{"2001:db8::/48", "2001:db8::/64", "2001:db8::/63", "::/0", "2a01:4f8:abcd::/56", "2001:db8::/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrefix(s)
		if err != nil || ValidateClusterPrefix(p) != nil {
			return
		}
		node, inst, err := DefaultSubPrefixes(p)
		if err != nil {
			t.Fatalf("DefaultSubPrefixes(%s): %v", p, err)
		}
		want := max(64, p.Bits()+1)
		switch {
		case node.Bits() != want || inst.Bits() != want:
			t.Fatalf("%s: sub-prefixes %s and %s, want length /%d", p, node, inst, want)
		case !PrefixContains(p, node) || !PrefixContains(p, inst):
			t.Fatalf("%s: sub-prefixes %s and %s are not inside it", p, node, inst)
		case node.Overlaps(inst):
			t.Fatalf("%s: sub-prefixes %s and %s overlap", p, node, inst)
		case node.Addr() != p.Addr():
			t.Fatalf("%s: the node prefix %s is not its first sub-prefix", p, node)
		}
		if err := ValidateSubPrefixes(p, node, inst); err != nil {
			t.Fatalf("%s: the defaults fail validation: %v", p, err)
		}
	})
}

// FuzzLayoutBruteForce builds a layout of up to two blocks (at most 4096
// addresses each), an exclusion and a gateway, and walks every address of
// every block: each has exactly one ordinal and back; the excluded ones are
// exactly the first (and, for IPv4, last) address of blocks larger than
// point-to-point, the exclusion and the gateway; Size and Runs count exactly
// the usable ones, and BlockOf finds each address's block.
func FuzzLayoutBruteForce(f *testing.F) {
	f.Add("192.0.2.0/28", "198.51.100.0/31", "192.0.2.4/30", "192.0.2.9")
	f.Add("2001:db8::/120", "2001:db8:1::/127", "2001:db8::10/124", "2001:db8::1")
	f.Add("192.0.2.0/32", "192.0.2.1/32", "", "")
	f.Add("10.0.0.0/20", "", "10.0.8.0/21", "10.0.0.1")
	f.Fuzz(func(t *testing.T, b1, b2, excl, gw string) {
		var blocks []netip.Prefix
		for _, s := range []string{b1, b2} {
			p, err := ParsePrefix(s)
			if err != nil {
				continue
			}
			if p.Addr().BitLen()-p.Bits() > 12 {
				return // brute force stays small
			}
			blocks = append(blocks, p)
		}
		if len(blocks) == 0 {
			return
		}
		var ex []netip.Prefix
		if e, err := parseAddrOrPrefixForFuzz(excl); err == nil {
			ex = append(ex, e)
		}
		gateway, _ := ParseAddr(gw)
		l, err := NewLayout(blocks, ex, gateway)
		if err != nil {
			// Refused only for a reason the rule gives.
			overlap := len(blocks) == 2 && blocks[0].Overlaps(blocks[1])
			mixed := len(blocks) == 2 && blocks[0].Addr().Is4() != blocks[1].Addr().Is4()
			outside := len(ex) == 1 && !PrefixContains(blocks[0], ex[0]) && (len(blocks) < 2 || !PrefixContains(blocks[1], ex[0]))
			if !overlap && !mixed && !outside {
				t.Fatalf("NewLayout(%v, %v, %v) refused: %v", blocks, ex, gateway, err)
			}
			return
		}
		usable := int64(0)
		seen := map[int64]bool{}
		for _, b := range blocks {
			host := b.Addr().BitLen() - b.Bits()
			n := 1 << host
			a := b.Addr()
			for k := 0; k < n; k, a = k+1, a.Next() {
				o, ok := l.Ordinal(a)
				if !ok || seen[o] {
					t.Fatalf("%s in %s: ordinal %d, %v (seen before: %v)", a, b, o, ok, seen[o])
				}
				seen[o] = true
				if back, ok := l.Addr(o); !ok || back != a {
					t.Fatalf("Addr(Ordinal(%s)) = %s", a, back)
				}
				if bb, ok := l.BlockOf(a); !ok || bb != b {
					t.Fatalf("BlockOf(%s) = %s, want %s", a, bb, b)
				}
				want := (host >= 2 && (k == 0 || (a.Is4() && k == n-1))) ||
					(len(ex) == 1 && ex[0].Contains(a)) || (gateway.IsValid() && gateway == a)
				if l.Excluded(o) != want {
					t.Fatalf("%s (block %s, ordinal %d): excluded = %v, want %v", a, b, o, l.Excluded(o), want)
				}
				if !want {
					usable++
				}
			}
		}
		if l.Size() != usable {
			t.Fatalf("Size() = %d, brute force counts %d", l.Size(), usable)
		}
		var inRuns int64
		for _, r := range l.Runs() {
			if a, ok := l.Addr(r.First); !ok || a != r.Start {
				t.Fatalf("run %+v starts at %s", r, a)
			}
			for o := r.First; o <= r.Last; o++ {
				if l.Excluded(o) {
					t.Fatalf("run %+v holds excluded ordinal %d", r, o)
				}
			}
			inRuns += r.Last - r.First + 1
		}
		if inRuns != usable {
			t.Fatalf("runs hold %d ordinals, %d are usable", inRuns, usable)
		}
	})
}

// parseAddrOrPrefixForFuzz reads an exclusion the way the provider does.
func parseAddrOrPrefixForFuzz(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return ParsePrefix(s)
	}
	a, err := ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// FuzzOpenHidesPassword: whatever the connection string, an error from Open
// does not show the password. Each string is tried with the fuzzed password
// and with a sentinel in its place; the password counts as shown only when it
// appears with itself and not with the sentinel (so that a password like
// "parse" is not blamed for the word in the message).
func FuzzOpenHidesPassword(f *testing.F) {
	f.Add("127.0.0.1:notaport/db", "s3cr3t-pass")
	f.Add("h/db?sslmode=bogus", "p@ss:w/rd%")
	f.Add("host=h port=x", "pa ss'word")
	f.Add("[::1/db", "hunter22")
	f.Add("h:5432/db?connect_timeout=x", "p%41ss word")
	f.Fuzz(func(t *testing.T, rest, password string) {
		if len(password) < 6 || strings.Contains(rest, password) {
			return
		}
		forms := func(pw string) []string {
			return []string{
				"postgres://user:" + pw + "@" + rest,
				"postgres://user:" + url.QueryEscape(pw) + "@" + rest,
				"password=" + pw + " " + rest,
				"password='" + strings.ReplaceAll(pw, "'", `\'`) + "' " + rest,
				rest + " password=" + pw,
			}
		}
		sentinel := strings.Repeat("Q", len(password))
		ctx := context.Background()
		open := func(s string) string {
			st, err := Open(ctx, Config{DatabaseURL: s})
			if err != nil {
				return err.Error()
			}
			st.Close()
			return ""
		}
		real, fake := forms(password), forms(sentinel)
		for i := range real {
			msg := open(real[i])
			if msg == "" {
				continue
			}
			// The password whole, and each part of it around an '@' (a
			// URL form ends the password at an unescaped one, and the
			// rest was taken for a host name, which errors show).
			shownForms := []string{password, url.QueryEscape(password)}
			for _, part := range strings.Split(password, "@") {
				if len(part) >= 6 && part != password && !strings.Contains(rest, part) {
					shownForms = append(shownForms, part)
				}
			}
			for _, shown := range shownForms {
				if strings.Contains(msg, shown) && !strings.Contains(open(fake[i]), shown) {
					t.Fatalf("the error for %q shows the password %q: %s", real[i], password, msg)
				}
			}
		}
	})
}

// TestOpenErrorHidesPassword: the connection strings a person gets wrong, with
// the password in every place libpq and pgx accept it. The error of Open must
// show none of it (found by FuzzOpenHidesPassword).
func TestOpenErrorHidesPassword(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ conn, secret string }{
		{"postgres://u:hunter22secret@db.example.net:notaport/db", "hunter22secret"},
		{"postgres://u:hunter22secret@db.example.net:5432/db?sslmode=bogus", "hunter22secret"},
		{"postgres://u:hunter22 secret@db.example.net:5432/db", "hunter22"},
		{"postgres://u@db.example.net:5432/db?password=hunter22secret&sslmode=bogus", "hunter22secret"},
		{"host=db.example.net password=hunter22secret port=notaport", "hunter22secret"},
		{"host=db.example.net password='hunter22 secret' port=notaport", "hunter22"},
		{"host=db.example.net port=notaport password = hunter22secret", "hunter22secret"},
		// libpq allows spaces after '=': the password is "hunter22secret".
		{"host=db.example.net port=5432 password= hunter22secret sslmode=bogus", "hunter22secret"},
		// An unescaped '@' in a URL password: the password is "hunter22@s3cr3tpart".
		{"postgres://u:hunter22@s3cr3tpart@db.example.net:notaport/db", "s3cr3tpart"},
	} {
		_, err := Open(context.Background(), Config{DatabaseURL: c.conn})
		if err == nil {
			t.Errorf("Open(%q) accepted a broken connection string", c.conn)
			continue
		}
		if strings.Contains(err.Error(), c.secret) {
			t.Errorf("BUG: the error for a malformed connection string shows the password (%q): %v", c.secret, err)
		}
	}
	// The same '@' in the connection string of a pool given to New: refused
	// before any call could name the part after it as the host.
	pc, err := pgxpool.ParseConfig("postgres://u:hunter22@s3cr3tpart@db.example.net:5432/db")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc) // lazy: connects to nothing
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = New(pool, Config{})
	var ie *InvalidError
	if !errors.As(err, &ie) || ie.Field != "pool" || strings.Contains(err.Error(), "s3cr3tpart") {
		t.Errorf("New over a pool whose password holds an unescaped '@': %v, want invalid_input on pool without the password", err)
	}
}

// edgeSeeds are hostile inputs of every family the edge judges.
var edgeSeeds = []string{"c1", "", strings.Repeat("a", 128), strings.Repeat("a", 129), "c1\x00", "c1\nx", "c1\u202ex",
	"c1'; DROP TABLE ipam_events; --", "../../etc/passwd", "c 1", "c1%", "-c1", "c1\xff", "сluster", "blocks/n1", "blocks/",
	"blocks/-n", "c1/v4", "node", "2001:DB8:200::1/48", "fe80::1%eth0", "::ffff:1.2.3.4", "instance.*", "instance.allocated", "*"}

// FuzzEdgeIDs: every check of the package edge judges an identifier by the
// one rule (idSpec), whether it creates, reads, releases or filters, and a
// refusal is an InvalidError naming the field it was given.
func FuzzEdgeIDs(f *testing.F) {
	for _, s := range edgeSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		valid := idSpec(s)
		named := func(what string, err error, field string) {
			t.Helper()
			if (err == nil) != valid {
				t.Fatalf("%s(%q) = %v, but the rule says valid = %v", what, s, err, valid)
			}
			var ie *InvalidError
			if err != nil && (!errors.As(err, &ie) || ie.Field != field || !errors.Is(err, ErrInvalid)) {
				t.Fatalf("%s(%q) = %v, want an InvalidError naming %s", what, s, err, field)
			}
		}
		named("checkIDs", checkIDs("cluster_id", s), "cluster_id")
		if s != "" {
			named("checkFilterIDs", checkFilterIDs("node_id", s), "node_id")
		} else if err := checkFilterIDs("node_id", s); err != nil {
			t.Fatalf("an empty filter is refused: %v", err)
		}
		named("ValidateOwner(node)", ValidateOwner(Owner{Kind: OwnerNode, ID: s}), "node_id")
		named("checkPoolRef(cluster)", checkPoolRef("cluster_id", "pool_id", PoolRef{s, "v4"}), "cluster_id")
		_, err := ParsePoolRef("pool_id", "c1/"+s)
		blocks := strings.HasPrefix(s, blocksPrefix) && idSpec(strings.TrimPrefix(s, blocksPrefix))
		if (err == nil) != (valid || blocks) {
			t.Fatalf("ParsePoolRef(c1/%q) = %v, but the rule says valid = %v", s, err, valid || blocks)
		}
		if ValidateSetKey(s) == nil && !valid && !strings.HasPrefix(s, "_") {
			t.Fatalf("set key %q is valid but no id could be", s)
		}
	})
}

// eventTypeSpec states the event type filter rule independently: 1 to 64
// bytes of lowercase letters, digits, '_' and '.', starting with a letter,
// no empty segment, optionally ending in '*' (a prefix).
func eventTypeSpec(s string) bool {
	if len(s) == 0 || len(s) > MaxEventTypeLength {
		return false
	}
	body := strings.TrimSuffix(s, "*")
	if body == "" || body[0] < 'a' || body[0] > 'z' {
		return false
	}
	if strings.HasSuffix(s, "*") {
		body = strings.TrimSuffix(body, ".")
	}
	for _, seg := range strings.Split(body, ".") {
		if seg == "" {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
				return false
			}
		}
	}
	return true
}

// FuzzValidateEventType: ValidateEventType accepts exactly what
// eventTypeSpec states, and refuses naming "type".
func FuzzValidateEventType(f *testing.F) {
	for _, s := range edgeSeeds {
		f.Add(s)
	}
	f.Add("env.ipv4_addon_enabled")
	f.Add("node.*")
	f.Add("a..b")
	f.Add("Instance.allocated")
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateEventType(s)
		if (err == nil) != eventTypeSpec(s) {
			t.Fatalf("ValidateEventType(%q) = %v, but the rule says valid = %v", s, err, eventTypeSpec(s))
		}
		var ie *InvalidError
		if err != nil && (!errors.As(err, &ie) || ie.Field != "type") {
			t.Fatalf("ValidateEventType(%q) = %v, want an InvalidError naming type", s, err)
		}
	})
}

// FuzzEdgePrefixAddr: a prefix or address that reaches the Go API already
// parsed (netip's lenient parsers keep host bits, zones and IPv4 mapping) is
// judged by checkPrefix/checkAddr exactly as the strict string parsers the
// provider and ipamctl use judge its text: one rule, whatever the face.
func FuzzEdgePrefixAddr(f *testing.F) {
	for _, s := range edgeSeeds {
		f.Add(s)
	}
	for _, s := range []string{"2001:db8::/48", "192.0.2.0/24", "192.0.2.1/24", "::ffff:192.0.2.0/120", "2001:db8::1", "192.0.2.1", "fe80::1%25eth0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if p, err := netip.ParsePrefix(s); err == nil {
			_, strict := ParsePrefix(s)
			if edge := checkPrefix("prefix", p, 0); (edge == nil) != (strict == nil) {
				t.Fatalf("%q: checkPrefix = %v, ParsePrefix = %v", s, edge, strict)
			}
			if edge := checkPrefix("prefix", p, 6); edge == nil && !p.Addr().Is6() {
				t.Fatalf("%q: checkPrefix accepted it as IPv6", s)
			}
		}
		if a, err := netip.ParseAddr(s); err == nil {
			_, strict := ParseAddr(s)
			if edge := checkAddr("address", a, 0); (edge == nil) != (strict == nil) {
				t.Fatalf("%q: checkAddr = %v, ParseAddr = %v", s, edge, strict)
			}
		}
	})
}

// FuzzBlockScalingValidate: settings Validate accepts are finite, inside
// their ranges, and a node's blocks under them hold at most
// MaxNodeBlockAddresses addresses, computed without overflow (big.Int);
// TargetBlocks then stays between 1 and max_blocks.
func FuzzBlockScalingValidate(f *testing.F) {
	f.Add(124, 16, 0.5, 1.5, int64(25))
	f.Add(65, 1, 0.5, 1.5, int64(-1))
	f.Add(66, 2, 0.0, 1.0, int64(0))
	f.Add(120, math.MaxInt, 0.5, 1.5, int64(1))
	f.Add(128, 1<<20, 0.0, 1.0, int64(math.MaxInt64))
	f.Add(124, 4, math.Inf(1), math.Inf(1), int64(3))
	f.Add(124, 4, math.NaN(), 2.0, int64(3))
	f.Fuzz(func(t *testing.T, pl, maxBlocks int, minFree, maxFree float64, used int64) {
		b := BlockScaling{PrefixLength: pl, MaxBlocks: maxBlocks, MinFree: minFree, MaxFree: maxFree}
		err := b.Validate()
		if err != nil {
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Field == "" {
				t.Fatalf("%+v: %v is not an InvalidError naming a field", b, err)
			}
			return
		}
		if pl < 65 || pl > 128 || maxBlocks < 1 || math.IsNaN(minFree) || math.IsInf(minFree, 0) || math.IsInf(maxFree, 0) ||
			minFree < 0 || maxFree < minFree+1 {
			t.Fatalf("%+v accepted", b)
		}
		total := new(big.Int).Lsh(big.NewInt(1), uint(128-pl))
		total.Mul(total, big.NewInt(int64(maxBlocks)))
		if total.Cmp(big.NewInt(MaxNodeBlockAddresses)) > 0 {
			t.Fatalf("%+v accepted: its blocks would hold %s addresses", b, total)
		}
		if used >= 0 {
			if n := b.TargetBlocks(used); n < 1 || n > maxBlocks {
				t.Fatalf("%+v: TargetBlocks(%d) = %d", b, used, n)
			}
		}
	})
}
