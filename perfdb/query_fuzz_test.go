package perfdb

import (
	"strings"
	"testing"
)

// FuzzParseDatabaseMode: never panics; accepts exactly the four modes and
// names them in its one-line error otherwise.
func FuzzParseDatabaseMode(f *testing.F) {
	for _, s := range []string{"SILICON", "HYBRID", "EMPIRICAL", "SOL", "sol", "", "SOL_FULL"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseDatabaseMode(s)
		if err != nil {
			if !strings.Contains(err.Error(), "SILICON, HYBRID, EMPIRICAL, SOL") {
				t.Fatalf("error does not list the modes: %v", err)
			}
			return
		}
		if string(m) != s {
			t.Fatalf("ParseDatabaseMode(%q) = %q", s, m)
		}
	})
}

// FuzzParseTransferPolicy: never panics; a parsed policy round-trips through
// its kind list.
func FuzzParseTransferPolicy(f *testing.F) {
	for _, s := range []string{"", "off", "balanced", "xshape,xquant", " Aggressive ", "xop,,xprofile", "bogus"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseTransferPolicy(s)
		if err != nil {
			return
		}
		var kinds []string
		for _, k := range []struct {
			on   bool
			name string
		}{{p.XShape, "xshape"}, {p.XQuant, "xquant"}, {p.XProfile, "xprofile"}, {p.XOp, "xop"}} {
			if k.on {
				kinds = append(kinds, k.name)
			}
		}
		spec := strings.Join(kinds, ",")
		if spec == "" {
			spec = "off"
		}
		back, err := ParseTransferPolicy(spec)
		if err != nil || back != p {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, p, spec, back, err)
		}
	})
}
