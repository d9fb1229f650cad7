package calibrate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aicdb/aicdb/store"
)

// GroupColumns are the accuracy view's columns a report may group by.
var GroupColumns = []string{"backend", "model", "system", "mode", "version", "version_used", "gemm_quant", "isl", "osl", "tp", "concurrency", "calibration", "run"}

// MAPERow is one (group, metric) line of an accuracy report: the mean absolute
// percentage error of the predictions and, on the same rows, of aiconfigurator's
// legacy estimate (LegacyN = 0 when it has none for the metric).
type MAPERow struct {
	Group       []string
	Metric      string
	N           int     // predicted rows
	MAPE        float64 // %
	LegacyN     int
	LegacyMAPE  float64 // % on the rows with a legacy estimate
	MAPESame    float64 // % of the predictions on those same rows
	Unpredicted int     // measured rows without a prediction (see the view's reason)
}

// Report reads MAPE per group and metric from the accuracy view, for one
// calibration ("" = uncalibrated), over measurements matching where ("" = all).
func Report(ctx context.Context, st *store.Store, by []string, metrics []string, calibration, where string) ([]MAPERow, error) {
	for _, b := range by {
		if !slices.Contains(GroupColumns, b) {
			return nil, fmt.Errorf("--by %s: want some of %s", b, strings.Join(GroupColumns, ", "))
		}
	}
	sel := "''"
	if len(by) > 0 {
		parts := make([]string, len(by))
		for i, b := range by {
			parts[i] = "coalesce(CAST(" + b + " AS TEXT), '')"
		}
		sel = strings.Join(parts, " || char(31) || ")
	}
	q := `SELECT ` + sel + ` AS grp, metric,
		count(rel_error),
		coalesce(100 * avg(abs(rel_error)), 0),
		count(CASE WHEN rel_error IS NOT NULL THEN legacy_rel_error END),
		coalesce(100 * avg(CASE WHEN rel_error IS NOT NULL THEN abs(legacy_rel_error) END), 0),
		coalesce(100 * avg(CASE WHEN legacy_rel_error IS NOT NULL THEN abs(rel_error) END), 0),
		count(*) - count(rel_error)
		FROM accuracy WHERE calibration = ?`
	args := []any{calibration}
	if strings.TrimSpace(where) != "" {
		q += ` AND measurement_id IN (SELECT id FROM measurements WHERE (` + where + `))`
	}
	if len(metrics) > 0 {
		q += ` AND metric IN (?` + strings.Repeat(", ?", len(metrics)-1) + `)`
		for _, m := range metrics {
			args = append(args, m)
		}
	}
	q += ` GROUP BY grp, metric ORDER BY grp, metric`
	rows, err := st.DB.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("accuracy report: %w", err)
	}
	defer rows.Close()
	var out []MAPERow
	for rows.Next() {
		var r MAPERow
		var g string
		if err := rows.Scan(&g, &r.Metric, &r.N, &r.MAPE, &r.LegacyN, &r.LegacyMAPE, &r.MAPESame, &r.Unpredicted); err != nil {
			return nil, fmt.Errorf("accuracy report: %w", err)
		}
		if len(by) > 0 {
			r.Group = strings.Split(g, "\x1f")
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
