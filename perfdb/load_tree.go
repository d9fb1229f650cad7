package perfdb

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// knownBackendDirs are first-level names under a system's data dir that are
// not op families (aiconfigurator KNOWN_BACKEND_DIRS).
var knownBackendDirs = map[string]bool{"trtllm": true, "sglang": true, "vllm": true, "nccl": true, "oneccl": true}

// dirKey names one <family>/<backend>/<version> directory of a system.
type dirKey struct{ family, backend, version string }

// reuseEntry is one reuse.yaml entry: borrow table from from_version.
type reuseEntry struct {
	Table, FromVersion, Reason, ApprovedBy string
}

// dirInfo is what resolution needs to know about a version directory.
type dirInfo struct {
	meta       *string // collection_meta.yaml text, nil when absent
	reuseText  *string // reuse.yaml text, nil when absent
	incomplete bool    // INCOMPLETE.txt present
	reuse      []reuseEntry
}

// unusable mirrors aiconfigurator's version_dir_is_unusable: a legacy
// INCOMPLETE.txt marker vetoes the dir unless a collection_meta.yaml exists.
func (d *dirInfo) unusable() bool { return d.meta == nil && d.incomplete }

// manifestEntry is one group of perf_data_reuse_manifest.yaml.
type manifestEntry struct {
	OpFile, KernelSource, Tier string
	Frameworks                 []string
}

// tree is the resolution view of one system's data: which version dirs and
// which importable table files exist, their sidecars, and the manifest. It is
// built from a directory (LoadDir, LoadEmbedded) or from the store (LoadStore);
// resolution is a pure function of it.
type tree struct {
	system   *System
	dirs     map[dirKey]*dirInfo
	files    map[string]bool // relative paths (from the systems folder) of table files
	manifest []manifestEntry
}

// families returns the family dir names, sorted (aiconfigurator walks readdir order;
// a table stem lives in one family, so the order does not change results).
func (t *tree) families() []string {
	set := map[string]bool{}
	for k := range t.dirs {
		set[k.family] = true
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// filePath is the relative path of <data_dir>/<family>/<backend>/<version>/<stem>.parquet.
func (t *tree) filePath(k dirKey, stem string) string {
	return path.Join(t.system.DataDir, k.family, k.backend, k.version, stem+".parquet")
}

// opPath mirrors resolve_op_data_path: the first family dir holding
// <backend>/<version>/<stem>.parquet that is not vetoed. ok is false when none does.
func (t *tree) opPath(backend, version, stem string) (k dirKey, p string, ok bool) {
	for _, fam := range t.families() {
		k := dirKey{fam, backend, version}
		d, exists := t.dirs[k]
		if !exists || d.unusable() {
			continue
		}
		if p := t.filePath(k, stem); t.files[p] {
			return k, p, true
		}
	}
	return dirKey{}, "", false
}

// versions returns every version dir name of backend across families.
func (t *tree) versions(backend string) []string {
	set := map[string]bool{}
	for k := range t.dirs {
		if k.backend == backend && k.family != "" && !knownBackendDirs[k.family] &&
			!strings.HasPrefix(k.version, ".") && !strings.HasPrefix(k.version, "_") {
			set[k.version] = true
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	return out
}

// srcRef is one resolved source file of a table.
type srcRef struct {
	dir     dirKey
	path    string
	channel string          // primary | reuse | earlier | manifest | nccl
	ks      map[string]bool // kernel_source allowlist (manifest fill); nil admits all
}

// resolve returns the ordered sources of one table for (backend, version)
// (aiconfigurator source_resolution.rs resolve_one, non-strict provenance,
// family-first layout only). With shared false (EMPIRICAL and SOL, see
// ForMode) only the primary is returned: resolve_one returns before the
// reuse.yaml donors when enable_shared_layer is off. With shared true:
//  1. primary: the requested dir; when it is in the comm family nothing else
//     is added (comm tables do not inherit);
//  2. reuse.yaml donors of the requested version (any family), file order,
//     deduplicated on from_version;
//  3. same-backend versions strictly earlier by PEP 440, nearest first
//     (non-PEP 440 siblings are skipped; declared donors are not repeated);
//  4. cross-backend fill for manifest-listed kernel sources, other frameworks
//     sorted by name, each newest version first.
func (t *tree) resolve(backend, version, stem string, shared bool) []srcRef {
	var out []srcRef
	if k, p, ok := t.opPath(backend, version, stem); ok {
		out = append(out, srcRef{dir: k, path: p, channel: "primary"})
		if k.family == "comm" {
			return out
		}
	}
	if !shared {
		return out
	}
	donors := map[string]bool{}
	for _, fam := range t.families() {
		d, ok := t.dirs[dirKey{fam, backend, version}]
		if !ok {
			continue
		}
		for _, e := range d.reuse {
			if e.Table != stem || donors[e.FromVersion] {
				continue
			}
			k, p, ok := t.opPath(backend, e.FromVersion, stem)
			if !ok {
				continue
			}
			out = append(out, srcRef{dir: k, path: p, channel: "reuse"})
			donors[e.FromVersion] = true
		}
	}
	if req, ok := parsePEP440(version); ok {
		type sib struct {
			v pep440
			s string
		}
		var earlier []sib
		for _, v := range t.versions(backend) {
			if v == version || donors[v] {
				continue
			}
			pv, ok := parsePEP440(v)
			if !ok || comparePEP440(pv, req) >= 0 {
				continue
			}
			earlier = append(earlier, sib{pv, v})
		}
		sort.SliceStable(earlier, func(i, j int) bool {
			if c := comparePEP440(earlier[i].v, earlier[j].v); c != 0 {
				return c > 0
			}
			return earlier[i].s > earlier[j].s
		})
		for _, e := range earlier {
			if k, p, ok := t.opPath(backend, e.s, stem); ok {
				out = append(out, srcRef{dir: k, path: p, channel: "earlier"})
			}
		}
	}
	// Cross-backend fill gated by the manifest.
	be := strings.ToLower(backend)
	filter := map[string]map[string]bool{}
	for _, e := range t.manifest {
		if e.OpFile != stem+".parquet" || e.KernelSource == "" || (e.Tier != "shared" && e.Tier != "shared_fallback") {
			continue
		}
		fws := map[string]bool{}
		for _, fw := range e.Frameworks {
			fws[strings.ToLower(fw)] = true
		}
		if !fws[be] {
			continue
		}
		for fw := range fws {
			if filter[fw] == nil {
				filter[fw] = map[string]bool{}
			}
			filter[fw][e.KernelSource] = true
		}
	}
	var fws []string
	for fw := range filter {
		if fw != be {
			fws = append(fws, fw)
		}
	}
	sort.Strings(fws)
	for _, fw := range fws {
		vs := t.versions(fw)
		sort.Slice(vs, func(i, j int) bool { return CompareVersions(vs[i], vs[j]) > 0 })
		for _, v := range vs {
			if k, p, ok := t.opPath(fw, v, stem); ok {
				out = append(out, srcRef{dir: k, path: p, channel: "manifest", ks: filter[fw]})
			}
		}
	}
	return out
}

// ncclSource returns the NCCL file for the system's misc.nccl_version
// (comm/nccl/<v>/nccl_perf.parquet); ok is false when there is none.
func (t *tree) ncclSource() (srcRef, bool) {
	if t.system.NCCLVersion == "" {
		return srcRef{}, false
	}
	k := dirKey{"comm", "nccl", t.system.NCCLVersion}
	d, exists := t.dirs[k]
	p := t.filePath(k, "nccl_perf")
	if !exists || d.unusable() || !t.files[p] {
		return srcRef{}, false
	}
	return srcRef{dir: k, path: p, channel: "nccl"}, true
}

// hasBackendVersion reports whether any family dir holds <backend>/<version>
// (nccl and oneccl are not backends: their tables come with every backend).
func (t *tree) hasBackendVersion(backend, version string) bool {
	if backend == "nccl" || backend == "oneccl" {
		return false
	}
	for k := range t.dirs {
		if k.backend == backend && k.version == version && !knownBackendDirs[k.family] {
			return true
		}
	}
	return false
}

// backendVersions lists (backend → versions) of the tree, excluding nccl/oneccl.
func (t *tree) backendVersions() map[string][]string {
	out := map[string][]string{}
	seen := map[[2]string]bool{}
	for k := range t.dirs {
		if k.backend == "nccl" || k.backend == "oneccl" || knownBackendDirs[k.family] {
			continue
		}
		if !seen[[2]string{k.backend, k.version}] {
			seen[[2]string{k.backend, k.version}] = true
			out[k.backend] = append(out[k.backend], k.version)
		}
	}
	for b := range out {
		sort.Slice(out[b], func(i, j int) bool { return CompareVersions(out[b][i], out[b][j]) < 0 })
	}
	return out
}

// parseReuseYAML parses a reuse.yaml sidecar strictly (aiconfigurator
// parse_reuse_yaml: a top-level 'reuse' list of mappings with non-empty string
// table, from_version, reason, approved_by). file names it in errors.
func parseReuseYAML(file string, data []byte) ([]reuseEntry, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("reuse file %s: not valid YAML: %s", file, oneLineErr(err))
	}
	if doc == nil {
		return nil, fmt.Errorf("reuse file %s: expected a YAML mapping at the top level", file)
	}
	raw, ok := doc["reuse"]
	if !ok {
		return nil, fmt.Errorf("reuse file %s: missing required top-level 'reuse' key", file)
	}
	if raw == nil {
		return nil, fmt.Errorf("reuse file %s: 'reuse' must be a list", file)
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("reuse file %s: 'reuse' must be a list", file)
	}
	out := make([]reuseEntry, 0, len(list))
	for i, it := range list {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("reuse file %s: reuse[%d] must be a mapping", file, i)
		}
		var vals [4]string
		for j, key := range []string{"table", "from_version", "reason", "approved_by"} {
			s, ok := m[key].(string)
			if !ok || strings.TrimSpace(s) == "" {
				return nil, fmt.Errorf("reuse file %s: reuse[%d].%s must be a non-empty string", file, i, key)
			}
			vals[j] = s
		}
		out = append(out, reuseEntry{vals[0], vals[1], vals[2], vals[3]})
	}
	return out, nil
}

// checkMetaYAML checks that a collection_meta.yaml is a YAML mapping
// (aiconfigurator parses it to fail loudly on malformed sidecars).
func checkMetaYAML(file string, data []byte) error {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("collection meta %s: not valid YAML: %s", file, oneLineErr(err))
	}
	if doc == nil {
		return fmt.Errorf("collection meta %s: expected a YAML mapping at the top level", file)
	}
	return nil
}

// parseManifestYAML parses perf_data_reuse_manifest.yaml: groups with op_file
// (".txt" renamed to ".parquet"), kernel_source, tier, frameworks. Groups with an
// empty op_file are skipped, as aiconfigurator does.
func parseManifestYAML(file string, data []byte) ([]manifestEntry, error) {
	var doc struct {
		Groups []struct {
			OpFile       string   `yaml:"op_file"`
			KernelSource string   `yaml:"kernel_source"`
			Tier         string   `yaml:"tier"`
			Frameworks   []string `yaml:"frameworks"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("reuse manifest %s: not valid YAML: %s", file, oneLineErr(err))
	}
	var out []manifestEntry
	for _, g := range doc.Groups {
		if g.OpFile == "" {
			continue
		}
		op := g.OpFile
		if s, ok := strings.CutSuffix(op, ".txt"); ok {
			op = s + ".parquet"
		}
		out = append(out, manifestEntry{OpFile: op, KernelSource: g.KernelSource, Tier: g.Tier, Frameworks: g.Frameworks})
	}
	return out, nil
}
