package perfdb

import (
	"regexp"
	"slices"
	"strings"
)

// Deployed engine versions onto perf-data versions: a run measured (or a
// deployment planned) on an engine version without perf data of its own is
// priced at the nearest version that has (refine/calibrate's accuracy rows,
// --deployed-version of eval and sweep).

var pep440Like = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)*`)

// IsRelease reports whether a perf-data version may stand in for another measured
// version: PEP 440 and not a development snapshot (".devN"), which is a partial
// collection (b200 vLLM 0.1.dev19262 holds only the KDA table) taken only when
// measured exactly.
func IsRelease(v string) bool {
	return pep440Like.MatchString(v) && !strings.Contains(strings.ToLower(v), ".dev")
}

// NearestVersion maps a measured (deployed) engine version onto the available perf-data versions:
// the same version; else the newest one below it (PEP 440 order); else the oldest
// above it; a version not stated or not PEP 440 (a nightly) maps to the newest.
// The mapping text records which rule applied.
func NearestVersion(measured string, available []string) (string, string, bool) {
	vs := slices.Clone(available)
	slices.SortFunc(vs, CompareVersions)
	if len(vs) == 0 {
		return "", "", false
	}
	newest := vs[len(vs)-1]
	switch {
	case measured == "":
		return newest, "not stated → newest " + newest, true
	case slices.Contains(vs, measured):
		return measured, "exact", true
	case !pep440Like.MatchString(measured):
		return newest, measured + " (not PEP 440) → newest " + newest, true
	}
	below := ""
	for _, v := range vs {
		if CompareVersions(v, measured) < 0 && IsRelease(v) {
			below = v
		}
	}
	if below != "" {
		return below, measured + " → " + below + " (newest below)", true
	}
	for _, v := range vs {
		if IsRelease(v) {
			return v, measured + " → " + v + " (oldest above)", true
		}
	}
	return newest, measured + " → newest " + newest, true
}
