package store

import (
	"database/sql"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
)

// sqlDrivers are the imports that give a package its own SQL handle.
var sqlDrivers = []string{"database/sql", "github.com/jmoiron/sqlx", "modernc.org/sqlite"}

// sqlStart matches a string that starts like a SQL statement: an upper-case
// statement keyword, or a lower-case statement shape (English text such as "drop
// --wide-ep to …" or "with --trace: …" is not SQL).
var sqlStart = regexp.MustCompile(`^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|WITH|REPLACE|DROP|ALTER|PRAGMA)\s|` +
	`(?is)^\s*(select\s.*\bfrom\s|select\s+\d|insert\s+(or\s+\w+\s+)?into\s|update\s+\w+\s+set\s|delete\s+from\s|` +
	`create\s+(temp\s+|temporary\s+)?(table|view|index|trigger)\s|drop\s+(table|view|index|trigger)\s|pragma\s+\w+|with\s+(recursive\s+)?\w+\s+as\s*\()`)

// storeOnly are store methods that take SQL text: for store/ and its
// subpackages only.
var storeOnly = map[string]bool{"EachRow": true}

// boundaryViolations lists, for one parsed production file outside store/, every
// import of a SQL driver or of storetest, every string literal that starts like
// SQL and every call of a store-only method.
func boundaryViolations(fset *token.FileSet, f *ast.File) []string {
	var out []string
	at := func(p token.Pos, format string, a ...any) {
		out = append(out, fset.Position(p).String()+": "+fmt.Sprintf(format, a...))
	}
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		for _, d := range sqlDrivers {
			if path == d || strings.HasPrefix(path, d+"/") {
				at(im.Pos(), "imports %s (SQL belongs in store/)", path)
			}
		}
		if path == "github.com/aicdb/aicdb/store/storetest" {
			at(im.Pos(), "imports storetest (tests only)")
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(n.Value)
			if err == nil && sqlStart.MatchString(s) {
				at(n.Pos(), "SQL text %.40q (move it into a store method)", s)
			}
		case *ast.SelectorExpr:
			if storeOnly[n.Sel.Name] {
				at(n.Pos(), "calls %s (store/ only: add a store method)", n.Sel.Name)
			}
		}
		return true
	})
	return out
}

// TestSQLStaysInStore: no package outside store/ (and its subpackages) imports
// a SQL driver or storetest, writes SQL text or hands SQL to the store's
// internal row reader, in its production .go files. The user's own SQL (aicdb
// query, plot pareto) reaches the store as data, through QueryReadOnly/QueryWrite.
func TestSQLStaysInStore(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == "store" || d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && rel != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, v := range boundaryViolations(fset, f) {
			t.Errorf("%s", strings.TrimPrefix(v, root+string(filepath.Separator)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("walked %d production files under %s: the walk missed the repository", files, root)
	}
}

// TestBoundaryViolationsCatch: the checker finds each kind of violation (so an
// empty report above means something).
func TestBoundaryViolationsCatch(t *testing.T) {
	src := `package p
import (
	"database/sql"
	sqlite3 "modernc.org/sqlite/lib"
	"github.com/aicdb/aicdb/store/storetest"
)
const q = ` + "`\n\tselect 1`" + `
var w = "WITH x AS (SELECT 1) SELECT * FROM x"
var ok = "selected rows"
var en = "drop --wide-ep to price it, or create the store"
func f(st any) { st.EachRow(nil, "", nil, nil) }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := boundaryViolations(fset, f)
	want := []string{
		"p.go:3:2: imports database/sql (SQL belongs in store/)",
		"p.go:4:2: imports modernc.org/sqlite/lib (SQL belongs in store/)",
		"p.go:5:2: imports storetest (tests only)",
		`p.go:7:11: SQL text "\n\tselect 1" (move it into a store method)`,
		`p.go:9:9: SQL text "WITH x AS (SELECT 1) SELECT * FROM x" (move it into a store method)`,
		"p.go:12:18: calls EachRow (store/ only: add a store method)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNoHandleExported: Store hands out no database handle: no exported field
// and no exported method result is a *sql.DB, *sqlx.DB or *sql.Conn.
func TestNoHandleExported(t *testing.T) {
	handles := map[reflect.Type]bool{
		reflect.TypeFor[*sql.DB](): true, reflect.TypeFor[*sqlx.DB](): true, reflect.TypeFor[*sql.Conn](): true,
	}
	st := reflect.TypeFor[Store]()
	for i := range st.NumField() {
		if f := st.Field(i); f.IsExported() && handles[f.Type] {
			t.Errorf("Store.%s is an exported %v", f.Name, f.Type)
		}
	}
	pt := reflect.TypeFor[*Store]()
	for i := range pt.NumMethod() {
		m := pt.Method(i)
		for j := range m.Type.NumOut() {
			if handles[m.Type.Out(j)] {
				t.Errorf("Store.%s returns a %v", m.Name, m.Type.Out(j))
			}
		}
	}
}
