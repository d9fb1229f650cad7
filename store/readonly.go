package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// A user's SQL (aicdb query without --write) is kept from changing the store by
// three independent layers, any one of which stops a write:
//
//  1. CheckReadOnlySQL: the text is exactly one SELECT, WITH or VALUES statement
//     (optionally under EXPLAIN), so no PRAGMA, ATTACH, VACUUM or second statement;
//  2. ReadOnlyAuthorizer, installed on the connection that compiles the statement
//     (SQLite's authorizer sees every operation of every statement it compiles,
//     inside views and CTEs too, and denies all but reads);
//  3. the connection itself is opened with mode=ro (SQLITE_OPEN_READONLY), which no
//     statement can undo, unlike PRAGMA query_only.
//
// modernc.org/sqlite does not expose sqlite3_stmt_readonly; the authorizer is the
// stronger check anyway (it also covers ATTACH and VACUUM INTO, which
// sqlite3_stmt_readonly would not flag as writes to the store).

// introspectionPragmas are pragmas with no side effect whatever their argument;
// SQLite presents them to the authorizer when a SELECT reads the table-valued
// function pragma_NAME(...).
var introspectionPragmas = map[string]bool{
	"table_info": true, "table_xinfo": true, "table_list": true, "index_list": true,
	"index_info": true, "index_xinfo": true, "foreign_key_list": true, "database_list": true,
	"collation_list": true, "function_list": true, "module_list": true, "pragma_list": true,
	"compile_options": true,
}

// readPragmas are pragmas that only read when given no argument.
var readPragmas = map[string]bool{
	"application_id": true, "user_version": true, "schema_version": true, "page_count": true,
	"page_size": true, "freelist_count": true, "journal_mode": true, "encoding": true,
}

// ReadOnlyAuthorizer is the SQLite authorizer policy of a user's query: it allows
// SELECT, reads of tables, views and table-valued functions, function calls (but
// load_extension), recursive CTEs and the side-effect-free pragmas behind
// pragma_table_info & co; it denies everything else: inserts, updates, deletes, DDL
// (temp objects too), ATTACH/DETACH (and so VACUUM INTO), VACUUM's other forms,
// transactions, savepoints and every other PRAGMA.
func ReadOnlyAuthorizer(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRead, sqlite.AuthRecursive:
		return sqlite.AuthorizerOK
	case sqlite.AuthFunction:
		if strings.EqualFold(arg2, "load_extension") {
			return sqlite.AuthorizerDeny
		}
		return sqlite.AuthorizerOK
	case sqlite.AuthPragma:
		p := strings.ToLower(arg1)
		if introspectionPragmas[p] || (readPragmas[p] && arg2 == "") {
			return sqlite.AuthorizerOK
		}
	}
	return sqlite.AuthorizerDeny
}

// withReadOnlyAuthorizer runs fn with ReadOnlyAuthorizer installed on conn, and
// removes it after (so a pooled connection goes back unrestricted). Statements
// compiled on conn meanwhile can only read.
func withReadOnlyAuthorizer(conn *sql.Conn, fn func() error) error {
	set := func(a sqlite.AuthorizerFn) error {
		return conn.Raw(func(dc any) error {
			r, ok := dc.(sqlite.AuthorizerRegisterer)
			if !ok {
				return errors.New("the SQLite driver has no authorizer: refusing to run the query")
			}
			return r.RegisterAuthorizer(a)
		})
	}
	if err := set(ReadOnlyAuthorizer); err != nil {
		return err
	}
	err := fn()
	if rerr := set(nil); rerr != nil && err == nil {
		err = fmt.Errorf("remove the read-only authorizer: %w", rerr)
	}
	return err
}

// ErrDenied is wrapped by QueryReadOnly when SQLite's authorizer refused an
// operation of the statement (a write, DDL, ATTACH, PRAGMA, load_extension …).
var ErrDenied = errors.New("the statement does more than read the store")

// QueryReadOnly runs one user statement on the read-only store s under
// ReadOnlyAuthorizer and returns its column names and rows (each value as the
// driver gives it).
func (s *Store) QueryReadOnly(ctx context.Context, q string) ([]string, [][]any, error) {
	if !s.ReadOnly {
		return nil, nil, errors.New("QueryReadOnly needs a store opened with ReadOnly")
	}
	if err := CheckReadOnlySQL(q); err != nil {
		return nil, nil, err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	var cols []string
	var data [][]any
	err = withReadOnlyAuthorizer(conn, func() error {
		rows, err := conn.QueryContext(ctx, q)
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_AUTH {
			return fmt.Errorf("%w (SQLite: %v)", ErrDenied, err)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		if cols, data, err = scanAll(rows); err != nil {
			return err
		}
		return rows.Close()
	})
	return cols, data, err
}

// QueryWrite runs one user statement (aicdb query --write: any SQL, writes
// included) on the writable store s and returns its column names and rows.
func (s *Store) QueryWrite(ctx context.Context, q string) ([]string, [][]any, error) {
	if s.ReadOnly {
		return nil, nil, errors.New("QueryWrite needs a store opened writable")
	}
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	cols, data, err := scanAll(rows)
	if err != nil {
		return nil, nil, err
	}
	return cols, data, rows.Close()
}

// CheckReadOnlySQL reports an error unless q is exactly one SELECT, WITH or VALUES
// statement, optionally prefixed by EXPLAIN [QUERY PLAN]; comments and one trailing
// ';' are allowed. It lexes like SQLite: '…' strings, "…", `…` and […] identifiers,
// -- and /* */ comments (an unterminated /* comment runs to the end, as in SQLite).
func CheckReadOnlySQL(q string) error {
	var words []string // the first few bare words, lower-cased
	statements := 0    // statements ended by ';' so far
	content := false   // tokens since the last ';'
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			for i < len(q) && q[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			j := strings.Index(q[i+2:], "*/")
			if j < 0 {
				i = len(q)
			} else {
				i += j + 4
			}
			continue
		case c == ';':
			if content {
				statements++
			}
			content = false
			i++
			continue
		}
		if statements > 0 {
			return errors.New("more than one statement")
		}
		content = true
		switch {
		case c == '\'' || c == '"' || c == '`' || c == '[':
			end := c
			if c == '[' {
				end = ']'
			}
			j := i + 1
			for {
				k := strings.IndexByte(q[j:], end)
				if k < 0 {
					return fmt.Errorf("unterminated %c at byte %d", c, i)
				}
				j += k + 1
				if end != ']' && j < len(q) && q[j] == end { // doubled quote: an escaped one
					j++
					continue
				}
				break
			}
			i = j
			words = append(words, "") // not a keyword
		case c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || c >= 0x80:
			j := i
			for j < len(q) && (q[j] == '_' || q[j] == '$' || (q[j]|0x20 >= 'a' && q[j]|0x20 <= 'z') || (q[j] >= '0' && q[j] <= '9') || q[j] >= 0x80) {
				j++
			}
			words = append(words, strings.ToLower(q[i:j]))
			i = j
		default:
			words = append(words, "")
			i++
		}
	}
	if len(words) == 0 {
		return errors.New("no statement")
	}
	w := words
	if w[0] == "explain" {
		w = w[1:]
		if len(w) >= 2 && w[0] == "query" && w[1] == "plan" {
			w = w[2:]
		}
	}
	if len(w) == 0 {
		return errors.New("EXPLAIN without a statement")
	}
	switch w[0] {
	case "select", "with", "values":
		return nil
	}
	if w[0] == "" {
		return errors.New("the statement does not start with a keyword (only SELECT, WITH or VALUES)")
	}
	return fmt.Errorf("%s statement is not a query (only SELECT, WITH or VALUES)", strings.ToUpper(w[0]))
}
