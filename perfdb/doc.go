// Package perfdb imports aiconfigurator's perf data (system specs, model configs,
// Parquet kernel tables) into the store, answers kernel-latency queries by
// aiconfigurator's interpolation rules, composes them into the latency of an engine
// pass for a model on a GPU system, and reproduces aiconfigurator's legacy static,
// mixed, agg and disagg estimates. It implements queueing/timing.Timing.
package perfdb
