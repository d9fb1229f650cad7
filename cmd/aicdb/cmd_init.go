package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/store"
)

// initCommand creates the store (--db) and loads the embedded default perf data
// (h200_sxm: vllm, trtllm 1.3.0rc20, sglang 0.5.14, nccl; the model configs)
// without network. Re-running it is idempotent.
func initCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "create the store and load the embedded perf data (h200_sxm) and model configs",
		Description: `Creates the SQLite store at --db (default ./aicdb.sqlite) and imports the data shipped
in the binary. Other systems and models come through 'aicdb perfdb import PATH'.
Running init again changes nothing that is already there. --no-mirror skips copying the
perf rows into the perf_* SQL tables (estimates do not need them; a later init fills them).`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "no-mirror", Usage: "do not copy perf rows into the perf_* SQL tables (faster)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return userErrorf("init: takes no arguments (got %q); the store path is the global --db flag", c.Args().First())
			}
			st, err := store.Open(c.Context, c.String("db"), store.Options{})
			if err != nil {
				return asUser(err)
			}
			defer st.Close()
			rep, err := perfdb.ImportEmbedded(c.Context, st, perfdb.ImportOptions{
				ImportedAt: time.Now().UTC().Format(time.RFC3339), NoMirror: c.Bool("no-mirror")})
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "store %s: systems %v, %d models, %d perf files imported (%d rows), %d unchanged\n",
				st.Path, rep.Systems, len(rep.Models), rep.Files, rep.Rows, rep.FilesSkipped)
			return nil
		},
	}
}
