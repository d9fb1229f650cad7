package gate

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/aicdb/aicdb/engine"
)

// TestDisaggPrefillCapAgainstDES: on random small tandems whose prefill workers
// cap their running requests (the engine's max_num_seqs / max_batch_size, a
// per-worker batch cap 1..4, or none) with and without an in-flight cap κ, pull
// and push connectors, every backend: the tandem and the disaggregated DES agree
// on every gated metric within 1e-9 (relative). A prompt that finished and waits
// for its pull holds its KV and counts against κ but takes no seat: it has left
// the running set (V-P3, T-D1), so the next prompt can start. Seeded.
func TestDisaggPrefillCapAgainstDES(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261204, 29))
	backends := []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang}
	for i := range 24 {
		b := backends[i%3]
		e, err := engine.Defaults(b, "")
		if err != nil {
			t.Fatal(err)
		}
		if b == engine.VLLM {
			e = vllm(2048, 256)
		}
		if b == engine.SGLang {
			e.AsyncScheduling = i%2 == 0
		}
		isl, osl, c := 16+rng.IntN(1000), 2+rng.IntN(30), 1+rng.IntN(10)
		cfg := tandemConfig(1+rng.IntN(2), 1+rng.IntN(2), e, 2+rng.Float64()*20)
		cfg.Push = i%4 == 3
		cfg.Prefill.BatchCap = rng.IntN(5)
		cfg.Prefill.InFlightCap = rng.IntN(4)
		if rng.IntN(2) == 0 { // the engine's own seat cap, as the aiconfigurator profile deploys prefill workers (max_num_seqs 1)
			cfg.Prefill.Engine.SetSeatCap(1)
		}
		name := fmt.Sprintf("%s prefill cap %d: push %t pcap %d κ %d seats %d nP %d nD %d isl %d osl %d c %d",
			b, i, cfg.Push, cfg.Prefill.BatchCap, cfg.Prefill.InFlightCap, cfg.Prefill.Engine.SeatCap(), cfg.Prefill.Workers, cfg.Decode.Workers, isl, osl, c)
		requireExactDisagg(t, DisaggFamily{Name: name, Spec: closed(isl, osl, 0, c), Config: cfg})
	}
}
