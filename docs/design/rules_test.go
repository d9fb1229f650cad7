package design

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// errorTextMatch finds production code that decides on an error's text: a
// strings function applied to x.Error(), or x.Error() compared with a string.
// Errors are matched with errors.Is / errors.As (ARCHITECTURE.md, quality bar);
// tests may compare messages, since the message is behaviour they assert.
var errorTextMatch = regexp.MustCompile(`strings\.(?:HasPrefix|HasSuffix|Contains|ContainsAny|Index|EqualFold|Compare|TrimPrefix|CutPrefix)\([^()]*\.Error\(\)|\.Error\(\)\s*[!=]=|[!=]=\s*[A-Za-z_.]+\.Error\(\)`)

// TestNoErrorTextMatching: no production code branches on an error message.
func TestNoErrorTextMatching(t *testing.T) {
	var bad []string
	for p, text := range goSources(t) {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		for i, line := range strings.Split(text, "\n") {
			if errorTextMatch.MatchString(line) {
				bad = append(bad, p+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d lines decide on an error's text (use errors.Is/As or a typed error):\n%s", len(bad), strings.Join(bad, "\n"))
	}
}
