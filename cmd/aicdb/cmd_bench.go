package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/measure"
)

// benchCommand groups measured-benchmark subcommands (issue 9 part 3): import.
func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measured benchmark runs: import vLLM bench serve, AIPerf and aiconfigurator silicon results",
		Subcommands: []*cli.Command{{
			Name:      "import",
			Usage:     "load measured runs into the measurements table",
			ArgsUsage: "FILE...",
			Description: `Each FILE is imported whole or not at all, once (by content hash). The format
is sniffed unless --input-format (alias --format) is given. Deployment fields the file lacks (model,
system, backend, version, parallelism, isl/osl, engine config; for mode disagg the pools:
prefill: and decode: with workers, batch, tp, pp, dp) come from a sidecar YAML beside it
(FILE.yaml or FILE's name with .yaml) and then from the flags. Rows of known public benchmark
campaigns (InferenceMAX / InferenceX runs in aiconfigurator's silicon sample) are deployed as their
launch scripts ran them, by aicdb's built-in rules, unless a deployment file of yours deploys them
or --campaigns none is given; each row records what deployed it (extra.deployed_as).`,
			Flags: slices.Concat([]cli.Flag{
				&cli.StringFlag{Name: "input-format", Aliases: []string{"format"}, Usage: "the files' `FORMAT`: vllm-bench | aiperf | aic-silicon; --format is an alias: here it names the input, not the output", DefaultText: "sniffed"},
			}, benchDeployment.flags(), []cli.Flag{&cli.StringFlag{Name: "mode", Usage: "agg | disagg (default agg)"}},
				parallelSpec{}.flags(), benchShape.flags(), []cli.Flag{
					&cli.StringFlag{Name: "deployment", Usage: "deployment YAML `FILE` for every FILE (instead of per-file sidecars); its runs: (keyed by the CSV id column) state single runs, its rules: (name, match, then the same keys) the runs each matches, its benchmark: how the runs were driven (rounds, warm-up rounds, length spread)"},
					&cli.StringFlag{Name: "campaigns", Value: "builtin", Usage: "`builtin`: deploy rows of known benchmark campaigns by aicdb's built-in rules (store/measure/campaigns/inferencemax.yaml) where no deployment file of yours does; none: read every row as its file records it"},
					quietFlag(),
				}),
			Action: runBenchImport,
		}},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return userErrorf("bench: unknown subcommand %q; use import", c.Args().First())
			}
			return userErrorf("bench: missing subcommand; use import")
		},
	}
}

// The deployment and shape flags of bench import: what a file and its sidecar
// lack (no defaults: 0 and "" are "not given").
var (
	benchDeployment = deploymentSpec{model: "model `ID`", system: "GPU system `NAME`", backend: engine.List(" | ", " | "),
		version: "backend `VERSION` as deployed"}
	benchShape = shapeSpec{isl: "input sequence length (when the file has only token totals)", osl: "output sequence length",
		prefix: "prompt tokens served from the prefix cache"}
)

func runBenchImport(c *cli.Context) error {
	files, err := interspersed(c) // "bench import FILE --system …" as well
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return userErrorf("bench import: missing FILE: aicdb bench import result.json")
	}
	format := c.String("input-format")
	if format != "" && !slices.Contains(measure.Formats, format) {
		return userErrorf("bench import: --input-format %q: want one of %s", format, strings.Join(measure.Formats, ", "))
	}
	dep, par, sh := readDeployment(c), readParallel(c), readShape(c)
	flags := measure.Deployment{Model: dep.Model, System: dep.System, Backend: dep.Backend,
		Version: dep.Version, Mode: c.String("mode"), TP: par.TP, PP: par.PP, DP: par.DP,
		MoETP: par.MoETP, MoEEP: par.MoEEP, ISL: sh.ISL, OSL: sh.OSL, Prefix: sh.Prefix}
	var campaigns *measure.Deployment
	switch v := c.String("campaigns"); v {
	case "builtin":
		d, err := measure.Campaigns()
		if err != nil {
			return err
		}
		campaigns = &d
	case "none":
	default:
		return userErrorf("bench import: --campaigns %q: want builtin or none", v)
	}
	var shared *measure.Deployment
	if p := c.String("deployment"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return userErrorf("bench import: --deployment %s: %v", p, err)
		}
		d, err := measure.ParseSidecar(p, b)
		if err != nil {
			return asUser(err)
		}
		shared = &d
	}
	// Parse every file first: a bad one stops before anything is written.
	type parsed struct {
		file string
		ms   []measure.Measurement
		dep  measure.Deployment
	}
	var all []parsed
	bar := newProgress(c, "bench import", "files")
	defer bar.Done() // ends a terminal line before an error
	for i, f := range files {
		bar.Update(i, 2*len(files)) // parse, then store: two steps per file
		data, err := os.ReadFile(f)
		if err != nil {
			return userErrorf("bench import: %s: %v", f, err)
		}
		dep := flags
		side := shared
		if side == nil {
			if p, ok := measure.SidecarPath(f); ok {
				b, err := os.ReadFile(p)
				if err != nil {
					return userErrorf("bench import: sidecar %s: %v", p, err)
				}
				d, err := measure.ParseSidecar(p, b)
				if err != nil {
					return asUser(err)
				}
				side = &d
			}
		}
		if side != nil {
			dep = *side
			dep.Merge(flags) // the sidecar wins over the flags
		}
		if campaigns != nil {
			dep = dep.WithCampaigns(*campaigns)
		}
		ms, err := measure.Parse(f, data, format, dep)
		if err != nil {
			return asUser(err)
		}
		if shared == nil && side != nil {
			if err := checkDeploymentUsed(c.App.ErrWriter, side, "sidecar of "+f, ms); err != nil {
				return err
			}
		}
		all = append(all, parsed{f, ms, dep})
	}
	if shared != nil {
		var ms []measure.Measurement
		for _, p := range all {
			ms = append(ms, p.ms...)
		}
		if err := checkDeploymentUsed(c.App.ErrWriter, shared, "--deployment "+c.String("deployment"), ms); err != nil {
			return err
		}
	}
	st, err := store.Open(c.Context, c.String("db"), store.Options{})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	now := time.Now().UTC().Format(time.RFC3339)
	runs, unchanged, reread, redeployed := 0, 0, 0, 0
	for i, p := range all {
		bar.Update(len(all)+i, 2*len(all))
		res, err := measure.Import(c.Context, st, p.ms, p.dep, now)
		if err != nil {
			return err
		}
		if res.Unchanged {
			bar.Done()
			fmt.Fprintf(c.App.Writer, "%s: unchanged (already imported)\n", p.file)
			unchanged++
			continue
		}
		bar.Done()
		if res.Reread {
			fmt.Fprintf(c.App.Writer, "%s: %d measured runs read again (imported by reader %s, now %s)\n", p.file, res.Rows,
				cmp.Or(res.ReadBy, "unrecorded"), measure.ReaderVersion(p.ms[0].Format))
			reread++
			continue
		}
		if res.Redeployed {
			fmt.Fprintf(c.App.Writer, "%s: %d measured runs updated to the deployment given now (imported before with another; their cached predictions dropped)\n", p.file, res.Rows)
			redeployed++
			continue
		}
		fmt.Fprintf(c.App.Writer, "%s: %d measured runs imported (%s)\n", p.file, res.Rows, p.ms[0].Format)
		runs += res.Rows
	}
	again := ""
	if reread > 0 {
		again = fmt.Sprintf(", %d files read again by a newer reader", reread)
	}
	if redeployed > 0 {
		again += fmt.Sprintf(", %d files given another deployment", redeployed)
	}
	bar.Summary("%d files: %d measured runs imported, %d files unchanged%s", len(all), runs, unchanged, again)
	return nil
}

// checkDeploymentUsed refuses a deployment file whose runs: and rules: deploy no run
// of the measurements ms (a wrong file, or ids that are not the CSV id
// column), and notes on errOut how many of its runs name none and how many of
// its rules select none (a deployment file may cover several files' runs).
func checkDeploymentUsed(errOut io.Writer, dep *measure.Deployment, from string, ms []measure.Measurement) error {
	if len(dep.Runs) == 0 && len(dep.Rules) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(ms))
	used := map[string]bool{}
	for i := range ms {
		seen[ms[i].RunID] = true
		if how, ok := ms[i].Extra["deployed_as"].(string); ok {
			used[how] = true
		}
	}
	var missing, unused []string
	for _, id := range slices.Sorted(maps.Keys(dep.Runs)) {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	for _, r := range dep.Rules {
		if !used["rule "+r.Name] {
			unused = append(unused, r.Name)
		}
	}
	if len(missing) == len(dep.Runs) && len(unused) == len(dep.Rules) {
		if len(dep.Rules) == 0 {
			return userErrorf("bench import: %s: runs: none of its %d runs (e.g. %q) is a run of the files given (runs are keyed by the CSV id column, or a JSON file's base name); give the files it describes", from, len(dep.Runs), missing[0])
		}
		return userErrorf("bench import: %s: none of its %d runs and %d rules (e.g. rule %q) deploys a run of the files given (a rule's match must hold for a row as its file records it); give the files it describes", from, len(dep.Runs), len(dep.Rules), unused[0])
	}
	if len(missing) > 0 {
		fmt.Fprintf(errOut, "aicdb: bench import: %s: %d of its %d runs are not in the files given (e.g. %q); the others applied\n", from, len(missing), len(dep.Runs), missing[0])
	}
	if len(unused) > 0 {
		fmt.Fprintf(errOut, "aicdb: bench import: %s: %d of its %d rules select no run of the files given (e.g. %q); the others applied\n", from, len(unused), len(dep.Rules), unused[0])
	}
	return nil
}
