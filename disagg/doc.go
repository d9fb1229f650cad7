// Package disagg is the prefill/decode tandem of QUEUEING.md §6: nP prefill and nD
// decode workers, each its backend's pass calendar driven by one outside clock
// (queueing.Kernel) and priced by its own pool's timing; static round-robin
// routing at the scheduler-visibility instant; a fluid KV-transfer fabric whose
// flows share each NIC max-min fairly; pull connectors (the decode worker reserves
// the request's KV before the transfer, the prefill worker holds its slot until
// pulled) or push connectors; the first token from the prefill worker or, with
// HandoffInTTFT, after the handoff.
//
// Quantitative is a deterministic event recursion (closed loop: the flagged
// mixture of a burst and a staggered start, open loop: the W1 stream); Screening
// is a closed form in microseconds whose TTFT lower bound is certain and whose
// upper bound is an estimate. Both report the aggregated columns
// (queueing.Report.Columns) plus kv_transfer_ms_mean, kv_transfer_ms_p99,
// p_queue_ms_p99, d_headroom_min and multi_stable.
package disagg
