package measure

import (
	"errors"
	"fmt"
	"strings"
)

// A rule's engine_config value may be computed from the run it deploys: a
// string starting with "=" is an integer expression over the run's isl, osl,
// concurrency (clients per worker) and tp, with + - * /, parentheses and
// ceil_to(x, m) (x rounded up to a multiple of m), the arithmetic launch
// scripts use (InferenceMAX: --max-num-seqs $CONC, --max_num_tokens rounded
// up to 64, --context-length $((ISL + OSL + 20))). Division is integer
// division, as in the shell.

// exprVars are the run's values an expression may name.
type exprVars struct {
	ISL, OSL, Concurrency, TP int
}

// exprLimit bounds every intermediate value, so an expression cannot overflow.
const exprLimit = 1 << 40

// isExpr reports whether v is an expression value.
func isExpr(v any) (string, bool) {
	s, ok := v.(string)
	if !ok || !strings.HasPrefix(s, "=") {
		return "", false
	}
	return strings.TrimSpace(s[1:]), true
}

// evalExpr evaluates the expression src (without its leading "=") for vars.
func evalExpr(src string, vars exprVars) (int64, error) {
	return parseExpr(src, vars, false)
}

// checkExpr reports an expression no run can evaluate: its syntax and names.
// Errors that depend on the run's values (a division by zero, a value out of
// range, a multiple ≤ 0) are left to the runs that meet them (evalExpr).
func checkExpr(src string) error {
	_, err := parseExpr(src, exprVars{}, true)
	return err
}

// parseExpr parses src and evaluates it for vars; syntaxOnly ignores the
// value-dependent errors (checkExpr).
func parseExpr(src string, vars exprVars, syntaxOnly bool) (int64, error) {
	p := exprParser{src: src, vars: vars, syntaxOnly: syntaxOnly}
	v, err := p.sum()
	if err != nil {
		return 0, fmt.Errorf("expression %q: %w", src, err)
	}
	p.space()
	if p.pos < len(p.src) {
		return 0, fmt.Errorf("expression %q: unexpected %q at %d (want + - * / between values)", src, p.src[p.pos:], p.pos)
	}
	return v, nil
}

type exprParser struct {
	src        string
	pos        int
	vars       exprVars
	deep       int
	syntaxOnly bool // value-dependent errors ignored (checkExpr)
}

func (p *exprParser) space() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
}

// valueErr is a value-dependent error, or nil when only the syntax is checked.
func (p *exprParser) valueErr(msg string) error {
	if p.syntaxOnly {
		return nil
	}
	return errors.New(msg)
}

// sum: term (("+" | "-") term)*
func (p *exprParser) sum() (int64, error) { return p.chain("+-", p.term) }

// term: factor (("*" | "/") factor)*
func (p *exprParser) term() (int64, error) { return p.chain("*/", p.factor) }

// chain parses operand (op operand)* for the operators ops of one precedence
// level, left to right, each intermediate value within ±exprLimit.
func (p *exprParser) chain(ops string, operand func() (int64, error)) (int64, error) {
	v, err := operand()
	if err != nil {
		return 0, err
	}
	for {
		p.space()
		if p.pos >= len(p.src) || !strings.ContainsRune(ops, rune(p.src[p.pos])) {
			return v, nil
		}
		op := p.src[p.pos]
		p.pos++
		w, err := operand()
		if err != nil {
			return 0, err
		}
		switch op {
		case '+':
			v += w
		case '-':
			v -= w
		case '*':
			v *= w
		case '/':
			if w == 0 {
				if err := p.valueErr("division by zero"); err != nil {
					return 0, err
				}
				v, w = 0, 1
			}
			v /= w
		}
		if v > exprLimit || v < -exprLimit {
			if err := p.valueErr("value out of range"); err != nil {
				return 0, err
			}
			v = 0
		}
	}
}

// factor: number | name | "ceil_to" "(" sum "," sum ")" | "(" sum ")"
func (p *exprParser) factor() (int64, error) {
	p.deep++
	defer func() { p.deep-- }()
	if p.deep > 64 {
		return 0, fmt.Errorf("nested too deeply")
	}
	p.space()
	if p.pos >= len(p.src) {
		return 0, fmt.Errorf("ends early: want a number, isl, osl, concurrency, tp, ceil_to(x, m) or (…)")
	}
	c := p.src[p.pos]
	switch {
	case c >= '0' && c <= '9':
		var v int64
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			v = v*10 + int64(p.src[p.pos]-'0')
			if v > exprLimit {
				return 0, fmt.Errorf("number out of range")
			}
			p.pos++
		}
		return v, nil
	case c == '(':
		p.pos++
		v, err := p.sum()
		if err != nil {
			return 0, err
		}
		return v, p.expect(')')
	case c >= 'a' && c <= 'z' || c == '_':
		start := p.pos
		for p.pos < len(p.src) && (p.src[p.pos] >= 'a' && p.src[p.pos] <= 'z' || p.src[p.pos] == '_') {
			p.pos++
		}
		switch name := p.src[start:p.pos]; name {
		case "isl":
			return int64(p.vars.ISL), nil
		case "osl":
			return int64(p.vars.OSL), nil
		case "concurrency":
			return int64(p.vars.Concurrency), nil
		case "tp":
			return int64(p.vars.TP), nil
		case "ceil_to":
			if err := p.expect('('); err != nil {
				return 0, err
			}
			x, err := p.sum()
			if err != nil {
				return 0, err
			}
			if err := p.expect(','); err != nil {
				return 0, err
			}
			m, err := p.sum()
			if err != nil {
				return 0, err
			}
			if err := p.expect(')'); err != nil {
				return 0, err
			}
			if m <= 0 {
				return 0, p.valueErr(fmt.Sprintf("ceil_to(x, %d): want a multiple > 0", m))
			}
			if x <= 0 {
				return x / m * m, nil
			}
			return (x + m - 1) / m * m, nil
		default:
			return 0, fmt.Errorf("unknown name %q (want isl, osl, concurrency, tp or ceil_to)", name)
		}
	}
	return 0, fmt.Errorf("unexpected %q at %d", p.src[p.pos:], p.pos)
}

func (p *exprParser) expect(c byte) error {
	p.space()
	if p.pos >= len(p.src) || p.src[p.pos] != c {
		return fmt.Errorf("want %q at %d", c, p.pos)
	}
	p.pos++
	return nil
}
