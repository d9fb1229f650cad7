package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckReadOnlySQL(t *testing.T) {
	for _, q := range []string{
		"select 1", "SELECT * FROM pareto;", "  with x as (select 1) select * from x ; -- done",
		"values (1), (2)", "/* lead */ select ';' as semi, \"a;b\", [c;d], `e;f` from t;;",
		"explain query plan select * from points", "select 'it''s; fine'", "select 1 /* unterminated",
	} {
		if err := CheckReadOnlySQL(q); err != nil {
			t.Errorf("%q: %v", q, err)
		}
	}
	for q, want := range map[string]string{
		"":                             "no statement",
		" -- only a comment":           "no statement",
		"pragma query_only=0":          "PRAGMA statement is not a query",
		"select 1; delete from sweeps": "more than one statement",
		"select 1;select 2":            "more than one statement",
		"attach 'x' as y":              "ATTACH",
		"vacuum into '/tmp/x'":         "VACUUM",
		"delete from t":                "DELETE",
		"explain delete from t":        "DELETE",
		"select 'open":                 "unterminated '",
		"(select 1)":                   "does not start with a keyword",
	} {
		err := CheckReadOnlySQL(q)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", q, err, want)
		}
	}
}

// FuzzCheckReadOnlySQL: the checker never panics, and whatever it accepts stops
// being accepted once a second statement follows it.
func FuzzCheckReadOnlySQL(f *testing.F) {
	for _, s := range []string{"select 1", "with a as (select 1) select * from a", "select ';'", "select \"x\"\"y\"", "select [a", "select 1 -- x", "values(1);"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		if CheckReadOnlySQL(q) != nil {
			return
		}
		if strings.Contains(q, "--") || strings.Contains(q, "/*") {
			return // the suffix could land inside a comment
		}
		if CheckReadOnlySQL(q+";\ndelete from t") == nil {
			t.Fatalf("%q accepted with a second statement", q)
		}
	})
}

// TestQueryReadOnly: the user's statement runs on the mode=ro connection under the
// authorizer; statements that write are refused by SQLite even when the text check
// is bypassed, and the pooled connection is unrestricted afterwards.
func TestQueryReadOnly(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "q.sqlite")
	w, err := Open(ctx, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ro, err := Open(ctx, p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var got []string
	_, rows, err := ro.QueryReadOnly(ctx, "select name from pragma_table_info('store_meta') order by cid")
	for _, r := range rows {
		got = append(got, r[0].(string))
	}
	if err != nil || strings.Join(got, ",") != "key,value" {
		t.Fatalf("introspection: %v %v", got, err)
	}
	conn, err := w.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"insert into store_meta values ('a', 'b')", "pragma query_only = 0", "attach 'x.db' as x", "create temp table x(a)", "select load_extension('x')"} {
		err := withReadOnlyAuthorizer(conn, func() error {
			_, err := conn.ExecContext(ctx, q)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "not authorized") {
			t.Errorf("%q under the authorizer: %v", q, err)
		}
	}
	if _, err := conn.ExecContext(ctx, "insert into store_meta values ('a', 'b')"); err != nil {
		t.Fatalf("after the authorizer is removed: %v", err)
	}
}
