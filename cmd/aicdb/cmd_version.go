package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/perfdb"
)

// versionCommand prints what `aicdb --version` prints.
func versionCommand() *cli.Command {
	return &cli.Command{
		Name:   "version",
		Usage:  "print the aicdb version and the embedded perf data's provenance",
		Action: func(c *cli.Context) error { return writeVersion(c.App.Writer) },
	}
}

// rootAction runs `aicdb` without a command: --version, or the help; a name that is
// not a command is a usage error.
func rootAction(c *cli.Context) error {
	if c.Bool("version") {
		return writeVersion(c.App.Writer)
	}
	if c.NArg() > 0 {
		return usage(c.App.Name, fmt.Errorf("unknown command %q", c.Args().First()))
	}
	return cli.ShowAppHelp(c)
}

// provenanceCommit finds aiconfigurator's commit (40 hex digits) and, when given
// right after it, its date in the embedded PROVENANCE.md.
var provenanceCommit = regexp.MustCompile("([0-9a-f]{40})`?(?:\\s*\\((\\d{4}-\\d{2}-\\d{2})\\))?")

// writeVersion prints aicdb's version (from the build info: module version, VCS
// revision) and the embedded data's provenance: aiconfigurator's commit from
// PROVENANCE.md and, read from the embedded tree, each system's backends and
// versions and the model configs.
func writeVersion(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "aicdb %s\n", buildVersion())
	prov, err := fs.ReadFile(perfdb.EmbeddedFS(), "PROVENANCE.md")
	if err != nil {
		return fmt.Errorf("version: embedded PROVENANCE.md: %w", err)
	}
	m := provenanceCommit.FindSubmatch(prov)
	if m == nil {
		return errors.New("version: embedded PROVENANCE.md names no aiconfigurator commit")
	}
	fmt.Fprintf(&b, "embedded perf data: aiconfigurator %s", m[1])
	if len(m[2]) > 0 {
		fmt.Fprintf(&b, " (%s)", m[2])
	}
	b.WriteString(", Apache-2.0\n")
	systems, err := perfdb.EmbeddedSystems()
	if err != nil {
		return fmt.Errorf("version: embedded systems: %w", err)
	}
	for _, s := range systems {
		bv, err := perfdb.EmbeddedBackendVersions(s)
		if err != nil {
			return fmt.Errorf("version: embedded system %s: %w", s, err)
		}
		fmt.Fprintf(&b, "  system %s:", s)
		for i, be := range slices.Sorted(maps.Keys(bv)) {
			sep := ";"
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s %s %s", sep, be, strings.Join(bv[be], " "))
		}
		b.WriteString("\n")
	}
	models, err := perfdb.EmbeddedModels()
	if err != nil {
		return fmt.Errorf("version: embedded model configs: %w", err)
	}
	fmt.Fprintf(&b, "  models: %d HF configs (%s)\n", len(models), strings.Join(models, ", "))
	_, err = io.WriteString(w, b.String())
	return err
}

// buildVersion is the main module's version from the build info ("(devel)" for a
// plain build from a checkout), with the VCS revision and Go version when recorded.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module support)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) {
		v += fmt.Sprintf(" (commit %s%s)", rev, modified)
	}
	return v + ", " + bi.GoVersion
}
