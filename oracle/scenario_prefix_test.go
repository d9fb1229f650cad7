package oracle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/oracle"
)

const prefixEngine = `"engine": {"backend": "vllm", "max_num_batched_tokens": 64, "max_num_seqs": 8, "block_size": 16,
	"num_gpu_blocks": 200, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0,
	"enable_prefix_caching": true, "async_scheduling": false}, "timing": {"kind": "constant", "pass_ms": 1}`

func runDoc(t *testing.T, doc string) *oracle.Result {
	t.Helper()
	sc, err := oracle.ReadScenario(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	res, err := sc.Simulate(context.Background(), oracle.Options{PassLog: true})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func ids(from, n int) string {
	var b []string
	for i := range n {
		b = append(b, fmt.Sprint(from+i))
	}
	return strings.Join(b, ",")
}

// TestScenarioSharedPrefixEqualsTokens: a prefix given as a field (prefix_group +
// prefix_len, or hash_ids) simulates exactly like the same prompts spelled out as
// token ids (shared ids, then ids unique to each request).
func TestScenarioSharedPrefixEqualsTokens(t *testing.T) {
	field := `{` + prefixEngine + `, "requests": [
		{"id": "A", "arrival_ms": 0, "prompt_len": 50, "prefix_group": 7, "prefix_len": 40, "max_tokens": 4},
		{"id": "B", "arrival_ms": 20, "prompt_len": 60, "prefix_group": 7, "prefix_len": 40, "max_tokens": 3},
		{"id": "C", "arrival_ms": 21, "prompt_len": 60, "prefix_group": 8, "prefix_len": 40, "max_tokens": 3}]}`
	hashes := `{` + prefixEngine + `, "hash_block": 16, "requests": [
		{"id": "A", "arrival_ms": 0, "prompt_len": 50, "hash_ids": [1, 2], "max_tokens": 4},
		{"id": "B", "arrival_ms": 20, "prompt_len": 60, "hash_ids": [1, 2, 3], "max_tokens": 3},
		{"id": "C", "arrival_ms": 21, "prompt_len": 60, "hash_ids": [9, 2], "max_tokens": 3}]}`
	tokens := func(shared int) string {
		return `{` + prefixEngine + `, "requests": [
		{"id": "A", "arrival_ms": 0, "prompt_tokens": [` + ids(0, shared) + `,` + ids(1000, 50-shared) + `], "max_tokens": 4},
		{"id": "B", "arrival_ms": 20, "prompt_tokens": [` + ids(0, shared) + `,` + ids(2000, 60-shared) + `], "max_tokens": 3},
		{"id": "C", "arrival_ms": 21, "prompt_tokens": [` + ids(500, shared) + `,` + ids(3000, 60-shared) + `], "max_tokens": 3}]}`
	}
	for _, c := range []struct {
		name, doc string
		shared    int
		cachedB   int
	}{
		{"prefix_len", field, 40, 32}, // 40 shared tokens = 2 full blocks of 16
		{"hash_ids", hashes, 32, 32},  // ids [1,2] name 32 tokens
	} {
		got := runDoc(t, c.doc)
		want := runDoc(t, tokens(c.shared))
		g, _ := json.Marshal(got.Output())
		w, _ := json.Marshal(want.Output())
		if !bytes.Equal(g, w) {
			t.Errorf("%s: differs from the explicit-token scenario:\n got %s\nwant %s", c.name, g, w)
		}
		if n := got.Requests[1].NumCachedTokens; n != c.cachedB {
			t.Errorf("%s: B cached %d tokens, want %d", c.name, n, c.cachedB)
		}
		if n := got.Requests[2].NumCachedTokens; n != 0 {
			t.Errorf("%s: C (other prefix) cached %d tokens, want 0", c.name, n)
		}
	}
}

func TestScenarioSharedPrefixErrors(t *testing.T) {
	req := func(r string) string { return `{` + prefixEngine + `, "requests": [` + r + `]}` }
	for _, c := range []struct{ doc, want string }{
		{req(`{"id": "A", "arrival_ms": 0, "prompt_len": 5, "prefix_len": 6, "max_tokens": 1}`), "scenario: requests[0].prefix_len = 6: must be in 0..prompt_len = 5"},
		{req(`{"id": "A", "arrival_ms": 0, "prompt_len": 5, "prefix_group": 1, "max_tokens": 1}`), "scenario: requests[0].prefix_group is set without requests[0].prefix_len"},
		{req(`{"id": "A", "arrival_ms": 0, "prompt_tokens": [1], "prefix_len": 1, "max_tokens": 1}`), "scenario: requests[0].prompt_tokens: a shared prefix (prefix_group, prefix_len, hash_ids) needs requests[0].prompt_len, not prompt_tokens"},
		{req(`{"id": "A", "arrival_ms": 0, "prompt_len": 5, "prefix_len": 1, "hash_ids": [1], "max_tokens": 1}`), "scenario: requests[0].hash_ids and requests[0].prefix_len are both set; give one"},
		{req(`{"id": "A", "arrival_ms": 0, "prompt_len": 600, "hash_ids": [1, 2, 3], "max_tokens": 1}`), "scenario: requests[0].hash_ids: 3 ids for prompt_len 600: at most one per hash_block = 512 tokens"},
		{req(`{"id": "A", "arrival_ms": 0, "prompt_len": 5, "hash_ids": [-1], "max_tokens": 1}`), "scenario: requests[0].hash_ids has id -1: ids must be ≥ 0"},
		{req(`{"id": "A", "arrival_ms": "x", "prompt_len": 5, "max_tokens": 1}`), "scenario: requests[0]: json: cannot unmarshal string into Go struct field rawRequest.arrival_ms of type float64"},
		{`{` + prefixEngine + `, "engine": {}}`, "scenario: field engine is given twice"},
		{`[]`, "scenario: want a JSON object, got ["},
		{`{` + prefixEngine + `, "requests": {}}`, "scenario: requests: want an array of requests"},
	} {
		_, err := oracle.ReadScenario(strings.NewReader(c.doc))
		if err == nil || err.Error() != c.want {
			t.Errorf("%.80s:\n got %v\nwant %s", c.doc, err, c.want)
		}
	}
}

// TestScenarioSummary: one request by hand (constant 1 ms passes, budget 64 ≥ prompt):
// tokens at 1, 2, 3 ms → TTFT 1, ITL 1, TPOT 1, E2E 3, throughput 1/3 ms.
func TestScenarioSummary(t *testing.T) {
	res := runDoc(t, `{`+prefixEngine+`, "requests": [{"id": "A", "arrival_ms": 0, "prompt_len": 8, "max_tokens": 3}]}`)
	s, err := res.Summary()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(s)
	want := `{"requests":1,"output_tokens":3,"passes":3,"scheduled_tokens":10,"preemptions":0,"cached_tokens":0,"end_ms":3,` +
		`"ttft_mean":1,"ttft_p50":1,"ttft_p90":1,"ttft_p99":1,"ttft_p999":1,"itl_mean":1,"itl_p50":1,"itl_p99":1,` +
		`"tpot_mean":1,"tpot_p50":1,"tpot_p99":1,"e2e_mean":3,"e2e_p50":3,"e2e_p99":3,"throughput_rps":333.3333333333333,"output_tokens_per_s":1000}`
	if string(got) != want {
		t.Fatalf("summary\n got %s\nwant %s", got, want)
	}
}

// TestWriteLog: one JSON line per pass then per request, the same content as Output.
func TestWriteLog(t *testing.T) {
	res := runDoc(t, `{`+prefixEngine+`, "requests": [{"id": "A", "arrival_ms": 0, "prompt_len": 80, "max_tokens": 2},
		{"id": "B\"", "arrival_ms": 0, "prompt_len": 8, "max_tokens": 2}]}`)
	var buf bytes.Buffer
	if err := res.WriteLog(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	out := res.Output()
	if len(lines) != len(out.Passes)+len(out.Requests) {
		t.Fatalf("%d lines, want %d passes + %d requests", len(lines), len(out.Passes), len(out.Requests))
	}
	for i, p := range out.Passes {
		var got struct {
			Pass       int             `json:"pass"`
			StartMs    float64         `json:"start_ms"`
			EndMs      float64         `json:"end_ms"`
			Scheduled  json.RawMessage `json:"scheduled"`
			Preempted  []string        `json:"preempted"`
			FreeBlocks int             `json:"free_blocks"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		sched, _ := p.Scheduled.MarshalJSON()
		if got.Pass != p.Index || got.StartMs != p.StartMs || got.EndMs != p.EndMs || string(got.Scheduled) != string(sched) || got.FreeBlocks != p.FreeBlocks {
			t.Fatalf("line %d = %s; want pass %+v", i+1, lines[i], p)
		}
	}
	for j, r := range out.Requests {
		var got struct {
			Request string    `json:"request"`
			TTFTMs  float64   `json:"ttft_ms"`
			Tokens  []float64 `json:"token_times_ms"`
		}
		if err := json.Unmarshal([]byte(lines[len(out.Passes)+j]), &got); err != nil {
			t.Fatal(err)
		}
		if got.Request != r.ID || got.TTFTMs != r.TTFTMs || fmt.Sprint(got.Tokens) != fmt.Sprint(r.TokenTimesMs) {
			t.Fatalf("request line %+v; want %+v", got, r)
		}
	}
}

// FuzzReadScenarioShared: scenarios with shared-prefix fields never panic the reader
// or the simulation; errors are one line; accepted prefixes fit their prompts.
func FuzzReadScenarioShared(f *testing.F) {
	f.Add([]byte(`{` + prefixEngine + `, "hash_block": 16, "requests": [{"id": "A", "arrival_ms": 0, "prompt_len": 50, "hash_ids": [1, 2], "max_tokens": 4},
		{"id": "B", "arrival_ms": 1, "prompt_len": 40, "prefix_group": 3, "prefix_len": 40, "max_tokens": 2}]}`))
	f.Add([]byte(`{"requests": [{"hash_ids": []}], "hash_block": 0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := oracle.ReadScenario(bytes.NewReader(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		total := 0
		for i, r := range sc.Requests {
			total += r.Len() + r.MaxTokens
			if sc.Shared != nil {
				sp := sc.Shared[i]
				if sp.Len > r.Len() || (sp.HashIDs != nil && len(sp.HashIDs) > (r.Len()+sp.HashBlock-1)/sp.HashBlock) {
					t.Fatalf("request %d: prefix %+v does not fit prompt %d", i, sp, r.Len())
				}
			}
		}
		if total > 20000 {
			return
		}
		res, err := sc.Simulate(context.Background(), oracle.Options{})
		if err == nil {
			if _, err := res.Summary(); err != nil {
				t.Fatalf("summary: %v", err)
			}
		}
	})
}
