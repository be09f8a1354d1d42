package e2e

// The guides' error samples, checked against the real error text: a fenced
// block (not a runnable one, and not one a <!-- sample-of: --> marker already
// checks by running its command) that shows an error, as Terraform prints a
// diagnostic ("Error: TITLE", its location, then its paragraphs) or as the
// bare message ("ipam_exhausted: pool ..."), must be text the provider and
// the core can print:
//
//   - the message is what the Error method of the code's error type writes,
//     its values aside; for the codes whose message is free text
//     (conflict, invalid_input, read_only, permission_denied,
//     schema_mismatch) the text is one
//     of the messages the core writes (the format strings of ipam/*.go);
//   - the title is the provider's for that code (internal/provider's
//     DiagnosticText: "Unable to Allocate Node Address: Pool Exhausted", or
//     the class alone for a failure to use the database);
//   - every other paragraph is one of the diagnostic's (what was left
//     behind, the advice, the import hint), in the diagnostic's order, the
//     message last; a sample with its title shows all of them, or marks
//     where it cuts with a paragraph "...".
//
// Values (names, addresses, counts, times, durations) are free; so is the
// end of a paragraph that ends in "...".

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/internal/advice"
	"github.com/overlayipam/terraform-provider-ipam/internal/provider"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// Markers stand for the values of an error built to read its wording.
const (
	markS = "\u27e6v\u27e7" // a string value
	markN = 987654321       // a number
	// markAnswers stands for what the hosts answered (UnavailableError,
	// RefusedError): "HOST refused the connection (nothing listens
	// there)", "HOST is read-only (...)", ... joined with "; ", in the
	// words of the core's hostAnswer.
	markAnswers = "\u27e6answers\u27e7"
)

var (
	markDur  = 987654321 * time.Second
	markTime = time.Date(2999, 1, 2, 3, 4, 5, 0, time.UTC)
	markAddr = netip.MustParseAddr("2001:db8:ffff::abcd")
)

// errorVariants are errors of every code, in each wording their Error
// method (and the advice for them) has, with markers for their values. A
// new wording needs a variant here before a guide may show it.
func errorVariants() []error {
	answers := []string{markAnswers}
	var out []error
	for _, next := range []time.Time{markTime, {}} {
		for _, held := range []int64{0, markN} {
			out = append(out,
				&ipam.ExhaustedError{PoolID: markS, Size: markN, Active: markN, Held: held, Cooling: markN, NextReusable: next},
				&ipam.ExhaustedError{PoolID: markS, Size: markN, Active: markN, Held: held, Cooling: markN, NextReusable: next,
					Node: markS, MaxBlocks: markN})
		}
	}
	out = append(out, &ipam.ExhaustedError{PoolID: markS, Tried: []string{markS, markS}})
	for _, reached := range []bool{false, true} {
		out = append(out,
			&ipam.UnavailableError{Addr: markS, Reached: reached, Answers: answers, Err: errors.New(markAnswers)},
			&ipam.UnavailableError{Addr: markS, Reached: reached, Answers: answers, Waited: markDur, Bound: markDur, Err: errors.New(markAnswers)})
	}
	out = append(out, &ipam.UnavailableError{Addr: markS, Answers: answers, Waited: markDur, Bound: markDur, FirstContact: true, Err: errors.New(markAnswers)})
	for _, kind := range []string{ipam.OwnerNode, ipam.OwnerInstance, ipam.OwnerEnvIPv4, ipam.OwnerSet, ipam.OwnerNodeBlocks} {
		for _, held := range []bool{false, true} {
			out = append(out, &ipam.OwnerConflictError{ClusterID: markS, OwnerKind: kind, OwnerID: markS, Address: markS, Actor: markS,
				Detail: markS, PoolID: markS, SetID: markS, Held: held})
		}
	}
	out = append(out,
		&ipam.AddressInUseError{Address: markS, State: ipam.StateReserved, OwnerKind: markS, OwnerID: markS, Actor: markS, Until: markTime},
		&ipam.AddressInUseError{Address: markS, State: ipam.StateActive, OwnerKind: markS, OwnerID: markS, Actor: markS},
		&ipam.AddressCoolingError{Address: markS, OwnerKind: markS, OwnerID: markS, ReusableAt: markTime},
		&ipam.InvalidError{Field: markS, Msg: markS},
		&ipam.ConflictError{Msg: markS},
		&ipam.ConflictError{Msg: markS, ExistingKind: "cluster", ExistingID: markS},
		&ipam.ConflictError{Msg: markS, ExistingKind: "pool", ExistingID: markS},
		&ipam.SchemaError{Msg: markS},
		&ipam.BusyError{What: markS, Timeout: markDur},
		&ipam.TimeoutError{What: markS, Timeout: markDur},
		&ipam.ReadOnlyError{Msg: markS},
		&ipam.DeniedError{Msg: markS},
		&ipam.RefusedError{Addr: markS, Answers: answers},
		&ipam.HoldLostError{Owner: ipam.Owner{Kind: markS, ID: markS}, Lost: ipam.LostHold{Address: markAddr, TakenBy: markS, At: markTime}},
		ipam.ErrNotFound,
	)
	for _, created := range []bool{false, true} {
		out = append(out, &ipam.ConfirmedError{Allocation: ipam.Allocation{ClusterID: markS, Address: markAddr, Actor: markS,
			Owner: ipam.Owner{Kind: markS, ID: markS}, AllocatedAt: markTime}, ConfirmedAt: markTime, Created: created})
	}
	return out
}

// template turns a text written with markers into a format string: each
// value a verb, '%' doubled.
func template(text string) string {
	text = strings.ReplaceAll(text, "%", "%%")
	for _, v := range []string{
		strconv.Quote(markS), markS, strconv.Itoa(markN), ipam.FormatDuration(markDur), markDur.String(),
		markTime.Format(time.RFC3339), markAddr.String(),
	} {
		text = strings.ReplaceAll(text, v, "%v")
	}
	return text
}

var verbRE = regexp.MustCompile(`%[-+# 0-9.*]*[a-zA-Z]`)

// answerFormats are the phrases of the core's hostAnswer (ipam/internal/engine/conn.go), as
// format strings ("%vrefused the connection (nothing listens there)"),
// read by answersPattern.
var answerFormats []string

// answersPattern matches what the hosts answered: answers in the words of
// hostAnswer, joined with "; ".
func answersPattern() string {
	var alts []string
	for _, f := range answerFormats {
		alts = append(alts, formatRE(f))
	}
	one := "(?:" + strings.Join(alts, "|") + ")"
	return one + "(?:; " + one + ")*"
}

// tok is a piece of a format: literal text, any value, or the answers.
type tok struct {
	kind int // 0 literal, 1 any value, 2 answers
	s    string
}

func tokens(format string) []tok {
	format = collapse(format)
	var out []tok
	literal := func(s string) {
		s = strings.ReplaceAll(s, "%%", "%")
		for i, part := range strings.Split(s, markAnswers) {
			if i > 0 {
				out = append(out, tok{kind: 2})
			}
			out = append(out, tok{s: part})
		}
	}
	last := 0
	for _, m := range verbRE.FindAllStringIndex(format, -1) {
		if m[0] > 0 && format[m[0]-1] == '%' && (m[0] < 2 || format[m[0]-2] != '%') {
			continue // a %% then a letter
		}
		literal(format[last:m[0]])
		out = append(out, tok{kind: 1})
		last = m[1]
	}
	literal(format[last:])
	return out
}

// formatRE is a format string as an unanchored regular expression.
func formatRE(format string) string {
	var b strings.Builder
	for _, t := range tokens(format) {
		switch t.kind {
		case 0:
			b.WriteString(regexp.QuoteMeta(t.s))
		case 1:
			b.WriteString(".*?")
		case 2:
			b.WriteString(answersPattern())
		}
	}
	return b.String()
}

// textPattern is a format string as a regular expression over text with its
// white space collapsed: each verb any value; with partial, any beginning of
// such a text (a sample cut short with "...").
func textPattern(format string, partial bool) *regexp.Regexp {
	if !partial {
		return regexp.MustCompile("^(?s:" + formatRE(format) + ")$")
	}
	// Any beginning: the tokens before some token k whole, then a beginning
	// of token k.
	var alts []string
	var head strings.Builder
	for _, t := range tokens(format) {
		switch t.kind {
		case 0:
			var cut []string
			for j := range t.s {
				cut = append(cut, regexp.QuoteMeta(t.s[:j]))
			}
			if len(cut) > 0 {
				alts = append(alts, head.String()+"(?:"+strings.Join(cut, "|")+")")
			}
			head.WriteString(regexp.QuoteMeta(t.s))
		case 1:
			alts = append(alts, head.String()+".*")
			head.WriteString(".*?")
		case 2:
			alts = append(alts, head.String()+".*")
			head.WriteString(answersPattern())
		}
	}
	alts = append(alts, head.String())
	return regexp.MustCompile("^(?s:" + strings.Join(alts, "|") + ")$")
}

// matches reports whether a sample paragraph is text of format: the whole
// of it, or its beginning when the sample ends in "...".
func matches(format, sample string) bool {
	if s, cut := strings.CutSuffix(sample, "..."); cut {
		return textPattern(format, true).MatchString(strings.TrimSpace(s))
	}
	return textPattern(format, false).MatchString(sample)
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// messageFormats are the messages the core writes for the codes whose
// message is free text: the format strings (or literals) given as Msg of
// an error, or to invalid(), in ipam/*.go.
func messageFormats(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "ipam", "internal", "engine", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	format := exprFormat
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				// A message that is a value alone (Msg: msg) says nothing of
				// its wording: it would match any sample.
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Msg" && format(n.Value) != "%v" {
					out = append(out, format(n.Value))
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "invalid" && len(n.Args) > 1 {
					if s, ok := literalText(n.Args[1]); ok && s != "%v" && s != "%s" {
						out = append(out, s)
					}
				}
			}
			return true
		})
	}
	if len(out) < 20 {
		t.Fatalf("found only %d messages in ipam/*.go: the scan is broken", len(out))
	}
	return out
}

// exprFormat is a string expression of Go source as a format string: its
// literals as they are, fmt.Sprintf's format, anything else a value.
func exprFormat(e ast.Expr) string {
	if s, ok := literalText(e); ok {
		return strings.ReplaceAll(s, "%", "%%") // text, not a format
	}
	switch e := e.(type) {
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return exprFormat(e.X) + exprFormat(e.Y)
		}
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sprintf" && len(e.Args) > 0 {
			if s, ok := literalText(e.Args[0]); ok {
				return s // the format itself, its verbs kept
			}
			return exprFormat(e.Args[0])
		}
	case *ast.ParenExpr:
		return exprFormat(e.X)
	}
	return "%v"
}

// literalText is the text of a string literal, or of literals joined with +.
func literalText(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(e.Value)
		return s, err == nil && e.Kind == token.STRING
	case *ast.BinaryExpr:
		x, okx := literalText(e.X)
		y, oky := literalText(e.Y)
		return x + y, okx && oky && e.Op == token.ADD
	case *ast.ParenExpr:
		return literalText(e.X)
	}
	return "", false
}

// readAnswerFormats reads the phrases hostAnswer (ipam/internal/engine/conn.go) returns,
// but for its fallback (the raw error), which no guide should show.
func readAnswerFormats(t *testing.T, root string) []string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "ipam", "internal", "engine", "conn.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "hostAnswer" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if r, ok := n.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
				if f := exprFormat(r.Results[0]); strings.Trim(f, "%v") != "" {
					out = append(out, f)
				}
			}
			return true
		})
	}
	if len(out) < 10 {
		t.Fatalf("found only %d answers in ipam/internal/engine/conn.go's hostAnswer: the scan is broken", len(out))
	}
	return out
}

// summaries are the provider's diagnostic summaries ("Unable to Allocate",
// "Unable to Delete Cluster", ...), as written in internal/provider.
func summaries(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "internal", "provider", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	re := regexp.MustCompile(`"(Unable to [A-Z][A-Za-z ]*)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if s := strings.TrimSpace(m[1]); !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d summaries in internal/provider: the scan is broken", len(out))
	}
	return out
}

// errorSample is a fenced block that shows an error: its title (after
// "Error: ", "" for a bare message) and its paragraphs, white space
// collapsed, the location lines left out.
type errorSample struct {
	f     fence
	title string
	paras []string
	code  string // of the message paragraph
}

var locationRE = regexp.MustCompile(`^(with |on [^ ]+ line \d+)`)

// errorSamples finds the error samples of a page's fences.
func errorSamples(fs []fence, codes []string) []errorSample {
	var out []errorSample
	for _, f := range fs {
		if runnable(f.lang) || f.lang == "sql" || f.marks["sample-of"] != "" {
			continue
		}
		var paras []string
		for _, p := range regexp.MustCompile(`\n\s*\n`).Split(f.body, -1) {
			if p = collapse(p); p != "" {
				paras = append(paras, p)
			}
		}
		s := errorSample{f: f}
		for _, p := range paras {
			switch {
			case s.title == "" && len(s.paras) == 0 && strings.HasPrefix(p, "Error: "):
				s.title = strings.TrimPrefix(p, "Error: ")
			case locationRE.MatchString(p):
			default:
				s.paras = append(s.paras, p)
				if code, _, ok := strings.Cut(p, ": "); ok && slices.Contains(codes, code) {
					s.code = code
				}
			}
		}
		if s.code != "" || s.title != "" {
			out = append(out, s)
		}
	}
	return out
}

// checkErrorSample says what is wrong with a sample ("" when nothing is).
func checkErrorSample(s errorSample, variants []error, msgFormats, sums []string) string {
	if s.code == "" {
		return "it shows an error title but no message starting with an error code"
	}
	msg := s.paras[len(s.paras)-1]
	if code, _, _ := strings.Cut(msg, ": "); code != s.code {
		return "the message (" + s.code + ": ...) is not its last paragraph, as it is in the diagnostic"
	}
	// Free-text messages: one the core writes.
	if slices.Contains([]string{ipam.CodeConflict, ipam.CodeInvalid, ipam.CodeReadOnly, ipam.CodeDenied, ipam.CodeSchema}, s.code) {
		text := strings.TrimPrefix(msg, s.code+": ")
		if s.code == ipam.CodeInvalid {
			_, text, _ = strings.Cut(text, ": ") // the field
		}
		ok := slices.ContainsFunc(msgFormats, func(f string) bool { return matches(f, text) })
		// A ConfirmedError is a conflict with a wording of its own.
		ok = ok || slices.ContainsFunc(variants, func(e error) bool {
			var ce *ipam.ConfirmedError
			return errors.As(e, &ce) && matches(template(e.Error()), msg)
		})
		if !ok {
			return fmt.Sprintf("no message of the core reads %q", msg)
		}
	}
	var closest string  // what is wrong with the paragraphs, the title being right
	var titles []string // the titles the provider gives this message
	for _, e := range variants {
		if ipam.Code(e) != s.code || !matches(template(e.Error()), msg) {
			continue
		}
		cands := sums
		if s.title != "" && !advice.For(e).Connection {
			title := "Unable to ...: " + advice.For(e).Title
			sum, ok := strings.CutSuffix(s.title, ": "+advice.For(e).Title)
			if !ok || !slices.ContainsFunc(sums, func(p string) bool { return strings.HasPrefix(sum, p) }) {
				if !slices.Contains(titles, title) {
					titles = append(titles, title)
				}
				continue
			}
			cands = []string{sum}
		}
		for _, sum := range cands {
			title, detail := provider.DiagnosticText(sum, e)
			if s.title != "" && title != s.title {
				if !slices.Contains(titles, title) {
					titles = append(titles, title)
				}
				continue
			}
			paras := strings.Split(detail, "\n\n")
			next, ok := 0, true
			var left []string // the diagnostic's paragraphs the sample does not show
			for _, p := range s.paras {
				found := false
				for ; next < len(paras); next++ {
					if matches(template(paras[next]), p) {
						found, next = true, next+1
						break
					}
					left = append(left, paras[next])
				}
				if !found {
					ok = false
					closest = fmt.Sprintf("the paragraph %q is not the provider's (in this order); its diagnostic reads:\n\n%s",
						p, strings.Join(paras, "\n\n"))
					break
				}
			}
			// A whole diagnostic (its title shown) shows every paragraph,
			// or says where it cuts with a paragraph "...".
			if ok && s.title != "" && len(left) > 0 && !slices.Contains(s.paras, "...") {
				ok = false
				closest = fmt.Sprintf("the sample leaves out the diagnostic's paragraph %q: show it, or mark the cut with a paragraph \"...\"", left[0])
			}
			if ok {
				return ""
			}
		}
	}
	switch {
	case closest != "":
		return closest
	case len(titles) > 0:
		return fmt.Sprintf("the title is %q; the provider's is one of %q", s.title, titles)
	}
	return fmt.Sprintf("the message %q is not how the core writes a %s error", msg, s.code)
}

func TestErrorSampleCheck(t *testing.T) {
	// The checker itself: what it accepts and refuses.
	for _, c := range []struct {
		format, sample string
		want           bool
	}{
		{"size %d, %d active", "size 3, 2 active", true},
		{"size %d, %d active", "size 3, 2 idle", false},
		{"size %d, %d active", "size 3, ...", true},
		{"size %d, %d active", "size 3, 2 act...", true},
		{"size %d, %d active", "sizes ...", false},
		{"100%% sure: %s", "100% sure: yes", true},
	} {
		if got := matches(c.format, c.sample); got != c.want {
			t.Errorf("matches(%q, %q) = %v, want %v", c.format, c.sample, got, c.want)
		}
	}
}
