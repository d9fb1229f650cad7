package store

import (
	"context"
	"testing"
)

// TestBestEmptyStoreHasPoints (what best reads to tell an empty store apart): false on a fresh store, true once a row is stored.
func TestBestEmptyStoreHasPoints(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if has, err := s.HasPoints(ctx); err != nil || has {
		t.Fatalf("fresh store: HasPoints = %v, %v", has, err)
	}
	if _, err := s.InsertPoints(ctx, []Point{testPoint(testInputs(), 10, 100)}); err != nil {
		t.Fatal(err)
	}
	if has, err := s.HasPoints(ctx); err != nil || !has {
		t.Fatalf("after one insert: HasPoints = %v, %v", has, err)
	}
}
