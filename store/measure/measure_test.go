package measure

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseVLLMBench: vLLM's keys land in their columns, request_rate Infinity is a
// closed loop at max_concurrency, lengths come from the token totals, the sidecar
// fills the deployment.
func TestParseVLLMBench(t *testing.T) {
	dep, err := ParseSidecar("vllm_bench.yaml", read(t, "vllm_bench.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data := read(t, "vllm_bench.json")
	if f, _ := Sniff(data); f != FormatVLLMBench {
		t.Fatalf("sniffed %q", f)
	}
	ms, err := Parse("vllm_bench.json", data, "", dep)
	if err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	if m.Model != "Qwen/Qwen3-32B" || m.System != "h200_sxm" || m.Version != "0.22.0" || m.TP != 2 || m.MoETP != 2 {
		t.Errorf("deployment %+v", m.Deployment)
	}
	if m.Concurrency != 32 || m.RequestRate != 0 || m.ISL != 1024 || m.OSL != 64 || m.NumPrompts != 320 {
		t.Errorf("workload c%d rate %v isl %d osl %d n %d", m.Concurrency, m.RequestRate, m.ISL, m.OSL, m.NumPrompts)
	}
	want := map[Metric]float64{TTFTMean: 180.5, TTFTP50: 150.25, TTFTP99: 410, TPOTMean: 36.5, ITLP99: 120, E2EP99: 9900, ThroughputRPS: 3.15, OutputTokensPerS: 807.1}
	for k, v := range want {
		if !m.Has[k] || m.Values[k] != v {
			t.Errorf("%s = %v (has %v), want %v", MetricColumns[k], m.Values[k], m.Has[k], v)
		}
	}
}

// TestParseAIPerf: AIPerf's records (avg/p50/p99) and input_config load.
func TestParseAIPerf(t *testing.T) {
	data := read(t, "aiperf.json")
	ms, err := Parse("aiperf.json", data, "", Deployment{System: "h200_sxm", Backend: "vllm", TP: 2})
	if err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	if m.Format != FormatAIPerf || m.Concurrency != 16 || m.ISL != 2000 || m.OSL != 64 || m.Model != "Qwen/Qwen3-32B" {
		t.Errorf("%+v", m)
	}
	if m.Values[TTFTP99] != 520 || m.Values[TPOTMean] != 25 || m.Values[E2EP50] != 6500 || m.Values[OutputTokensPerS] != 640 {
		t.Errorf("values %v", m.Values)
	}
}

// TestParseSilicon: aiconfigurator's CSV, one measurement per row with its line.
func TestParseSilicon(t *testing.T) {
	ms, err := Parse("silicon.csv", read(t, "silicon.csv"), "", Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Line != 2 || ms[1].Line != 3 {
		t.Fatalf("%d rows", len(ms))
	}
	m := ms[0]
	if m.Model != "meta-llama/Llama-3.1-70B" || m.Backend != "vllm" || m.System != "h200_sxm" || m.TP != 4 ||
		m.Concurrency != 8 || m.ISL != 1024 || m.GemmQuant != "fp8" || m.Values[TTFTMean] != 101.09658590517938 {
		t.Errorf("%+v", m)
	}
}

// TestParseFile: the file on disk parses as its bytes do; a missing file is
// fs.ErrNotExist (the reports skip on it).
func TestParseFile(t *testing.T) {
	path := filepath.Join("testdata", "silicon.csv")
	got, err := ParseFile(path, FormatAICSilicon, Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Parse(path, read(t, "silicon.csv"), FormatAICSilicon, Deployment{})
	if err != nil || len(got) != len(want) || got[0].RunID != want[0].RunID || got[1].Values != want[1].Values {
		t.Errorf("ParseFile = %d rows, Parse = %d rows (%v)", len(got), len(want), err)
	}
	if _, err := ParseFile(filepath.Join("testdata", "absent.csv"), FormatAICSilicon, Deployment{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestSiliconAggShape: batch_size is per attention-DP rank; a moe_tp = moe_ep = k
// row whose tp·dp is k·k is a k-GPU deployment (the sample's tp×ep product).
func TestSiliconAggShape(t *testing.T) {
	for _, c := range []struct{ in, want Measurement }{
		{Measurement{Concurrency: 32, Deployment: Deployment{TP: 1, DP: 8, MoETP: 1, MoEEP: 8}},
			Measurement{Concurrency: 256, Deployment: Deployment{TP: 1, DP: 8, MoETP: 1, MoEEP: 8}}},
		{Measurement{Concurrency: 64, Deployment: Deployment{TP: 64, DP: 1, MoETP: 8, MoEEP: 8}},
			Measurement{Concurrency: 64, Deployment: Deployment{TP: 8, DP: 1, MoETP: 1, MoEEP: 8}}},
		{Measurement{Concurrency: 4, Deployment: Deployment{TP: 1, DP: 64, MoETP: 8, MoEEP: 8}},
			Measurement{Concurrency: 256, Deployment: Deployment{TP: 1, DP: 8, MoETP: 1, MoEEP: 8}}},
		{Measurement{Concurrency: 16, Deployment: Deployment{TP: 16, DP: 1, MoETP: 4, MoEEP: 4}},
			Measurement{Concurrency: 16, Deployment: Deployment{TP: 4, DP: 1, MoETP: 1, MoEEP: 4}}},
		{Measurement{Concurrency: 8, Deployment: Deployment{TP: 4, DP: 0, MoETP: 4, MoEEP: 1}}, // dp not stated
			Measurement{Concurrency: 8, Deployment: Deployment{TP: 4, DP: 0, MoETP: 4, MoEEP: 1}}},
		{Measurement{Concurrency: 8, Deployment: Deployment{TP: 8, DP: 1, MoETP: 2, MoEEP: 4}}, // a real moe_tp·moe_ep split
			Measurement{Concurrency: 8, Deployment: Deployment{TP: 8, DP: 1, MoETP: 2, MoEEP: 4}}},
		{Measurement{Concurrency: 8, Deployment: Deployment{TP: 4, DP: 4, MoETP: 1, MoEEP: 16}}, // Kimi-K2.5 "…_c32_tp4_ep4_…"
			Measurement{Concurrency: 32, Deployment: Deployment{TP: 4, DP: 1, MoETP: 1, MoEEP: 4}}},
		{Measurement{Concurrency: 2, Deployment: Deployment{TP: 2, DP: 2, MoETP: 1, MoEEP: 4}},
			Measurement{Concurrency: 4, Deployment: Deployment{TP: 2, DP: 1, MoETP: 1, MoEEP: 2}}},
		{Measurement{Concurrency: 1, Deployment: Deployment{TP: 8, DP: 2, MoETP: 4, MoEEP: 4}}, // one rule, not both in turn
			Measurement{Concurrency: 2, Deployment: Deployment{TP: 2, DP: 2, MoETP: 1, MoEEP: 4}}},
		{Measurement{Concurrency: 8, Deployment: Deployment{TP: 2, DP: 4, MoETP: 1, MoEEP: 8}}, // tp ≠ dp: as stated
			Measurement{Concurrency: 32, Deployment: Deployment{TP: 2, DP: 4, MoETP: 1, MoEEP: 8}}},
	} {
		got := c.in
		siliconAggShape(&got)
		g, w := got.Deployment, c.want.Deployment
		if got.Concurrency != c.want.Concurrency || [4]int{g.TP, g.DP, g.MoETP, g.MoEEP} != [4]int{w.TP, w.DP, w.MoETP, w.MoEEP} {
			t.Errorf("%+v → concurrency %d %+v, want %d %+v", c.in.Deployment, got.Concurrency, g, c.want.Concurrency, w)
		}
	}
}

// TestSiliconAggShapeProperty: for any agg row, the worker's concurrency is
// batch_size × the stated dp, the attention width still equals the MoE width
// when it did, and only a moe_tp = moe_ep = k row whose tp·dp is k·k changes
// shape — to k GPUs — or a tp = dp = k, moe_tp 1, moe_ep k·k row (to tp k, moe_ep k).
func TestSiliconAggShapeProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "k")
		tp := rapid.SampledFrom([]int{1, 2, 4, 8, 16, 64}).Draw(t, "tp")
		dp := rapid.SampledFrom([]int{0, 1, 2, 4, 8, 16, 64}).Draw(t, "dp")
		ep := rapid.SampledFrom([]int{1, k, 2 * k, tp * max(dp, 1)}).Draw(t, "ep")
		batch := rapid.IntRange(1, 512).Draw(t, "batch")
		m := Measurement{Concurrency: batch, Deployment: Deployment{TP: tp, DP: dp, MoETP: k, MoEEP: ep}}
		siliconAggShape(&m)
		if m.Concurrency != batch*max(dp, 1) {
			t.Fatalf("concurrency %d, want %d × %d", m.Concurrency, batch, max(dp, 1))
		}
		width := tp * max(dp, 1)
		remapped := k > 1 && ep == k && width == k*k
		d := m.Deployment
		if k <= 1 && tp > 1 && dp == tp && ep == tp*tp {
			if d.TP != tp || d.DP != 1 || d.MoETP != 1 || d.MoEEP != tp {
				t.Fatalf("tp %d dp %d moe_ep %d → %+v, want tp %d, dp 1, moe_ep %d", tp, dp, ep, d, tp, tp)
			}
			return
		}
		if !remapped {
			if d.TP != tp || d.DP != dp || d.MoETP != k || d.MoEEP != ep {
				t.Fatalf("shape changed: %+v", d)
			}
			return
		}
		if d.TP*max(d.DP, 1) != k || d.MoETP != 1 || d.MoEEP != k {
			t.Fatalf("tp %d dp %d moe %d×%d → %+v, want %d GPUs, moe_tp 1, moe_ep %d", tp, dp, k, ep, d, k, k)
		}
	})
}

// TestBadFiles: truncated, wrong types and NaN are one error naming file and field
// (and line for CSV).
func TestBadFiles(t *testing.T) {
	dep := Deployment{System: "h200_sxm", Backend: "vllm", TP: 2, ISL: 100, OSL: 10}
	vj := string(read(t, "vllm_bench.json"))
	csvData := string(read(t, "silicon.csv"))
	cases := []struct {
		name, file, data, format, want string
	}{
		{"truncated json", "a.json", vj[:len(vj)/2], "vllm-bench", "a.json: not a JSON object (unexpected EOF): is the file truncated?"},
		{"wrong type", "a.json", strings.Replace(vj, `"p99_ttft_ms": 410.0`, `"p99_ttft_ms": "fast"`, 1), "", `a.json: field p99_ttft_ms: "fast": want a number`},
		{"nan", "a.json", strings.Replace(vj, `"mean_tpot_ms": 36.5`, `"mean_tpot_ms": NaN`, 1), "", "a.json: field mean_tpot_ms: NaN: the benchmark recorded no value; remove the field or rerun"},
		{"inf ttft", "a.json", strings.Replace(vj, `"mean_tpot_ms": 36.5`, `"mean_tpot_ms": Infinity`, 1), "", `a.json: field mean_tpot_ms: "Infinity": want a number`},
		{"aiperf object", "b.json", `{"time_to_first_token": 5}`, "", "b.json: field time_to_first_token: a number: want an object"},
		{"csv nan", "c.csv", strings.Replace(csvData, "101.09658590517938", "nan", 1), "", `c.csv line 2: field silicon_ttft_ms: "nan": want a finite number of ms ≥ 0`},
		{"csv truncated row", "c.csv", csvData[:len(csvData)-60], "", "c.csv line 3: field pp_size: missing (short row): is the file truncated?"},
		{"csv header", "c.csv", "id,silicon_ttft_ms\n1,2\n", "", "c.csv line 1: field silicon_data_source: column missing from the header (not aiconfigurator's silicon CSV schema)"},
		{"unknown", "d.txt", "hello", "", "d.txt: unknown benchmark format"},
		{"no deployment", "a.json", vj, "", "a.json: field system: missing: pass --system or a sidecar YAML with system:"},
	}
	for _, c := range cases {
		d := dep
		if c.name == "no deployment" {
			d = Deployment{}
		}
		_, err := Parse(c.file, []byte(c.data), c.format, d)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want prefix %q", c.name, err, c.want)
		}
		var fe *FieldError
		if err != nil && !errors.As(err, &fe) {
			t.Errorf("%s: %T is not a *FieldError", c.name, err)
		}
	}
}

// FuzzParse: any input gives measurements that validate (finite values) or an
// error; never a panic.
func FuzzParse(f *testing.F) {
	for _, n := range []string{"vllm_bench.json", "aiperf.json", "silicon.csv"} {
		b, err := os.ReadFile("testdata/" + n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		// Open-loop loads: a rate with gamma sends, an AIPerf arrival pattern.
		f.Add([]byte(strings.Replace(string(b), `"request_rate": Infinity, "burstiness": 1.0, "max_concurrency": 32`, `"request_rate": 2.5, "burstiness": 0.5, "max_concurrency": null`, 1)))
		f.Add([]byte(strings.Replace(string(b), `"loadgen": {`, `"loadgen": {"request_rate": 3, "arrival_pattern": "gamma", "arrival_smoothness": 2, `, 1)))
		// --save-detailed lengths.
		f.Add([]byte(strings.Replace(string(b), `"completed": 320,`, `"completed": 320, "input_lens": [1000, 1048], "output_lens": [64, 64],`, 1)))
	}
	dep := Deployment{Model: "m", System: "s", Backend: "vllm", TP: 1, ISL: 10, OSL: 10, Mode: "agg"}
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := Parse("f", data, "", dep)
		if err != nil {
			return
		}
		for i := range ms {
			if err := ms[i].Validate(); err != nil {
				t.Fatalf("parsed row does not validate: %v", err)
			}
			a, why := ms[i].OpenArrivals()
			if strings.Contains(why, "\n") || (ms[i].RequestRate <= 0 && (why != "" || a != Arrivals{})) || (why == "" && (a.GammaShape < 0 || a.GammaShape > 1e4)) {
				t.Fatalf("open-loop sends of a parsed row at rate %v: %+v %q", ms[i].RequestRate, a, why)
			}
		}
	})
}

// TestParseSiliconBareQuoteFirstRow: a data row that the CSV reader rejects
// before it yields a field (a bare quote in an unquoted field) is a one-line
// error naming the file and line, not a panic (found by FuzzParse).
func TestParseSiliconBareQuoteFirstRow(t *testing.T) {
	b, err := os.ReadFile("testdata/silicon.csv")
	if err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(string(b), "\n")
	_, err = Parse("bad.csv", []byte(header+"\n0\"0\n"), "aic-silicon", Deployment{})
	const want = `bad.csv line 2: bare " in non-quoted-field: is the file truncated?`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestSiliconStatedConcurrency: an agg row whose silicon_concurrency disagrees
// with batch_size × attention_dp_size is read at silicon_concurrency (the
// benchmark's own client count) and says so in Extra; a row where they agree
// keeps its reading and gets no note.
func TestSiliconStatedConcurrency(t *testing.T) {
	lines := strings.Split(strings.TrimSpace(string(read(t, "silicon.csv"))), "\n")
	// "…_c32_tp8_ep8_1537": batch_size 32 at the recorded tp 1, dp 64, moe 8 × 8.
	bad := strings.Replace(lines[1], "silicon_concurrency=8", "silicon_concurrency=32", 1)
	bad = strings.Replace(bad, ",fp8,fp8,8,4,1,1,4,1,", ",fp8,fp8,32,1,1,64,8,8,", 1)
	ms, err := Parse("silicon.csv", []byte(strings.Join([]string{lines[0], bad, lines[2]}, "\n")), FormatAICSilicon, Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	if m.Concurrency != 32 || m.TP != 1 || m.DP != 8 || m.MoEEP != 8 {
		t.Errorf("disagreeing row: concurrency %d, tp %d, dp %d, moe_ep %d; want 32 clients on tp 1, dp 8, moe_ep 8", m.Concurrency, m.TP, m.DP, m.MoEEP)
	}
	want := "batch_size 32 × attention_dp_size 64 = 2048 clients disagrees with silicon_concurrency 32: read as 32 clients, the benchmark's own count"
	if m.Extra["concurrency_note"] != want {
		t.Errorf("note %q, want %q", m.Extra["concurrency_note"], want)
	}
	if ms[1].Concurrency != 64 || ms[1].Extra["concurrency_note"] != nil {
		t.Errorf("agreeing row: concurrency %d, note %v; want 64 and none", ms[1].Concurrency, ms[1].Extra["concurrency_note"])
	}
}

// TestOpenLoopLoads: how vllm bench serve and AIPerf files state an open-loop
// load (OpenLoop, OpenBound) and how its sends were spaced (Poisson, gamma,
// constant), and which are refused.
func TestOpenLoopLoads(t *testing.T) {
	dep, err := ParseSidecar("vllm_bench.yaml", read(t, "vllm_bench.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := string(read(t, "vllm_bench.json"))
	load := `"request_rate": Infinity, "burstiness": 1.0, "max_concurrency": 32, `
	for _, c := range []struct {
		name, load string
		conc       int
		rate       float64
		open       bool
		gamma      float64
		why        string
	}{
		{"rate inf, no bound: every prompt at once", `"request_rate": Infinity, "max_concurrency": null, `, 320, 0, true, 0, ""},
		{"rate, no bound", `"request_rate": 4.5, "burstiness": 1.0, "max_concurrency": null, `, 0, 4.5, true, 0, ""},
		{"rate and bound", `"request_rate": 4.5, "max_concurrency": 8, `, 8, 4.5, true, 0, ""},
		{"gamma", `"request_rate": 4.5, "burstiness": 2.0, `, 0, 4.5, true, 2, ""},
		{"bad gamma", `"request_rate": 4.5, "burstiness": 0, `, 0, 4.5, true, 0, "burstiness 0: want a gamma shape in (0, 1e4]"},
		{"ramp beside a rate", `"request_rate": 4.5, "ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 8, `, 0, 4.5, true, 0,
			"ramp_up_strategy linear beside request_rate 4.5: vllm bench serve runs a ramp at rate inf; the file contradicts itself"},
		{"ramp null", `"request_rate": 4.5, "ramp_up_strategy": null, `, 0, 4.5, true, 0, ""},
		{"ramp without rates", `"request_rate": Infinity, "ramp_up_strategy": "linear", "max_concurrency": null, `, 0, 0, true, 0,
			"ramp_up_strategy linear without ramp_up_start_rps and ramp_up_end_rps: the ramp's rates are not stated"},
		{"ramp of another kind", `"request_rate": Infinity, "ramp_up_strategy": "step", "ramp_up_start_rps": 1, "ramp_up_end_rps": 8, "max_concurrency": null, `, 0, 0, true, 0,
			"ramp_up_strategy step: linear and exponential ramps are modelled"},
		{"ramp from 0", `"request_rate": Infinity, "ramp_up_strategy": "linear", "ramp_up_start_rps": 0, "ramp_up_end_rps": 8, "max_concurrency": null, `, 0, 0, true, 0,
			"ramp_up_start_rps 0: want a finite rate > 0 (vllm bench serve divides by it)"},
		{"ramp down", `"request_rate": Infinity, "ramp_up_strategy": "exponential", "ramp_up_start_rps": 9, "ramp_up_end_rps": 8, "max_concurrency": null, `, 0, 0, true, 0,
			"ramp_up_end_rps 8: want a finite rate ≥ ramp_up_start_rps 9"},
	} {
		ms, err := Parse("v.json", []byte(strings.Replace(base, load, c.load, 1)), "", dep)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		m := ms[0]
		a, why := m.OpenArrivals()
		open := m.OpenLoop()
		if m.Concurrency != c.conc || m.RequestRate != c.rate || open != c.open || a.GammaShape != c.gamma || a.Constant ||
			!strings.Contains(why, c.why) || (c.why == "") != (why == "") {
			t.Errorf("%s: concurrency %d rate %v open %v sends %+v why %q", c.name, m.Concurrency, m.RequestRate, open, a, why)
		}
		if _, closed := m.BenchmarkRun(1); closed == open {
			t.Errorf("%s: BenchmarkRun closed %v for an open-loop %v run", c.name, closed, open)
		}
		if bound := m.OpenBound(); (c.name == "rate and bound") != (bound == 8) || bound != 0 && bound != 8 {
			t.Errorf("%s: open bound %d", c.name, bound)
		}
		if once := c.conc == 320; once != m.AllAtOnce() || once && !strings.Contains(m.Extra["concurrency_note"].(string), "all 320 prompts sent at once") {
			t.Errorf("%s: all at once %v, extra %v", c.name, m.AllAtOnce(), m.Extra)
		}
	}
	// A ramp-up run (vllm bench serve --ramp-up-strategy: request_rate inf) is
	// read as its ramp, with or without a bound — not as every prompt at once.
	for _, c := range []struct {
		load  string
		bound int
		want  Arrivals
	}{
		{`"request_rate": Infinity, "ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 8, "max_concurrency": null, `, 0,
			Arrivals{Ramp: "linear", RampStartRPS: 1, RampEndRPS: 8}},
		{`"request_rate": Infinity, "burstiness": 0.5, "ramp_up_strategy": "exponential", "ramp_up_start_rps": 2, "ramp_up_end_rps": 32, "max_concurrency": 16, `, 16,
			Arrivals{GammaShape: 0.5, Ramp: "exponential", RampStartRPS: 2, RampEndRPS: 32}},
	} {
		ms, err := Parse("v.json", []byte(strings.Replace(base, load, c.load, 1)), "", dep)
		if err != nil {
			t.Fatalf("ramp %q: %v", c.load, err)
		}
		m := ms[0]
		a, why := m.OpenArrivals()
		if !m.OpenLoop() || !m.Ramped() || m.AllAtOnce() || m.RequestRate != 0 || m.Concurrency != c.bound || m.OpenBound() != c.bound || a != c.want || why != "" {
			t.Errorf("ramp %q: open %v ramped %v once %v rate %v concurrency %d bound %d sends %+v why %q", c.load, m.OpenLoop(), m.Ramped(), m.AllAtOnce(),
				m.RequestRate, m.Concurrency, m.OpenBound(), a, why)
		}
		if _, closed := m.BenchmarkRun(1); closed {
			t.Errorf("ramp %q: read as a closed loop", c.load)
		}
	}
	ai := string(read(t, "aiperf.json"))
	// AIPerf load options that send otherwise are kept and refused with a reason;
	// null or false ones, and warm-up options, change nothing.
	for _, c := range []struct{ loadgen, input, why string }{
		{`"prefill_concurrency": 4`, ``, "aiperf prefill_concurrency 4: holds a request until fewer than that many wait for their first token, which the model does not represent"},
		{`"concurrency_ramp_duration": 30`, ``, "aiperf concurrency_ramp_duration 30: ramps the clients from 1 over that many seconds, which the model does not represent"},
		{`"request_rate": 3.0, "request_rate_ramp_duration": 60`, ``, "aiperf request_rate_ramp_duration 60: ramps the rate over that many seconds of wall time"},
		{`"user_centric_rate": 5.0, "num_users": 50`, ``, "aiperf user_centric_rate 5.0: sends per-user sessions with fixed turn gaps"},
		{`"request_cancellation_rate": 10`, ``, "aiperf request_cancellation_rate 10: cancels that percentage of requests"},
		{`"prefill_concurrency": null, "warmup_request_count": 20, "warmup_concurrency": 4`, ``, ""},
		{``, `"input": {"fixed_schedule": true}, `, "aiperf fixed schedule (--fixed-schedule or a mooncake_trace dataset): the requests replay the dataset's timestamps"},
		{``, `"input": {"custom_dataset_type": "mooncake_trace"}, `, "aiperf fixed schedule"},
		{``, `"input": {"fixed_schedule": false}, `, ""},
	} {
		data := ai
		if c.loadgen != "" {
			data = strings.Replace(data, `"loadgen": {`, `"loadgen": {`+c.loadgen+`, `, 1)
		}
		data = strings.Replace(data, `"loadgen": {`, c.input+`"loadgen": {`, 1)
		ms, err := Parse("a.json", []byte(data), "", Deployment{System: "h200_sxm", Backend: "vllm", TP: 2})
		if err != nil {
			t.Fatalf("aiperf %s %s: %v", c.loadgen, c.input, err)
		}
		if why := ms[0].LoadUnmodelled(); !strings.Contains(why, c.why) || (c.why == "") != (why == "") {
			t.Errorf("aiperf %s %s: load reason %q, want %q", c.loadgen, c.input, why, c.why)
		}
	}
	// A time-bounded run (no request_count in its load): the request_count record.
	timed := strings.Replace(strings.Replace(ai, `"loadgen": {"concurrency": 16, "request_count": 400}`, `"loadgen": {"request_rate": 3.0}`, 1),
		`"request_throughput":`, `"request_count": {"unit": "requests", "avg": 250}, "request_throughput":`, 1)
	if ms, err := Parse("a.json", []byte(timed), "", Deployment{System: "h200_sxm", Backend: "vllm", TP: 2}); err != nil || ms[0].NumPrompts != 250 || ms[0].RequestRate != 3 {
		t.Errorf("time-bounded AIPerf run: %v %v", ms, err)
	}
	for _, c := range []struct {
		loadgen string
		want    Arrivals
		why     string
	}{
		{`"arrival_pattern": "poisson"`, Arrivals{}, ""},
		{`"arrival_pattern": "constant"`, Arrivals{Constant: true}, ""},
		{`"arrival_pattern": "gamma", "arrival_smoothness": 0.5`, Arrivals{GammaShape: 0.5}, ""},
		{`"arrival_pattern": "gamma"`, Arrivals{}, "arrival_pattern gamma without arrival_smoothness: the gamma shape is not stated"},
		{`"arrival_pattern": "sawtooth"`, Arrivals{}, "arrival_pattern sawtooth: poisson, gamma and constant sends are modelled"},
	} {
		data := strings.Replace(ai, `"loadgen": {`, `"loadgen": {"request_rate": 3.0, `+c.loadgen+`, `, 1)
		ms, err := Parse("a.json", []byte(data), "", Deployment{System: "h200_sxm", Backend: "vllm", TP: 2})
		if err != nil {
			t.Fatal(err)
		}
		if a, why := ms[0].OpenArrivals(); !ms[0].OpenLoop() || a != c.want || why != c.why {
			t.Errorf("aiperf %s: open %v sends %+v why %q, want %+v %q", c.loadgen, ms[0].OpenLoop(), a, why, c.want, c.why)
		}
	}
}

// TestSidecarPools: a sidecar states a disaggregated deployment's pools for a
// file that does not (vllm bench serve against a disaggregated server); the
// row's shape is the decode pool's; pools on an aggregated row, an unknown pool
// key or a negative size are one-line errors naming the field.
func TestSidecarPools(t *testing.T) {
	side := []byte("system: h200_sxm\nbackend: vllm\nversion: 0.22.0\nmode: disagg\nprefill: {workers: 2, tp: 2}\ndecode: {workers: 1, tp: 4, batch: 32}\n")
	dep, err := ParseSidecar("s.yaml", side)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Parse("vllm_bench.json", read(t, "vllm_bench.json"), "", dep)
	if err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	if m.Mode != "disagg" || m.PWorkers != 2 || m.PTP != 2 || m.DWorkers != 1 || m.DTP != 4 || m.DBatch != 32 || m.TP != 4 || m.PP != 1 || m.Concurrency != 32 {
		t.Errorf("pools p%d×tp%d d%d×tp%d b%d, row tp %d pp %d, c %d", m.PWorkers, m.PTP, m.DWorkers, m.DTP, m.DBatch, m.TP, m.PP, m.Concurrency)
	}
	for _, c := range []struct{ yaml, want string }{
		{"system: h200_sxm\nbackend: vllm\ntp: 2\nprefill: {workers: 1, tp: 2}\n", "field prefill: pools given for an aggregated deployment"},
		{"system: h200_sxm\nbackend: vllm\nmode: disagg\nprefill: {workers: 1, tp: 2}\ndecode: {workers: -1, tp: 2}\n", "field decode.workers: -1: must be ≥ 0"},
		{"system: h200_sxm\nbackend: vllm\nmode: disagg\nprefill: {gpus: 1}\n", "field gpus not found"},
	} {
		d, err := ParseSidecar("s.yaml", []byte(c.yaml))
		if err == nil {
			_, err = Parse("vllm_bench.json", read(t, "vllm_bench.json"), "", d)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line with %q", c.yaml, err, c.want)
		}
	}
}

// TestRunLengths: a vllm bench serve --save-detailed file's per-request lengths,
// or an AIPerf export's length percentiles, become 16 equally weighted quantile
// points, kept in the row's extra column (none when the lengths do not vary); a
// sidecar can state them instead; bad lengths are one-line errors.
func TestRunLengths(t *testing.T) {
	dep, err := ParseSidecar("vllm_bench.yaml", read(t, "vllm_bench.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(strings.TrimSpace(string(read(t, "vllm_bench.json"))), "}")
	var ins, outs []string
	for i := 1; i <= 320; i++ {
		ins = append(ins, fmt.Sprint(i*10))
		outs = append(outs, fmt.Sprint(64))
	}
	data := base + `, "input_lens": [` + strings.Join(ins, ",") + `], "output_lens": [` + strings.Join(outs, ",") + `]}`
	ms, err := Parse("d.json", []byte(data), "", dep)
	if err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	// Outputs all 64: no shape to model (nil), prompts 10…3200.
	if len(m.ISLQuantiles) != 16 || m.ISLQuantiles[0] != 110 || m.ISLQuantiles[15] != 3110 || m.OSLQuantiles != nil {
		t.Errorf("quantiles %v / %v", m.ISLQuantiles, m.OSLQuantiles)
	}
	// AIPerf's length records: the quantile function linear between the stated
	// percentiles.
	ai := strings.Replace(string(read(t, "aiperf.json")), `"input_sequence_length": {"unit": "tokens", "avg": 2000.0}`,
		`"input_sequence_length": {"unit": "tokens", "avg": 2000.0, "min": 1000, "p50": 2000, "max": 3000}`, 1)
	if ms, err := Parse("a.json", []byte(ai), "", Deployment{System: "h200_sxm", Backend: "vllm", TP: 2}); err != nil ||
		!slices.Equal(ms[0].ISLQuantiles, []int{1063, 1188, 1313, 1438, 1563, 1688, 1813, 1938, 2063, 2188, 2313, 2438, 2563, 2688, 2813, 2938}) {
		t.Errorf("aiperf percentiles: %v", err)
	}
	dec := strings.Replace(ai, `"p50": 2000`, `"p50": 500`, 1)
	if _, err := Parse("a.json", []byte(dec), "", Deployment{System: "h200_sxm", Backend: "vllm", TP: 2}); err == nil || !strings.Contains(err.Error(), "not a length at or above the lower percentiles") {
		t.Errorf("decreasing percentiles: %v", err)
	}
	if q, ok := m.Extra["isl_quantiles"].([]int); !ok || len(q) != 16 {
		t.Errorf("extra %v", m.Extra)
	}
	side, err := ParseSidecar("s.yaml", []byte("system: h200_sxm\nbackend: vllm\ntp: 2\nisl_quantiles: [500, 1500]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := Parse("vllm_bench.json", read(t, "vllm_bench.json"), "", side); err != nil || !slices.Equal(ms[0].ISLQuantiles, []int{500, 1500}) || ms[0].OSLQuantiles != nil {
		t.Errorf("sidecar quantiles: %v %v", ms, err)
	}
	// A failed request (output length 0) is left out of both.
	if ms, err := Parse("d.json", []byte(base+`, "input_lens": [100, 200, 300, 5000], "output_lens": [10, 20, 30, 0]}`), "", dep); err != nil ||
		!slices.Equal(ms[0].ISLQuantiles, []int{100, 200, 300}) || !slices.Equal(ms[0].OSLQuantiles, []int{10, 20, 30}) {
		t.Errorf("failed request: %v", err)
	}
	for _, c := range []struct{ data, want string }{
		{base + `, "input_lens": [10, 0]}`, "field input_lens: 0: a completed request's prompt length must be ≥ 1"},
		{base + `, "input_lens": [10, -1]}`, "field input_lens: -1: want per-request lengths in 0..16777216"},
		{base + `, "input_lens": [10, "a\nb"]}`, `field input_lens: "a\nb": want per-request lengths`},
		{base + `, "input_lens": [10, 20], "output_lens": [5]}`, "field output_lens: 1 lengths beside 2 input_lens: want one per request"},
	} {
		_, err := Parse("d.json", []byte(c.data), "", dep)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %v, want one line with %q", err, c.want)
		}
	}
	bad, _ := ParseSidecar("s.yaml", []byte("system: h200_sxm\nbackend: vllm\ntp: 2\nosl_quantiles: [0]\n"))
	if _, err := Parse("vllm_bench.json", read(t, "vllm_bench.json"), "", bad); err == nil || !strings.Contains(err.Error(), "field osl_quantiles: 0: a length must be in 1..") {
		t.Errorf("bad sidecar quantiles: %v", err)
	}
}

// TestDeploymentRuns: a deployment file's runs: entry applies to its run only
// (the CSV id), over the row's own fields and before the file-level ones; its
// benchmark sets the rounds BenchmarkRun replays and, with a length spread,
// 16 quantile points of each length; the benchmark is kept in the extra
// column. Bad entries are one-line errors naming the key.
func TestDeploymentRuns(t *testing.T) {
	const id = "2026_04_06_llama_3_1_70b_h200_sxm_trtllm_fp8_agg_1024x1024_c64_tp2_ep1_582"
	side := []byte("engine_config: {max_num_tokens: 4096}\nruns:\n  " + id + ":\n    tp: 8\n" +
		"    moe_tp: 8\n    benchmark: {tool: bench_serving, rounds: 10, warmup_rounds: 0, length_spread: [0.8, 1.0]}\n" +
		"    engine_config: {max_num_tokens: 16384, batch_wait_timeout_iters: 20}\n")
	dep, err := ParseSidecar("d.yaml", side)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Parse("silicon.csv", read(t, "silicon.csv"), "", dep)
	if err != nil {
		t.Fatal(err)
	}
	other, run := ms[0], ms[1]
	if run.RunID != id || run.TP != 8 || run.MoETP != 8 || run.EngineConfig["max_num_tokens"] != 16384 || run.Runs != nil {
		t.Errorf("the run's entry: tp %d moe-tp %d (the entry's 8 wins over the row's 2 and 2), config %v", run.TP, run.MoETP, run.EngineConfig)
	}
	if other.EngineConfig["max_num_tokens"] != 4096 || other.Benchmark != nil || other.ISLQuantiles != nil {
		t.Errorf("another row took the run's entry: config %v, benchmark %v", other.EngineConfig, other.Benchmark)
	}
	if r, ok := run.BenchmarkRun(1); !ok || r.Requests != 640 || r.Warmup != 0 || !strings.Contains(r.Source, "bench_serving (10 rounds, 0 warm-up rounds)") {
		t.Errorf("run %+v %v", r, ok)
	}
	if q := run.ISLQuantiles; len(q) != 16 || q[0] != 826 || q[15] != 1018 || run.OSLQuantiles[0] != 826 {
		t.Errorf("length spread points %v / %v", q, run.OSLQuantiles)
	}
	if b, ok := run.Extra["benchmark"].(map[string]any); !ok || b["rounds"] != 10 {
		t.Errorf("extra %v", run.Extra)
	}
	for _, c := range []struct{ yaml, want string }{
		{"benchmark: {rounds: 0}\n", "benchmark.rounds 0: want the measured requests per client, 1..1000"},
		{"benchmark: {rounds: 10, warmup_rounds: -1}\n", "benchmark.warmup_rounds -1"},
		{"benchmark: {rounds: 10, length_spread: [1.0, 0.8]}\n", "benchmark.length_spread [1 0.8]: want [lo, hi] with 0 < lo ≤ hi ≤ 4"},
		{"benchmark: {rounds: 10, length_spread: [0.5]}\n", "benchmark.length_spread [0.5]"},
		{"runs:\n  a: {benchmark: {rounds: 2000}}\n", "runs: a: benchmark.rounds 2000"},
		{"runs:\n  a: {runs: {b: {tp: 1}}}\n", "runs: a: an entry cannot hold runs or rules of its own"},
		{"runs:\n  a: {gpus: 1}\n", "field gpus not found"},
	} {
		_, err := ParseSidecar("d.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line with %q", c.yaml, err, c.want)
		}
	}
}
