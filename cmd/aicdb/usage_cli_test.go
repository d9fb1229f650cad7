package main

import (
	"bytes"
	"context"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/perfdb"
)

// runArgs runs the CLI in-process with args (after "aicdb").
func runArgs(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"aicdb"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestUsageErrorOneLine: a wrong or missing flag, a missing required flag, an
// unknown command or help topic print one line naming the help to read, nothing on
// stdout, exit 1. On main they printed about 45 lines of help first (or exited 3).
func TestUsageErrorOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--bogus"}, "flag provided but not defined: -bogus; see 'aicdb sweep --help'"},
		{[]string{"sweep", "--model"}, "flag needs an argument: -model; see 'aicdb sweep --help'"},
		{[]string{"sweep", "--model", "m", "--isl", "x"}, `invalid value "x" for flag -isl: parse error; see 'aicdb sweep --help'`},
		{[]string{"sweep"}, "missing required flag --model, --system, --backend, --total-gpus; see 'aicdb sweep --help'"},
		{[]string{"sweep", "--model", "m", "--system", "s", "--backend", "b", "--total-gpus", "8", "--osl", "5"}, "--isl and --osl are required (or give a stored trace as the workload with --trace NAME)"},
		{[]string{"oracle", "run"}, "missing required flag --scenario; see 'aicdb oracle run --help'"},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus; see 'aicdb --help'"},
		{[]string{"bogus"}, `unknown command "bogus"; see 'aicdb --help'`},
		{[]string{"help", "bogus"}, `unknown command "bogus"; see 'aicdb --help'`},
		{[]string{"help", "help"}, `unknown command "help"; see 'aicdb --help'`},
		{[]string{"oracle", "bogus"}, `unknown command "bogus"; see 'aicdb oracle --help'`},
		{[]string{"perfdb", "help", "bogus"}, `unknown command "bogus"; see 'aicdb perfdb --help'`},
		{[]string{"sweep", "help", "bogus"}, `unknown command "bogus"; see 'aicdb sweep --help'`},
		// A command without arguments refuses one rather than ignoring it (calibrate
		// read no predicate from "calibrate --name x PREDICATE" and fitted nothing).
		{[]string{"calibrate", "--name", "x", "system = 'a'"}, `calibrate: takes no arguments (got "system = 'a'"); every input is a --flag (see 'aicdb calibrate --help')`},
		{[]string{"oracle", "run", "--scenario", "s.json", "extra"}, `oracle run: takes no arguments (got "extra"); every input is a --flag (see 'aicdb oracle run --help')`},
		{[]string{"init", "my.db"}, `init: takes no arguments (got "my.db"); the store path is the global --db flag`},
		{[]string{"plot", "pareto", "select 1"}, "--out is required: the image FILE (.png or .svg)"},
	} {
		code, out, errs := runArgs(c.args...)
		if code != 1 || out != "" || errs != "aicdb: "+c.want+"\n" {
			t.Errorf("aicdb %s: code %d stdout %q stderr %q, want exit 1, stderr %q only", strings.Join(c.args, " "), code, out, errs, "aicdb: "+c.want)
		}
	}
}

// commandPaths lists every command of the app below the root (depth first), help
// commands excluded.
func commandPaths(prefix []string, cmds []*cli.Command) [][]string {
	var out [][]string
	for _, c := range cmds {
		if c.Name == "help" {
			continue
		}
		p := append(slices.Clone(prefix), c.Name)
		out = append(out, p)
		out = append(out, commandPaths(p, c.Subcommands)...)
	}
	return out
}

// TestUsageEveryCommand: every command (those other packages add too) reports an
// unknown flag in one line naming its own help, and its --help still prints help.
func TestUsageEveryCommand(t *testing.T) {
	paths := commandPaths(nil, newApp(nil, nil).Commands)
	if len(paths) < 10 {
		t.Fatalf("only %d commands found: %v", len(paths), paths)
	}
	for _, p := range paths {
		name := "aicdb " + strings.Join(p, " ")
		code, out, errs := runArgs(append(slices.Clone(p), "--no-such-flag")...)
		want := "aicdb: flag provided but not defined: -no-such-flag; see '" + name + " --help'\n"
		if code != 1 || out != "" || errs != want {
			t.Errorf("%s --no-such-flag: code %d stdout %q stderr %q, want exit 1 and %q", name, code, out, errs, want)
		}
		code, out, errs = runArgs(append(slices.Clone(p), "--help")...)
		if code != 0 || errs != "" || !strings.HasPrefix(out, "NAME:\n   "+name+" - ") || !strings.Contains(out, "--help, -h") {
			t.Errorf("%s --help: code %d stdout %q stderr %q", name, code, out, errs)
		}
		// `aicdb help CMD` / `aicdb PARENT help CMD` print the same help.
		hp := append(append(slices.Clone(p[:len(p)-1]), "help"), p[len(p)-1])
		if code2, out2, _ := runArgs(hp...); code2 != 0 || out2 != out {
			t.Errorf("aicdb %s: code %d, output differs from %s --help:\n%s", strings.Join(hp, " "), code2, name, out2)
		}
	}
}

// TestHelpStillPrints: --help, -h, help and a command's help keep printing the help.
func TestHelpStillPrints(t *testing.T) {
	_, want, _ := runArgs("--help")
	if !strings.Contains(want, "COMMANDS:") || !strings.Contains(want, "GLOBAL OPTIONS:") || !strings.Contains(want, "--db PATH") {
		t.Fatalf("aicdb --help: %q", want)
	}
	for _, args := range [][]string{{"-h"}, {"help"}, {"h"}, {}} {
		if code, out, errs := runArgs(args...); code != 0 || out != want || errs != "" {
			t.Errorf("aicdb %v: code %d stdout %q stderr %q", args, code, out, errs)
		}
	}
	_, sweep, _ := runArgs("sweep", "--help")
	if !strings.Contains(sweep, "OPTIONS:") || !strings.Contains(sweep, "--model ID") || strings.Contains(sweep, "COMMANDS:") {
		t.Fatalf("aicdb sweep --help: %q", sweep)
	}
	if code, out, _ := runArgs("sweep", "help"); code != 0 || out != sweep {
		t.Errorf("aicdb sweep help: code %d out %q", code, out)
	}
	_, perf, _ := runArgs("perfdb", "--help")
	if !strings.Contains(perf, "COMMANDS:") || !strings.Contains(perf, "import") || !strings.Contains(perf, "OPTIONS:") {
		t.Fatalf("aicdb perfdb --help: %q", perf)
	}
	if code, out, _ := runArgs("perfdb", "help"); code != 0 || out != perf {
		t.Errorf("aicdb perfdb help: code %d out %q", code, out)
	}
}

// TestVersion: `aicdb --version` and `aicdb version` print the same: aicdb's version
// and the embedded data's provenance (aiconfigurator's commit from PROVENANCE.md,
// every embedded system with its backends and versions). On main both were errors.
func TestVersion(t *testing.T) {
	code, out, errs := runArgs("--version")
	if code != 0 || errs != "" {
		t.Fatalf("aicdb --version: code %d stderr %q", code, errs)
	}
	if code, out2, _ := runArgs("version"); code != 0 || out2 != out {
		t.Fatalf("aicdb version: code %d, output %q differs from --version's %q", code, out2, out)
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "aicdb ") || !strings.Contains(lines[0], "go1.") {
		t.Errorf("first line %q: want the aicdb version and Go version", lines[0])
	}
	prov, err := fs.ReadFile(perfdb.EmbeddedFS(), "PROVENANCE.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`embedded perf data: aiconfigurator ([0-9a-f]{40}) `).FindStringSubmatch(out)
	if m == nil || !bytes.Contains(prov, []byte("@ `"+m[1]+"`")) {
		t.Errorf("version output %q: want the aiconfigurator commit of PROVENANCE.md", out)
	}
	systems, err := perfdb.EmbeddedSystems()
	if err != nil || len(systems) == 0 {
		t.Fatalf("embedded systems %v %v", systems, err)
	}
	for _, s := range systems {
		bv, err := perfdb.EmbeddedBackendVersions(s)
		if err != nil || len(bv) == 0 {
			t.Fatalf("%s: %v %v", s, bv, err)
		}
		for b, vs := range bv {
			if !strings.Contains(out, b+" "+strings.Join(vs, " ")) {
				t.Errorf("version output lacks %s %s %v:\n%s", s, b, vs, out)
			}
		}
	}
	if code, out, _ := runArgs("help", "version"); code != 0 || !strings.Contains(out, "aicdb version - ") {
		t.Errorf("aicdb help version: code %d out %q", code, out)
	}
}

// TestHelpOneDefaultPerFlag: no flag's help states a default and then prints
// "(default: 0)" beside it (statedDefaults moves the stated one into DefaultText).
func TestHelpOneDefaultPerFlag(t *testing.T) {
	for _, cmd := range [][]string{{"eval"}, {"estimate"}, {"sweep"}, {"best"}, {"trace", "replay"}, {"oracle", "run"}, {"calibrate"}} {
		code, out, errs := runCLI(t, append(cmd, "--help")...)
		if code != 0 {
			t.Fatalf("%v --help: exit %d %s", cmd, code, errs)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "(default") && strings.Count(l, "(default") > 1 {
				t.Errorf("%v --help: two defaults on one flag: %s", cmd, strings.TrimSpace(l))
			}
		}
	}
}
