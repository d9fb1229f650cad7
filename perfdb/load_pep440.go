package perfdb

import (
	"regexp"
	"strconv"
	"strings"
)

// pep440 is a parsed PEP 440 version ("0.22.0", "1.3.0rc10", "0.5.6.post2",
// "0.1.dev19262"). aiconfigurator orders version directories with
// packaging.version / pep440_rs; the shared layer depends on it.
type pep440 struct {
	epoch   int
	release []int
	preL    int // -1: none; 0 a, 1 b, 2 rc
	preN    int
	post    int // -1: none
	dev     int // -1: none
	local   string
}

var pep440Re = regexp.MustCompile(`^v?(?:(\d+)!)?(\d+(?:\.\d+)*)` +
	`(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d+)?)?` +
	`(?:-(\d+)|[-_.]?(post|rev|r)[-_.]?(\d+)?)?` +
	`(?:[-_.]?(dev)[-_.]?(\d+)?)?` +
	`(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?$`)

// parsePEP440 parses a version; ok is false when it is not PEP 440.
func parsePEP440(s string) (v pep440, ok bool) {
	m := pep440Re.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return v, false
	}
	atoi := func(x string) int {
		if x == "" {
			return 0
		}
		n, err := strconv.Atoi(x)
		if err != nil {
			ok = false
		}
		return n
	}
	ok = true
	v.epoch = atoi(m[1])
	for _, p := range strings.Split(m[2], ".") {
		v.release = append(v.release, atoi(p))
	}
	v.preL, v.post, v.dev = -1, -1, -1
	switch m[3] {
	case "a", "alpha":
		v.preL = 0
	case "b", "beta":
		v.preL = 1
	case "c", "rc", "pre", "preview":
		v.preL = 2
	}
	if v.preL >= 0 {
		v.preN = atoi(m[4])
	}
	switch {
	case m[5] != "":
		v.post = atoi(m[5])
	case m[6] != "":
		v.post = atoi(m[7])
	}
	if m[8] != "" {
		v.dev = atoi(m[9])
	}
	v.local = m[10]
	return v, ok
}

// comparePEP440 orders two parsed versions like packaging.version: epoch,
// release (trailing zeros ignored), then X.devN < X.aN < X.bN < X.rcN < X < X.postN,
// dev releases of each before it, then local labels.
func comparePEP440(a, b pep440) int {
	if c := cmpInt(a.epoch, b.epoch); c != 0 {
		return c
	}
	n := max(len(a.release), len(b.release))
	for i := 0; i < n; i++ {
		var x, y int
		if i < len(a.release) {
			x = a.release[i]
		}
		if i < len(b.release) {
			y = b.release[i]
		}
		if c := cmpInt(x, y); c != 0 {
			return c
		}
	}
	// pre: dev-only releases sort before any pre-release; no pre sorts after all.
	preKey := func(v pep440) (int, int) {
		switch {
		case v.preL < 0 && v.post < 0 && v.dev >= 0:
			return -1, 0
		case v.preL < 0:
			return 3, 0
		}
		return v.preL, v.preN
	}
	al, an := preKey(a)
	bl, bn := preKey(b)
	if c := cmpInt(al, bl); c != 0 {
		return c
	}
	if c := cmpInt(an, bn); c != 0 {
		return c
	}
	if c := cmpInt(a.post, b.post); c != 0 { // none (-1) < post0
		return c
	}
	devKey := func(v pep440) int {
		if v.dev < 0 {
			return int(^uint(0) >> 1)
		}
		return v.dev
	}
	if c := cmpInt(devKey(a), devKey(b)); c != 0 {
		return c
	}
	return compareLocal(a.local, b.local)
}

// compareLocal orders local labels: none < any; segment-wise, numeric segments
// above alphanumeric ones, numbers numerically, strings lexically.
func compareLocal(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" {
		return -1
	}
	if b == "" {
		return 1
	}
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' || r == '_' })
	}
	as, bs := split(a), split(b)
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, ex := strconv.Atoi(as[i])
		y, ey := strconv.Atoi(bs[i])
		switch {
		case ex == nil && ey == nil:
			if c := cmpInt(x, y); c != 0 {
				return c
			}
		case ex == nil:
			return 1
		case ey == nil:
			return -1
		default:
			if c := strings.Compare(as[i], bs[i]); c != 0 {
				return c
			}
		}
	}
	return cmpInt(len(as), len(bs))
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CompareVersions orders two version strings: PEP 440 versions by PEP 440,
// any PEP 440 version above any non-PEP 440 string, and non-PEP 440 strings
// lexically (aiconfigurator's NewestFirstKey). It returns -1, 0 or +1.
func CompareVersions(a, b string) int {
	pa, oka := parsePEP440(a)
	pb, okb := parsePEP440(b)
	switch {
	case oka && okb:
		if c := comparePEP440(pa, pb); c != 0 {
			return c
		}
		return strings.Compare(a, b) // equal by PEP 440 ("1.0" vs "1.0.0"): stable tie-break
	case oka:
		return 1
	case okb:
		return -1
	}
	return strings.Compare(a, b)
}
