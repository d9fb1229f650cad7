package oracle

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
)

// TestDisaggScenario: the 2P1D pull scenario of testdata/disagg — two prompts
// finish together (15 ms) on the two prefill workers; the decode KV holds two
// requests (2048 tokens, 64 blocks each), so both pull at once and share its NIC
// (25 ms); the third waits for a slot of KV.
func TestDisaggScenario(t *testing.T) {
	data, err := os.ReadFile("testdata/disagg/2p1d_pull.json")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ParseScenario(data)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sc.RunDisagg(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := res.Requests[0], res.Requests[1], res.Requests[2]
	if a.FirstTokenMs != 15 || b.FirstTokenMs != 15 || a.XferEndMs-a.XferStartMs != 25 || b.XferEndMs != 40 {
		t.Fatalf("a, b: first %v, %v, transfers %v..%v, %v..%v; want 15, 15 and 15..40 each (fan-in halves)", a.FirstTokenMs, b.FirstTokenMs, a.XferStartMs, a.XferEndMs, b.XferStartMs, b.XferEndMs)
	}
	if c.XferStartMs < a.FinishMs || c.Headroom != 0 {
		t.Fatalf("c: pull at %v before a slot of decode KV freed (%v), headroom %v; want after, 0", c.XferStartMs, a.FinishMs, c.Headroom)
	}
	s, err := res.Summary()
	if err != nil {
		t.Fatal(err)
	}
	if s.Requests != 3 || s.OutputTokens != 30 || s.TTFTP50 != 15 || math.Abs(s.KVTransferMsMean-62.5/3) > 1e-9 || s.DHeadroomMin != 0 {
		t.Fatalf("summary %+v: want 3 requests, 30 tokens, TTFT p50 15, kv transfer mean (25+25+12.5)/3, headroom min 0", s)
	}
}

// TestDisaggScenarioErrors: one-line errors naming the field.
func TestDisaggScenarioErrors(t *testing.T) {
	data, err := os.ReadFile("testdata/disagg/2p1d_pull.json")
	if err != nil {
		t.Fatal(err)
	}
	base := string(data)
	for _, tc := range []struct{ from, to, want string }{
		{`"connector": "pull"`, `"connector": "pul"`, `scenario: disagg.connector = "pul": must be pull or push`},
		{`"inter_node_gbps": 10`, `"inter_node_gbps": 0`, "scenario: disagg fabric inter_node_gbps = 0: must be a finite number > 0"},
		{`"inter_node_gbps": 10, `, ``, "scenario: missing field disagg.fabric.inter_node_gbps"},
		{`"prefill": {"workers": 2,`, `"prefill": {`, "scenario: missing field disagg.prefill.workers"},
		{`"kv_capacity_tokens": 2048`, `"kv_capacity_tokens": 2048, "kv": 1`, `scenario: disagg: json: unknown field "kv"`},
		{`"kv_capacity_tokens": 2048`, `"kv_capacity_tokens": 1000`, "scenario: disagg decode num_gpu_blocks = 63: one request of isl 1000 + osl 10 needs 64 blocks of 16 tokens; give the decode pool more KV"},
		{`"max_tokens": 10}
  ]`, `"max_tokens": 10, "eos_at": 3}
  ]`, "scenario: requests[2].eos_at: disaggregated runs stop at max_tokens only; drop eos_at"},
		{`"capacity_policy": "GUARANTEED_NO_EVICT", "block_size": 16, "enable_prefix_caching": false}`, `"capacity_policy": "GUARANTEED_NO_EVICT", "enable_prefix_caching": false}`,
			"scenario: missing engine knob engine.block_size (required for backend trtllm) (in disagg.decode)"},
	} {
		in := strings.Replace(base, tc.from, tc.to, 1)
		if in == base {
			t.Fatalf("case %q: no replacement", tc.want)
		}
		sc, err := ParseScenario([]byte(in))
		if err == nil {
			_, err = sc.RunDisagg(context.Background())
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("got %v\nwant %s", err, tc.want)
		}
	}
}

// FuzzReadDisaggScenario: any input parses to an error or to a scenario whose run
// is an error or finishes every request with finite summary columns.
func FuzzReadDisaggScenario(f *testing.F) {
	data, err := os.ReadFile("testdata/disagg/2p1d_pull.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(strings.Replace(string(data), `"pull"`, `"push"`, 1)))
	f.Add([]byte(`{"disagg": null, "requests": []}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		sc, err := ParseScenario(in)
		if err != nil || sc.Disagg == nil {
			return
		}
		for _, r := range sc.Requests {
			if r.Len() > 1<<14 || r.MaxTokens > 1<<12 || r.ArrivalMs > 1e7 {
				return // keep each run short
			}
		}
		if len(sc.Requests) > 64 || sc.Disagg.Config.Prefill.Workers > 8 || sc.Disagg.Config.Decode.Workers > 8 {
			return
		}
		res, err := sc.RunDisagg(context.Background())
		if err != nil {
			return
		}
		if _, err := res.Summary(); err != nil {
			t.Fatal(err)
		}
	})
}
