// Package disagg will hold the prefill/decode tandem of QUEUEING.md §6: prefill and
// decode pools with their own calendars and timing, a round-robin router, a max-min
// fair KV-transfer fabric, decode-side staging and prefill-side hold.
//
// It is not built yet. Until it is, disaggregated operating points are "composed"
// from the legacy static prefill and decode estimates (queueing tier "composed"), and
// every such row says so in its queueing_tier column.
package disagg
