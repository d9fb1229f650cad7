package perfdb

import (
	"strings"
	"unicode"
)

// SuggestModel returns the stored model id a mistyped or differently spelt id most
// likely means: the one whose name, without its org, a "Meta-" prefix, case and
// punctuation, equals id's ("meta-llama/Llama-3.1-70B" → "meta-llama/Meta-Llama-3.1-70B").
// ok is false when no id, or more than one, matches.
func SuggestModel(id string, ids []string) (string, bool) {
	want := modelKey(id)
	found := ""
	for _, c := range ids {
		if modelKey(c) == want {
			if found != "" {
				return "", false
			}
			found = c
		}
	}
	return found, found != ""
}

// modelKey is a model id reduced for SuggestModel's comparison.
func modelKey(id string) string {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	id = strings.ToLower(id)
	id = strings.TrimPrefix(id, "meta-")
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, id)
}
