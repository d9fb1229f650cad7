package perfdb

import "fmt"

// LoadOption adjusts how LoadDir, LoadStore and LoadEmbedded resolve the
// sources of each table. Without options they load what aiconfigurator's
// get_database loads with no database mode: the shared layer on.
type LoadOption func(*loadConfig)

// loadConfig is the resolved set of load options.
type loadConfig struct {
	mode   DatabaseMode // "" = no mode given (aiconfigurator database_mode=None)
	shared *bool        // explicit shared-layer override; nil derives it from mode
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

// SharedLayerEnabled reports whether aiconfigurator loads the shared layer for
// queries under mode: yes for no mode (""), SILICON and HYBRID; no for
// EMPIRICAL and SOL.
func SharedLayerEnabled(mode DatabaseMode) bool {
	return mode == "" || mode == ModeSilicon || mode == ModeHybrid
}

// resolveLoadOptions applies opts and returns whether the shared layer is on;
// an unknown mode is an error naming it.
func resolveLoadOptions(opts []LoadOption) (bool, error) {
	var c loadConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.mode != "" {
		if _, err := ParseDatabaseMode(string(c.mode)); err != nil {
			return false, fmt.Errorf("load perf data: %w", err)
		}
	}
	if c.shared != nil {
		return *c.shared, nil
	}
	return SharedLayerEnabled(c.mode), nil
}
