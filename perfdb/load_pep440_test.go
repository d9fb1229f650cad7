package perfdb

import (
	"sort"
	"testing"

	"pgregory.net/rapid"
)

func TestCompareVersionsPEP440Order(t *testing.T) {
	// Ascending, as packaging.version orders them (non-PEP 440 strings first).
	want := []string{
		"latest", "nightly",
		"0.1.dev19262", "0.1a1", "0.1", "0.1.post1",
		"0.5.6", "0.5.6.post2", "0.5.9", "0.5.10", "0.5.14",
		"0.14.0", "0.18.0", "0.19.0",
		"0.22.0.dev3", "0.22.0rc1", "0.22.0", "0.22.0.post1.dev0", "0.22.0.post1", "0.24.0",
		"1.2.0rc5", "1.3.0.dev1", "1.3.0a2", "1.3.0b1", "1.3.0rc2", "1.3.0rc10", "1.3.0rc15", "1.3.0rc20", "1.3.0",
		"1!0.1",
	}
	got := append([]string(nil), want...)
	sort.Slice(got, func(i, j int) bool { return got[len(got)-1-i] < got[len(got)-1-j] }) // scramble deterministically
	sort.SliceStable(got, func(i, j int) bool { return CompareVersions(got[i], got[j]) < 0 })
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order = %v\nwant    %v", got, want)
		}
	}
	for _, c := range []struct{ a, b string }{{"1.0", "1.0.0"}, {"1.0RC1", "1.0rc1"}, {"v2.1", "2.1"}, {"1.0-1", "1.0.post1"}} {
		pa, _ := parsePEP440(c.a)
		pb, _ := parsePEP440(c.b)
		if comparePEP440(pa, pb) != 0 {
			t.Errorf("%s and %s should be equal by PEP 440", c.a, c.b)
		}
	}
	for _, s := range []string{"", "abc", "1..2", "1.0-", "1.0+"} {
		if _, ok := parsePEP440(s); ok {
			t.Errorf("%q parsed as PEP 440", s)
		}
	}
}

// versionGen generates PEP 440 versions and a few non-versions.
func versionGen() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.IntRange(0, 9).Draw(t, "nonpep") == 0 {
			return rapid.SampledFrom([]string{"latest", "main", "x.y"}).Draw(t, "raw")
		}
		v := rapid.SampledFrom([]string{"0", "1", "2", "10"}).Draw(t, "major") + "." + rapid.SampledFrom([]string{"0", "1", "5", "14"}).Draw(t, "minor")
		if rapid.Bool().Draw(t, "patch") {
			v += "." + rapid.SampledFrom([]string{"0", "2", "6"}).Draw(t, "p")
		}
		v += rapid.SampledFrom([]string{"", "a1", "b2", "rc1", "rc10"}).Draw(t, "pre")
		v += rapid.SampledFrom([]string{"", ".post1", ".post2"}).Draw(t, "post")
		v += rapid.SampledFrom([]string{"", ".dev0", ".dev19262"}).Draw(t, "dev")
		return v
	})
}

func TestCompareVersionsIsATotalOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := versionGen().Draw(t, "a"), versionGen().Draw(t, "b"), versionGen().Draw(t, "c")
		if CompareVersions(a, a) != 0 {
			t.Fatalf("%s != itself", a)
		}
		if CompareVersions(a, b) != -CompareVersions(b, a) {
			t.Fatalf("antisymmetry fails for %s, %s", a, b)
		}
		if CompareVersions(a, b) <= 0 && CompareVersions(b, c) <= 0 && CompareVersions(a, c) > 0 {
			t.Fatalf("transitivity fails for %s ≤ %s ≤ %s", a, b, c)
		}
	})
}
