package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/trace"
)

// traceCommand wires `aicdb trace import|ls|show|stats|rm` (issue 13). Parsing lives
// in package trace, storage in store, the reuse oracle in oracle; this file reads
// flags and prints.
func traceCommand() *cli.Command {
	return &cli.Command{
		Name:  "trace",
		Usage: "import request traces (Mooncake, Azure 2023, ServeGen, generic JSONL) and summarise them",
		Subcommands: []*cli.Command{
			traceImportCommand(),
			{
				Name:   "ls",
				Usage:  "list the stored traces",
				Flags:  []cli.Flag{formatFlag(formatTable)},
				Action: traceLs,
			},
			{
				Name:      "show",
				Usage:     "print a trace's requests (or a slice of them)",
				ArgsUsage: "NAME",
				Flags: append(sliceFlags(),
					formatFlag(formatTable)), // jsonl: docs/traces.md's generic format
				Action: traceShow,
			},
			{
				Name:      "stats",
				Usage:     "rate over time, length quantiles and prefix reuse of a trace (or a slice)",
				ArgsUsage: "NAME",
				Description: `Prints the arrival rate per time bucket, ISL/OSL quantiles and the trace's own prefix
reuse (unbounded cache). With --reuse it replays the slice through one engine's prefix
cache with a KV budget (the reuse oracle, docs/traces.md) and prints the hit fraction:
   aicdb trace stats conv --reuse --backend vllm --kv-blocks 100000`,
				Flags: append(sliceFlags(),
					&cli.Float64Flag{Name: "bucket", Usage: "rate bucket width in `SECONDS` (default: ≤ 24 buckets)"},
					&cli.BoolFlag{Name: "reuse", Usage: "run the prefix-cache reuse oracle"},
					&cli.StringFlag{Name: "backend", Usage: "reuse oracle policy `BACKEND`: " + engine.List(", ", " or ")},
					&cli.IntFlag{Name: "kv-blocks", Usage: "reuse oracle KV budget in `N` blocks (SGLang: pages)"},
					&cli.IntFlag{Name: "block-size", Usage: "tokens per block/page `N` (default vllm 16, sglang 1, trtllm 32)"},
					formatFlag(formatText, formatText)),
				Action: traceStats,
			},
			{
				Name:      "replay",
				Usage:     "replay a trace (W3: its own arrivals and lengths, prefix hits from its hash ids) through the DES",
				ArgsUsage: "NAME",
				Description: `--engine FILE holds {"engine": {...}, "timing": {...}} with the knobs of an oracle
scenario (docs/oracle.md). Prints the summary (counters and the 15 columns) and stores it
with every request's result (replays, replay_requests). --tier quantitative (default) runs
the queueing calendar with each request's cached tokens from the reuse oracle over the
engine's pool; --tier oracle runs the DES with the trace's hash ids as block identities.
--by minute adds "series" to the summary: per window the arrivals, finished requests,
throughput, time-average queue length (arrived, no first token yet) and requests in
system, and the p99 TTFT of the requests arriving in it.
   aicdb trace replay conv --engine vllm_h200.json --window 0..600 --by minute`,
				Flags: slices.Concat(sliceFlags(), []cli.Flag{
					&cli.StringFlag{Name: "engine", Usage: "engine and timing JSON `FILE` (required)"},
					&cli.StringFlag{Name: "tier", Value: "quantitative", Usage: "`TIER`: quantitative (the calendar, prefix hits from the reuse oracle) or oracle (the DES)"},
				}, perfTimingFlags("perf data: ", "", "time passes from perf data: model `ID` (with --system, --backend, --tp; replaces the file's timing)",
					"perf data: `BACKEND` (must be the engine file's)"), []cli.Flag{
					&cli.BoolFlag{Name: "sessions", Usage: "W4: a session's later turn arrives at its previous turn's completion + think time + client RTT, the previous context cached (the DES: while its blocks survive in the engine's prefix cache)"},
					&cli.IntFlag{Name: "max-sessions", Usage: "W4: at most `N` sessions in progress (0 = no cap)"},
					&cli.StringFlag{Name: "kv-capacity-tokens", Usage: "KV pool of both tiers: `auto|N` tokens, replacing the engine file's num_gpu_blocks (auto: from the perf database's GPU memory model at the slice's longest request; needs --model)"},
					&cli.Float64Flag{Name: "client-rtt-ms", Value: queueing.DefaultClientRTTMs, Usage: "W4: client round trip in `MS` before a later turn reaches the scheduler (as eval's closed loop)"},
					&cli.StringFlag{Name: "by", Usage: "add a time series by `WINDOW` (second, minute or hour): arrivals, finished, throughput, queue length, TTFT p99 per window"},
					formatFlag(formatJSON), quietFlag()}, evalDisaggFlags()),
				Action: traceReplay,
			},
			{
				Name:      "rm",
				Usage:     "remove a stored trace",
				ArgsUsage: "NAME",
				Action:    traceRm,
			},
		},
	}
}

func traceImportCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "import a trace file (or a ServeGen client pool directory)",
		ArgsUsage: "FILE",
		Description: `FILE is a Mooncake JSONL trace, an Azure LLM inference 2023 CSV, a ServeGen client pool
(a directory of chunk-N-trace.csv + chunk-N-dataset.json, or one chunk-N-trace.csv) or
aicdb's generic JSONL (docs/traces.md). --input-format (alias --format) is sniffed when omitted. One import is
one transaction: a bad row stops it with the file, line and field, and the store is
unchanged. Re-importing the same content (same sha256) changes nothing.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input-format", Aliases: []string{"format"}, Usage: "the input file's `FORMAT`: mooncake, azure, servegen or jsonl; --format is an alias: here it names the input, not the output", DefaultText: "sniffed"},
			&cli.StringFlag{Name: "name", Usage: "trace `NAME` (default: the file name without extension)"},
			&cli.IntFlag{Name: "hash-block", Value: trace.DefaultHashBlock, Usage: "prompt tokens per hash id `N` (mooncake, jsonl)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "ServeGen draw `SEED`"},
			quietFlag(),
		},
		Action: traceImport,
	}
}

// sliceFlags select part of a stored trace (applied in SQL).
func sliceFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "window", Usage: "only arrivals in `START..END` seconds from the trace origin (either side may be empty)"},
		&cli.Float64Flag{Name: "scale-rate", Value: 1, Usage: "multiply the arrival rate by `X` (times divided by X)"},
		&cli.IntFlag{Name: "limit", Usage: "at most `N` requests"},
	}
}

// interspersed lets flags follow and separate the positional arguments
// (urfave/cli v2 stops parsing flags at the first positional): what follows the
// first positional is parsed with the command's own flags (and the global --db)
// and copied into c. It returns the positional arguments in order.
func interspersed(c *cli.Context) ([]string, error) {
	args := c.Args().Slice()
	if len(args) <= 1 {
		return args, nil
	}
	fs := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, f := range c.Command.Flags {
		if err := f.Apply(fs); err != nil {
			return nil, err
		}
	}
	setDB := func() error { return nil }
	if fs.Lookup("db") == nil {
		setDB = trailingDB(c, fs)
	}
	pos := args[:1:1]
	for rest := args[1:]; len(rest) > 0; {
		if err := fs.Parse(rest); err != nil {
			return nil, userErrorf("%s: %v", commandPath(c), err)
		}
		if rest = fs.Args(); len(rest) > 0 { // a positional between flags: keep it, parse on
			pos, rest = append(pos, rest[0]), rest[1:]
		}
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		i := slices.IndexFunc(c.Command.Flags, func(cf cli.Flag) bool { return slices.Contains(cf.Names(), f.Name) })
		if i < 0 {
			return
		}
		for _, n := range c.Command.Flags[i].Names() { // an alias sets its flag under every name
			if err == nil {
				err = c.Set(n, f.Value.String())
			}
		}
	})
	if err == nil {
		err = setDB()
	}
	if err != nil {
		return nil, userErrorf("%s: %v", commandPath(c), err)
	}
	return pos, nil
}

// commandPath is the command c runs, as typed after "aicdb" ("trace replay").
func commandPath(c *cli.Context) string {
	var names []string
	for _, p := range c.Lineage() {
		if p.Command != nil && p.Command.Name != "" && p.Command.Name != c.App.Name && (len(names) == 0 || names[len(names)-1] != p.Command.Name) {
			names = append(names, p.Command.Name)
		}
	}
	slices.Reverse(names)
	return strings.Join(names, " ")
}

// oneArg returns the single positional argument.
func oneArg(c *cli.Context, what string) (string, error) {
	args, err := interspersed(c)
	if err != nil {
		return "", err
	}
	if len(args) != 1 {
		return "", userErrorf("trace %s: want one %s, got %d arguments", c.Command.Name, what, len(args))
	}
	return args[0], nil
}

func traceImport(c *cli.Context) error {
	path, err := oneArg(c, "FILE")
	if err != nil {
		return err
	}
	st0, err := os.Stat(path)
	if err != nil {
		return userErrorf("trace import %s: no such file or directory", path)
	}
	f, err := importFormat(c.String("input-format"), path, st0.IsDir())
	if err != nil {
		return err
	}
	hb := c.Int("hash-block")
	if hb < 1 || hb > 1<<20 {
		return userErrorf("trace import: --hash-block %d: must be in 1..1048576", hb)
	}
	params := map[string]any{}
	var files []string
	if f == trace.ServeGen {
		params["seed"] = c.Uint64("seed")
		if files, err = trace.ServeGenFiles(path); err != nil {
			return userErrorf("trace import %v", err)
		}
	} else {
		if st0.IsDir() {
			return userErrorf("trace import %s: is a directory; only ServeGen pools (--format servegen) are directories", path)
		}
		params["hash_block"] = hb
		files = []string{path}
	}
	pj, _ := json.Marshal(params) // sorted keys: deterministic
	sum, err := contentHash(f, pj, files)
	if err != nil {
		return userErrorf("trace import %s: %v", path, err)
	}
	name := c.String("name")
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(filepath.Clean(path)), filepath.Ext(path))
	}
	// trace show/stats/replay/rm take the name as an argument, where "h" and
	// "help" ask for help and a leading '-' is a flag: such a trace could not be
	// named again.
	if name == "" || name == "h" || name == "help" || strings.HasPrefix(name, "-") {
		return userErrorf("trace import %s: trace name %q cannot be given to the trace commands (help words and flags are taken); pass --name", path, name)
	}
	hashBlock := 0
	if f == trace.Mooncake || f == trace.JSONL {
		hashBlock = hb
	}
	st, err := store.Open(c.Context, c.String("db"), store.Options{})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	meta := store.TraceMeta{Name: name, Format: string(f), Source: path, SHA256: sum, HashBlock: hashBlock,
		Params: string(pj), ImportedAt: time.Now().UTC().Format(time.RFC3339)}
	bar := newProgress(c, "trace import "+name, "KiB")
	res, err := st.ImportTrace(c.Context, meta, func(emit func(store.TraceRow) error) error {
		conv := func(r trace.Request) error {
			return emit(store.TraceRow{Line: r.Line, ArrivalMs: r.ArrivalMs, ISL: r.ISL, OSL: r.OSL,
				HashIDs: trace.EncodeHashIDs(r.HashIDs), Session: r.Session, ThinkMs: r.ThinkMs})
		}
		o := trace.Options{File: path, HashBlock: hb, Seed: c.Uint64("seed")}
		if f == trace.ServeGen {
			return trace.ParseServeGen(c.Context, path, o, conv)
		}
		fh, err := os.Open(path)
		if err != nil {
			return err
		}
		defer fh.Close()
		return trace.Parse(c.Context, bufio.NewReaderSize(&countingReader{r: fh, total: st0.Size(), progress: bar.Update}, 1<<16), f, o, conv)
	})
	bar.Done()
	if err != nil {
		if c.Context.Err() != nil {
			return err
		}
		return userErrorf("trace import: %v (nothing was stored)", err)
	}
	i := res.Info
	if res.Unchanged {
		fmt.Fprintf(c.App.Writer, "trace %s: unchanged (%s has the same content, %d requests)\n", i.Name, path, i.Requests)
		bar.Summary("unchanged, %d requests already stored", i.Requests)
		return nil
	}
	fmt.Fprintf(c.App.Writer, "trace %s: %d requests over %.1f s imported from %s (%s)\n", i.Name, i.Requests, i.LastMs/1000, path, i.Format)
	bar.Summary("%d requests imported", i.Requests)
	return nil
}

// countingReader reports the KiB read of a file of total bytes to progress.
type countingReader struct {
	r        io.Reader
	n, total int64
	progress func(done, total int)
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	c.progress(int(c.n>>10), int(max(c.total>>10, 1)))
	return k, err
}

// importFormat checks --input-format (alias --format) or sniffs it.
func importFormat(flagVal, path string, isDir bool) (trace.Format, error) {
	if flagVal != "" {
		f, err := trace.ParseFormat(flagVal)
		if err != nil {
			return "", userErrorf("trace import: --%v", err)
		}
		return f, nil
	}
	if isDir || strings.HasSuffix(path, "-trace.csv") && strings.HasPrefix(filepath.Base(path), "chunk-") {
		return trace.ServeGen, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return "", userErrorf("trace import %s: %v", path, err)
	}
	defer fh.Close()
	br := bufio.NewReader(fh)
	for {
		line, err := br.ReadSlice('\n')
		if len(bytes.TrimSpace(line)) > 0 || err != nil {
			if f, ok := trace.Sniff(line); ok {
				return f, nil
			}
			return "", userErrorf("trace import %s: cannot tell its format from the first line: pass --format mooncake|azure|servegen|jsonl", path)
		}
	}
}

// contentHash is sha256 over the format, the import parameters and each file's name
// and bytes, streamed.
func contentHash(f trace.Format, params []byte, files []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "aicdb-trace\x00%s\x00%s\x00", f, params)
	for _, p := range files {
		fmt.Fprintf(h, "%s\x00", filepath.Base(p))
		fh, err := os.Open(p)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func openRead(c *cli.Context) (*store.Store, error) {
	st, err := store.Open(c.Context, c.String("db"), store.Options{ReadOnly: true})
	return st, asUser(err)
}

func traceLs(c *cli.Context) error {
	if c.NArg() > 0 {
		return userErrorf("trace ls: takes no arguments (got %q)", c.Args().First())
	}
	st, err := openRead(c)
	if err != nil {
		return err
	}
	defer st.Close()
	ts, err := st.Traces(c.Context)
	if err != nil {
		return err
	}
	data := make([][]any, 0, len(ts))
	for _, t := range ts {
		data = append(data, []any{t.Name, t.Format, int64(t.Requests), t.LastMs / 1000, int64(t.HashBlock), t.Source})
	}
	return writeRows(c.App.Writer, c.String("format"), []string{"name", "format", "requests", "span_s", "hash_block", "source"}, data)
}

func traceRm(c *cli.Context) error {
	name, err := oneArg(c, "NAME")
	if err != nil {
		return err
	}
	st, err := store.Open(c.Context, c.String("db"), store.Options{MustExist: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	if err := st.DeleteTrace(c.Context, name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return userErrorf("trace rm: %v", err)
		}
		return err
	}
	fmt.Fprintf(c.App.Writer, "trace %s removed\n", name)
	return nil
}

// traceSlice reads --window/--scale-rate/--limit.
func traceSlice(c *cli.Context) (store.TraceSlice, error) {
	var sl store.TraceSlice
	sl.Scale = c.Float64("scale-rate")
	if !(sl.Scale > 0) || math.IsInf(sl.Scale, 0) || sl.Scale > 1e6 {
		return sl, userErrorf("--scale-rate %v: must be a number in (0, 1e6]", sl.Scale)
	}
	if c.Int("limit") < 0 {
		return sl, userErrorf("--limit %d: must be ≥ 1 (omit it for all requests)", c.Int("limit"))
	}
	sl.Limit = c.Int("limit")
	if w := c.String("window"); w != "" {
		a, b, ok := strings.Cut(w, "..")
		if !ok {
			return sl, userErrorf("--window %q: want START..END in seconds, e.g. 600..1200 or 600..", w)
		}
		num := func(s string) (float64, error) {
			if s == "" {
				return 0, nil
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || !(v >= 0) || v > 1e12 {
				return 0, userErrorf("--window %q: %q is not a time ≥ 0 in seconds", w, s)
			}
			return v * 1000, nil
		}
		var err error
		if sl.StartMs, err = num(a); err != nil {
			return sl, err
		}
		if sl.EndMs, err = num(b); err != nil {
			return sl, err
		}
		if b != "" && sl.EndMs <= sl.StartMs {
			return sl, userErrorf("--window %q: END must be after START", w)
		}
	}
	return sl, nil
}

// openTrace opens the store read-only and finds the trace named by the argument.
func openTrace(c *cli.Context) (*store.Store, store.TraceInfo, store.TraceSlice, error) {
	var info store.TraceInfo
	name, err := oneArg(c, "NAME")
	if err != nil {
		return nil, info, store.TraceSlice{}, err
	}
	sl, err := traceSlice(c)
	if err != nil {
		return nil, info, sl, err
	}
	st, err := openRead(c)
	if err != nil {
		return nil, info, sl, err
	}
	info, err = st.Trace(c.Context, name)
	if err != nil {
		st.Close()
		if errors.Is(err, store.ErrNotFound) {
			return nil, info, sl, userErrorf("trace %s: %v", c.Command.Name, err)
		}
		return nil, info, sl, err
	}
	return st, info, sl, nil
}

func toRequest(r store.TraceRow, ids []int64) (trace.Request, []int64, error) {
	ids, err := trace.DecodeHashIDs(ids, r.HashIDs)
	if err != nil {
		return trace.Request{}, ids, fmt.Errorf("stored trace request %d: %w", r.Seq, err)
	}
	return trace.Request{Line: r.Line, ArrivalMs: r.ArrivalMs, ISL: r.ISL, OSL: r.OSL, HashIDs: ids,
		Session: r.Session, ThinkMs: r.ThinkMs}, ids, nil
}

func traceShow(c *cli.Context) error {
	st, info, sl, err := openTrace(c)
	if err != nil {
		return err
	}
	defer st.Close()
	format := c.String("format")
	if err := checkFormat(format); err != nil {
		return err
	}
	w := bufio.NewWriter(c.App.Writer)
	defer w.Flush()
	var rw *rowWriter // table, csv, json; jsonl is the generic trace format below
	if format != formatJSONL {
		rw = newRowWriter(w, format, []string{"seq", "line", "arrival_ms", "isl", "osl", "hash_ids", "session", "think_ms"})
	}
	err = st.TraceRequests(c.Context, info.ID, sl, func(r store.TraceRow) error {
		if rw != nil {
			var ids, sess any // nil ("-", empty, null) when absent
			if r.HashIDs != "" {
				ids = json.RawMessage(r.HashIDs)
			}
			if r.Session != "" {
				sess = r.Session
			}
			return rw.Row([]any{int64(r.Seq), int64(r.Line), r.ArrivalMs, int64(r.ISL), int64(r.OSL), ids, sess, r.ThinkMs})
		}
		b := fmt.Appendf(nil, `{"arrival_ms":%s,"isl":%d,"osl":%d`, fmtMs(r.ArrivalMs), r.ISL, r.OSL)
		if r.HashIDs != "" {
			b = fmt.Appendf(b, `,"hash_ids":%s`, r.HashIDs)
		}
		if r.Session != "" {
			s, _ := json.Marshal(r.Session)
			b = fmt.Appendf(b, `,"session_id":%s,"think_ms":%s`, s, fmtMs(r.ThinkMs))
		}
		_, err := fmt.Fprintf(w, "%s}\n", b)
		return err
	})
	if err == nil && rw != nil {
		err = rw.Close()
	}
	return err
}

// fmtMs prints a time in ms with at most 4 decimals (100 ns, Azure's resolution).
func fmtMs(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e4)/1e4, 'f', -1, 64)
}

// maxStatsBuckets bounds the rate-over-time table.
const maxStatsBuckets = 100000

func traceStats(c *cli.Context) error {
	st, info, sl, err := openTrace(c)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := checkFormat(c.String("format"), formatText); err != nil {
		return err
	}
	bucket := c.Float64("bucket")
	if bucket < 0 || math.IsNaN(bucket) || bucket > 1e9 {
		return userErrorf("trace stats: --bucket %v: must be a positive number of seconds", bucket)
	}
	var rs *oracle.ReuseSim
	if c.Bool("reuse") {
		if info.HashBlock == 0 {
			return userErrorf("trace stats --reuse: trace %s (%s) has no prefix hash ids to reuse", info.Name, info.Format)
		}
		if c.String("backend") == "" || !c.IsSet("kv-blocks") {
			return userErrorf("trace stats --reuse: give --backend %s and --kv-blocks N", engine.List("|", "|"))
		}
		rs, err = oracle.NewReuse(oracle.ReuseConfig{Backend: engine.Backend(c.String("backend")),
			KVBlocks: c.Int("kv-blocks"), BlockSize: c.Int("block-size"), HashBlock: info.HashBlock})
		if err != nil {
			return userErrorf("trace stats --reuse: %v", err)
		}
	} else if c.IsSet("backend") || c.IsSet("kv-blocks") || c.IsSet("block-size") {
		return userErrorf("trace stats: --backend, --kv-blocks and --block-size configure --reuse; add --reuse")
	}
	span := (info.LastMs - sl.StartMs) / sl.Scale
	if sl.EndMs > 0 {
		span = (min(sl.EndMs, info.LastMs) - sl.StartMs) / sl.Scale
	}
	if bucket > 0 && span/(bucket*1000) > maxStatsBuckets {
		return userErrorf("trace stats: --bucket %g s makes %.0f buckets over %.0f s: at most %d; use a wider bucket", bucket, span/(bucket*1000), span/1000, maxStatsBuckets)
	}
	sb := trace.NewStatsBuilder(info.HashBlock, bucket*1000, max(span, 0))
	var ids []int64
	var hit, prompt, withHit int64
	err = st.TraceRequests(c.Context, info.ID, sl, func(r store.TraceRow) error {
		var q trace.Request
		var err error
		q, ids, err = toRequest(r, ids)
		if err != nil {
			return err
		}
		sb.Add(q)
		if rs != nil {
			h := rs.Add(q.ISL, q.OSL, q.HashIDs)
			hit += int64(h)
			prompt += int64(q.ISL)
			if h > 0 {
				withHit++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s := sb.Stats()
	if s.Requests == 0 {
		return userErrorf("trace stats %s: the slice holds no requests", info.Name)
	}
	w := c.App.Writer
	if f := c.String("format"); f != formatText {
		return writeTraceStats(w, f, info, s, rs != nil, hit, prompt, withHit)
	}
	dur := (s.LastMs - s.FirstMs) / 1000
	fmt.Fprintf(w, "trace %s (%s): %d requests, first %.3f s, last %.3f s\n", info.Name, info.Format, s.Requests, s.FirstMs/1000, s.LastMs/1000)
	if dur > 0 {
		fmt.Fprintf(w, "mean rate      %.3f req/s\n", float64(s.Requests-1)/dur)
	}
	if s.Sessions > 0 {
		fmt.Fprintf(w, "sessions       %d\n", s.Sessions)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tokens\tmean\tmin\tp50\tp90\tp99\tmax\t")
	for _, q := range []struct {
		n string
		q trace.Quantiles
	}{{"isl", s.ISL}, {"osl", s.OSL}} {
		fmt.Fprintf(tw, "%s\t%.3f\t%d\t%d\t%d\t%d\t%d\t\n", q.n, q.q.Mean, q.q.Min, q.q.P50, q.q.P90, q.q.P99, q.q.Max)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s.Blocks > 0 {
		fmt.Fprintf(w, "prefix reuse (unbounded cache, %d-token hash blocks): %.3f %% of blocks, %.3f %% of prompt tokens\n",
			s.HashBlock, 100*trace.Fraction(s.ReusedBlocks, s.Blocks), 100*trace.Fraction(s.ReusedTokens, s.Tokens))
	}
	if rs != nil {
		bs := c.Int("block-size")
		if bs == 0 {
			bs = oracle.DefaultReuseBlockSize(engine.Backend(c.String("backend")))
		}
		fmt.Fprintf(w, "prefix-cache hits (%s, %d blocks of %d tokens): %.3f %% of prompt tokens, %.3f %% of requests hit\n",
			c.String("backend"), c.Int("kv-blocks"), bs, 100*trace.Fraction(hit, prompt), 100*trace.Fraction(withHit, int64(s.Requests)))
	}
	fmt.Fprintf(w, "rate per %g s bucket (req/s):\n", s.BucketMs/1000)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	for i, n := range s.Buckets {
		fmt.Fprintf(tw, "%.0f s\t%.3f\t\n", (s.FirstMs+float64(i)*s.BucketMs)/1000, float64(n)/(s.BucketMs/1000))
	}
	return tw.Flush()
}

// writeTraceStats prints trace stats as one row (--format table|csv|json|jsonl):
// the counts, the length quantiles, the reuse fractions (null without hash ids or
// --reuse) and the per-bucket rates as a JSON array.
func writeTraceStats(w io.Writer, format string, info store.TraceInfo, s trace.Stats, reuse bool, hit, prompt, withHit int64) error {
	cols := []string{"name", "format", "requests", "sessions", "first_s", "last_s", "mean_rate_rps"}
	row := []any{info.Name, info.Format, int64(s.Requests), int64(s.Sessions), s.FirstMs / 1000, s.LastMs / 1000, nil}
	if dur := (s.LastMs - s.FirstMs) / 1000; dur > 0 {
		row[6] = float64(s.Requests-1) / dur
	}
	for _, q := range []struct {
		n string
		q trace.Quantiles
	}{{"isl", s.ISL}, {"osl", s.OSL}} {
		cols = append(cols, q.n+"_mean", q.n+"_min", q.n+"_p50", q.n+"_p90", q.n+"_p99", q.n+"_max")
		row = append(row, q.q.Mean, int64(q.q.Min), int64(q.q.P50), int64(q.q.P90), int64(q.q.P99), int64(q.q.Max))
	}
	var blocks, tokens, hitTokens, hitReqs any
	if s.Blocks > 0 {
		blocks, tokens = trace.Fraction(s.ReusedBlocks, s.Blocks), trace.Fraction(s.ReusedTokens, s.Tokens)
	}
	if reuse {
		hitTokens, hitReqs = trace.Fraction(hit, prompt), trace.Fraction(withHit, int64(s.Requests))
	}
	rates := make([]float64, len(s.Buckets))
	for i, n := range s.Buckets {
		rates[i] = float64(n) / (s.BucketMs / 1000)
	}
	rj, err := json.Marshal(rates)
	if err != nil {
		return fmt.Errorf("trace stats: encoding rates: %w", err)
	}
	cols = append(cols, "reused_block_fraction", "reused_token_fraction", "cache_hit_token_fraction", "cache_hit_request_fraction", "bucket_s", "bucket_rates_rps")
	row = append(row, blocks, tokens, hitTokens, hitReqs, s.BucketMs/1000, json.RawMessage(rj))
	return writeRows(w, format, cols, [][]any{row})
}

func traceReplay(c *cli.Context) error {
	name, err := oneArg(c, "NAME")
	if err != nil {
		return err
	}
	if err := checkFormat(c.String("format")); err != nil {
		return err
	}
	tier := c.String("tier")
	if tier != "oracle" && tier != "quantitative" {
		return userErrorf("trace replay: --tier %q: must be quantitative or oracle", tier)
	}
	mode := c.String("mode")
	switch {
	case mode != "agg" && mode != "disagg":
		return userErrorf("trace replay: --mode %q: use agg or disagg", mode)
	case mode == "agg":
		if err := checkAggFlags(c); err != nil {
			return userErrorf("trace replay: %v", err)
		}
	}
	fidelity := "W3"
	if c.Bool("sessions") {
		fidelity = "W4"
	} else if c.IsSet("max-sessions") || c.IsSet("client-rtt-ms") {
		return userErrorf("trace replay: --max-sessions and --client-rtt-ms need --sessions")
	}
	if v := c.Float64("client-rtt-ms"); !(v >= 0) || v > 1e6 {
		return userErrorf("trace replay: --client-rtt-ms %v: must be a number in [0, 1e6] ms", v)
	}
	if c.Int("max-sessions") < 0 {
		return userErrorf("trace replay: --max-sessions %d: must be ≥ 0 (0 = no cap)", c.Int("max-sessions"))
	}
	var width float64
	if by := c.String("by"); by != "" {
		if width, err = trace.ByWidth(by); err != nil {
			return userErrorf("trace replay: %v", err)
		}
	}
	path := c.String("engine")
	if path == "" {
		return userErrorf("trace replay: --engine FILE is required (a JSON object with the engine and timing of an oracle scenario)")
	}
	f, err := os.Open(path)
	if err != nil {
		return userErrorf("trace replay: --engine %s: %v", path, err)
	}
	eng, tim, err := oracle.ReadSetup(bufio.NewReader(f))
	f.Close()
	if err != nil {
		return userErrorf("trace replay: --engine %s: %v", path, err)
	}
	sl, err := traceSlice(c)
	if err != nil {
		return err
	}
	st, err := store.Open(c.Context, c.String("db"), store.Options{MustExist: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	info, err := st.Trace(c.Context, name)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return userErrorf("trace replay: %v", err)
		}
		return err
	}
	var pt *perfdb.PassTiming
	var longest workload.Spec
	if readDeployment(c).set.given("model") {
		if pt, longest, err = replayPassTiming(c, st, info, sl, eng); err != nil {
			return err
		}
		tim = pt
	} else if tim == nil {
		return userErrorf("trace replay: --engine %s: no \"timing\" object; add one or time passes from perf data with --model, --system, --backend and --tp", path)
	}
	if err := replayKVCapacity(c, pt, longest, &eng); err != nil {
		return err
	}
	var sum oracle.Summary
	var rows []store.ReplayRow
	var hand *replayHandoff
	bar := newProgress(c, "trace replay "+name, "requests")
	defer replayPhaseGC()() // through the replay and the storing of its rows
	if mode == "disagg" {
		sum, hand, rows, err = replayDisagg(c, st, info, sl, eng, tim, tier, bar)
	} else if tier == "oracle" {
		sum, rows, err = replayOracle(c, st, info, sl, eng, tim, bar)
	} else {
		sum, rows, err = replayQuantitative(c, st, info, sl, eng, tim, bar)
	}
	bar.Done()
	if err != nil {
		if pt != nil && perfdb.IsMiss(err) {
			return userErrorf("trace replay %s: perf data: %v", name, err)
		}
		return err
	}
	out := struct {
		oracle.Summary
		*replayHandoff
		Tier     string         `json:"queueing_tier"`
		Fidelity string         `json:"workload_fidelity"`
		Series   []trace.Window `json:"series,omitempty"`
	}{sum, hand, tier, fidelity, nil}
	if width > 0 {
		outs := make([]trace.Outcome, len(rows))
		for i, r := range rows {
			outs[i] = trace.Outcome{ArrivalMs: r.ArrivalMs, FirstTokenMs: r.ArrivalMs + r.TTFTMs, FinishMs: r.ArrivalMs + r.E2EMs}
		}
		out.Series = trace.Series(outs, width)
	}
	sumJSON, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	argm := map[string]any{"trace": name, "engine": path, "window": c.String("window"),
		"scale_rate": sl.Scale, "limit": sl.Limit, "tier": tier, "by": c.String("by")}
	if mode == "disagg" {
		argm["mode"] = mode
	}
	args, _ := json.Marshal(argm)
	id, err := st.SaveReplay(c.Context, store.ReplayRecord{TraceID: info.ID, Tier: tier, WorkloadFidelity: fidelity,
		Arguments: string(args), Summary: string(sumJSON), CreatedAt: time.Now().UTC().Format(time.RFC3339)}, rows)
	if err != nil {
		return err
	}
	if f := c.String("format"); f == formatJSON {
		fmt.Fprintf(c.App.Writer, "%s\n", sumJSON) // the stored summary document, series indented
	} else if err := writeReplay(c.App.Writer, f, out, out.Series); err != nil {
		return err
	}
	bar.Summary("replay %d stored (%d requests, %s tier, %s %s)", id, len(rows), tier, mode, fidelity)
	return nil
}

// writeReplay prints a replay's summary record (csv and jsonl: one row, the series
// as a JSON array in its series column). A table prints the summary without the
// series, then, after a blank line, the series as its own table, a row per window.
func writeReplay(w io.Writer, format string, sum any, series []trace.Window) error {
	if format != formatTable || len(series) == 0 {
		return writeRecord(w, format, sum)
	}
	cols, row, err := orderedFields(sum)
	if err != nil {
		return err
	}
	if i := slices.Index(cols, "series"); i >= 0 {
		cols, row = slices.Delete(cols, i, i+1), slices.Delete(row, i, i+1)
	}
	if err := writeRows(w, format, cols, [][]any{row}); err != nil {
		return err
	}
	fmt.Fprintln(w)
	// The series' columns are trace.Window's JSON keys, as in the json series.
	var keys []string
	data := make([][]any, len(series))
	for i := range series {
		if keys, data[i], err = orderedFields(series[i]); err != nil {
			return err
		}
	}
	return writeRows(w, format, keys, data)
}

// replayPassTiming builds the perf-data pass timing of --model/--system/--backend/
// --version/--tp… with eval's builder, checked against the slice's longest request
// (its largest isl and osl, also returned).
func replayPassTiming(c *cli.Context, st *store.Store, info store.TraceInfo, sl store.TraceSlice, eng engine.Spec) (*perfdb.PassTiming, workload.Spec, error) {
	var w workload.Spec
	dep, par := readDeployment(c), readParallel(c)
	if err := dep.requirePerf(par, "trace replay: --model: --%s is required with the perf-data timing"); err != nil {
		return nil, w, err
	}
	if b := dep.Backend; b != string(eng.Backend) {
		return nil, w, userErrorf("trace replay: --backend %s: the --engine file's backend is %s; they must be the same", b, eng.Backend)
	}
	var longest store.TraceRow // the first request of the largest isl + osl
	err := st.TraceRequests(c.Context, info.ID, sl, func(r store.TraceRow) error {
		w.ISL, w.OSL = max(w.ISL, r.ISL), max(w.OSL, r.OSL)
		if r.ISL+r.OSL > longest.ISL+longest.OSL {
			longest = r
		}
		return nil
	})
	if err != nil {
		return nil, w, err
	}
	if w.ISL == 0 {
		return nil, w, userErrorf("trace replay %s: the slice holds no requests", info.Name)
	}
	pt, _, err := perfPassTiming(c.Context, c.String("db"), dep, readQuant(c), par, func(m *perfdb.Model) error {
		return traceFitsContext(info.Name, longest, m)
	}, c.App.ErrWriter)
	return pt, w, err
}

// traceFitsContext rejects a trace slice whose longest request (isl + osl) does
// not fit the model's context window (max_position_embeddings; 0 = unknown, not
// checked), naming the request by its line in the imported file and the fix.
func traceFitsContext(name string, longest store.TraceRow, m *perfdb.Model) error {
	if n := longest.ISL + longest.OSL; m.MaxPos > 0 && n > m.MaxPos {
		return userErrorf("trace %s: the request at line %d (isl %d + osl %d = %d tokens) exceeds the %d-token context of %s; narrow --window/--limit or pick a longer-context model",
			name, longest.Line, longest.ISL, longest.OSL, n, m.MaxPos, m.ID)
	}
	return nil
}

// replayKVCapacity applies --kv-capacity-tokens auto|N to the engine's pool, which
// both tiers use (the DES's num_gpu_blocks − 1 blocks, the calendar's
// kv_capacity_tokens): auto sizes it from pt's GPU memory model at the slice's
// longest request (w), as eval does.
//
// Without the flag the file's pool stays (it may be a value read off the
// engine's own start-up log), but with perf-data timing a deployment whose
// weights do not fit is refused, and a file pool larger than the one the
// memory model deploys is noted on stderr: the replay then assumes memory the
// GPUs may not have.
func replayKVCapacity(c *cli.Context, pt *perfdb.PassTiming, w workload.Spec, eng *engine.Spec) error {
	if !c.IsSet("kv-capacity-tokens") {
		if pt == nil {
			return nil
		}
		e := *eng
		e.KVCapacityTokens = 0
		n, err := evalPool(c, pt, w, e, "trace replay: %v")
		if err != nil {
			return err
		}
		if file := (eng.GPUBlocks() - 1) * eng.BlockSize; file > n {
			fmt.Fprintf(c.App.ErrWriter, "aicdb: note: the engine file's KV pool (%d tokens: num_gpu_blocks − 1 blocks of %d) is larger than the pool this deployment holds by the perf database's memory model (%d tokens); replaying the file's (--kv-capacity-tokens auto for the model's)\n",
				file, eng.BlockSize, n)
		}
		return nil
	}
	n, auto, err := kvCapacityTokensFlag(c)
	if err != nil {
		return err
	}
	if auto {
		if pt == nil {
			return userErrorf("trace replay: --kv-capacity-tokens auto: the engine file's timing has no GPU memory model to size the KV pool from; give the capacity in tokens, or time passes from perf data with --model, --system, --backend and --tp")
		}
		e := *eng              // its backend picks the pool rule (SGLang sizes its own pool)
		e.KVCapacityTokens = 0 // auto replaces the file's num_gpu_blocks
		if err := resolveKVCapacity(c, pt, w, &e); err != nil {
			return err
		}
		n = e.KVCapacityTokens
	}
	if n < eng.BlockSize {
		return userErrorf("trace replay: --kv-capacity-tokens %d: the engine needs a KV pool of at least one %d-token block", n, eng.BlockSize)
	}
	eng.SetGPUBlocks(n/eng.BlockSize + 1) // + the null block 0
	return nil
}

// sliceBound is a capacity hint for the slice's request count: the whole trace, or
// --limit when smaller; 0 (no hint) for a time window, which may be a small part of
// a long trace.
func sliceBound(info store.TraceInfo, sl store.TraceSlice) int {
	if sl.StartMs > 0 || (sl.EndMs > 0 && sl.EndMs < info.LastMs) {
		return 0
	}
	if sl.Limit > 0 {
		return min(info.Requests, sl.Limit)
	}
	return info.Requests
}

// replayGCPercent is the GC percent of a replay phase. A replay's live heap
// grows with the trace (the simulator's per-request state, the replay rows), so
// under the default 100 the peak RSS grows by about twice the live heap per
// request. At 50 the Mooncake conversation sample (12,031 requests) peaks
// 9.6 MiB lower (quantitative tier: RSS growth 2.4 → 1.5 KB per request
// between --limit 3000 and all requests) for ~0.1 s more CPU (0.52 → 0.62 s),
// measured with farm-bench; the replay's results do not depend on it.
const replayGCPercent = 50

// replayPhaseGC runs the collector at replayGCPercent until restore is called.
func replayPhaseGC() (restore func()) { return gcPhase(replayGCPercent, -1) }

// replayOracle replays the slice through the DES; prefix hits come from the trace's
// hash ids as block identities (the engine's own cache decides what hits).
func replayOracle(c *cli.Context, st *store.Store, info store.TraceInfo, sl store.TraceSlice, eng engine.Spec, tim timing.Timing, bar *progressReporter) (oracle.Summary, []store.ReplayRow, error) {
	var sum oracle.Summary
	sim, err := oracle.New(eng, tim, oracle.Options{SummaryOnly: true, Progress: bar.Update}) // per-token times are never stored
	if err != nil {
		return sum, nil, userErrorf("trace replay: --engine: %v", err)
	}
	n := sliceBound(info, sl)
	sim.Reserve(n)
	var ids []int64
	seqs := make([]int64, 0, n)
	sessions := c.Bool("sessions")
	var turns []oracle.SessionTurn // W4: collected, then driven by RunSessions
	sessionOf := map[string]int{}
	err = st.TraceRequests(c.Context, info.ID, sl, func(r store.TraceRow) error {
		if ids, err = trace.DecodeHashIDs(ids, r.HashIDs); err != nil {
			return err
		}
		q := workload.Request{ID: "s" + strconv.FormatInt(r.Seq, 10), ArrivalMs: r.ArrivalMs, PromptLen: r.ISL, MaxTokens: r.OSL}
		var sp oracle.SharedPrefix
		if ids != nil && info.HashBlock > 0 {
			sp = oracle.SharedPrefix{HashIDs: ids, HashBlock: info.HashBlock}
		}
		seqs = append(seqs, r.Seq)
		if sessions {
			t := oracle.SessionTurn{Request: q, Prefix: sp, ThinkMs: r.ThinkMs}
			if sp.HashIDs != nil {
				t.Prefix.HashIDs = append([]int64(nil), ids...) // ids is reused by the next row
			}
			if r.Session != "" {
				if t.Session = sessionOf[r.Session]; t.Session == 0 {
					t.Session = len(sessionOf) + 1
					sessionOf[r.Session] = t.Session
				}
			}
			turns = append(turns, t)
			return nil
		}
		if sp.HashIDs != nil {
			_, err = sim.AddShared(q, sp)
		} else {
			_, err = sim.Add(q)
		}
		if err != nil {
			return userErrorf("trace replay %s: %v", info.Name, err)
		}
		return nil
	})
	if err != nil {
		return sum, nil, err
	}
	if len(seqs) == 0 {
		return sum, nil, userErrorf("trace replay %s: the slice holds no requests", info.Name)
	}
	var res *oracle.Result
	if sessions {
		res, err = sim.RunSessions(c.Context, oracle.Sessions{Turns: turns, ClientRTTMs: c.Float64("client-rtt-ms"), MaxSessions: c.Int("max-sessions")})
	} else {
		res, err = sim.Run(c.Context)
	}
	if err != nil {
		return sum, nil, userErrorf("trace replay %s: %v", info.Name, err)
	}
	if sum, err = res.Summary(); err != nil {
		return sum, nil, err
	}
	rows := make([]store.ReplayRow, len(res.Requests))
	for i, r := range res.Requests {
		tpot := 0.0
		if k := r.NumTokens; k > 1 {
			tpot = (r.FinishMs - r.FirstTokenMs) / float64(k-1)
		}
		rows[i] = store.ReplayRow{Seq: seqs[i], ArrivalMs: r.ArrivalMs, ISL: r.PromptLen, OSL: r.MaxTokens,
			CachedTokens: r.NumCachedTokens, Preemptions: r.NumPreemptions, TTFTMs: r.TTFTMs, TPOTMs: tpot, E2EMs: r.FinishMs - r.ArrivalMs}
	}
	return sum, rows, nil
}

// replayQuantitative replays the slice through the queueing calendar with the
// engine's KV pool as its KV capacity: each request's cached tokens come from the
// reuse oracle run over that pool (num_gpu_blocks − 1 blocks of block_size; none
// when prefix caching is off or the trace has no hash ids), released at once; when
// that replay is KV-bound (running requests held over half the pool) the hits are
// recomputed with every request pinning its KV over its run time
// (oracle.ReusePinned) and the slice is replayed again with them.
func replayQuantitative(c *cli.Context, st *store.Store, info store.TraceInfo, sl store.TraceSlice, eng engine.Spec, tim timing.Timing, bar *progressReporter) (oracle.Summary, []store.ReplayRow, error) {
	var sum oracle.Summary
	spec, err := eng, eng.Validate() // the model reads the oracle engine as is; its KV pool is the calendar's KV capacity
	if err != nil {
		return sum, nil, userErrorf("trace replay --tier quantitative: --engine: %v", err)
	}
	tw, err := refine.LoadTraceWorkload(c.Context, st, info, sl)
	if errors.Is(err, refine.ErrEmptySlice) {
		return sum, nil, userErrorf("trace replay %s: the slice holds no requests", info.Name)
	}
	if err != nil {
		return sum, nil, err
	}
	rc := quantitativeConfig(spec, tim)
	rc.Sessions, rc.MaxSessions, rc.ClientRTTMs = c.Bool("sessions"), c.Int("max-sessions"), c.Float64("client-rtt-ms")
	rc.Progress = bar.Update
	sum, rows, err := quantitativeReplay(c.Context, tw, rc)
	if ke := (*queueing.SessionKVError)(nil); errors.As(err, &ke) {
		return sum, nil, userErrorf("trace replay %s --sessions --tier quantitative: the session contexts cannot all stay cached: at %.0f ms the running requests plus the cached contexts of the sessions between turns need %d KV blocks (%d tokens) but the pool holds %d (%d tokens), so the engine evicts contexts and later turns prefill again, which this tier does not model; use --tier oracle, which models eviction, or a larger KV pool (--kv-capacity-tokens, num_gpu_blocks) / --max-sessions",
			info.Name, ke.AtMs, ke.PeakBlocks, ke.PeakBlocks*ke.BlockSize, ke.PoolBlocks, ke.PoolBlocks*ke.BlockSize)
	}
	if err != nil {
		return sum, nil, userErrorf("trace replay %s: %v", info.Name, err)
	}
	return sum, rows, nil
}

// quantitativeConfig is the W3 replay configuration of eng and tim: the reuse
// oracle over the engine's pool (num_gpu_blocks − 1 blocks of block_size) when it
// caches prefixes; when it does not, a W4 later turn finds no previous context
// cached either (as in the DES).
func quantitativeConfig(eng engine.Spec, tim timing.Timing) refine.TraceReplay {
	rc := refine.TraceReplay{Engine: eng, Timing: tim, PrefixCaching: eng.EnablePrefixCaching, NoPrefixCache: !eng.EnablePrefixCaching}
	if eng.EnablePrefixCaching {
		rc.Reuse = &oracle.ReuseConfig{Backend: eng.Backend, KVBlocks: eng.GPUBlocks() - 1, BlockSize: eng.BlockSize}
	}
	return rc
}

// replayPreemptions is a quantitative replay's preemption count: every request
// of a replay is measured, so it is the calendar's mean per request times their
// number (a KV-bound replay once read "no preemption" for want of it).
func replayPreemptions(perRequest float64, requests int) int {
	return int(math.Round(perRequest * float64(requests)))
}

// quantitativeReplay replays the whole workload tw (refine.TraceWorkload.Replay) and
// returns the summary and the per-request rows `trace replay --tier quantitative`
// stores.
func quantitativeReplay(ctx context.Context, tw *refine.TraceWorkload, rc refine.TraceReplay) (oracle.Summary, []store.ReplayRow, error) {
	var sum oracle.Summary
	rep, err := tw.Replay(ctx, nil, rc)
	if err != nil {
		return sum, nil, err
	}
	reqs, seqs := tw.Reqs, tw.Seqs
	sum = oracle.Summary{Requests: len(reqs), Passes: rep.Diagnostics.Passes, EndMs: rep.Diagnostics.WindowEndMs,
		TTFTMean: rep.TTFTSteady.Mean(), TTFTP50: rep.TTFTSteady.Quantile(0.5), TTFTP90: rep.TTFTSteady.Quantile(0.9),
		TTFTP99: rep.TTFTSteady.Quantile(0.99), TTFTP999: rep.TTFTSteady.Quantile(0.999),
		ITLMean: rep.ITL.Mean(), ITLP50: rep.ITL.Quantile(0.5), ITLP99: rep.ITL.Quantile(0.99),
		TPOTMean: rep.TPOT.Mean(), TPOTP50: rep.TPOT.Quantile(0.5), TPOTP99: rep.TPOT.Quantile(0.99),
		E2EMean: rep.E2E.Mean(), E2EP50: rep.E2E.Quantile(0.5), E2EP99: rep.E2E.Quantile(0.99),
		ThroughputRPS: rep.ThroughputRPS, OutputTokensPerS: rep.OutputTokensPerS,
		Preemptions: replayPreemptions(rep.PreemptionsPerRequest, len(reqs))}
	rows := make([]store.ReplayRow, len(rep.Requests))
	for i, r := range rep.Requests {
		sum.OutputTokens += r.OSL
		sum.CachedTokens += r.Prefix
		sum.ScheduledTokens += r.ISL - r.Prefix + r.OSL - 1
		tpot := 0.0
		if r.OSL > 1 {
			tpot = (r.E2EMs - r.TTFTMs) / float64(r.OSL-1)
		}
		rows[i] = store.ReplayRow{Seq: seqs[i], ArrivalMs: r.ArrivalMs, ISL: r.ISL, OSL: r.OSL, CachedTokens: r.Prefix,
			TTFTMs: r.TTFTMs, TPOTMs: tpot, E2EMs: r.E2EMs}
	}
	return sum, rows, nil
}
