package perfdb

import (
	"context"
	"errors"
	"math"
	"testing"
)

// qwen32bEstimator is Qwen/Qwen3-32B on the embedded h200_sxm vLLM 0.22.0 data.
func qwen32bEstimator(t *testing.T, tp int) *Estimator {
	t.Helper()
	return qwen32bEstimatorWith(t, Config{Backend: "vllm", Version: "0.22.0", TP: tp})
}

// qwen32bEstimatorWith is qwen32bEstimator under cfg.
func qwen32bEstimatorWith(t *testing.T, cfg Config) *Estimator {
	t.Helper()
	d, err := LoadEmbedded(context.Background(), "h200_sxm", "vllm", "0.22.0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := EmbeddedModel("Qwen/Qwen3-32B")
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEstimator(d, m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestKVCapacityQwen32BHand checks the KV pool of Qwen3-32B on h200_sxm, vLLM
// 0.22.0, tp 2 (isl 4000, osl 500, block 16) against a hand computation:
//
//	weights/GPU = (64·(5120·(8192+2·1024) + 8192·5120 + 3·5120·25600) + 2·151936·5120)·2 B / 2 = 32 761 446 400 B
//	activations = 2·4000·(64·128)·6.5 (LLAMA, tp 2)                                             =    425 984 000 B
//	nccl (tp 2) = 358 612 992 B;  others = 3 758 096 384 B;  capacity = 151 397 597 184 B
//	budget      = capacity·0.92 (gpu_memory_utilization, vLLM 0.22)·0.98 (tolerance) − the above
//	per token   = ⌈8/2⌉ kv heads · 128 · 64 layers · 2 (K, V) · 2 B = 131 072 B
//	tokens      = ⌊budget / 131 072 / 16⌋·16 = 756 800
func TestKVCapacityQwen32BHand(t *testing.T) {
	e := qwen32bEstimator(t, 2)
	weights := (64*(5120*(8192+2*1024)+8192*5120+3*5120*25600) + 2*151936*5120) * 2 / 2
	act := 2 * 4000 * (64 * 128) * 6.5
	budget := 151397597184*0.92*0.98 - (float64(weights) + act + 358612992 + 3758096384)
	perTok := 4 * 128 * 64 * 2 * 2
	if got := e.KVBytesPerToken(); got != float64(perTok) {
		t.Fatalf("KVBytesPerToken = %v, want %d", got, perTok)
	}
	want := int(math.Floor(budget/float64(perTok))) / 16 * 16
	if want != 756800 {
		t.Fatalf("hand computation gives %d, want 756800", want)
	}
	got, err := e.KVCapacityTokens(4000, 500, 16)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("KVCapacityTokens = %d, want %d (hand)", got, want)
	}
	if got%16 != 0 {
		t.Errorf("KVCapacityTokens = %d: not whole blocks of 16", got)
	}
}

// TestKVCapacityOOM: a worker whose weights + one request's KV do not fit gives
// ErrOOM with the memory arithmetic in GiB per GPU.
func TestKVCapacityOOM(t *testing.T) {
	e := qwen32bEstimator(t, 1)
	_, err := e.KVCapacityTokens(200000, 500, 16)
	if !errors.Is(err, ErrOOM) {
		t.Fatalf("err = %v, want ErrOOM", err)
	}
	want := "out of memory: vllm KV budget 141.00 GiB × 0.92 × 0.98 − (weights 61.02 + activations 33.57 + nccl 0.00 + others 3.50 GiB) = 29.03 GiB per GPU < the KV of one request of isl 200000 + osl 500 (48.95 GiB) on h200_sxm tp 1; raise --tp/--pp or shorten the request"
	if err.Error() != want {
		t.Errorf("error\n got %s\nwant %s", err, want)
	}
	if _, err := e.KVCapacityTokens(4000, 500, 0); err == nil {
		t.Error("block size 0: no error")
	}
}

// TestKVCapacityTokensWithKnobs: an engine config's memory keys replace the
// fraction (gpu_memory_utilization 0.8 in the hand budget of
// TestKVCapacityQwen32BHand) or the whole budget (kv_cache_memory_bytes 40 GiB:
// 40·2^30 / 131 072 = 327 680 tokens), and a kv_cache_memory_bytes above the
// memory left after the non-KV footprint is ErrOOM; the zero knobs are
// KVCapacityTokens.
func TestKVCapacityTokensWithKnobs(t *testing.T) {
	e := qwen32bEstimator(t, 2)
	weights := (64*(5120*(8192+2*1024)+8192*5120+3*5120*25600) + 2*151936*5120) * 2 / 2
	nonKV := float64(weights) + 2*4000*(64*128)*6.5 + 358612992 + 3758096384
	const perTok = 4 * 128 * 64 * 2 * 2
	for _, c := range []struct {
		k    KVPoolKnobs
		want int
	}{
		{KVPoolKnobs{}, 756800},
		{KVPoolKnobs{MemFraction: 0.8}, int(math.Floor((151397597184*0.8*0.98-nonKV)/perTok)) / 16 * 16},
		{KVPoolKnobs{KVCacheBytes: 40 << 30}, 327680},
	} {
		got, err := e.KVCapacityTokensWith(4000, 500, 16, c.k)
		if err != nil || got != c.want {
			t.Errorf("%+v: %d (err %v), want %d", c.k, got, err, c.want)
		}
	}
	if _, err := e.KVCapacityTokensWith(4000, 500, 16, KVPoolKnobs{KVCacheBytes: 140 << 30}); !errors.Is(err, ErrOOM) {
		t.Errorf("kv_cache_memory_bytes 140 GiB on a 141 GiB GPU: err %v, want ErrOOM", err)
	}
}
