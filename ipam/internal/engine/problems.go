package engine

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MaxProblems bounds how many problems of one field an error names. A list
// of 20,000 bad exclusions is refused with the first MaxProblems of them
// (by position), the last one saying how many more there are, so that the
// error and the diagnostics made of it stay small whatever the input.
const MaxProblems = 5

// fieldProblems collects the problems of one list field, each at the index
// of the element at fault (-1: the field as a whole), and makes them one
// bounded error.
type fieldProblems struct {
	field string
	list  []fieldProblem
}

type fieldProblem struct {
	index int
	kind  string // what the rest are counted as: "exclusions outside the pool's blocks"
	msg   func() string
}

func newProblems(field string) *fieldProblems { return &fieldProblems{field: field} }

// add records a problem of element index. Its message is only written if it
// is shown; kind names the problem in the plural, for the count of the rest.
func (f *fieldProblems) add(index int, kind string, msg func() string) {
	f.list = append(f.list, fieldProblem{index: index, kind: kind, msg: msg})
}

// addf is add with a message made by fmt.Sprintf.
func (f *fieldProblems) addf(index int, kind, format string, args ...any) {
	f.add(index, kind, func() string { return fmt.Sprintf(format, args...) })
}

// addErr is add with the message of an InvalidError (or any error).
func (f *fieldProblems) addErr(index int, kind string, err error) {
	var ie *InvalidError
	if errors.As(err, &ie) {
		f.add(index, kind, func() string { return ie.Msg })
		return
	}
	f.add(index, kind, err.Error)
}

func (f *fieldProblems) len() int { return len(f.list) }

// err is nil without problems; otherwise the first MaxProblems by index,
// joined (one InvalidError each, naming the element), the last of them
// ending with the count of the others by kind.
func (f *fieldProblems) err() error {
	if len(f.list) == 0 {
		return nil
	}
	sort.SliceStable(f.list, func(i, j int) bool { return f.list[i].index < f.list[j].index })
	shown := f.list[:min(len(f.list), MaxProblems)]
	errs := make([]error, len(shown))
	for i, p := range shown {
		e := &InvalidError{Field: f.field, Msg: p.msg()}
		if p.index >= 0 {
			e.Index, e.Indexed = p.index, true
		}
		errs[i] = e
	}
	if rest := f.list[len(shown):]; len(rest) > 0 {
		last := errs[len(errs)-1].(*InvalidError)
		last.Msg += "\n" + moreText(rest)
	}
	return errors.Join(errs...)
}

// joinProblems joins the problems of several fields into one flat list (as
// errors.Join, but a joined error among errs gives its errors, not itself):
// a caller sees one error per problem.
func joinProblems(errs ...error) error {
	var flat []error
	for _, err := range errs {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			flat = append(flat, j.Unwrap()...)
		} else if err != nil {
			flat = append(flat, err)
		}
	}
	return errors.Join(flat...)
}

// moreText counts problems by kind, in the order the kinds first appear:
// "... and 19,995 more exclusions outside the pool's blocks (only the first
// 5 problems are listed)".
func moreText(rest []fieldProblem) string {
	var kinds []string
	n := map[string]int{}
	for _, p := range rest {
		if n[p.kind] == 0 {
			kinds = append(kinds, p.kind)
		}
		n[p.kind]++
	}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = Thousands(n[k]) + " more " + k
	}
	return fmt.Sprintf("... and %s (only the first %d problems are listed)", strings.Join(parts, " and "), MaxProblems)
}

// Thousands writes n with a comma between groups of three digits: 19,995.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
