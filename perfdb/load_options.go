package perfdb

import (
	"fmt"
	"slices"
	"strings"
)

// LoadOption adjusts how LoadDir, LoadStore and LoadEmbedded resolve the
// sources of each table. Without options they load what aiconfigurator's
// get_database loads with no database mode: the shared layer on.
type LoadOption func(*loadConfig)

// loadConfig is the resolved set of load options.
type loadConfig struct {
	mode   DatabaseMode // "" = no mode given (aiconfigurator database_mode=None)
	shared *bool        // explicit shared-layer override; nil derives it from mode
	tables []string     // table stems to load; nil loads every table
	model  *Model       // ForModel: derive tables from the model's family
	noSnap bool         // WithoutSnapshot
}

// ForMode loads what aiconfigurator loads for queries under mode: the shared
// layer (reuse.yaml donors, strictly earlier same-backend versions, manifest
// cross-backend fill) on for SILICON and HYBRID, off for EMPIRICAL and SOL,
// which then see the requested version's own files only
// (aiconfigurator perf_database.py _shared_layer_enabled; Rust
// engine/runtime.rs). NCCL comes from misc.nccl_version in every mode.
// An empty mode is the same as no option.
func ForMode(mode DatabaseMode) LoadOption {
	return func(c *loadConfig) { c.mode = mode }
}

// WithSharedLayer forces the shared layer on or off whatever the mode
// (aiconfigurator get_database(shared_layer=...)).
func WithSharedLayer(on bool) LoadOption {
	return func(c *loadConfig) { c.shared = &on }
}

// OnlyTables loads only the named tables (file stems, e.g. "gemm_perf"); the
// other tables of Data stay empty and contribute no Sources. NCCL
// (comm/nccl, from the system's nccl_version) is always loaded. An unknown
// stem is an error naming the known ones.
func OnlyTables(stems ...string) LoadOption {
	return func(c *loadConfig) { c.tables = append(c.tables, stems...) }
}

// ForModel loads only the tables m's op lists read: a dense (LLAMA) model
// reads GEMM, attention, all-reduce and the fp8-static quantize tables, not
// MoE; every other family loads every table but the DSA module tables, which
// only DEEPSEEKV32 op lists read (ops_deepseek_v32.go), and gdn_perf, which only
// QWEN35 op lists read (ops_qwen35.go). A nil model loads every table.
func ForModel(m *Model) LoadOption {
	return func(c *loadConfig) { c.model = m }
}

// denseTables are the tables a LLAMA op list reads (ops_llama.go: GEMM,
// context/generation attention, custom all-reduce and NCCL; the fp8-static
// overheads of computescale/scale_matrix).
var denseTables = []string{"gemm_perf", "context_attention_perf", "generation_attention_perf",
	"custom_allreduce_perf", "nccl_perf", "computescale_perf", "scale_matrix_perf"}

// modelTables are the tables the op lists of a model family read (ForModel).
func modelTables(family string) []string {
	if family == "LLAMA" {
		return denseTables
	}
	var t []string
	for _, stem := range tableStems {
		switch {
		case (stem == "dsa_context_module_perf" || stem == "dsa_generation_module_perf") && family != "DEEPSEEKV32",
			stem == "gdn_perf" && family != "QWEN35":
			continue
		}
		t = append(t, stem)
	}
	return t
}

// WithoutSnapshot makes LoadStore decode the stored sources without reading
// or writing the perf-data snapshot beside the store (see LoadStore).
func WithoutSnapshot() LoadOption {
	return func(c *loadConfig) { c.noSnap = true }
}

// loadPlan is what the options resolve to.
type loadPlan struct {
	shared   bool
	tables   map[string]bool // nil: every table
	snapshot bool            // LoadStore may use the snapshot beside the store
}

// wants reports whether the plan loads table stem.
func (p loadPlan) wants(stem string) bool { return p.tables == nil || p.tables[stem] }

// tableTag names the table selection in snapshot keys and file names:
// "all", or the selected stems sorted and joined by "+".
func (p loadPlan) tableTag() string {
	if p.tables == nil {
		return "all"
	}
	var s []string
	for t := range p.tables {
		s = append(s, t)
	}
	slices.Sort(s)
	return strings.Join(s, "+")
}

// SharedLayerEnabled reports whether aiconfigurator loads the shared layer for
// queries under mode: yes for no mode (""), SILICON and HYBRID; no for
// EMPIRICAL and SOL.
func SharedLayerEnabled(mode DatabaseMode) bool {
	return mode == "" || mode == ModeSilicon || mode == ModeHybrid
}

// resolveLoadOptions applies opts; an unknown mode or table is an error
// naming it.
func resolveLoadOptions(opts []LoadOption) (loadPlan, error) {
	var c loadConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	p := loadPlan{shared: SharedLayerEnabled(c.mode), snapshot: !c.noSnap}
	if c.mode != "" {
		if _, err := ParseDatabaseMode(string(c.mode)); err != nil {
			return loadPlan{}, fmt.Errorf("load perf data: %w", err)
		}
	}
	if c.shared != nil {
		p.shared = *c.shared
	}
	tables := c.tables
	if c.model != nil {
		tables = append(tables, modelTables(c.model.Family)...)
	}
	if tables != nil {
		p.tables = map[string]bool{}
		for _, t := range tables {
			if !isImportedStem(t) {
				return loadPlan{}, fmt.Errorf("load perf data: table %q: unknown; known tables: %s", t, strings.Join(tableStems, ", "))
			}
			p.tables[t] = true
		}
	}
	return p, nil
}
