// Package queueing is the pass-calendar model of aggregated LLM serving
// (QUEUEING.md §1–§5, §8): it turns a workload, an engine configuration and a pass
// timing into latency distributions (TTFT, ITL, TPOT, E2E) and throughput, at two
// precision tiers of the same model:
//
//   - Quantitative: a deterministic pass-by-pass recursion of the backend's calendar
//     over request slots (the limit-cycle evaluator): O(passes), no event heap, no RNG.
//   - Screening: an O(1) closed form of the same calendar, with a [lo, hi] bracket on
//     the steady TTFT p99 that the sweep funnel relies on.
//
// The calendars follow the engine rules of SCHEDULERS.md at slot level; with a KV
// capacity they count KV blocks (vLLM preemption, SGLang reservation/retraction, the
// TRT-LLM GUARANTEED_NO_EVICT reservation; kv.go). Everything is deterministic:
// the same inputs give bit-identical reports. docs/queueing.md derives the formulas.
package queueing
