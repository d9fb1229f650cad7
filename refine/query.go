package refine

import (
	"context"
	"runtime"
	"strconv"
	"strings"

	"github.com/aicdb/aicdb/store"
)

// Threshold is one `column op number` comparison found in a user's SQL.
type Threshold struct {
	Column string
	Op     Op
	Value  float64
}

type tokKind int

const (
	tIdent tokKind = iota
	tNumber
	tOp
	tOther
)

type token struct {
	kind tokKind
	text string
}

// tokenize splits SQL into identifiers, numbers, comparison operators and other
// punctuation; string literals and comments are dropped (they never hold a
// threshold), quoted identifiers ("x", `x`, [x]) become identifiers.
func tokenize(sql string) []token {
	var out []token
	s := sql
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				i = len(s)
			} else {
				i += j + 4
			}
		case c == '\'':
			j := i + 1
			for j < len(s) {
				if s[j] == '\'' {
					if j+1 < len(s) && s[j+1] == '\'' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			out = append(out, token{tOther, "'"})
			i = j + 1
		case c == '"' || c == '`' || c == '[':
			end := byte('"')
			if c == '`' {
				end = '`'
			} else if c == '[' {
				end = ']'
			}
			j := strings.IndexByte(s[i+1:], end)
			if j < 0 {
				j = len(s) - i - 1
			}
			out = append(out, token{tIdent, strings.ToLower(s[i+1 : i+1+j])})
			i += j + 2
		case isIdentStart(c):
			j := i
			for j < len(s) && (isIdentStart(s[j]) || (s[j] >= '0' && s[j] <= '9')) {
				j++
			}
			out = append(out, token{tIdent, strings.ToLower(s[i:j])})
			i = j
		case (c >= '0' && c <= '9') || (c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9'):
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
				((s[j] == '+' || s[j] == '-') && j > i && (s[j-1] == 'e' || s[j-1] == 'E'))) {
				j++
			}
			out = append(out, token{tNumber, s[i:j]})
			i = j
		case c == '<' || c == '>' || c == '=' || c == '!':
			j := i + 1
			if j < len(s) && (s[j] == '=' || s[j] == '>') {
				j++
			}
			out = append(out, token{tOp, s[i:j]})
			i = j
		default:
			out = append(out, token{tOther, string(c)})
			i++
		}
	}
	return out
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}

func flip(o Op) Op {
	switch o {
	case LT:
		return GT
	case LE:
		return GE
	case GT:
		return LT
	}
	return LE
}

// ExtractThresholds finds comparisons of queueing columns with numeric literals in
// sql: `col < n`, `col <= n`, `col > n`, `col >= n`, `n < col` (…), `col BETWEEN a AND b`,
// with optional table qualifiers (`p.col`), a unary `+` or `-` on the number.
func ExtractThresholds(sql string) []Threshold {
	out, _ := extractThresholds(tokenize(sql))
	return out
}

// extractThresholds also returns the token positions of the thresholded columns.
func extractThresholds(toks []token) ([]Threshold, map[int]bool) {
	var out []Threshold
	at := map[int]bool{}
	num := func(i int) (float64, int, bool) { // number at i (with sign), next index
		sign := 1.0
		if i < len(toks) && toks[i].kind == tOther && (toks[i].text == "-" || toks[i].text == "+") {
			if toks[i].text == "-" {
				sign = -1
			}
			i++
		}
		if i >= len(toks) || toks[i].kind != tNumber {
			return 0, i, false
		}
		v, err := strconv.ParseFloat(toks[i].text, 64)
		if err != nil {
			return 0, i, false
		}
		return sign * v, i + 1, true
	}
	op := func(t token) (Op, bool) {
		switch t.text {
		case "<", "<=", ">", ">=":
			return Op(t.text), true
		}
		return "", false
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind != tIdent || store.QueueingIndex(t.text) < 0 {
			continue
		}
		col := t.text
		if i+1 < len(toks) {
			if o, ok := op(toks[i+1]); ok {
				if v, _, ok := num(i + 2); ok {
					out = append(out, Threshold{col, o, v})
					at[i] = true
				}
			}
			if toks[i+1].kind == tIdent && toks[i+1].text == "between" {
				if a, j, ok := num(i + 2); ok && j < len(toks) && toks[j].text == "and" {
					if b, _, ok := num(j + 1); ok {
						out = append(out, Threshold{col, GE, a}, Threshold{col, LE, b})
						at[i] = true
					}
				}
			}
		}
		// number op column (a qualifier "x." may sit between).
		j := i - 1
		if j >= 1 && toks[j].text == "." && toks[j-1].kind == tIdent {
			j -= 2
		}
		if j >= 1 {
			if o, ok := op(toks[j]); ok && toks[j-1].kind == tNumber {
				if v, err := strconv.ParseFloat(toks[j-1].text, 64); err == nil {
					if j >= 2 && toks[j-2].text == "-" {
						v = -v
					}
					out = append(out, Threshold{col, flip(o), v})
					at[i] = true
				}
			}
		}
	}
	return out, at
}

// QueryScope says which stored rows a query can read, judged by the relations it
// names: only `pareto` → pareto rows; otherwise every row.
func QueryScope(sql string) (paretoOnly bool) {
	names := map[string]bool{}
	for _, t := range tokenize(sql) {
		if t.kind == tIdent {
			names[t.text] = true
		}
	}
	if !names["pareto"] {
		return false
	}
	for _, n := range []string{"operating_points", "points", "best_configs", "quantitative_results"} {
		if names[n] {
			return false
		}
	}
	return true
}

// QueryStats reports what PrepareQuery did.
type QueryStats struct {
	Thresholds []Threshold
	Straddlers int // rows whose stored numbers do not decide a threshold
	Evaluated  int // rows resolved with the evaluator and persisted
	Unresolved int // straddlers the evaluator could not resolve (no quantitative tier)
	// Skipped straddlers were left unevaluated: the answer did not depend on them
	// (settled), or --max-evals ran out (then Settled is false).
	Skipped int
	Settled bool
}

// PrepareQuery is the first pass of the two-pass design (GO_STACK.md §2.4–2.5): it
// finds the thresholds on queueing columns in the user's SQL, the screening-tier rows
// in the query's scope for which the stored numbers do not decide one of them
// (Classify = Straddle, or the bracket and the stored screening value disagree), and
// resolves them lazily: in tokens_per_s_per_gpu order, in growing batches, until the
// user's answer no longer depends on the rows left (answerSettled; a top-k query
// stops once its top k is decided), or maxEvals (> 0) evaluations are spent. Each
// batch is persisted in one transaction. The user's SQL then runs unchanged on the
// real tables and views, where `points`/`pareto` present the quantitative values:
// every screening-tier row it returns is certain by its bracket.
func PrepareQuery(ctx context.Context, st *store.Store, ev Evaluator, sql string, maxEvals, workers int) (QueryStats, error) {
	var qs QueryStats
	qs.Thresholds = ExtractThresholds(sql)
	if len(qs.Thresholds) == 0 {
		return qs, nil
	}
	// The SQL prefilter keeps a superset of the undecided rows (undecidedSQL mirrors
	// Classify), so only candidates are scanned into Go; undecided is then exact.
	var conds []string
	var args []any
	for _, th := range qs.Thresholds {
		c, a := th.undecidedSQL()
		conds = append(conds, c)
		args = append(args, a...)
	}
	rows, err := st.SelectPoints(ctx, store.PointFilter{ParetoOnly: QueryScope(sql), Tier: store.TierScreening,
		Where: strings.Join(conds, " OR "), WhereArgs: args})
	if err != nil {
		return qs, err
	}
	var todo []store.Point
	for i := range rows {
		p := &rows[i]
		if p.Q.Tier != store.TierScreening {
			continue
		}
		for _, th := range qs.Thresholds {
			if undecided(p, th) {
				todo = append(todo, *p)
				break
			}
		}
	}
	qs.Straddlers = len(todo)
	expectEvaluations(ev, len(todo))
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Lazy resolution in tokens_per_s_per_gpu order, in growing batches, until the
	// user's answer no longer depends on the rows still unresolved (answerSettled):
	// a top-k query stops once its top k is decided.
	batch := 2 * workers
	if !lazySafe(sql) {
		batch = len(todo) // one round: resolve every straddler
	}
	for len(todo) > 0 {
		if maxEvals > 0 && qs.Evaluated >= maxEvals {
			break
		}
		settled, err := answerSettled(ctx, st, sql, qs.Thresholds, todo)
		if err != nil {
			return qs, err
		}
		if settled {
			qs.Settled = true
			break
		}
		n := min(batch, len(todo))
		if maxEvals > 0 {
			n = min(n, maxEvals-qs.Evaluated)
		}
		got, err := Resolve(ctx, st, ev, todo[:n], workers)
		if err != nil {
			return qs, err
		}
		qs.Evaluated += got
		qs.Unresolved += n - got // no quantitative tier (kept at screening)
		todo = todo[n:]
		batch *= 2
	}
	qs.Skipped = len(todo)
	if len(todo) == 0 {
		qs.Settled = true
	}
	return qs, nil
}

// undecided reports a screening row whose answer to th the stored numbers leave
// open, or where the bracket's verdict and the stored screening value disagree (the
// SQL compares the stored value, so such a row must be resolved to be answered right).
func undecided(p *store.Point, th Threshold) bool {
	v := Classify(p, th.Column, th.Op, th.Value)
	if v == Straddle {
		return true
	}
	sv := th.Op.holds(p.Q.V[store.QueueingIndex(th.Column)], th.Value)
	return (v == Pass) != sv
}

// undecidedSQL is a SQL condition on the points view that holds for every
// screening row undecided(p, th) holds for (NULLs count as undecided). It mirrors
// Classify: bracketed TTFT columns are decided when the bracket's verdict agrees
// with the stored value; other columns when the stored value fails.
func (th Threshold) undecidedSQL() (string, []any) {
	col := th.Column // a known queueing column name (ExtractThresholds checks)
	op := string(th.Op)
	holds := func(x string) string { return "(" + x + " " + op + " ?)" }
	valueFails := "NOT " + holds(col)
	nonBracket := "coalesce(" + holds(col) + ", 1)"
	pct, ok := bracketedColumn(col)
	if !ok {
		return nonBracket, []any{th.Value}
	}
	covers := "0"
	if pct.bracketCovers() {
		covers = "bracket_certain = 1"
	}
	var decided string
	var args []any
	switch th.Op {
	case LT, LE: // Fail: lo fails; Pass: lo holds and (covers, hi holds).
		decided = "((NOT " + holds("ttft_steady_p99_lo") + ") AND " + valueFails + ") OR (" +
			holds("ttft_steady_p99_lo") + " AND " + covers + " AND " + holds("ttft_steady_p99_hi") + " AND " + holds(col) + ")"
		args = []any{th.Value, th.Value, th.Value, th.Value, th.Value}
	default: // GT, GE. Pass: lo holds; Fail: lo fails and (covers, hi fails).
		decided = "(" + holds("ttft_steady_p99_lo") + " AND " + holds(col) + ") OR ((NOT " + holds("ttft_steady_p99_lo") +
			") AND " + covers + " AND (NOT " + holds("ttft_steady_p99_hi") + ") AND " + valueFails + ")"
		args = []any{th.Value, th.Value, th.Value, th.Value, th.Value}
	}
	return "CASE WHEN ttft_steady_p99_lo IS NULL OR ttft_steady_p99_hi IS NULL THEN " + nonBracket +
			" ELSE NOT coalesce(" + decided + ", 0) END",
		append([]any{th.Value}, args...)
}

// lazySafe reports whether the early stop of the lazy pre-pass is sound for sql:
// resolving a straddler may change every queueing column and its tier, so the
// answer must depend on them only through upper-bound thresholds (the optimistic
// value lo then bounds the effect) or as bare select-list items (shown, not used).
// Lower bounds, ORDER BY/GROUP BY/aggregates/expressions on a queueing column, or a
// filter on queueing_tier → resolve every straddler instead.
func lazySafe(sql string) bool {
	toks := tokenize(sql)
	ths, at := extractThresholds(toks)
	for _, th := range ths {
		if th.Op != LT && th.Op != LE {
			return false
		}
	}
	for i, t := range toks {
		if t.kind != tIdent || at[i] {
			continue
		}
		if store.QueueingIndex(t.text) < 0 && t.text != "queueing_tier" && t.text != "workload_fidelity" {
			continue
		}
		// A bare select-list item: [select|,] [qualifier .] col [,|from|as].
		j := i - 1
		if j >= 1 && toks[j].text == "." {
			j -= 2
		}
		prevOK := j >= 0 && (toks[j].text == "select" || toks[j].text == ",")
		nextOK := i+1 < len(toks) && (toks[i+1].text == "," || toks[i+1].text == "from" || toks[i+1].text == "as")
		if !prevOK || !nextOK {
			return false
		}
	}
	return true
}
