// Package oracle is a discrete-event simulation of the LLM serving engines' real
// iteration-level schedulers (SCHEDULERS.md): vLLM v1 with its KV block pool, prefix
// cache, chunked prefill, preemption by recompute and async scheduling. It is the
// reference the queueing model is validated against (QUEUEING.md §8), so it shares
// nothing with the model's calendars: only the pass timing (queueing/timing) and the
// workload input types (queueing/workload).
//
// Time is simulated in milliseconds; there is no wall clock and no unseeded
// randomness, so a run is bit-reproducible.
package oracle
