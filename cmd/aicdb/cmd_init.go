package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/store"
)

// initCommand creates the store (--db), the only command that may, and loads the
// embedded default perf data (h200_sxm: vllm, trtllm 1.3.0rc20, sglang 0.5.14, nccl;
// the model configs) without network. Re-running it is idempotent.
func initCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "create the store and load the embedded perf data (h200_sxm) and model configs",
		Description: `Creates the SQLite store at --db (default ./aicdb.sqlite) and imports the data shipped
in the binary. Other systems and models come through 'aicdb perfdb import PATH'.
Running init again changes nothing that is already there. init is the only command
that creates a store; it refuses an existing file that is not one (another
program's database, or not SQLite). Estimates read the stored
Parquet files; --mirror also copies their rows (3,127,698 for the embedded data) into the perf_* SQL tables for
'aicdb query' (about 10× slower; running init --mirror later fills them).`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "mirror", Usage: "also copy the perf rows into the perf_* SQL tables (slow)"},
			noWarmFlag(),
			quietFlag(),
		},
		Action: func(c *cli.Context) error {
			st, err := store.Open(c.Context, c.String("db"), store.Options{})
			if err != nil {
				return asUser(err)
			}
			defer st.Close()
			progress, finish := importProgress(c, "init")
			rep, err := perfdb.ImportEmbedded(c.Context, st, perfdb.ImportOptions{
				ImportedAt: time.Now().UTC().Format(time.RFC3339), NoMirror: !c.Bool("mirror"), Progress: progress})
			finish()
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "store %s: systems %v, %d models, %d perf files imported, %d unchanged, %d rows mirrored\n",
				st.Path, rep.Systems, len(rep.Models), rep.Files, rep.FilesSkipped, rep.Rows)
			if c.Bool("no-warm") {
				return nil
			}
			return warmSnapshots(c, st, "init", rep.Systems, c.Bool("quiet"))
		},
	}
}

// noWarmFlag is init's and perfdb import's opt-out of warmSnapshots.
func noWarmFlag() cli.Flag {
	return &cli.BoolFlag{Name: "no-warm", Usage: "skip building the perf-data snapshots of each backend's newest version (the first estimate of each then builds its own, ~0.4 s)"}
}

// warmSnapshots builds the perf-data snapshot of each backend's newest version
// on each of systems (perfdb.WarmSnapshots) and names them on stderr unless
// quiet: the first estimate of a (system, backend, version) otherwise decodes its
// stored Parquet (~0.4 s) before it prices anything.
func warmSnapshots(c *cli.Context, st *store.Store, cmd string, systems []string, quiet bool) error {
	start := time.Now()
	for _, sys := range systems {
		warmed, err := perfdb.WarmSnapshots(c.Context, st, sys)
		if err != nil {
			return err
		}
		if len(warmed) > 0 && !quiet {
			fmt.Fprintf(c.App.ErrWriter, "aicdb: %s: perf-data snapshots of %s: %s (%.1f s)\n", cmd, sys, strings.Join(warmed, ", "), time.Since(start).Seconds())
		}
	}
	return nil
}
