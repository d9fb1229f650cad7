package engineconf

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxDepth bounds YAML nesting (engine configs nest two or three levels) and
// maxKeys the keys of a file once aliases are expanded (alias bombs).
const (
	maxDepth = 8
	maxKeys  = 10000
)

// yamlMapping returns the root mapping of data when data parses as a YAML
// document whose root is a mapping (nil otherwise: CLI argument files such as
// "--max-num-seqs 256" parse as plain scalars).
func yamlMapping(data []byte) *yaml.Node {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil || len(n.Content) != 1 || n.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	// A config key is a name: a "key" that is a flag or holds spaces is a line of
	// CLI arguments whose JSON value YAML read as a mapping (--speculative-config
	// '{"method": "mtp"}').
	m := n.Content[0]
	for i := 0; i < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && (strings.HasPrefix(k.Value, "-") || strings.ContainsAny(k.Value, " \t")) {
			return nil
		}
	}
	return m
}

// parseYAML flattens a YAML mapping into keys joined with '.'; a sequence value
// is written comma-separated; null is "".
func parseYAML(root *yaml.Node) ([]keyValue, error) {
	var out []keyValue
	var walk func(m *yaml.Node, prefix string, depth int) error
	walk = func(m *yaml.Node, prefix string, depth int) error {
		if depth > maxDepth {
			return fmt.Errorf("line %d: nested deeper than %d levels", m.Line, maxDepth)
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			if len(out) >= maxKeys {
				return fmt.Errorf("line %d: more than %d keys (aliases expanded); an engine config has a few dozen", k.Line, maxKeys)
			}
			if k.Kind != yaml.ScalarNode || k.Value == "" {
				return fmt.Errorf("line %d: a key must be a non-empty name", k.Line)
			}
			if k.Value == "<<" {
				return fmt.Errorf("line %d: YAML merge keys (<<) are not supported; write the keys out", k.Line)
			}
			key := k.Value
			if prefix != "" {
				key = prefix + "." + k.Value
			}
			for v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			switch v.Kind {
			case yaml.MappingNode:
				if err := walk(v, key, depth+1); err != nil {
					return err
				}
			case yaml.SequenceNode:
				parts := make([]string, 0, len(v.Content))
				for _, e := range v.Content {
					if e.Kind != yaml.ScalarNode {
						return fmt.Errorf("line %d: key %s: a list of lists or mappings is not an engine setting", e.Line, key)
					}
					parts = append(parts, e.Value)
				}
				out = append(out, keyValue{key: key, value: strings.Join(parts, ","), line: k.Line})
			case yaml.ScalarNode:
				val := v.Value
				if v.Tag == "!!null" {
					val = ""
				}
				out = append(out, keyValue{key: key, value: val, line: k.Line})
			default:
				return fmt.Errorf("line %d: key %s: unsupported YAML value", k.Line, key)
			}
		}
		return nil
	}
	if err := walk(root, "", 0); err != nil {
		return nil, err
	}
	return out, nil
}

// parseCLI reads "--flag value" arguments: '#' starts a comment line, a trailing
// backslash continues a line, single and double quotes group words, "--k=v" is
// "--k v". A flag takes the words up to the next flag as its value (joined by one
// space; none for a bare boolean flag). Words before the first flag are
// positional (the command — "python3 -m module" included — and the model) and
// listed as ignored.
func parseCLI(data []byte) ([]keyValue, error) {
	words, err := splitWords(string(data))
	if err != nil {
		return nil, err
	}
	var out []keyValue
	cur := -1
	for i, w := range words {
		// "python3 -m sglang.launch_server": the interpreter's -m is part of the command.
		if cur == -1 && w.text == "-m" && i > 0 && strings.HasPrefix(words[i-1].text, "python") {
			out = append(out, keyValue{key: w.text, line: w.line, positional: true})
			continue
		}
		if isFlag(w.text) {
			k, v, hasEq := strings.Cut(w.text, "=")
			if normaliseKey(k) == "" {
				return nil, fmt.Errorf("line %d: %q is not a flag name", w.line, w.text)
			}
			out = append(out, keyValue{key: k, value: v, line: w.line, flag: true})
			cur = len(out) - 1
			if hasEq {
				cur = -2 // "--k=v" takes no further words
			}
			continue
		}
		switch cur {
		case -1:
			out = append(out, keyValue{key: w.text, line: w.line, positional: true})
		case -2:
			return nil, fmt.Errorf("line %d: %q follows %s=…, which already has its value", w.line, w.text, out[len(out)-1].key)
		default:
			if out[cur].value != "" {
				out[cur].value += " "
			}
			out[cur].value += w.text
		}
	}
	return out, nil
}

// isFlag reports a flag word: "--name" or "-name" (a letter after one dash; "-1"
// is a value).
func isFlag(w string) bool {
	if strings.HasPrefix(w, "--") {
		return true
	}
	return len(w) >= 2 && w[0] == '-' && (w[1] >= 'a' && w[1] <= 'z' || w[1] >= 'A' && w[1] <= 'Z')
}

// word is one shell word and the line it starts on.
type word struct {
	text string
	line int
}

// splitWords splits s into shell-like words (see parseCLI).
func splitWords(s string) ([]word, error) {
	var out []word
	var b strings.Builder
	line, start := 1, 1
	in := false // inside a word
	var q rune  // open quote
	comment := false
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if comment {
			if r == '\n' {
				comment = false
				line++
			}
			continue
		}
		switch {
		case q != 0:
			if r == q {
				q = 0
				continue
			}
			if r == '\n' {
				line++
			}
			b.WriteRune(r)
		case r == '\'' || r == '"':
			if !in {
				in, start = true, line
			}
			q = r
		case r == '\\' && i+1 < len(rs) && rs[i+1] == '\n':
			i++
			line++
		case r == '\\' && i+1 < len(rs) && rs[i+1] == '\r' && i+2 < len(rs) && rs[i+2] == '\n':
			i += 2
			line++
		case r == '#' && !in:
			comment = true
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			if in {
				out = append(out, word{b.String(), start})
				b.Reset()
				in = false
			}
			if r == '\n' {
				line++
			}
		default:
			if !in {
				in, start = true, line
			}
			b.WriteRune(r)
		}
	}
	if q != 0 {
		return nil, fmt.Errorf("line %d: unclosed %c quote", start, q)
	}
	if in {
		out = append(out, word{b.String(), start})
	}
	return out, nil
}

// parseBool reads the boolean spellings of argparse/YAML/Python.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("want true or false")
}

// parseInt reads a decimal integer in [lo, 2^31).
func parseInt(v string, lo int) (int, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer")
	}
	if n < int64(lo) || n >= 1<<31 {
		return 0, fmt.Errorf("want an integer in %d..%d", lo, 1<<31-1)
	}
	return int(n), nil
}
