package measure

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ParseSidecar reads a deployment YAML (the Deployment fields by their yaml
// names). Unknown keys are an error naming them, so a typo does not silently
// leave a field unset.
func ParseSidecar(file string, data []byte) (Deployment, error) {
	var d Deployment
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil && !errors.Is(err, io.EOF) {
		return d, fmt.Errorf("%s: %s (known keys: model, system, backend, version, mode, tp, pp, dp, moe_tp, moe_ep, gemm_quant, moe_quant, isl, osl, prefix, engine_config, prefill and decode with workers, batch, tp, pp, dp, isl_quantiles, osl_quantiles, benchmark with rounds, warmup_rounds, length_spread, tool, runs: the same keys per run id, and rules: name, match and the same keys)",
			file, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if err := d.checkSidecar(); err != nil {
		return d, fmt.Errorf("%s: %w", file, err)
	}
	for i := range d.Rules {
		r := &d.Rules[i]
		if r.Name == "" {
			return d, fmt.Errorf("%s: rules: rule %d: name: empty (name each rule, as rows record it)", file, i+1)
		}
		if err := r.check(); err != nil {
			return d, fmt.Errorf("%s: rules: %s: %w", file, r.Name, err)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(d.Runs)) {
		r := d.Runs[id]
		if err := r.checkEntry(); err != nil {
			return d, fmt.Errorf("%s: runs: %s: %w", file, id, err)
		}
	}
	return d, nil
}

// checkSidecar checks the fields a sidecar adds beyond a file's own: its
// benchmark.
func (d *Deployment) checkSidecar() error {
	if d.Benchmark == nil {
		return nil
	}
	return d.Benchmark.check()
}

// SidecarPath returns the sidecar YAML of a benchmark file if one exists:
// FILE.yaml, FILE.yml, or the file's name with its extension replaced by .yaml.
func SidecarPath(file string) (string, bool) {
	stem := strings.TrimSuffix(file, filepath.Ext(file))
	for _, p := range []string{file + ".yaml", file + ".yml", stem + ".yaml", stem + ".yml"} {
		if p == file {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, true
		}
	}
	return "", false
}
