package engine

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxIDLength bounds every identifier (cluster names, node, instance, org and
// env ids, actors).
const MaxIDLength = 128

// ValidateID checks an identifier: 1 to 128 characters, starting with a letter
// or digit, then letters, digits, '.', '_', ':', '@' or '-'. The '/' is kept
// for composite ids ("<cluster_id>/<node_id>"); quotes, spaces, control
// characters and SQL metacharacters never appear in an id.
func ValidateID(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s must not be empty", what)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", what)
	case len(s) > MaxIDLength:
		return fmt.Errorf("%s is %d characters long; at most %d are allowed", what, len(s), MaxIDLength)
	case !isID(s):
		return fmt.Errorf("%s %q may only contain letters, digits, '.', '_', ':', '@' and '-', and must start with a letter or digit", what, truncate(s, 40))
	}
	return nil
}

// isID tells whether s is ^[A-Za-z0-9][A-Za-z0-9._:@-]*$, byte by byte: every
// allocation checks five ids, and a regular expression cost the caller more
// than the encoding of its statement.
func isID(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == ':' || c == '@' || c == '-'):
		default:
			return false
		}
	}
	return s != ""
}

// MaxOriginLength bounds Config.Origin (a working directory's path).
const MaxOriginLength = 1024

// ValidateOrigin checks a configuration's origin (Config.Origin): at most
// MaxOriginLength bytes of valid UTF-8, without control characters.
func ValidateOrigin(s string) error {
	if len(s) > MaxOriginLength {
		return &InvalidError{Field: "origin", Msg: fmt.Sprintf("must be at most %d characters, not %d", MaxOriginLength, len(s))}
	}
	if !utf8.ValidString(s) {
		return &InvalidError{Field: "origin", Msg: "must be valid UTF-8"}
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return &InvalidError{Field: "origin", Msg: fmt.Sprintf("must not contain the control character %U", r)}
		}
	}
	return nil
}

// The checks below are the one judgment of every input at the package edge.
// Each exported entry point runs them on what it was given before any
// statement: an id meets the same rule whether it creates, reads, releases or
// filters; prefixes and addresses are canonical, of the right family and
// without zones; numbers lie inside their documented ranges. A refusal is an
// InvalidError naming the field (ErrInvalid), and nothing is written.

// checkIDs checks identifiers given as field, value pairs.
func checkIDs(fieldValues ...string) error {
	for i := 0; i+1 < len(fieldValues); i += 2 {
		if err := ValidateID(fieldValues[i], fieldValues[i+1]); err != nil {
			return &InvalidError{Field: fieldValues[i], Msg: err.Error()}
		}
	}
	return nil
}

// checkFilterIDs is checkIDs where an empty value means "any" (a filter, or
// every cluster).
func checkFilterIDs(fieldValues ...string) error {
	for i := 0; i+1 < len(fieldValues); i += 2 {
		if fieldValues[i+1] == "" {
			continue
		}
		if err := checkIDs(fieldValues[i], fieldValues[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// validPoolName tells whether name can name a pool in its cluster: an id (an
// operator pool, or the cluster's node or instance pool), or a node's blocks
// ("blocks/<node_id>").
func validPoolName(name string) bool {
	if rest, ok := strings.CutPrefix(name, blocksPrefix); ok {
		return ValidateID("node_id", rest) == nil
	}
	return ValidateID("pool", name) == nil
}

// isParkedPoolID tells whether id names a released block's parked pool, as
// parkedPoolID writes it: "<cluster_id>/parked/<block>", the block a prefix
// without host bits, in its canonical form. Listings show such pools, and
// no request names one, so validPoolName refuses them.
func isParkedPoolID(id string) bool {
	c, n, _ := strings.Cut(id, "/")
	rest, parked := strings.CutPrefix(n, parkedPrefix)
	b, err := ParsePrefix(rest)
	return parked && err == nil && ValidateID("cluster", c) == nil && parkedPoolID(c, b) == id
}

// checkPoolID checks a pool's key, "<cluster_id>/<name>".
func checkPoolID(field, id string) error {
	_, err := ParsePoolRef(field, id)
	return err
}

// checkPoolRef checks a request's pool: its cluster, and its name when one
// is given.
func checkPoolRef(clusterField, nameField string, r PoolRef) error {
	if err := checkIDs(clusterField, r.ClusterID); err != nil {
		return err
	}
	if r.Name != "" && !validPoolName(r.Name) {
		return invalid(nameField, "%q is not a pool name: letters, digits, '.', '_', ':', '@' and '-', starting with a letter or digit, at most %d characters",
			truncate(r.Name, 40), MaxIDLength)
	}
	return nil
}

// checkPrefix checks a prefix: valid, not IPv4-mapped, without host bits,
// and of family (4 or 6; 0: either).
func checkPrefix(field string, p netip.Prefix, family int) error {
	switch {
	case !p.IsValid():
		return invalid(field, "is empty or not a valid CIDR prefix (expected e.g. 2001:db8::/48 or 192.0.2.0/24)")
	case p.Addr().Is4In6():
		return invalid(field, "%s is an IPv4-mapped IPv6 prefix; write the IPv4 prefix itself", p)
	case p.Masked() != p:
		return invalid(field, "%s has host bits set; write it as %s", p, p.Masked())
	case family != 0 && familyOf(p.Addr()) != family:
		return invalid(field, "%s is not an IPv%d prefix", p, family)
	}
	return nil
}

// checkAddr checks an address: valid, without zone (a zone means nothing
// outside one host's links), not IPv4-mapped, and of family (0: either).
func checkAddr(field string, a netip.Addr, family int) error {
	switch {
	case !a.IsValid():
		return invalid(field, "is empty or not a valid IP address (expected e.g. 2001:db8::1 or 192.0.2.1)")
	case a.Zone() != "":
		return invalid(field, "%s has a zone (%%%s); zones are not allowed: give the plain address", a.WithZone(""), truncate(a.Zone(), 20))
	case a.Is4In6():
		return invalid(field, "%s is an IPv4-mapped IPv6 address; write the IPv4 address itself", a)
	case family != 0 && familyOf(a) != family:
		return invalid(field, "%s is not an IPv%d address", a, family)
	}
	return nil
}

// checkOptionalAddr is checkAddr for an address that may be left unset
// (the zero Addr).
func checkOptionalAddr(field string, a netip.Addr, family int) error {
	if a == (netip.Addr{}) {
		return nil
	}
	return checkAddr(field, a, family)
}

// MaxStaleDays bounds the age a stale-leak search looks back (100 years, as
// ParseDuration's days).
const MaxStaleDays = 100 * 365

// MaxEventTypeLength bounds an event type or type prefix.
const MaxEventTypeLength = 64

var eventTypePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*(\.?\*)?$`)

// ValidateEventType checks an event type filter: an exact type
// ("instance.allocated") or a prefix ending in '*' ("instance.*"): lowercase
// letters, digits, '_' and '.'.
func ValidateEventType(t string) error {
	if len(t) > MaxEventTypeLength || !eventTypePattern.MatchString(t) {
		return invalid("type", "%q is not an event type: give e.g. instance.allocated or instance.* (lowercase letters, digits, '_' and '.', at most %d characters)",
			truncate(t, 40), MaxEventTypeLength)
	}
	return nil
}

// notAKind is the error for a kind that is not one of OwnerKinds.
func notAKind(field, kind string) error {
	return invalid(field, "%q is not an owner kind: expected %s", truncate(kind, 40), strings.Join(OwnerKinds, ", "))
}

// ParsePoolRef reads a pool's key back; field names the input for the error.
func ParsePoolRef(field, id string) (PoolRef, error) {
	c, n, ok := strings.Cut(id, "/")
	if !ok || ValidateID("cluster", c) != nil || !validPoolName(n) {
		return PoolRef{}, invalid(field, "%q is not a pool id: expected <cluster_id>/<name>, each letters, digits, '.', '_', ':', '@' and '-'", truncate(id, 40))
	}
	return PoolRef{c, n}, nil
}

// withOwnLabel gives an owner the label that names it when it has none: a
// node's node_id, an instance's instance_id and an environment's env_id are
// its id, as the typed verbs (AllocateInstance, ...) and the provider write
// them, so that a listing by that label finds what the generic verbs
// (Allocate, Reserve) write too.
func withOwnLabel(o Owner) Owner {
	switch {
	case o.Kind == OwnerNode && o.NodeID == "":
		o.NodeID = o.ID
	case o.Kind == OwnerInstance && o.InstanceID == "":
		o.InstanceID = o.ID
	case o.Kind == OwnerEnvIPv4 && o.EnvID == "":
		o.EnvID = o.ID
	}
	return o
}

// ValidateOwner checks the owner's key and labels.
func ValidateOwner(o Owner) error {
	if err := checkFilterIDs("org_id", o.OrgID, "env_id", o.EnvID, "node_id", o.NodeID, "instance_id", o.InstanceID); err != nil {
		return err
	}
	if o.Kind == "" {
		return invalid("owner_kind", "must not be empty")
	}
	if !slices.Contains(OwnerKinds, o.Kind) {
		return notAKind("owner_kind", o.Kind)
	}
	if o.Kind == OwnerSet {
		return validateSetMember(o)
	}
	if err := ValidateID("owner id", o.ID); err != nil {
		return &InvalidError{Field: o.Kind + "_id", Msg: err.Error()}
	}
	return nil
}

var setKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$`)

// ValidateSetKey checks a member key: 1 to 63 letters, digits, '_', '.', '-'.
func ValidateSetKey(k string) error {
	if !setKeyPattern.MatchString(k) {
		return fmt.Errorf("key %q must be 1 to 63 letters, digits, '_', '.' or '-', starting with a letter, digit or '_'", truncate(k, 40))
	}
	return nil
}

func validateSetMember(o Owner) error {
	set, key, ok := strings.Cut(o.ID, "#")
	if !ok || set != o.SetID {
		return invalid("owner_id", "set member id %q is not <owner_id>#<key>", o.ID)
	}
	if err := checkIDs("owner_id", set); err != nil {
		return err
	}
	if err := ValidateSetKey(key); err != nil {
		return &InvalidError{Field: "addresses", Msg: err.Error()}
	}
	return nil
}

func asWritten(written map[string]string, values map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range values {
		var parsed any
		var err error
		switch v.(type) {
		case time.Duration:
			parsed, err = ParseDuration(written[k])
		case netip.Prefix:
			parsed, err = ParsePrefix(written[k])
		}
		if err == nil && parsed == v {
			out[k] = written[k]
		}
	}
	return out
}

// durationDigits is a duration Go's parser reads but cannot hold (too many
// hours, say): its text is a well-formed one.
var durationDigits = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)

// ParseDuration parses Go duration syntax extended with days: "30d", "1d12h",
// "90m", "24h". Negative durations are refused, and so are durations too long
// to hold, each saying so.
func ParseDuration(s string) (time.Duration, error) {
	orig := s
	if s == "" {
		return 0, fmt.Errorf("empty duration (expected e.g. \"30d\", \"24h\" or \"90m\")")
	}
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q is negative: a duration is 0 or more (e.g. \"30d\", \"24h\" or \"90m\")", truncate(orig, 40))
	}
	var d time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		days, err := strconv.ParseInt(s[:i], 10, 64)
		if err == nil && days > 100*365 {
			return 0, fmt.Errorf("%q is too long a duration (at most 36500d, 100 years)", truncate(orig, 40))
		}
		if err != nil || days < 0 {
			return 0, fmt.Errorf("%q is not a valid duration (expected e.g. \"30d\", \"24h\" or \"90m\")", truncate(orig, 40))
		}
		d = time.Duration(days) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return d, nil
		}
	}
	rest, err := time.ParseDuration(s)
	if err != nil && strings.Contains(err.Error(), "invalid duration") && durationDigits.MatchString(s) {
		return 0, fmt.Errorf("%q is too long a duration (at most about 292 years)", truncate(orig, 40))
	}
	if err != nil || rest < 0 || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("%q is not a valid duration (expected e.g. \"30d\", \"24h\" or \"90m\")", truncate(orig, 40))
	}
	if rest > math.MaxInt64-d {
		return 0, fmt.Errorf("%q is too long a duration (at most about 292 years)", truncate(orig, 40))
	}
	return d + rest, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// request is an AllocateRequest that checkRequest accepted, with the pool
// it draws from without looking at the database (ownPool), found once.
type request struct {
	AllocateRequest
	own PoolRef
}

// checkRequest validates a request on its own: its owner, and a pool named
// where the owner's kind does not decide it.
func checkRequest(req AllocateRequest) (request, error) {
	req.Owner = withOwnLabel(req.Owner)
	r := request{AllocateRequest: req, own: ownPool(req)}
	if err := ValidateOwner(req.Owner); err != nil {
		return r, err
	}
	if err := checkPoolRef("cluster_id", "pool_id", req.Pool); err != nil {
		return r, err
	}
	if err := checkOptionalAddr("address", req.Address, 0); err != nil {
		return r, err
	}
	if req.Pool.Name == "" && !r.own.valid() {
		return r, invalid("pool_id", "must be set: an owner of kind %s draws its address from the pool named here (one of its cluster's pools)", req.Owner.Kind)
	}
	return r, nil
}

// ownPool is the pool a request with no pool named draws from without
// looking at the database: the cluster's node or instance pool by the
// owner's kind (an instance's node blocks are looked up: resolvePool).
func ownPool(req AllocateRequest) PoolRef {
	if req.Pool.Name != "" {
		return req.Pool
	}
	switch req.Owner.Kind {
	case OwnerNode:
		return NodePool(req.Pool.ClusterID)
	case OwnerInstance:
		return InstancePool(req.Pool.ClusterID)
	}
	return PoolRef{}
}
