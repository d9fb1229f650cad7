// Package trace reads request traces (issue 13, workload fidelity W3/W4): Mooncake
// JSONL, the Azure LLM inference 2023 CSV, ServeGen client pools and aicdb's generic
// JSONL (docs/traces.md). Every parser streams: it reads one line at a time and hands
// each request to a callback, so a million-row trace is never held as text.
//
// The package is standalone (standard library only) on purpose: the formats are input
// plumbing, not queueing or scheduling, and the store, the CLI and later the replay
// tiers all consume the same Request stream. Errors on bad rows are *RowError values
// naming the file, the line and the field.
package trace
