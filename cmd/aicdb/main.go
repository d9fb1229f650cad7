// Command aicdb predicts latency distributions and throughput of LLM inference
// deployments and stores them in one SQLite file. This package wires the CLI only;
// all model logic lives in the library packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
)

// exit codes: 0 success, 1 user error (bad input), 2 internal error.
const (
	exitUser     = 1
	exitInternal = 2
)

// userError marks an error caused by the user's input: one line, exit code 1.
type userError struct{ err error }

func (e userError) Error() string { return e.err.Error() }
func (e userError) Unwrap() error { return e.err }

// userErrorf builds a user error (exit code 1).
func userErrorf(format string, args ...any) error {
	return userError{fmt.Errorf(format, args...)}
}

// asUser marks err as a user error (exit code 1); nil stays nil.
func asUser(err error) error {
	if err == nil {
		return nil
	}
	var ue userError
	if errors.As(err, &ue) {
		return err
	}
	return userError{err}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "aicdb",
		Usage: "latency distributions and throughput of LLM serving deployments, in one SQLite file",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "db", Value: "./aicdb.sqlite", EnvVars: []string{"AICDB_DB"}, Usage: "the store `PATH`"},
			&cli.BoolFlag{Name: "version", Usage: "print the aicdb version and the embedded perf data's provenance"},
		},
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: []*cli.Command{
			initCommand(),
			perfdbCommand(),
			estimateCommand(),
			evalCommand(),
			oracleCommand(),
			traceCommand(),
			sweepCommand(),
			bestCommand(),
			queryCommand(),
			deployCommand(),
			versionCommand(),
			doctorCommand(),
			schemaCommand(),
			benchCommand(),
			accuracyCommand(),
			calibrateCommand(),
			plotCommand(),
		},
		Action:         rootAction,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	// Usage errors (unknown flags, missing values or commands) are one-line user errors.
	oneLineUsage(app)
	statedDefaults(app.Commands)
	dbAnywhere(app.Commands)
	noStrayArgs(app.Commands, "")
	return app
}

// noStrayArgs makes every command that takes no arguments (no ArgsUsage, no
// subcommands) refuse one in one line: "calibrate --name x \"system = 'a'\""
// read the predicate nowhere and calibrated no rows, as if it were not given.
func noStrayArgs(cmds []*cli.Command, parent string) {
	for _, c := range cmds {
		path := strings.TrimSpace(parent + " " + c.Name)
		if slices.ContainsFunc(c.Subcommands, func(s *cli.Command) bool { return s.Name != "help" }) {
			noStrayArgs(c.Subcommands, path)
			continue
		}
		if c.Name == "help" || c.ArgsUsage != "" || c.Action == nil {
			continue
		}
		action, hint := c.Action, fmt.Sprintf("every input is a --flag (see 'aicdb %s --help')", path)
		if path == "init" {
			hint = "the store path is the global --db flag"
		}
		c.Action = func(ctx *cli.Context) error {
			if ctx.Args().Present() {
				return userErrorf("%s: takes no arguments (got %q); %s", path, ctx.Args().First(), hint)
			}
			return action(ctx)
		}
	}
}

// dbAnywhere lets every command take the global --db after its name too
// ("aicdb estimate … --db a.sqlite"): each command gets a hidden --db whose value,
// when given there, wins over the one before the command (or AICDB_DB); when not
// given, the command's Before copies the parent's value into it, so c.String("db")
// reads the store path in either case. Call it after oneLineUsage.
func dbAnywhere(cmds []*cli.Command) {
	for _, c := range cmds {
		if c.Name == "help" {
			continue
		}
		c.Flags = append(c.Flags, &cli.StringFlag{Name: "db", Hidden: true, Usage: "the store `PATH` (as before the command)"})
		before := c.Before
		c.Before = func(ctx *cli.Context) error {
			if !slices.Contains(ctx.LocalFlagNames(), "db") {
				if err := ctx.Set("db", ctx.Lineage()[1].String("db")); err != nil {
					return err
				}
			}
			if before != nil {
				return before(ctx)
			}
			return nil
		}
		dbAnywhere(c.Subcommands)
	}
}

// trailingDB declares --db on fs, a command's own parser of the flags after its
// positional arguments (see dbAnywhere); call the returned function after
// fs.Parse to apply a given --db to c.
func trailingDB(c *cli.Context, fs *flag.FlagSet) func() error {
	db := fs.String("db", "", "")
	return func() error {
		if *db == "" {
			return nil
		}
		return c.Set("db", *db)
	}
}

// statedDefaults moves a "(default …)" that a flag's usage states into the flag's
// DefaultText, so help prints one default per flag instead of that text followed
// by "(default: 0)" — for flags whose zero value means "derive it".
func statedDefaults(cmds []*cli.Command) {
	for _, c := range cmds {
		for _, f := range c.Flags {
			var usage, text *string
			switch x := f.(type) {
			case *cli.IntFlag:
				usage, text = &x.Usage, &x.DefaultText
			case *cli.Int64Flag:
				usage, text = &x.Usage, &x.DefaultText
			case *cli.Float64Flag:
				usage, text = &x.Usage, &x.DefaultText
			default:
				continue
			}
			i := strings.LastIndex(*usage, " (default")
			if *text != "" || i < 0 || !strings.HasSuffix(*usage, ")") {
				continue
			}
			stated := strings.TrimSuffix(strings.TrimLeft(strings.TrimPrefix((*usage)[i+1:], "(default"), ": "), ")")
			*usage, *text = (*usage)[:i], stated
		}
		statedDefaults(c.Subcommands)
	}
}

// run executes the CLI and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := newApp(stdout, stderr).RunContext(ctx, args)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "aicdb: "+oneLine(err.Error()))
	var ue userError
	if errors.As(err, &ue) {
		return exitUser
	}
	var ce cli.ExitCoder
	if errors.As(err, &ce) && ce.ExitCode() != 0 {
		return ce.ExitCode()
	}
	return exitInternal
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
