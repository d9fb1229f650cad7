package trace

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ServeGen describes a client pool as fitted distributions, not rows: per client, one
// chunk-<client>-trace.csv (per 600 s window: start, rate, cv, inter-arrival family
// and its two fitted parameters) and one chunk-<client>-dataset.json (per 6 h window:
// empirical PMFs of input and output tokens). ParseServeGen draws a concrete request
// stream from it, deterministically for a seed:
//
//   - per client and window with rate > 0, a renewal process from the window start
//     whose inter-arrival mean is 1/rate and whose coefficient of variation is cv, in
//     the family the pattern names (Gamma, Weibull; Exponential or empty = cv 1). The
//     fitted arg1/arg2 are not used: rate and cv pin the first two moments exactly,
//     which is what a queueing model sees;
//   - lengths drawn independently from the PMFs of the latest dataset window that
//     starts at or before the arrival window (an empty PMF falls back to the nearest
//     non-empty window of the same client, earlier first);
//   - each client has its own random stream (PCG seeded with (seed, client)), and
//     requests are merged across clients window by window, so memory is one window.

// sgWindow is one row of a chunk-N-trace.csv.
type sgWindow struct {
	startS, rate, cv float64
	pattern          string
	line             int
}

// sgPMF is an empirical distribution of token counts.
type sgPMF struct {
	values []int
	cdf    []float64 // cumulative, last = 1
}

func (p sgPMF) draw(r *rand.Rand) int {
	u := r.Float64()
	i := sort.SearchFloat64s(p.cdf, u)
	if i >= len(p.values) {
		i = len(p.values) - 1
	}
	return p.values[i]
}

type sgLengths struct {
	startS  float64
	in, out sgPMF
	inOK    bool
	outOK   bool
}

type sgClient struct {
	id      int
	windows []sgWindow
	lengths []sgLengths // sorted by startS
	rng     *rand.Rand
}

var chunkTrace = regexp.MustCompile(`^chunk-(\d+)-trace\.csv$`)

// ServeGenFiles lists the files of a ServeGen pool in a fixed order (client id, then
// trace before dataset): path is a pool directory or one chunk-N-trace.csv. The list
// is what the content hash covers.
func ServeGenFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var traces []string
	if st.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if chunkTrace.MatchString(e.Name()) {
				traces = append(traces, filepath.Join(path, e.Name()))
			}
		}
		if len(traces) == 0 {
			return nil, fmt.Errorf("%s: no chunk-<client>-trace.csv files: not a ServeGen client pool", path)
		}
	} else {
		if !chunkTrace.MatchString(filepath.Base(path)) {
			return nil, fmt.Errorf("%s: a ServeGen input is a pool directory or a chunk-<client>-trace.csv", path)
		}
		traces = []string{path}
	}
	sort.Slice(traces, func(i, j int) bool { return clientID(traces[i]) < clientID(traces[j]) })
	var out []string
	for _, t := range traces {
		d := strings.TrimSuffix(t, "-trace.csv") + "-dataset.json"
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("%s: its length distributions %s are missing", t, filepath.Base(d))
		}
		out = append(out, t, d)
	}
	return out, nil
}

func clientID(path string) int {
	m := chunkTrace.FindStringSubmatch(filepath.Base(path))
	n, _ := strconv.Atoi(m[1])
	return n
}

// ParseServeGen draws the request stream of a ServeGen pool (see the package comment
// on ServeGen) and emits it in arrival order.
func ParseServeGen(ctx context.Context, path string, o Options, emit func(Request) error) error {
	files, err := ServeGenFiles(path)
	if err != nil {
		return err
	}
	var clients []*sgClient
	for i := 0; i < len(files); i += 2 {
		c := &sgClient{id: clientID(files[i])}
		if c.windows, err = readFile(files[i], parseServeGenWindows); err != nil {
			return err
		}
		if c.lengths, err = readFile(files[i+1], parseServeGenDataset); err != nil {
			return err
		}
		c.rng = rand.New(rand.NewPCG(o.Seed, uint64(c.id)))
		clients = append(clients, c)
	}
	return drawServeGen(ctx, clients, emit)
}

func readFile[T any](path string, parse func(io.Reader, string) (T, error)) (T, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.Close()
	return parse(bufio.NewReader(f), path)
}

// windowStarts is the union of every client's window starts, ascending.
func windowStarts(clients []*sgClient) []float64 {
	set := map[float64]bool{}
	for _, c := range clients {
		for _, w := range c.windows {
			set[w.startS] = true
		}
	}
	out := make([]float64, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Float64s(out)
	return out
}

func drawServeGen(ctx context.Context, clients []*sgClient, emit func(Request) error) error {
	type drawn struct {
		client int
		r      Request
	}
	var buf []drawn
	next := make([]int, len(clients)) // each client's next window index
	n := 0
	for _, ws := range windowStarts(clients) {
		if err := ctx.Err(); err != nil {
			return err
		}
		buf = buf[:0]
		for ci, c := range clients {
			for next[ci] < len(c.windows) && c.windows[next[ci]].startS == ws {
				w := c.windows[next[ci]]
				end := ws + 600
				if next[ci]+1 < len(c.windows) {
					end = c.windows[next[ci]+1].startS
				}
				next[ci]++
				if w.rate <= 0 {
					continue
				}
				gap, err := iatSampler(w)
				if err != nil {
					return err
				}
				in, out, err := c.lengthsAt(ws, w)
				if err != nil {
					return err
				}
				for t := ws + gap(c.rng); t < end; t += gap(c.rng) {
					buf = append(buf, drawn{ci, Request{ArrivalMs: t * 1000, ISL: in.draw(c.rng), OSL: out.draw(c.rng)}})
				}
			}
		}
		sort.SliceStable(buf, func(i, j int) bool { return buf[i].r.ArrivalMs < buf[j].r.ArrivalMs })
		for _, d := range buf {
			if err := emit(d.r); err != nil {
				return err
			}
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("servegen pool: every window has rate 0: no requests")
	}
	return nil
}

// lengthsAt returns the input and output PMFs for a window starting at ws.
func (c *sgClient) lengthsAt(ws float64, w sgWindow) (sgPMF, sgPMF, error) {
	k := sort.Search(len(c.lengths), func(i int) bool { return c.lengths[i].startS > ws }) - 1
	if k < 0 {
		k = 0
	}
	pick := func(ok func(sgLengths) bool) int {
		for d := 0; d < len(c.lengths); d++ {
			if i := k - d; i >= 0 && ok(c.lengths[i]) {
				return i
			}
			if i := k + d; i < len(c.lengths) && ok(c.lengths[i]) {
				return i
			}
		}
		return -1
	}
	i := pick(func(l sgLengths) bool { return l.inOK })
	j := pick(func(l sgLengths) bool { return l.outOK })
	if i < 0 || j < 0 {
		return sgPMF{}, sgPMF{}, fmt.Errorf("servegen client %d: window at line %d has rate %v but its dataset has no length distribution", c.id, w.line, w.rate)
	}
	return c.lengths[i].in, c.lengths[j].out, nil
}

// iatSampler returns a sampler of inter-arrival times (seconds) with mean 1/rate and
// the window's cv in its family.
func iatSampler(w sgWindow) (func(*rand.Rand) float64, error) {
	mean := 1 / w.rate
	switch w.pattern {
	case "", "Exponential":
		return func(r *rand.Rand) float64 { return r.ExpFloat64() * mean }, nil
	case "Gamma":
		k := 1 / (w.cv * w.cv)
		theta := mean / k
		return func(r *rand.Rand) float64 { return gammaDraw(r, k) * theta }, nil
	case "Weibull":
		k := weibullShape(w.cv)
		lambda := mean / math.Exp(lgamma(1+1/k))
		return func(r *rand.Rand) float64 {
			return lambda * math.Pow(-math.Log(1-r.Float64()), 1/k)
		}, nil
	}
	return nil, fmt.Errorf("servegen window at line %d: pattern %q", w.line, w.pattern)
}

func lgamma(x float64) float64 { v, _ := math.Lgamma(x); return v }

// weibullShape solves cv² = Γ(1+2/k)/Γ(1+1/k)² − 1 for k by bisection (cv falls as k
// grows).
func weibullShape(cv float64) float64 {
	f := func(k float64) float64 { return math.Exp(lgamma(1+2/k)-2*lgamma(1+1/k)) - 1 - cv*cv }
	lo, hi := 0.02, 100.0
	for range 100 {
		mid := math.Sqrt(lo * hi)
		if f(mid) > 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return math.Sqrt(lo * hi)
}

// gammaDraw draws Gamma(k, 1) (Marsaglia–Tsang; k < 1 through Gamma(k+1)·U^(1/k),
// in log space so tiny shapes underflow to 0, never to NaN).
func gammaDraw(r *rand.Rand, k float64) float64 {
	if k < 1 {
		g := gammaDraw(r, k+1)
		u := 1 - r.Float64() // (0, 1]
		return math.Exp(math.Log(g) + math.Log(u)/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - r.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

// parseServeGenWindows reads a chunk-N-trace.csv: no header,
// window_start_s,rate_rps,cv,pattern,arg1,arg2 per row, starts strictly increasing.
func parseServeGenWindows(r io.Reader, file string) ([]sgWindow, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var out []sgWindow
	line := 0
	fail := func(field, format string, args ...any) error {
		return &RowError{File: file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		f := strings.Split(s, ",")
		if len(f) != 6 {
			return nil, fail("", "%d comma-separated fields: want 6 (window_start_s,rate_rps,cv,pattern,arg1,arg2)", len(f))
		}
		num := func(i int, name string) (float64, error) {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1e12 {
				return 0, fail(name, "%.40q: want a finite number ≥ 0", f[i])
			}
			return v, nil
		}
		w := sgWindow{pattern: f[3], line: line}
		var err error
		if w.startS, err = num(0, "window_start_s"); err != nil {
			return nil, err
		}
		if w.rate, err = num(1, "rate_rps"); err != nil {
			return nil, err
		}
		if w.cv, err = num(2, "cv"); err != nil {
			return nil, err
		}
		for i, name := range []string{"arg1", "arg2"} {
			if _, err := num(4+i, name); err != nil {
				return nil, err
			}
		}
		switch w.pattern {
		case "", "Exponential":
		case "Gamma", "Weibull":
			if w.rate > 0 && (w.cv < 0.05 || w.cv > 50) {
				return nil, fail("cv", "%v: a %s window needs cv in 0.05..50", w.cv, w.pattern)
			}
		default:
			return nil, fail("pattern", "%.20q: want Gamma, Weibull, Exponential or empty", w.pattern)
		}
		if w.rate > 1e6 {
			return nil, fail("rate_rps", "%v: more than 10⁶ requests per second", w.rate)
		}
		if n := len(out); n > 0 && w.startS <= out[n-1].startS {
			return nil, fail("window_start_s", "%v: window starts must increase (previous %v)", w.startS, out[n-1].startS)
		}
		out = append(out, w)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: read: %w", file, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no windows", file)
	}
	return out, nil
}

// parseServeGenDataset reads a chunk-N-dataset.json: window start → {input_tokens,
// output_tokens, reason_ratio}, each a string holding a Python dict {value: p, ...}.
func parseServeGenDataset(r io.Reader, file string) ([]sgLengths, error) {
	var raw map[string]map[string]json.RawMessage
	if err := json.NewDecoder(r).Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: not a ServeGen dataset (JSON object of windows): %v", file, err)
	}
	var out []sgLengths
	for k, v := range raw {
		start, err := strconv.ParseFloat(k, 64)
		if err != nil || start < 0 || math.IsInf(start, 0) {
			return nil, fmt.Errorf("%s: window key %.30q: want a start time in seconds", file, k)
		}
		l := sgLengths{startS: start}
		for _, f := range []struct {
			name string
			pmf  *sgPMF
			ok   *bool
		}{{"input_tokens", &l.in, &l.inOK}, {"output_tokens", &l.out, &l.outOK}} {
			var s string
			if err := json.Unmarshal(v[f.name], &s); err != nil {
				return nil, fmt.Errorf("%s: window %s: field %s: want a string holding {tokens: probability, ...}", file, k, f.name)
			}
			p, err := ParsePMF(s)
			if err != nil {
				return nil, fmt.Errorf("%s: window %s: field %s: %v", file, k, f.name, err)
			}
			*f.pmf, *f.ok = p, len(p.values) > 0
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no windows", file)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].startS < out[j].startS })
	return out, nil
}

// ParsePMF reads ServeGen's Python-dict PMF "{45: 0.0096, 46: 0.0117, ...}" (values are
// token counts ≥ 1, probabilities finite ≥ 0 with a positive sum; "{}" is empty). The
// result is sorted by value with a normalised CDF.
func ParsePMF(s string) (sgPMF, error) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return sgPMF{}, fmt.Errorf("%.30q: want {tokens: probability, ...}", s)
	}
	body := strings.TrimSpace(s[1 : len(s)-1])
	if body == "" {
		return sgPMF{}, nil
	}
	type vp struct {
		v int
		p float64
	}
	var es []vp
	total := 0.0
	for item := range strings.SplitSeq(body, ",") {
		k, p, ok := strings.Cut(item, ":")
		if !ok {
			return sgPMF{}, fmt.Errorf("entry %.30q: want tokens: probability", item)
		}
		v, err := strconv.Atoi(strings.TrimSpace(k))
		if err != nil || v < 1 || v > MaxTokens {
			return sgPMF{}, fmt.Errorf("entry %.30q: tokens must be an integer in 1..%d", item, MaxTokens)
		}
		pr, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(pr) || math.IsInf(pr, 0) || pr < 0 || pr > 1e6 {
			return sgPMF{}, fmt.Errorf("entry %.30q: probability must be a finite number ≥ 0", item)
		}
		es = append(es, vp{v, pr})
		total += pr
	}
	if !(total > 0) {
		return sgPMF{}, fmt.Errorf("probabilities sum to %v: want > 0", total)
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].v < es[j].v })
	out := sgPMF{values: make([]int, len(es)), cdf: make([]float64, len(es))}
	acc := 0.0
	for i, e := range es {
		acc += e.p
		out.values[i], out.cdf[i] = e.v, acc/total
	}
	out.cdf[len(es)-1] = 1
	return out, nil
}

// newRand is the stream of one ServeGen client.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }
