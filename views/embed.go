// Package views embeds the SQL view definitions (*.sql). A writable store.Open drops
// and re-creates every view when these files (or the schema version) changed since
// the store's views were made, so view changes need no migration.
package views

import "embed"

// FS holds the *.sql view definitions, applied in file-name order.
//
//go:embed *.sql
var FS embed.FS
