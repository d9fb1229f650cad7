package design

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	// sectionRef is a cited section: "SCHEDULERS.md §4.3" (the first number of a
	// range such as "§3.3–§3.5" is checked by the same pattern on each end).
	sectionRef = regexp.MustCompile(`\b(ARCHITECTURE|QUEUEING|SCHEDULERS|PERFDB|GO_STACK)\.md §([0-9]+(?:\.[0-9]+)?)`)
	// rangeEnd is the far end of a cited range: "§3.3–§3.5" or "§2.4–2.5".
	rangeEnd = regexp.MustCompile(`\b(ARCHITECTURE|QUEUEING|SCHEDULERS|PERFDB|GO_STACK)\.md §[0-9.]+–§?([0-9]+(?:\.[0-9]+)?)`)
	// ruleRef is a numbered engine rule: V-R3, S-R2, T-D1, V-P4, M-R1.
	ruleRef = regexp.MustCompile(`\b([VSTM]-[RPD][0-9]+)\b`)
	// fileRef is any design document named in a comment.
	fileRef = regexp.MustCompile(`\b(ARCHITECTURE|QUEUEING|SCHEDULERS|PERFDB|GO_STACK)\.md\b`)
)

// goSources returns every non-generated .go file of the module (the repository
// root is two levels up), with its text.
func goSources(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join("..", "..")
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && d.Name() != ".." && d.Name() != "." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = string(b)
		return nil
	})
	if err != nil {
		t.Fatalf("walking the module: %v", err)
	}
	if len(out) < 50 {
		t.Fatalf("found only %d Go files under %s: the walk is wrong", len(out), root)
	}
	return out
}

// headings returns the section numbers of a design document's headings:
// "## 3. SGLang" → "3", "### 3.7 Output processing" → "3.7".
func headings(t *testing.T, doc string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(doc + ".md")
	if err != nil {
		t.Fatalf("design document %s.md is missing from docs/design: %v", doc, err)
	}
	h := regexp.MustCompile(`(?m)^#{2,4} ([0-9]+(?:\.[0-9]+)?)\.?\s`)
	out := map[string]bool{}
	for _, m := range h.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	return out
}

// TestCitedSectionsExist: every "DOC.md §N" cited in Go resolves to a heading of
// docs/design/DOC.md, so a rule number in a comment can be followed in the repo.
func TestCitedSectionsExist(t *testing.T) {
	src := goSources(t)
	heads := map[string]map[string]bool{}
	var bad []string
	for p, text := range src {
		for _, m := range fileRef.FindAllStringSubmatch(text, -1) {
			if heads[m[1]] == nil {
				heads[m[1]] = headings(t, m[1])
			}
		}
		for _, re := range []*regexp.Regexp{sectionRef, rangeEnd} {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				if !heads[m[1]][m[2]] {
					bad = append(bad, p+": "+m[1]+".md §"+m[2])
				}
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d citations name a section docs/design does not have:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// TestCitedRulesExist: every engine rule id cited in Go (V-R6, S-R4, T-R1, …) is
// defined in docs/design/SCHEDULERS.md.
func TestCitedRulesExist(t *testing.T) {
	b, err := os.ReadFile("SCHEDULERS.md")
	if err != nil {
		t.Fatalf("docs/design/SCHEDULERS.md: %v", err)
	}
	defined := map[string]bool{}
	for _, m := range ruleRef.FindAllStringSubmatch(string(b), -1) {
		defined[m[1]] = true
	}
	var bad []string
	cited := 0
	for p, text := range goSources(t) {
		for _, m := range ruleRef.FindAllStringSubmatch(text, -1) {
			cited++
			if !defined[m[1]] {
				bad = append(bad, p+": "+m[1])
			}
		}
	}
	if cited == 0 {
		t.Fatal("no rule ids cited anywhere: the pattern is wrong")
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d cited rule ids are not in docs/design/SCHEDULERS.md:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}
