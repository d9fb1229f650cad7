package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// deployCommand prints the launch configuration of a stored row: the engine it
// was predicted with (operating_points.engine_config), in the engine's own flags
// or YAML. Rendering lives in queueing/engineconf; this file only wires it.
func deployCommand() *cli.Command {
	return &cli.Command{
		Name:      "deploy",
		Usage:     "print the launch flags or YAML of a stored row's engine, as the row was predicted",
		ArgsUsage: "ROWID",
		Description: `ROWID is the row's SQLite rowid (all digits) or its key (or a key prefix of ≥ 6 hex digits).
   aicdb deploy 42                         # vllm serve … / trtllm-serve … / python3 -m sglang.launch_server …
   aicdb deploy 3f9a01c2 --backend-format yaml
Disaggregated rows print the prefill and the decode worker, each with its worker count.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "backend-format", Value: engineconf.FormatCLI, Usage: "`FORMAT`: cli (launch command and flags) or yaml (vLLM/SGLang --config, TensorRT-LLM extra_llm_api_options)"},
		},
		Action: runDeploy,
	}
}

func runDeploy(c *cli.Context) error {
	// urfave/cli stops parsing flags at the first argument; the spelling
	// "deploy ROWID --backend-format yaml" puts the flag after it.
	format := c.String("backend-format")
	var refs []string
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--backend-format" || a == "-backend-format":
			if i+1 >= len(args) {
				return userErrorf("--backend-format: needs a value (cli or yaml)")
			}
			format, i = args[i+1], i+1
		case strings.HasPrefix(a, "--backend-format="):
			format = strings.TrimPrefix(a, "--backend-format=")
		case (a == "--db" || a == "-db") && i+1 < len(args): // the global --db after ROWID
			if err := c.Set("db", args[i+1]); err != nil {
				return err
			}
			i++
		case strings.HasPrefix(a, "--db="):
			if err := c.Set("db", strings.TrimPrefix(a, "--db=")); err != nil {
				return err
			}
		default:
			refs = append(refs, a)
		}
	}
	if len(refs) != 1 {
		return userErrorf("deploy: give exactly one ROWID (a row id or key prefix); e.g. aicdb deploy 42")
	}
	if format != engineconf.FormatCLI && format != engineconf.FormatYAML {
		return userErrorf("--backend-format %q: unknown; use cli or yaml", format)
	}
	st, err := store.Open(c.Context, c.String("db"), store.Options{ReadOnly: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	p, err := st.FindPoint(c.Context, refs[0])
	if err != nil {
		if errors.Is(err, store.ErrNoPoint) {
			return userErrorf("deploy %v; list rows with aicdb query", err)
		}
		return asUser(err)
	}
	r, recorded, err := refine.PointResolved(p.PointInputs)
	if err != nil {
		return fmt.Errorf("deploy row %s: %w", p.Key[:12], err)
	}
	w := c.App.Writer
	in := p.PointInputs
	engineNote := "engine profile " + r.Profile
	if !recorded {
		// vLLM and TensorRT-LLM rows of accuracy/calibrate, and rows stored before
		// engine configs, keep their engine in their knob columns: the evaluator
		// derives it from them (refine.pointEngineKnobs), and so does this.
		engineNote = "engine from the row's columns (token budget, running cap, chunked prefill; the rest the engine's defaults), as the evaluator ran it"
	}
	if p.Legacy.OOM {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: note: row %s does not fit in GPU memory (oom); its launch may fail\n", p.Key[:12])
	}
	version := in.Version
	if in.Deployed != "" { // launch the engine deployed; the row is priced at perf data of another version
		version = in.Deployed + " (priced at perf-data version " + in.Version + ")"
	}
	fmt.Fprintf(w, "# row %s: %s on %s, %s %s, %s isl %d osl %d, %s\n",
		p.Key[:12], in.Model, in.System, in.Backend, version, in.Parallel(), in.ISL, in.OSL, engineNote)
	if len(r.Config) > 0 {
		keys := make([]string, len(r.Config))
		for i, s := range r.Config {
			keys[i] = s.Key + "=" + s.Value
		}
		fmt.Fprintf(w, "# engine config keys applied: %s\n", strings.Join(keys, ", "))
	}
	type worker struct {
		title string
		e     *engine.Spec
		d     engineconf.Deployment
	}
	// MTP is the point's (refine's pointEngine, disaggSetup: on every engine of
	// the row): each engine renders its drafts.
	drafted := func(e *engine.Spec) *engine.Spec {
		if e == nil || in.NextN == 0 {
			return e
		}
		m := *e
		m.SetDrafts(in.NextN, in.NextNAccepted)
		return &m
	}
	if in.NextN > 0 {
		drafter := "MTP"
		if e := r.Drafter(); e != nil {
			drafter = fmt.Sprintf("%s head %s", strings.ToUpper(e.DraftMethod), e.DraftModel)
		}
		fmt.Fprintf(w, "# %s: %d draft tokens per decode step, predicted at %s accepted per step (measured for the model and data; not an engine key)\n",
			drafter, in.NextN, strconv.FormatFloat(in.NextNAccepted, 'g', -1, 64))
	}
	var ws []worker
	if in.Mode == store.ModeDisagg {
		pl, err := poolLayout(in, in.PTP, in.PPP, in.PDP)
		if err != nil {
			return fmt.Errorf("deploy row %s: %w", p.Key[:12], err)
		}
		dl, err := poolLayout(in, in.DTP, in.DPP, in.DDP)
		if err != nil {
			return fmt.Errorf("deploy row %s: %w", p.Key[:12], err)
		}
		ws = []worker{
			{fmt.Sprintf("prefill workers: %d × (tp %d, pp %d, dp %d)", in.PWorkers, in.PTP, in.PPP, in.PDP), drafted(r.Prefill),
				engineconf.Deployment{Model: in.Model, Layout: pl, ExtraYAMLPath: "prefill_extra_llm_api_options.yaml"}},
			{fmt.Sprintf("decode workers: %d × (tp %d, pp %d, dp %d)", in.DWorkers, in.DTP, in.DPP, in.DDP), drafted(r.Decode),
				engineconf.Deployment{Model: in.Model, Layout: dl, ExtraYAMLPath: "decode_extra_llm_api_options.yaml"}},
		}
	} else {
		ws = []worker{{"", drafted(r.Engine), engineconf.Deployment{Model: in.Model, Layout: engineconf.Layout{TP: in.TP, PP: in.PP, DP: in.DP, MoETP: in.MoETP, MoEEP: in.MoEEP}}}}
	}
	for i, x := range ws {
		if x.e == nil {
			return fmt.Errorf("deploy row %s: the recorded engine config has no %s engine", p.Key[:12], in.Mode)
		}
		out, err := engineconf.Render(*x.e, x.d, format)
		if err != nil {
			return fmt.Errorf("deploy row %s: %w", p.Key[:12], err)
		}
		if i > 0 && format == engineconf.FormatYAML {
			fmt.Fprintln(w, "---")
		}
		if x.title != "" {
			fmt.Fprintf(w, "# %s\n", x.title)
		}
		fmt.Fprint(w, out)
	}
	return nil
}

// poolLayout is the layout of one disaggregated pool of point in: its own tp,
// pp and dp, and for a MoE model (a split other than 1 × 1) the experts over
// the pool's tp·dp GPUs at the point's expert-parallel size, as the evaluator
// priced it (refine.PoolMoELayout; its error when the split cannot cover the
// pool, which no priced row has). A split of 1 × 1 is left to the engine's
// default (the experts tensor-parallel over the pool).
func poolLayout(in store.PointInputs, tp, pp, dp int) (engineconf.Layout, error) {
	l := engineconf.Layout{TP: tp, PP: pp, DP: dp, MoETP: 1, MoEEP: 1}
	if in.MoETP > 1 || in.MoEEP > 1 {
		var err error
		if l.MoETP, l.MoEEP, err = refine.PoolMoELayout(tp, dp, in.MoEEP); err != nil {
			return l, err
		}
	}
	return l, nil
}
