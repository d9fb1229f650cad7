package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/store"
)

// perfdbCommand groups the perf-database subcommands: import and ls.
func perfdbCommand() *cli.Command {
	return &cli.Command{
		Name:  "perfdb",
		Usage: "import and list perf data (systems, models, backend versions)",
		Subcommands: []*cli.Command{
			perfdbImportCommand(),
			perfdbLsCommand(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return userErrorf("perfdb: unknown subcommand %q; use import or ls", c.Args().First())
			}
			return userErrorf("perfdb: missing subcommand; use import or ls")
		},
	}
}

func perfdbImportCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "import an aiconfigurator systems folder, a folder of model configs, or one config.json",
		ArgsUsage: "PATH",
		Description: `PATH is one of:
   an aiconfigurator systems folder (<system>.yaml files beside a data/ tree),
   a folder of <org>--<name>_config.json files (+ optional <org>--<name>_hf_quant_config.json),
   one config.json (model id from <org>--<name>_config.json, or --id ORG/NAME).
One import is one transaction: on any error the store is unchanged. Re-importing
skips unchanged files (same sha256) and replaces changed ones.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "id", Usage: "model `ID` (org/name) for a single config.json"},
			&cli.BoolFlag{Name: "no-mirror", Usage: "do not copy perf rows into the perf_* SQL tables (faster)"},
			noWarmFlag(),
			quietFlag(),
		},
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			id, noMirror, noWarm := c.String("id"), c.Bool("no-mirror"), c.Bool("no-warm")
			if len(args) > 1 { // flags after PATH (urfave/cli v2 stops at the first positional)
				fs := flag.NewFlagSet("import", flag.ContinueOnError)
				fs.SetOutput(io.Discard)
				fs.StringVar(&id, "id", id, "")
				fs.BoolVar(&noMirror, "no-mirror", noMirror, "")
				fs.BoolVar(&noWarm, "no-warm", noWarm, "")
				quiet := fs.Bool("quiet", false, "")
				setDB := trailingDB(c, fs)
				if err := fs.Parse(args[1:]); err != nil {
					return userErrorf("perfdb import: %v", err)
				}
				if err := setDB(); err != nil {
					return err
				}
				if *quiet {
					if err := c.Set("quiet", "true"); err != nil {
						return err
					}
				}
				if fs.NArg() > 0 {
					return userErrorf("perfdb import: one PATH expected, got extra %q", fs.Arg(0))
				}
				args = args[:1]
			}
			if len(args) != 1 {
				return userErrorf("perfdb import: missing PATH: aicdb perfdb import path/to/systems")
			}
			if _, err := os.Stat(args[0]); err != nil {
				return userErrorf("perfdb import: %s: no such file or folder", args[0])
			}
			st, err := store.Open(c.Context, c.String("db"), store.Options{MustExist: true})
			if err != nil {
				return asUser(err)
			}
			defer st.Close()
			progress, finish := importProgress(c, "perfdb import")
			rep, err := perfdb.Import(c.Context, st, args[0], perfdb.ImportOptions{ID: id, NoMirror: noMirror,
				ImportedAt: time.Now().UTC().Format(time.RFC3339), Progress: progress})
			finish()
			if err != nil {
				return asUser(err)
			}
			fmt.Fprintf(c.App.Writer, "imported %s: systems %v, models %d, perf files %d (%d rows), unchanged %d, removed %d\n",
				args[0], rep.Systems, len(rep.Models), rep.Files, rep.Rows, rep.FilesSkipped, rep.FilesRemoved)
			if len(rep.TablesSkipped) > 0 {
				fmt.Fprintf(c.App.ErrWriter, "not imported (tables aicdb does not model): %s\n", strings.Join(rep.TablesSkipped, ", "))
			}
			if noWarm {
				return nil
			}
			return warmSnapshots(c, st, "perfdb import", rep.Systems, c.Bool("quiet"))
		},
	}
}

// lsSubjects are the things `perfdb ls` lists.
var lsSubjects = []string{"systems", "models", "versions"}

func perfdbLsCommand() *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "list the store's systems, models or backend versions (every version --version accepts; tables and rows count its own files, 0 when they all come from other versions)",
		ArgsUsage: "systems|models|versions",
		Flags: []cli.Flag{
			shortFormatFlag("table"),
		},
		Action: runPerfdbLs,
	}
}

func runPerfdbLs(c *cli.Context) error {
	ctx := c.Context
	args := c.Args().Slice()
	format := c.String("format")
	if len(args) == 0 {
		return userErrorf("perfdb ls: missing subject; use one of %s", strings.Join(lsSubjects, ", "))
	}
	subject := args[0]
	if len(args) > 1 {
		fs := flag.NewFlagSet("ls", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.StringVar(&format, "format", format, "")
		fs.StringVar(&format, "f", format, "")
		setDB := trailingDB(c, fs)
		if err := fs.Parse(args[1:]); err != nil {
			return userErrorf("perfdb ls: %v", err)
		}
		if err := setDB(); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return userErrorf("perfdb ls: one subject expected, got extra %q", fs.Arg(0))
		}
	}
	switch subject {
	case "systems", "models", "versions":
	default:
		return userErrorf("perfdb ls: unknown subject %q; use one of %s", subject, strings.Join(lsSubjects, ", "))
	}
	if err := checkFormat(format); err != nil {
		return err
	}
	st, err := store.Open(ctx, c.String("db"), store.Options{ReadOnly: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	var cols []string
	var data [][]any
	switch subject {
	case "systems":
		ss, err := perfdb.ListSystemInfo(ctx, st)
		if err != nil {
			return err
		}
		cols = []string{"system", "gpus_per_node", "mem_capacity_gib", "nccl_version", "backends"}
		for _, s := range ss {
			data = append(data, []any{s.Name, int64(s.GPUsPerNode), s.MemCapacity / (1 << 30), s.NCCLVersion, strings.Join(s.Backends, " ")})
		}
	case "models":
		ms, err := perfdb.ListModels(ctx, st)
		if err != nil {
			return err
		}
		cols = []string{"model", "architecture", "family", "layers", "hidden", "heads", "kv_heads", "experts", "topk", "gemm_quant", "kvcache_quant"}
		for _, m := range ms {
			data = append(data, []any{m.ID, m.Architecture, m.Family, int64(m.Layers), int64(m.Hidden), int64(m.Heads),
				int64(m.KVHeads), int64(m.NumExperts), int64(m.TopK), m.GemmQuant, m.KVQuant})
		}
	case "versions":
		vs, err := usableVersions(ctx, st)
		if err != nil {
			return err
		}
		cols = []string{"system", "backend", "version", "tables", "rows"}
		for _, v := range vs {
			data = append(data, []any{v.System, v.Backend, v.Version, int64(v.Tables), int64(v.Rows)})
		}
	}
	return writeRows(c.App.Writer, format, cols, data)
}

// usableVersions lists the store's versions with their own perf files
// (perfdb.ListVersionInfo) and every other version a command accepts as --version
// (perfdb.ListVersions: a version directory whose tables come from other versions'
// files, e.g. sglang 0.5.12), the latter with 0 tables and 0 rows, in the same
// order: system, backend, PEP 440 version.
func usableVersions(ctx context.Context, st *store.Store) ([]perfdb.VersionInfo, error) {
	vs, err := perfdb.ListVersionInfo(ctx, st)
	if err != nil {
		return nil, err
	}
	have := map[[3]string]bool{}
	for _, v := range vs {
		have[[3]string{v.System, v.Backend, v.Version}] = true
	}
	systems, err := perfdb.ListSystems(ctx, st)
	if err != nil {
		return nil, err
	}
	for _, sys := range systems {
		bs, err := perfdb.ListBackends(ctx, st, sys)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			usable, err := perfdb.ListVersions(ctx, st, sys, b)
			if err != nil {
				return nil, err
			}
			for _, v := range usable {
				if !have[[3]string{sys, b, v}] {
					vs = append(vs, perfdb.VersionInfo{System: sys, Backend: b, Version: v})
				}
			}
		}
	}
	slices.SortStableFunc(vs, func(a, b perfdb.VersionInfo) int {
		if c := cmp.Compare(a.System, b.System); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Backend, b.Backend); c != 0 {
			return c
		}
		return perfdb.CompareVersions(a.Version, b.Version)
	})
	return vs, nil
}
