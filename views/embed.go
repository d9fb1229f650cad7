// Package views embeds the SQL view definitions (*.sql). store.Open drops and
// re-creates every view on each open, so view changes need no migration.
package views

import "embed"

// FS holds the *.sql view definitions, applied in file-name order.
//
//go:embed *.sql
var FS embed.FS
