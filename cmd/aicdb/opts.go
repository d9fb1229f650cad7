package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// Flag groups shared by the commands that price, sweep or record a deployment.
// Each group is declared once here and read once into a typed option struct by
// its reader; a command passes its wording and defaults in the group's spec (the
// flag names are the same everywhere, the usage says what the command does with
// them). Commands read the typed structs, never the flags by name.

// flagsSet remembers which of a group's flags were given on the command line.
type flagsSet map[string]bool

// given reports whether --name was given.
func (s flagsSet) given(name string) bool { return s[name] }

// readSet records which of names were given.
func readSet(c *cli.Context, names ...string) flagsSet {
	s := flagsSet{}
	for _, n := range names {
		if c.IsSet(n) {
			s[n] = true
		}
	}
	return s
}

// deploymentOpts names what is deployed: --model, --system, --backend, --version
// and, where the command has it, --deployed-version.
type deploymentOpts struct {
	Model, System, Backend, Version string
	// Deployed is --deployed-version: the engine version deployed ("" = Version).
	Deployed string
	// NextN is eval's --nextn: MTP drafts per decode step, priced in each decode
	// row (perfdb.Config.Nextn) as the engine schedules them (engine.Spec.DraftTokens).
	NextN int
	// SeparateDrafter: the NextN drafts come from the engine config's EAGLE /
	// EAGLE3 head (perfdb.Config.SeparateDrafter), not the model's MTP layers.
	SeparateDrafter bool
	set             flagsSet
}

// deploymentSpec is a command's wording and defaults of the deployment flags.
type deploymentSpec struct {
	model, system, backend, version string   // usages
	systemDefault, backendDefault   string   // "" = none
	required                        []string // flags the command requires
}

func (s deploymentSpec) flags() []cli.Flag {
	req := func(n string) bool {
		for _, r := range s.required {
			if r == n {
				return true
			}
		}
		return false
	}
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Usage: s.model, Required: req("model")},
		&cli.StringFlag{Name: "system", Value: s.systemDefault, Usage: s.system, Required: req("system")},
		&cli.StringFlag{Name: "backend", Value: s.backendDefault, Usage: s.backend, Required: req("backend")},
		&cli.StringFlag{Name: "version", Usage: s.version},
	}
}

// readDeployment reads the deployment flags.
func readDeployment(c *cli.Context) deploymentOpts {
	return deploymentOpts{Model: c.String("model"), System: c.String("system"), Backend: c.String("backend"),
		Version: c.String("version"), Deployed: c.String("deployed-version"), NextN: c.Int("nextn"),
		set: readSet(c, "model", "system", "backend", "version")}
}

// deployedVersionFlag declares --deployed-version (eval, sweep; best filters by it).
func deployedVersionFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "deployed-version", Usage: usage}
}

// deployedVersionUsage is eval's and sweep's --deployed-version.
const deployedVersionUsage = "the engine `VERSION` deployed, when it has no perf data of its own: priced at the nearest " +
	"perf-data version (newest below, else oldest above; --version overrides) and calibrated (--calibration) with the fit " +
	"of runs measured on VERSION"

// resolveDeployed prices sweep's --deployed-version before the sweep resolves
// its version: without --version, dep.Version becomes the one
// estimateSource.resolveVersion picks for it (eval resolves it as it builds the
// pass timing). Without --deployed-version it does nothing.
func resolveDeployed(ctx context.Context, db string, dep *deploymentOpts, note io.Writer) error {
	if dep.Deployed == "" || dep.Version != "" {
		return nil
	}
	src, err := openEstimateSource(ctx, db)
	if err != nil {
		return asUser(err)
	}
	defer src.close()
	dep.Version, err = src.resolveVersion(ctx, *dep, note)
	return err
}

// parallelOpts is one worker's parallelism: --tp, --pp, --dp, --moe-tp, --moe-ep.
type parallelOpts struct {
	TP, PP, DP, MoETP, MoEEP int
	// WideEP selects the all-to-all MoE path (--wide-ep, where the command has it).
	WideEP bool
	set    flagsSet
}

// parallelSpec is a command's wording and defaults of the parallelism flags:
// prefix goes before every usage, tpSuffix after --tp's.
type parallelSpec struct {
	prefix, tpSuffix string
	def              parallelOpts
	// moeDerived: the command completes a MoE model's layout with
	// parallelOpts.forModel (moe-tp 1, moe-ep tp·dp unless given).
	moeDerived bool
}

// moeEPText is the help's default of --moe-ep: derived for a MoE model where the
// command derives it (parallelOpts.forModel), else the flag's value.
func (s parallelSpec) moeEPText() string {
	if !s.moeDerived {
		return ""
	}
	return fmt.Sprintf("tp·dp for a MoE model given neither --moe-tp nor --moe-ep; %d otherwise", s.def.MoEEP)
}

func (s parallelSpec) flags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "tp", Value: s.def.TP, Usage: s.prefix + "tensor parallel size" + s.tpSuffix},
		&cli.IntFlag{Name: "pp", Value: s.def.PP, Usage: s.prefix + "pipeline parallel size"},
		&cli.IntFlag{Name: "dp", Value: s.def.DP, Usage: s.prefix + "attention data parallel size"},
		&cli.IntFlag{Name: "moe-tp", Value: s.def.MoETP, Usage: s.prefix + "MoE tensor parallel size"},
		&cli.IntFlag{Name: "moe-ep", Value: s.def.MoEEP, Usage: s.prefix + "MoE expert parallel size", DefaultText: s.moeEPText()},
	}
}

// readParallel reads the parallelism flags.
func readParallel(c *cli.Context) parallelOpts {
	return parallelOpts{TP: c.Int("tp"), PP: c.Int("pp"), DP: c.Int("dp"), MoETP: c.Int("moe-tp"), MoEEP: c.Int("moe-ep"),
		WideEP: c.Bool("wide-ep"), set: readSet(c, "tp", "pp", "dp", "moe-tp", "moe-ep")}
}

// check rejects a size below 1, naming the flag.
func (p parallelOpts) check() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"tp", p.TP}, {"pp", p.PP}, {"dp", p.DP}, {"moe-tp", p.MoETP}, {"moe-ep", p.MoEEP}} {
		if f.v <= 0 {
			return userErrorf("--%s %d: must be ≥ 1", f.name, f.v)
		}
	}
	return nil
}

// forModel completes the MoE layout for model m, the same rule in estimate, eval
// and trace replay: given neither --moe-tp nor --moe-ep, a MoE model's experts
// are split over the worker's tp·dp GPUs by expert parallelism (moe-tp 1,
// moe-ep tp·dp). A given layout must cover tp·dp (aiconfigurator's MoE
// constructor assertion tp·dp = moe-tp·moe-ep); the error names the --moe-ep that
// does. Dense models keep the flags as given.
func (p parallelOpts) forModel(m *perfdb.Model) (parallelOpts, error) {
	if !m.IsMoE() {
		return p, nil
	}
	n := p.TP * p.DP
	if !p.set.given("moe-tp") && !p.set.given("moe-ep") {
		p.MoETP, p.MoEEP = 1, n
		return p, nil
	}
	if p.MoETP <= 0 || p.MoEEP <= 0 || p.MoETP*p.MoEEP == n {
		return p, nil // sizes below 1 are check's to name
	}
	fix := fmt.Sprintf("pass --moe-ep %d", n/p.MoETP)
	if n%p.MoETP != 0 {
		fix = fmt.Sprintf("pass --moe-tp 1 --moe-ep %d", n)
	}
	return p, userErrorf("--tp %d × --dp %d = %d GPUs, but --moe-tp %d × --moe-ep %d = %d for the MoE model %s; %s",
		p.TP, p.DP, n, p.MoETP, p.MoEEP, p.MoETP*p.MoEEP, m.ID, fix)
}

// gpus is the GPUs of one worker (tp·pp·dp).
func (p parallelOpts) gpus() int { return p.TP * p.PP * p.DP }

// worker is the parallelism as the pass-timing builder takes it.
func (p parallelOpts) worker() refine.Worker {
	return refine.Worker{TP: p.TP, PP: p.PP, DP: p.DP, MoETP: p.MoETP, MoEEP: p.MoEEP}
}

// perfTimingFlags declares the flags of a pass timing from the perf database
// (eval --model, trace replay --model): deployment, parallelism (no --tp default:
// it is required with --model; a MoE model's moe-ep derived by forModel) and perf-data modes. prefix goes
// before every usage, withModel after --system's and --tp's; model and backend
// are the usages of --model and --backend.
func perfTimingFlags(prefix, withModel, model, backend string) []cli.Flag {
	dep := deploymentSpec{model: model, system: prefix + "GPU system `NAME`" + withModel, backend: backend,
		version: prefix + "backend `VERSION` (default: the newest available)"}
	par := parallelSpec{prefix: prefix, tpSuffix: withModel, def: parallelOpts{PP: 1, DP: 1, MoETP: 1, MoEEP: 1}, moeDerived: true}
	return slices.Concat(dep.flags(), par.flags(), quantFlags(prefix), []cli.Flag{wideEPFlag(prefix)})
}

// wideEPFlag declares --wide-ep (prefix before its usage).
func wideEPFlag(prefix string) cli.Flag {
	return &cli.BoolFlag{Name: "wide-ep", Usage: prefix + "the all-to-all (wide-EP) MoE path: SGLang DeepEP for DeepSeek MLA models; refused where the data has none"}
}

// quantOpts are the perf-data modes: --database-mode and the quant overrides
// (empty = from the model).
type quantOpts struct {
	DatabaseMode                       string
	GemmQuant, KVQuant, FMHAQuant, MoE string
}

// quantFlags declares the perf-data mode flags, prefix before every usage.
func quantFlags(prefix string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "database-mode", Value: string(perfdb.ModeSilicon), Usage: prefix + "SILICON | HYBRID | EMPIRICAL | SOL"},
		&cli.StringFlag{Name: "gemm-quant", Usage: prefix + "GEMM quant mode (default: from the model)"},
		&cli.StringFlag{Name: "kv-quant", Usage: prefix + "KV cache quant mode (default: from the model)"},
		&cli.StringFlag{Name: "fmha-quant", Usage: prefix + "FMHA quant mode (default: from the model and backend)"},
		&cli.StringFlag{Name: "moe-quant", Usage: prefix + "MoE quant mode (default: from the model)"},
	}
}

// readQuant reads the perf-data mode flags.
func readQuant(c *cli.Context) quantOpts {
	return quantOpts{DatabaseMode: c.String("database-mode"), GemmQuant: c.String("gemm-quant"), KVQuant: c.String("kv-quant"),
		FMHAQuant: c.String("fmha-quant"), MoE: c.String("moe-quant")}
}

// mode validates --database-mode.
func (q quantOpts) mode() (perfdb.DatabaseMode, error) {
	m, err := perfdb.ParseDatabaseMode(q.DatabaseMode)
	if err != nil {
		return m, userErrorf("--database-mode: %v", err)
	}
	return m, nil
}

// shapeOpts is the request shape: --isl, --osl, --prefix.
type shapeOpts struct {
	ISL, OSL, Prefix int
	set              flagsSet
}

// shapeSpec is a command's wording and defaults of the shape flags.
type shapeSpec struct {
	isl, osl, prefix string // usages
	def              shapeOpts
}

func (s shapeSpec) flags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "isl", Value: s.def.ISL, Usage: s.isl},
		&cli.IntFlag{Name: "osl", Value: s.def.OSL, Usage: s.osl},
		&cli.IntFlag{Name: "prefix", Value: s.def.Prefix, Usage: s.prefix},
	}
}

// readShape reads the shape flags.
func readShape(c *cli.Context) shapeOpts {
	return shapeOpts{ISL: c.Int("isl"), OSL: c.Int("osl"), Prefix: c.Int("prefix"), set: readSet(c, "isl", "osl", "prefix")}
}

// pointInputs is the deployment as the sweep stores a point (the fields the
// pass-timing builder reads), at the resolved version.
func pointInputs(d deploymentOpts, version string, q quantOpts, nextn int) store.PointInputs {
	return store.PointInputs{Model: d.Model, System: d.System, Backend: d.Backend, Version: version,
		DatabaseMode: q.DatabaseMode, GemmQuant: q.GemmQuant, KVCacheQuant: q.KVQuant, FMHAQuant: q.FMHAQuant,
		MoEQuant: q.MoE, NextN: nextn}
}

// workerConfig is the perfdb.Config of one worker through the sweep evaluator's
// builder (refine.WorkerConfig), so a point priced here is priced as in a sweep.
func workerConfig(d deploymentOpts, version string, q quantOpts, nextn int, p parallelOpts) (perfdb.Config, error) {
	if _, err := q.mode(); err != nil {
		return perfdb.Config{}, err
	}
	cfg, err := refine.WorkerConfig(pointInputs(d, version, q, nextn), p.worker())
	cfg.WideEP, cfg.SeparateDrafter = p.WideEP, d.SeparateDrafter && nextn > 0
	return cfg, asUser(err)
}

// requirePerf rejects a perf-data timing without --system, --backend or --tp;
// msg formats the missing flag's name.
func (d deploymentOpts) requirePerf(p parallelOpts, msg string) error {
	for _, f := range []string{"system", "backend"} {
		if !d.set.given(f) {
			return userErrorf(msg, f)
		}
	}
	if !p.set.given("tp") {
		return userErrorf(msg, "tp")
	}
	return nil
}

// traceWorkloadOpts is a stored trace as the workload (sweep) or the filter (best):
// --trace, --sessions (W4) and --max-sessions.
type traceWorkloadOpts struct {
	Name        string
	Sessions    bool
	MaxSessions int
	set         flagsSet
}

// traceWorkloadFlags declares --trace, --sessions and --max-sessions with a
// command's usages.
func traceWorkloadFlags(trace, sessions, maxSessions string) []cli.Flag {
	return []cli.Flag{&cli.StringFlag{Name: "trace", Usage: trace}, &cli.BoolFlag{Name: "sessions", Usage: sessions},
		&cli.IntFlag{Name: "max-sessions", Usage: maxSessions}}
}

// readTraceWorkload reads the trace workload flags.
func readTraceWorkload(c *cli.Context) traceWorkloadOpts {
	return traceWorkloadOpts{Name: c.String("trace"), Sessions: c.Bool("sessions"), MaxSessions: c.Int("max-sessions"),
		set: readSet(c, "trace", "sessions", "max-sessions")}
}
