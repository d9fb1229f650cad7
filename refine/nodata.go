package refine

import (
	"errors"
	"fmt"

	"github.com/aicdb/aicdb/perfdb"
)

// ErrNoPerfData marks (wrapped) a point the perf data cannot price. Evaluators other
// than the perf-database one (the synthetic one, tests) return it; the perf-database
// evaluator's own gaps are recognised by IsPerfDataGap directly. Sweep returns it
// (wrapped) when no point of the sweep could be priced.
var ErrNoPerfData = errors.New("no perf data for this point")

// IsPerfDataGap reports whether err means the perf data cannot price one point: a
// structured table miss (perfdb.MissError, perf_interp's miss), an empirical miss
// with nothing to calibrate from (perfdb.EmpiricalMissError), a model family with
// no op list (perfdb.ErrUnsupportedFamily), or ErrNoPerfData. aiconfigurator's
// sweep skips such points (it logs the exception and continues), so a sweep counts
// them instead of aborting. Every other error (bad input, store failure,
// cancellation) is not a gap.
func IsPerfDataGap(err error) bool {
	if err == nil {
		return false
	}
	var em *perfdb.EmpiricalMissError
	return errors.Is(err, ErrNoPerfData) || perfdb.IsMiss(err) ||
		errors.Is(err, perfdb.ErrUnsupportedFamily) || errors.As(err, &em)
}

// noPerfDataError is Sweep's error when none of its points could be priced; it
// matches ErrNoPerfData (errors.Is).
type noPerfDataError struct {
	n     int
	first string
}

func (e *noPerfDataError) Error() string {
	return fmt.Sprintf("none of the %d points of this sweep has perf data (first miss: %s)", e.n, e.first)
}

func (e *noPerfDataError) Unwrap() error { return ErrNoPerfData }
