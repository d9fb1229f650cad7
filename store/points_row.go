package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoPoint is returned (wrapped) by FindPoint when no row matches.
var ErrNoPoint = errors.New("no such operating point")

// FindPoint reads one row of the points view (OOM rows included) by ref: a
// decimal SQLite rowid of operating_points (any all-digit ref), or a key or its
// prefix of at least 6 hex digits (it must match exactly one row).
func (s *Store) FindPoint(ctx context.Context, ref string) (Point, error) {
	ref = strings.TrimSpace(ref)
	var f PointFilter
	f.IncludeOOM = true
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil && id > 0 {
		f.Where, f.WhereArgs = "key = (SELECT key FROM operating_points WHERE rowid = ?)", []any{id}
	} else if isHex6(ref) {
		f.Where, f.WhereArgs = "substr(key, 1, ?) = ?", []any{len(ref), strings.ToLower(ref)}
	} else {
		return Point{}, fmt.Errorf("row %q: want a row id (a positive integer) or a key prefix of at least 6 hex digits", ref)
	}
	pts, err := s.SelectPoints(ctx, f)
	if err != nil {
		return Point{}, err
	}
	switch len(pts) {
	case 0:
		return Point{}, fmt.Errorf("row %s: %w", ref, ErrNoPoint)
	case 1:
		return pts[0], nil
	}
	return Point{}, fmt.Errorf("row %s: the key prefix matches %d rows; give more digits", ref, len(pts))
}

// isHex6 reports a string of at least 6 hex digits, at most a key's 64.
func isHex6(s string) bool {
	return len(s) >= 6 && len(s) <= 64 && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}
