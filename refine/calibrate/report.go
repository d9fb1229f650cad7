package calibrate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aicdb/aicdb/store"
)

// GroupColumns are the accuracy view's columns a report may group by.
var GroupColumns = []string{"backend", "model", "system", "mode", "version", "version_used", "gemm_quant", "isl", "osl", "tp", "pp", "dp", "moe_ep", "concurrency", "calibration", "run", "nextn", "deployed_as"}

// CheckGroupBy refuses a grouping column that is not one of GroupColumns.
func CheckGroupBy(by []string) error {
	for _, b := range by {
		if !slices.Contains(GroupColumns, b) {
			return fmt.Errorf("--by %s: want some of %s", b, strings.Join(GroupColumns, ", "))
		}
	}
	return nil
}

// MAPERow is one (group, metric) line of an accuracy report: the mean absolute
// percentage error of the predictions and, on the same rows, of aiconfigurator's
// legacy estimate (LegacyN = 0 when it has none for the metric).
type MAPERow = store.AccuracyRow

// Report reads MAPE per group and metric from the accuracy view, for one
// calibration ("" = uncalibrated), over measurements matching where ("" = all).
func Report(ctx context.Context, st *store.Store, by []string, metrics []string, calibration, where string) ([]MAPERow, error) {
	if err := CheckGroupBy(by); err != nil {
		return nil, err
	}
	rows, err := st.AccuracyReport(ctx, by, metrics, calibration, where)
	if err != nil {
		return nil, fmt.Errorf("accuracy report: %w", err)
	}
	return rows, nil
}
