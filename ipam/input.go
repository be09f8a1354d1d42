package ipam

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxIDLength bounds every identifier (cluster names, node, instance, org and
// env ids, actors).
const MaxIDLength = 128

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]*$`)

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
	case !idPattern.MatchString(s):
		return fmt.Errorf("%s %q may only contain letters, digits, '.', '_', ':', '@' and '-', and must start with a letter or digit", what, truncate(s, 40))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ParseDuration parses Go duration syntax extended with days: "30d", "1d12h",
// "90m", "24h". Negative durations are refused.
func ParseDuration(s string) (time.Duration, error) {
	orig := s
	if s == "" {
		return 0, fmt.Errorf("empty duration (expected e.g. \"30d\", \"24h\" or \"90m\")")
	}
	var d time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		days, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || days < 0 || days > 100*365 {
			return 0, fmt.Errorf("%q is not a valid duration (expected e.g. \"30d\", \"24h\" or \"90m\")", truncate(orig, 40))
		}
		d = time.Duration(days) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return d, nil
		}
	}
	rest, err := time.ParseDuration(s)
	if err != nil || rest < 0 || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("%q is not a valid duration (expected e.g. \"30d\", \"24h\" or \"90m\")", truncate(orig, 40))
	}
	if rest > math.MaxInt64-d {
		return 0, fmt.Errorf("%q is too long a duration (at most about 292 years)", truncate(orig, 40))
	}
	return d + rest, nil
}

// FormatDuration renders d in a form ParseDuration reads back: whole days
// longer than a day as "30d", everything else in Go syntax without trailing
// zero units ("24h", "36h", "1h30m").
func FormatDuration(d time.Duration) string {
	day := 24 * time.Hour
	if d > day && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	r := d.String()
	if strings.HasSuffix(r, "m0s") {
		r = strings.TrimSuffix(r, "0s")
	}
	if strings.HasSuffix(r, "h0m") {
		r = strings.TrimSuffix(r, "0m")
	}
	return r
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
