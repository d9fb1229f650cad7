// Package migrations embeds the goose SQL migrations: the single source of the
// store's schema. Files are applied in version order by store.Open.
package migrations

import "embed"

// FS holds the *.sql migrations.
//
//go:embed *.sql
var FS embed.FS
