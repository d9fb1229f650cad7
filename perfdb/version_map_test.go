package perfdb

import "testing"

func TestNearestVersion(t *testing.T) {
	avail := []string{"0.24.0", "0.19.0", "0.22.0"}
	cases := []struct{ measured, want, mapping string }{
		{"", "0.24.0", "not stated → newest 0.24.0"},
		{"0.22.0", "0.22.0", "exact"},
		{"0.23.1", "0.22.0", "0.23.1 → 0.22.0 (newest below)"},
		{"0.17.0", "0.19.0", "0.17.0 → 0.19.0 (oldest above)"},
		{"0.30.0rc1", "0.24.0", "0.30.0rc1 → 0.24.0 (newest below)"},
		{"nightly-5b8c30d6", "0.24.0", "nightly-5b8c30d6 (not PEP 440) → newest 0.24.0"},
	}
	for _, c := range cases {
		got, mapping, ok := NearestVersion(c.measured, avail)
		if !ok || got != c.want || mapping != c.mapping {
			t.Errorf("%q: got %q (%q), want %q (%q)", c.measured, got, mapping, c.want, c.mapping)
		}
	}
	if _, _, ok := NearestVersion("0.1", nil); ok {
		t.Error("mapped onto no versions")
	}
	// A development snapshot stands in for no other version (b200 vLLM
	// 0.1.dev19262 holds only the KDA table): 0.17.0 maps to the oldest release above.
	if got, mapping, _ := NearestVersion("0.17.0", []string{"0.1.dev19262", "0.19.0", "0.24.0"}); got != "0.19.0" || mapping != "0.17.0 → 0.19.0 (oldest above)" {
		t.Errorf("0.17.0 → %s (%s), want 0.19.0 (oldest above)", got, mapping)
	}
	if got, mapping, _ := NearestVersion("0.1.dev19262", []string{"0.1.dev19262", "0.19.0"}); got != "0.1.dev19262" || mapping != "exact" {
		t.Errorf("0.1.dev19262 → %s (%s), want itself (exact)", got, mapping)
	}
	// trtllm release candidates order by PEP 440.
	if got, _, _ := NearestVersion("1.2.0rc2.post2", []string{"1.3.0rc10", "1.2.0rc5"}); got != "1.2.0rc5" {
		t.Errorf("1.2.0rc2.post2 → %s, want 1.2.0rc5 (oldest above)", got)
	}
}
