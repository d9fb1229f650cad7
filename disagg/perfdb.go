package disagg

import (
	"errors"
	"fmt"

	"github.com/aicdb/aicdb/perfdb"
)

// KVBytesPerLink returns the KV handoff per prompt token carried by one link:
// the model's KV per token (perfdb's per-GPU KVBytesPerToken of the prefill pool
// × its tp) shipped over the NICs of the side with fewer GPUs (one NIC per GPU,
// each carrying its shard). tpP and tpD are the pools' tp. A model's constant
// per-request state (GDN) is not part of the flow.
func KVBytesPerLink(pre *perfdb.Estimator, tpP, tpD int) (float64, error) {
	b := pre.KVBytesPerToken()
	if !(b > 0) {
		return 0, fmt.Errorf("kv bytes per token: the prefill pool's model gives %v", b)
	}
	return b * float64(tpP) / float64(max(min(tpP, tpD), 1)), nil
}

// FabricOf is the fabric of system s: inter_node_bw and intra_node_bw per GPU
// (bytes/s → GB/s), its GPUs per node, DefaultEfficiency.
func FabricOf(s *perfdb.System) Fabric {
	return Fabric{InterNodeGBps: s.InterNodeBW / 1e9, IntraNodeGBps: s.IntraNodeBW / 1e9,
		GPUsPerNode: s.NumGPUsPerNode, Efficiency: DefaultEfficiency}
}

// ErrDecodeKV reports a decode worker whose KV cannot hold one request.
var ErrDecodeKV = errors.New("a decode worker's KV cannot hold one request")

// DecodeKVCapacityTokens returns a decode worker's KV in tokens by
// aiconfigurator's disagg memory rule: the largest decode batch whose footprint
// passes its OOM check (perfdb.Disagg), times the request's isl + osl. A worker
// that cannot hold one request gives ErrDecodeKV.
func DecodeKVCapacityTokens(pre, dec *perfdb.Estimator, isl, osl int) (int, error) {
	fits := func(b int) (bool, error) {
		_, err := perfdb.Disagg(pre, dec, perfdb.DisaggInput{ISL: isl, OSL: osl, PrefillBatch: 1, PrefillWorkers: 1, DecodeBatch: b, DecodeWorkers: 1})
		if errors.Is(err, perfdb.ErrOOM) {
			return false, nil
		}
		return err == nil, err
	}
	ok, err := fits(1)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, ErrDecodeKV
	}
	lo, hi := 1, 2
	for ; hi <= 1<<16; lo, hi = hi, hi*2 {
		if ok, err = fits(hi); err != nil {
			return 0, err
		} else if !ok {
			break
		}
	}
	for hi-lo > 1 {
		m := (lo + hi) / 2
		if ok, err = fits(m); err != nil {
			return 0, err
		} else if ok {
			lo = m
		} else {
			hi = m
		}
	}
	return lo * (isl + osl), nil
}
