package perfdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"reflect"
	"sort"
	"strings"
	"sync"
)

// LoadDir loads the perf data (system, backend, version) sees from an
// aiconfigurator `systems` folder (the folder holding <system>.yaml and the
// data/ tree): the shared-layer sources resolved and the loader rules applied
// (see Data). Unknown system, backend or version → an error listing what exists.
// Options select the database mode the data is loaded for (ForMode,
// WithSharedLayer); without them the shared layer is on.
func LoadDir(ctx context.Context, systemsDir, system, backend, version string, opts ...LoadOption) (*Data, error) {
	if fi, err := os.Stat(systemsDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("systems folder %s: not a folder; pass aiconfigurator's systems folder (<system>.yaml beside data/)", systemsDir)
	}
	return loadFS(ctx, os.DirFS(systemsDir), systemsDir, system, backend, version, opts)
}

// loadFS is LoadDir over any file system; label names the root in errors.
func loadFS(ctx context.Context, fsys fs.FS, label, system, backend, version string, opts []LoadOption) (*Data, error) {
	plan, err := resolveLoadOptions(opts)
	if err != nil {
		return nil, err
	}
	sys, _, err := readSystemFS(fsys, label, system)
	if err != nil {
		return nil, err
	}
	tr, err := scanTreeFS(fsys, label, sys)
	if err != nil {
		return nil, err
	}
	return assemble(ctx, tr, &fsSource{fsys: fsys, label: label}, backend, version, plan)
}

// systemNamesFS lists the <name>.yaml system specs at the root of fsys.
func systemNamesFS(fsys fs.FS) ([]string, error) {
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || n == "perf_data_reuse_manifest.yaml" {
			continue
		}
		if s, ok := strings.CutSuffix(n, ".yaml"); ok {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ListSystemsDir lists the systems of an aiconfigurator systems folder.
func ListSystemsDir(systemsDir string) ([]string, error) {
	out, err := systemNamesFS(os.DirFS(systemsDir))
	if err != nil {
		return nil, fmt.Errorf("systems folder %s: %w", systemsDir, err)
	}
	return out, nil
}

// ListBackendsDir lists the backends with perf data for a system (nccl excluded).
func ListBackendsDir(systemsDir, system string) ([]string, error) {
	bv, err := backendVersionsFS(os.DirFS(systemsDir), systemsDir, system)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(bv))
	for b := range bv {
		out = append(out, b)
	}
	sort.Strings(out)
	return out, nil
}

// ListVersionsDir lists a backend's versions for a system, in PEP 440 order.
func ListVersionsDir(systemsDir, system, backend string) ([]string, error) {
	bv, err := backendVersionsFS(os.DirFS(systemsDir), systemsDir, system)
	if err != nil {
		return nil, err
	}
	return bv[backend], nil
}

func backendVersionsFS(fsys fs.FS, label, system string) (map[string][]string, error) {
	sys, _, err := readSystemFS(fsys, label, system)
	if err != nil {
		return nil, err
	}
	tr, err := scanTreeFS(fsys, label, sys)
	if err != nil {
		return nil, err
	}
	return tr.backendVersions(), nil
}

// readSystemFS reads and parses <system>.yaml; an unknown system is an error
// listing the known ones. It also returns the raw YAML.
func readSystemFS(fsys fs.FS, label, system string) (*System, []byte, error) {
	if system == "" || strings.ContainsAny(system, `/\`) || strings.HasPrefix(system, ".") {
		return nil, nil, fmt.Errorf("system %q: not a system name", system)
	}
	file := system + ".yaml"
	data, err := fs.ReadFile(fsys, file)
	if errors.Is(err, fs.ErrNotExist) {
		names, _ := systemNamesFS(fsys)
		return nil, nil, fmt.Errorf("system %q: unknown in %s; available: %s", system, label, listOrNone(names))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("system spec %s: %w", path.Join(label, file), err)
	}
	sys, err := ParseSystemYAML(system, path.Join(label, file), data)
	if err != nil {
		return nil, nil, err
	}
	return sys, data, nil
}

// scanTreeFS indexes the system's data dir: every <family>/<backend>/<version>
// dir with its sidecars (reuse.yaml parsed strictly: a malformed sidecar is an
// error naming the file), the importable table files, and the manifest.
func scanTreeFS(fsys fs.FS, label string, sys *System) (*tree, error) {
	t := &tree{system: sys, dirs: map[dirKey]*dirInfo{}, files: map[string]bool{}}
	root := path.Clean(sys.DataDir)
	if root == "." || strings.HasPrefix(root, "..") || path.IsAbs(root) {
		return nil, fmt.Errorf("system spec %s.yaml: data_dir %q must be a relative path inside the systems folder", path.Join(label, sys.Name), sys.DataDir)
	}
	if m, err := fs.ReadFile(fsys, "perf_data_reuse_manifest.yaml"); err == nil {
		t.manifest, err = parseManifestYAML(path.Join(label, "perf_data_reuse_manifest.yaml"), m)
		if err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reuse manifest %s: %w", path.Join(label, "perf_data_reuse_manifest.yaml"), err)
	}
	fams, err := readDirs(fsys, root)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil // a system without data: every load lists no versions
	}
	if err != nil {
		return nil, fmt.Errorf("perf data %s: %w", path.Join(label, root), err)
	}
	for _, fam := range fams {
		if knownBackendDirs[fam] { // legacy <backend>/<version> layout: not supported
			continue
		}
		backends, err := readDirs(fsys, path.Join(root, fam))
		if err != nil {
			return nil, fmt.Errorf("perf data %s: %w", path.Join(label, root, fam), err)
		}
		for _, be := range backends {
			versions, err := readDirs(fsys, path.Join(root, fam, be))
			if err != nil {
				return nil, fmt.Errorf("perf data %s: %w", path.Join(label, root, fam, be), err)
			}
			for _, v := range versions {
				if strings.HasPrefix(v, "_") {
					continue
				}
				k := dirKey{fam, be, v}
				d, err := scanVersionDir(fsys, label, path.Join(root, fam, be, v), t.files)
				if err != nil {
					return nil, err
				}
				t.dirs[k] = d
			}
		}
	}
	return t, nil
}

// scanVersionDir reads one version dir's sidecars and notes its table files.
func scanVersionDir(fsys fs.FS, label, dir string, files map[string]bool) (*dirInfo, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("perf data %s: %w", path.Join(label, dir), err)
	}
	d := &dirInfo{}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") {
			continue
		}
		p := path.Join(dir, n)
		switch n {
		case "collection_meta.yaml":
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return nil, fmt.Errorf("collection meta %s: %w", path.Join(label, p), err)
			}
			if err := checkMetaYAML(path.Join(label, p), b); err != nil {
				return nil, err
			}
			s := string(b)
			d.meta = &s
		case "reuse.yaml":
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return nil, fmt.Errorf("reuse file %s: %w", path.Join(label, p), err)
			}
			if d.reuse, err = parseReuseYAML(path.Join(label, p), b); err != nil {
				return nil, err
			}
			s := string(b)
			d.reuseText = &s
		case "INCOMPLETE.txt":
			d.incomplete = true
		default:
			if stem, ok := strings.CutSuffix(n, ".parquet"); ok && isImportedStem(stem) {
				files[p] = true
			}
		}
	}
	return d, nil
}

// readDirs lists the visible subdirectory names of dir, sorted.
func readDirs(fsys fs.FS, dir string) ([]string, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// rowSource provides the rows of a resolved file: from Parquet (fsSource) or
// from the store (storeSource).
type rowSource interface{ isRowSource() }

// fsSource reads Parquet files from a file system.
type fsSource struct {
	fsys  fs.FS
	label string
}

func (*fsSource) isRowSource() {}

// readKindRows returns the rows of one file of kind k as stored (before loader
// rules) and the file's sha256.
func readKindRows[R any, K comparable](ctx context.Context, src rowSource, k *tableKind[R, K], p string) ([]R, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	switch s := src.(type) {
	case *fsSource:
		data, err := fs.ReadFile(s.fsys, p)
		if err != nil {
			return nil, "", fmt.Errorf("parquet file %s: %w", path.Join(s.label, p), err)
		}
		sum := sha256.Sum256(data)
		t, err := readParquet(path.Join(s.label, p), data, k.cols)
		if err != nil {
			return nil, "", err
		}
		rows, err := k.fromParquet(t)
		return rows, hex.EncodeToString(sum[:]), err
	case *storeSource:
		return loadStoreRows(ctx, s, k, p)
	}
	return nil, "", fmt.Errorf("internal: unknown row source %T", src)
}

// loadKind resolves one table: reads each source in priority order, applies
// the kernel_source allowlist and the loader rules, keeps the first row of
// each coordinate, and records the sources in *srcs.
func loadKind[R any, K comparable](ctx context.Context, src rowSource, k *tableKind[R, K], refs []srcRef, system string, srcs *[]DataSource) ([]R, error) {
	seen := map[K]struct{}{}
	var out []R
	keep := k.keep
	if k.keepExempt[system] {
		keep = nil
	}
	for _, ref := range refs {
		rows, sum, err := readKindRows(ctx, src, k, ref.path)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = make([]R, 0, len(rows)+len(rows)/2)
		}
		n, used := 0, 0
		for i := range rows {
			r := &rows[i]
			if ref.ks != nil && !ref.ks[k.kernel(r)] {
				continue
			}
			if keep != nil && !keep(r) {
				continue
			}
			if k.norm != nil {
				k.norm(r)
			}
			n++
			key := k.key(r)
			if _, dup := seen[key]; dup {
				continue
			}
			seen[key] = struct{}{}
			out = append(out, *r)
			used++
		}
		*srcs = append(*srcs, DataSource{Table: k.stem, Backend: ref.dir.backend, Version: ref.dir.version,
			Channel: ref.channel, Path: ref.path, SHA256: sum, Rows: n, Used: used})
	}
	return out, nil
}

// loadWorkers bounds the tables decoded at once (the project's machines have 2 cores).
const loadWorkers = 2

// assemble builds Data for (backend, version) from a tree and a row source,
// with the shared layer on or off (see tree.resolve), reading only the tables
// the plan wants (the others resolve to no source and stay empty).
// Tables are decoded concurrently; the result does not depend on the order.
func assemble(ctx context.Context, tr *tree, src rowSource, backend, version string, plan loadPlan) (*Data, error) {
	if backend == "" || version == "" || !tr.hasBackendVersion(backend, version) {
		return nil, fmt.Errorf("perf data for system %s: no %s %s; available: %s",
			tr.system.Name, orDash(backend), orDash(version), describeVersions(tr.backendVersions()))
	}
	d := &Data{System: tr.system, Backend: backend, Version: version}
	res := func(stem string) []srcRef {
		if !plan.wants(stem) {
			return nil
		}
		return tr.resolve(backend, version, stem, plan.shared)
	}
	sys := tr.system.Name
	var moe []MoERow
	nccl := []srcRef{}
	if ref, ok := tr.ncclSource(); ok {
		nccl = append(nccl, ref)
	}
	// One task per table, in Data.Sources order.
	tasks := []func(*[]DataSource) error{
		func(s *[]DataSource) (err error) {
			d.Gemm, err = loadKind(ctx, src, gemmKind, res(gemmKind.stem), sys, s)
			floorGemmAtSOL(tr.system, d.Gemm)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.ContextAttention, err = loadKind(ctx, src, contextAttentionKind, res(contextAttentionKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.GenerationAttention, err = loadKind(ctx, src, generationAttentionKind, res(generationAttentionKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.AllReduce, err = loadKind(ctx, src, allReduceKind, res(allReduceKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.NCCL, err = loadKind(ctx, src, ncclKind, nccl, sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			moe, err = loadKind(ctx, src, moeKind, res(moeKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.ComputeScale, err = loadKind(ctx, src, computeScaleKind, res(computeScaleKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.ScaleMatrix, err = loadKind(ctx, src, scaleMatrixKind, res(scaleMatrixKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.MLAContextModule, err = loadKind(ctx, src, mlaContextModuleKind, res(mlaContextModuleKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.MLAGenerationModule, err = loadKind(ctx, src, mlaGenerationModuleKind, res(mlaGenerationModuleKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.MLAContext, err = loadKind(ctx, src, mlaContextKind, res(mlaContextKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.MLAGeneration, err = loadKind(ctx, src, mlaGenerationKind, res(mlaGenerationKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.MLABmm, err = loadKind(ctx, src, mlaBmmKind, res(mlaBmmKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.DSAContext, err = loadKind(ctx, src, dsaContextKind, res(dsaContextKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.DSAGeneration, err = loadKind(ctx, src, dsaGenerationKind, res(dsaGenerationKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.GDN, err = loadKind(ctx, src, gdnKind, res(gdnKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.DeepEPNormal, err = loadKind(ctx, src, deepEPNormalKind, res(deepEPNormalKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.DeepEPLL, err = loadKind(ctx, src, deepEPLLKind, res(deepEPLLKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.WideEPContextMoE, err = loadKind(ctx, src, wideEPContextMoEKind, res(wideEPContextMoEKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.WideEPGenerationMoE, err = loadKind(ctx, src, wideEPGenerationMoEKind, res(wideEPGenerationMoEKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.WideEPContextMLA, err = loadKind(ctx, src, wideEPContextMLAKind, res(wideEPContextMLAKind.stem), sys, s)
			return err
		},
		func(s *[]DataSource) (err error) {
			d.WideEPGenerationMLA, err = loadKind(ctx, src, wideEPGenerationMLAKind, res(wideEPGenerationMLAKind.stem), sys, s)
			return err
		},
	}
	srcs := make([][]DataSource, len(tasks))
	errs := make([]error, len(tasks))
	sem := make(chan struct{}, loadWorkers)
	var wg sync.WaitGroup
	for i, task := range tasks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = task(&srcs[i])
		}()
	}
	wg.Wait()
	for i := range tasks {
		if errs[i] != nil {
			return nil, errs[i] // the first failing table, in a fixed order
		}
		d.Sources = append(d.Sources, srcs[i]...)
	}
	for _, r := range moe {
		if r.Kernel == moeMinLatencyKernel {
			d.MoEMinLatency = append(d.MoEMinLatency, r)
		} else {
			d.MoE = append(d.MoE, r)
		}
	}
	return d, nil
}

// floorGemmAtSOL raises every GEMM latency below its SOL to the SOL
// (aiconfigurator GEMM._correct_sol; power is kept).
func floorGemmAtSOL(s *System, rows []GemmRow) {
	for i := range rows {
		r := &rows[i]
		if sol, ok := s.GemmSOL(r.Dtype, r.M, r.N, r.K); ok && sol > r.Latency {
			r.Latency = sol
		}
	}
}

// describeVersions renders backend → versions for error messages, e.g.
// "sglang 0.5.14; trtllm 1.3.0rc20; vllm 0.14.0, 0.22.0".
func describeVersions(bv map[string][]string) string {
	if len(bv) == 0 {
		return "none"
	}
	bs := make([]string, 0, len(bv))
	for b := range bv {
		bs = append(bs, b)
	}
	sort.Strings(bs)
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = b + " " + strings.Join(bv[b], ", ")
	}
	return strings.Join(parts, "; ")
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tableFields maps each perf-table field of Data to the table (file stem) it
// is loaded from. NCCL, which assemble always loads, and Sources are not
// listed; TestTableFieldsCoverData checks that every other slice field is.
var tableFields = []struct{ field, stem string }{
	{"Gemm", gemmKind.stem}, {"ContextAttention", contextAttentionKind.stem},
	{"GenerationAttention", generationAttentionKind.stem}, {"AllReduce", allReduceKind.stem},
	{"MoE", moeKind.stem}, {"MoEMinLatency", moeKind.stem},
	{"ComputeScale", computeScaleKind.stem}, {"ScaleMatrix", scaleMatrixKind.stem},
	{"MLAContextModule", mlaContextModuleKind.stem}, {"MLAGenerationModule", mlaGenerationModuleKind.stem},
	{"MLAContext", mlaContextKind.stem}, {"MLAGeneration", mlaGenerationKind.stem}, {"MLABmm", mlaBmmKind.stem},
	{"DSAContext", dsaContextKind.stem}, {"DSAGeneration", dsaGenerationKind.stem}, {"GDN", gdnKind.stem},
	{"DeepEPNormal", deepEPNormalKind.stem}, {"DeepEPLL", deepEPLLKind.stem},
	{"WideEPContextMoE", wideEPContextMoEKind.stem}, {"WideEPGenerationMoE", wideEPGenerationMoEKind.stem},
	{"WideEPContextMLA", wideEPContextMLAKind.stem}, {"WideEPGenerationMLA", wideEPGenerationMLAKind.stem},
}

// unwantedFields returns the Data field indexes of the tables plan does not
// load (nil when it loads every table).
func unwantedFields(plan loadPlan) []bool {
	if plan.tables == nil {
		return nil
	}
	skip := make([]bool, dataType.NumField())
	for _, t := range tableFields {
		if !plan.wants(t.stem) {
			f, _ := dataType.FieldByName(t.field)
			skip[f.Index[0]] = true
		}
	}
	return skip
}

// only returns d restricted to the tables plan wants, as assemble builds it
// under plan: every other table empty and its sources dropped (NCCL, which
// assemble always loads, is kept). LoadStore derives a table selection's Data
// from a snapshot of every table this way (TestOnlyMatchesAssemble: equal to
// decoding the selection, for every model family and every single table).
func (d *Data) only(plan loadPlan) *Data {
	skip := unwantedFields(plan)
	if skip == nil {
		return d
	}
	o := *d
	v := reflect.ValueOf(&o).Elem()
	for i, s := range skip {
		if s {
			v.Field(i).SetZero()
		}
	}
	o.Sources = nil
	for _, s := range d.Sources {
		if s.Table == ncclKind.stem || plan.wants(s.Table) {
			o.Sources = append(o.Sources, s)
		}
	}
	return &o
}
