package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestLookup(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"vllm", ""},
		{"SGLang", `backend "SGLang": unknown (did you mean sglang?); use vllm, trtllm or sglang`},
		{"trtllm", ""},
		{"tgi", `backend "tgi": unknown; use vllm, trtllm or sglang`},
		{"vlm", `backend "vlm": unknown (did you mean vllm?); use vllm, trtllm or sglang`},
		{"trt-llm", `backend "trt-llm": unknown (did you mean trtllm?); use vllm, trtllm or sglang`},
		{"", `backend "": unknown; use vllm, trtllm or sglang`},
	} {
		_, err := Lookup(c.in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("Lookup(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestBackendsOrderAndNames(t *testing.T) {
	got := Backends()
	want := []Backend{VLLM, TRTLLM, SGLang}
	if len(got) != len(want) {
		t.Fatalf("Backends() = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Backends() = %v, want %v", got, want)
		}
		c, ok := got[i].Calendar()
		if !ok || c.Name() != got[i] {
			t.Fatalf("%s: Calendar() = %v, %v", got[i], c, ok)
		}
	}
	if _, ok := Backend("tgi").Calendar(); ok {
		t.Fatal(`Backend("tgi").Calendar() is registered`)
	}
}

// Every backend's defaults validate, and budget/cap read the backend's knobs.
func TestDefaults(t *testing.T) {
	for _, c := range []struct {
		b           Backend
		budget, cap int
	}{{VLLM, 8192, 1024}, {TRTLLM, 8192, 2048}, {SGLang, 8192, 2048}} {
		s, err := Defaults(c.b, "0.11.0")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s defaults: %v", c.b, err)
		}
		if s.TokenBudget() != c.budget || s.SeatCap() != c.cap {
			t.Errorf("%s: budget %d cap %d, want %d %d", c.b, s.TokenBudget(), s.SeatCap(), c.budget, c.cap)
		}
	}
	if _, err := Defaults("vllm", "x"); err == nil || err.Error() != `version "x": want a dotted version such as 0.11.0 (or empty for the latest defaults)` {
		t.Errorf("bad version: %v", err)
	}
	// Every engine's overlap / async loop is on by default (vLLM V-R10, TRT-LLM
	// §4.2, SGLang §3.2: --disable-overlap-schedule is the opt-out).
	for _, b := range Backends() {
		if s, _ := Defaults(b, ""); !s.AsyncScheduling || !s.Traits().Overlap {
			t.Errorf("%s defaults: async_scheduling %v, overlap trait %v; want both on", b, s.AsyncScheduling, s.Traits().Overlap)
		}
	}
	s, _ := Defaults(SGLang, "")
	s.EnableChunkedPrefill = false
	if s.TokenBudget() != s.MaxPrefillTokens {
		t.Errorf("SGLang without chunking: budget %d, want max_prefill_tokens %d", s.TokenBudget(), s.MaxPrefillTokens)
	}
}

func TestValidateNamesKnob(t *testing.T) {
	for _, c := range []struct {
		mod  func(*Spec)
		want string
	}{
		{func(s *Spec) { s.Backend = "tgi" }, `engine backend "tgi": unknown; use vllm, trtllm or sglang`},
		{func(s *Spec) { s.MaxNumSeqs = 0 }, "engine max_num_seqs = 0: must be > 0 for backend vllm"},
		{func(s *Spec) { s.BlockSize = -1 }, "engine block_size = -1: must be ≥ 0"},
		{func(s *Spec) {
			s.Backend, s.AsyncScheduling, s.MaxPrefillTokens, s.EnableChunkedPrefill = SGLang, true, 0, false
		},
			"engine max_prefill_tokens = 0: must be > 0 for backend sglang"},
		{func(s *Spec) { s.Backend, s.MaxBatchSize, s.MaxNumTokens = TRTLLM, 1, 64 },
			`engine capacity_policy "": use guaranteed_no_evict or max_utilization`},
	} {
		s, _ := Defaults(VLLM, "")
		c.mod(&s)
		if err := s.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("Validate = %v, want %q", err, c.want)
		}
	}
}

// The JSON field names are today's stored engine configs' and scenario files'.
func TestSpecJSONGolden(t *testing.T) {
	s, _ := Defaults(TRTLLM, "")
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"backend":"trtllm","enable_chunked_prefill":false,"async_scheduling":true,"block_size":32,"enable_mixed_chunk":false,"max_batch_size":2048,"max_num_tokens":8192,"capacity_policy":"guaranteed_no_evict"}`
	if string(b) != want {
		t.Fatalf("JSON\n got %s\nwant %s", b, want)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil || back != s {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

// GPUBlocks inverts SetGPUBlocks for every pool ≥ 1 block and block size.
func TestGPUBlocksRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := Spec{BlockSize: rapid.IntRange(1, 1024).Draw(t, "bs")}
		n := rapid.IntRange(1, 1<<20).Draw(t, "n")
		s.SetGPUBlocks(n)
		if s.GPUBlocks() != n || s.KVCapacityTokens != (n-1)*s.BlockSize {
			t.Fatalf("SetGPUBlocks(%d) with block %d: GPUBlocks %d, tokens %d", n, s.BlockSize, s.GPUBlocks(), s.KVCapacityTokens)
		}
	})
}

// Lookup never panics, and accepts exactly the registered names (case-sensitive),
// returning that backend's calendar.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{"vllm", "SGLANG", "trt", "", "ṽllm"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		c, err := Lookup(name)
		registered := slices.Contains(Backends(), Backend(name))
		if (err == nil) != registered || (err == nil) != (c != nil) || (c != nil && c.Name() != Backend(name)) {
			t.Fatalf("Lookup(%q) = %v, %v; registered %v", name, c, err, registered)
		}
	})
}

// The traits each backend declares under its defaults and under the knobs that
// change them (the scheduling rules they stand for are in the Traits doc).
func TestTraits(t *testing.T) {
	v, _ := Defaults(VLLM, "")
	tr, _ := Defaults(TRTLLM, "")
	trMax := tr
	trMax.CapacityPolicy = PolicyMaxUtilization
	sg, _ := Defaults(SGLang, "")
	sgAlt := sg
	sgAlt.EnableMixedChunk = false
	for _, c := range []struct {
		name string
		s    Spec
		want Traits
	}{
		{"vllm", v, Traits{Overlap: true, PerPassKV: true, ThresholdChunks: true, SharedBudget: true, DecodeRecomputesFirstToken: true}},
		{"trtllm no-evict", tr, Traits{Overlap: true, AdmissionReservesKV: true, SharedBudget: true, BudgetsCachedPrefix: true, BlockAlignedChunks: true, FinalFreesSeat: true}},
		{"trtllm max-util", trMax, Traits{Overlap: true, PerPassKV: true, SharedBudget: true, BudgetsCachedPrefix: true, BlockAlignedChunks: true, FinalFreesSeat: true}},
		{"sglang mixed", sg, Traits{Overlap: true, FinishedRunsAgain: true, PerPassKV: true, RatioAdmission: true, BlockAlignedChunks: true, PrefillBuffersPerSeat: 2, FirstTokenFromDecode: true, DecodePreallocates: true}},
		{"sglang alternating", sgAlt, Traits{Overlap: true, FinishedRunsAgain: true, Alternating: true, PerPassKV: true, RatioAdmission: true, BlockAlignedChunks: true, PrefillBuffersPerSeat: 2, FirstTokenFromDecode: true, DecodePreallocates: true}},
		{"unknown", Spec{Backend: "tgi"}, Traits{}},
	} {
		if got := c.s.Traits(); got != c.want {
			t.Errorf("%s: traits %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestSGLangChunkedPrefillSize pins SGLang's capacity tiers at their edges
// (ServerArgs._handle_gpu_memory_settings): the bound belongs to the next tier.
func TestSGLangChunkedPrefillSize(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		mem  float64
		want int
	}{{0, 0}, {-1, 0}, {16 * gib, 2048}, {35*gib - 1, 2048}, {35 * gib, 4096}, {60*gib - 1, 4096},
		{60 * gib, 8192}, {80 * gib, 8192}, {160 * gib, 16384}, {192 * gib, 16384}} {
		if got := SGLangChunkedPrefillSize(tc.mem); got != tc.want {
			t.Errorf("SGLangChunkedPrefillSize(%g GiB) = %d, want %d", tc.mem/gib, got, tc.want)
		}
	}
}

// TestPrefillInFlightCap: SGLang's prefill server has two handoff buffers per
// running slot (S-D1) and lowers a looser deployed κ to them; engines without
// buffers keep the deployed κ (0 = none).
func TestPrefillInFlightCap(t *testing.T) {
	sg := Spec{Backend: SGLang}
	vl := Spec{Backend: VLLM}
	for _, c := range []struct {
		name                  string
		s                     Spec
		seats, deployed, want int
	}{
		{"sglang, no deployed cap", sg, 4, 0, 8},
		{"sglang, looser deployed cap", sg, 4, 20, 8},
		{"sglang, tighter deployed cap", sg, 4, 3, 3},
		{"vllm, none", vl, 4, 0, 0},
		{"vllm, deployed", vl, 4, 5, 5},
	} {
		if got := PrefillInFlightCap(c.s, c.seats, c.deployed); got != c.want {
			t.Errorf("%s: PrefillInFlightCap(%d, %d) = %d, want %d", c.name, c.seats, c.deployed, got, c.want)
		}
	}
}

// TestDecodeSlots: an SGLang decode server holds its running cap plus a
// pre-allocation reserve of twice it while the cap is ≤ 32, else the cap alone
// (S-D2); engines that do not preallocate have none.
func TestDecodeSlots(t *testing.T) {
	sg := Spec{Backend: SGLang}
	for _, c := range []struct{ seats, want int }{{1, 3}, {32, 96}, {33, 33}, {256, 256}} {
		if got := DecodeSlots(sg, c.seats); got != c.want {
			t.Errorf("SGLang DecodeSlots(%d) = %d, want %d", c.seats, got, c.want)
		}
	}
	if got := DecodeSlots(Spec{Backend: TRTLLM}, 8); got != 0 {
		t.Errorf("TRT-LLM DecodeSlots = %d, want 0", got)
	}
}

// TestValidateDrafts: MTP drafts are accepted on vLLM, on TensorRT-LLM under
// GUARANTEED_NO_EVICT and on SGLang without the overlap scheduler and mixed chunk
// (SetDrafts), with an acceptance in [0, drafts]; every other use is a one-line
// error naming the knob.
func TestValidateDrafts(t *testing.T) {
	trt, _ := Defaults(TRTLLM, "")
	trt.DraftTokens, trt.DraftAccepted = 1, 0.85
	if err := trt.Validate(); err != nil {
		t.Fatalf("MTP on TensorRT-LLM: %v", err)
	}
	cases := []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"negative drafts", func(s *Spec) { s.DraftTokens = -1 }, "draft_tokens = -1"},
		{"too many drafts", func(s *Spec) { s.DraftTokens = 65 }, "draft_tokens = 65"},
		{"acceptance above drafts", func(s *Spec) { s.DraftAccepted = 1.5 }, "draft_accepted = 1.5"},
		{"acceptance without drafts", func(s *Spec) { s.DraftTokens = 0 }, "draft_accepted = 0.85"},
		{"negative acceptance", func(s *Spec) { s.DraftAccepted = -0.1 }, "draft_accepted = -0.1"},
		{"max_utilization", func(s *Spec) { s.CapacityPolicy = PolicyMaxUtilization }, "max_utilization is not modelled"},
	}
	for _, c := range cases {
		s := trt
		c.edit(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// vLLM MTP (V-S1..V-S4): both scheduling modes; SetDrafts changes nothing else.
	for _, async := range []bool{false, true} {
		v, _ := Defaults(VLLM, "")
		v.AsyncScheduling = async
		v.SetDrafts(2, 1.4)
		if err := v.Validate(); err != nil || v.AsyncScheduling != async {
			t.Errorf("vLLM MTP (async %t): %v, spec %+v", async, err, v)
		}
	}
	// SGLang EAGLE / NEXTN: SetDrafts turns the overlap scheduler and mixed chunk
	// off as SGLang's server arguments do; set back on, Validate names both.
	sg, _ := Defaults(SGLang, "")
	sg.EnableMixedChunk = true
	sg.SetDrafts(2, 1.3)
	if sg.AsyncScheduling || sg.EnableMixedChunk || sg.DraftTokens != 2 || sg.DraftAccepted != 1.3 {
		t.Fatalf("SGLang SetDrafts(2, 1.3) = %+v: want drafts 2 at 1.3, overlap and mixed chunk off", sg)
	}
	if err := sg.Validate(); err != nil {
		t.Fatalf("EAGLE on SGLang: %v", err)
	}
	for name, edit := range map[string]func(*Spec){
		"overlap":     func(s *Spec) { s.AsyncScheduling = true },
		"mixed chunk": func(s *Spec) { s.EnableMixedChunk = true },
	} {
		s := sg
		edit(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "set async_scheduling false and enable_mixed_chunk false") {
			t.Errorf("SGLang drafts with %s: got %v, want the server-arguments error", name, err)
		}
	}
	// SetDrafts leaves the other backends' scheduling knobs alone.
	tr, _ := Defaults(TRTLLM, "")
	tr.SetDrafts(1, 0.85)
	if !tr.AsyncScheduling {
		t.Errorf("TensorRT-LLM SetDrafts turned the overlap executor off")
	}
}

// TestValidateDrafter: a separate drafter (an EAGLE / EAGLE3 head) needs its
// method, its checkpoint and drafts, on vLLM, SGLang or TensorRT-LLM (EAGLE3
// only: its one-model EAGLE mode); each misuse is a one-line error naming the
// knob and the fix.
func TestValidateDrafter(t *testing.T) {
	v, _ := Defaults(VLLM, "")
	v.SetDrafts(3, 2)
	v.DraftMethod, v.DraftModel = "eagle3", "org/head"
	if err := v.Validate(); err != nil || !v.SeparateDrafter() {
		t.Fatalf("EAGLE3 on vLLM: %v (separate %v)", err, v.SeparateDrafter())
	}
	sg, _ := Defaults(SGLang, "")
	sg.SetDrafts(3, 2)
	sg.DraftMethod, sg.DraftModel = "eagle", "org/head"
	if err := sg.Validate(); err != nil {
		t.Fatalf("an EAGLE head on SGLang: %v", err)
	}
	trt, _ := Defaults(TRTLLM, "")
	trt.SetDrafts(3, 2)
	trt.DraftMethod, trt.DraftModel = "eagle3", "org/head"
	if err := trt.Validate(); err != nil {
		t.Fatalf("an EAGLE3 head on TensorRT-LLM: %v", err)
	}
	cases := []struct {
		name string
		s    Spec
		edit func(*Spec)
		want string
	}{
		{"model without method", v, func(s *Spec) { s.DraftMethod = "" }, `engine draft_model = "org/head" without draft_method: a drafter checkpoint runs only as an EAGLE / EAGLE3 drafter (the MTP drafter is the model's own layers); set draft_method or drop draft_model`},
		{"unknown method", v, func(s *Spec) { s.DraftMethod = "medusa" }, `engine draft_method = "medusa": unknown; use eagle, eagle3 (or none for the model's own MTP layers)`},
		{"no checkpoint", v, func(s *Spec) { s.DraftModel = "" }, `engine draft_method = "eagle3": needs draft_model, the drafter's checkpoint (vLLM speculative_config model, SGLang speculative_draft_model_path, TensorRT-LLM speculative_config speculative_model_dir)`},
		{"no drafts", v, func(s *Spec) { s.SetDrafts(0, 0) }, `engine draft_method = "eagle3": needs draft_tokens ≥ 1 (vLLM speculative_config num_speculative_tokens, SGLang speculative_num_steps, TensorRT-LLM speculative_config max_draft_len)`},
		{"TensorRT-LLM EAGLE", trt, func(s *Spec) { s.DraftMethod = "eagle" }, `engine draft_method = "eagle": TensorRT-LLM's PyTorch flow drafts with an EAGLE3 head (speculative_config decoding_type Eagle); use eagle3`},
	}
	for _, c := range cases {
		s := c.s
		c.edit(&s)
		if err := s.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("%s: got %v\nwant %s", c.name, err, c.want)
		}
	}
}
