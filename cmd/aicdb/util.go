package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// oneLine folds an error message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// usageError is a command-line mistake: an unknown or malformed flag, a missing
// required flag, an unknown command or help topic. It prints as one line naming the
// help to read (cmd is the command path, e.g. "aicdb sweep"); run exits 1.
type usageError struct {
	cmd string
	err error
}

func (e usageError) Error() string { return fmt.Sprintf("%v; see '%s --help'", e.err, e.cmd) }
func (e usageError) Unwrap() error { return e.err }

// usage returns err as a user error pointing at cmd's help.
func usage(cmd string, err error) error { return userError{usageError{cmd: cmd, err: err}} }

// oneLineUsage makes every command of app (recursively) report usage mistakes as one
// line and exit 1, where urfave/cli prints the whole help first (about 45 lines) or
// exits 3: flag parse errors go through OnUsageError; required flags are checked in
// Before instead of by urfave/cli (which prints the help before its error); the help
// command and parent commands without an action reject unknown names. `--help` and
// `help CMD` still print the help. Call it once the command list is complete.
func oneLineUsage(app *cli.App) {
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usage(app.Name, err) }
	app.Commands = append(app.Commands, helpCommand(app.Name))
	app.Flags = append(app.Flags, cli.HelpFlag) // urfave/cli adds it only with its own help command
	for _, c := range app.Commands {
		if c.Name != "help" {
			tidyCommand([]string{app.Name, c.Name}, c)
		}
	}
}

// tidyCommand applies oneLineUsage to c, named by path, and its subcommands.
func tidyCommand(names []string, c *cli.Command) {
	path := strings.Join(names, " ")
	c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usage(path, err) }
	var required []string
	for _, f := range c.Flags {
		if notRequired(f) {
			required = append(required, "--"+f.Names()[0])
		}
	}
	if len(required) > 0 {
		before := c.Before
		c.Before = func(ctx *cli.Context) error {
			if a := ctx.Args().First(); a == "help" || a == "h" {
				return nil // `aicdb CMD help`: the help subcommand runs next
			}
			var missing []string
			for _, name := range required {
				if !ctx.IsSet(strings.TrimPrefix(name, "--")) {
					missing = append(missing, name)
				}
			}
			if len(missing) > 0 {
				return usage(path, fmt.Errorf("missing required flag %s", strings.Join(missing, ", ")))
			}
			if before != nil {
				return before(ctx)
			}
			return nil
		}
	}
	if len(c.Subcommands) > 0 && c.Action == nil {
		c.Action = func(ctx *cli.Context) error {
			if ctx.NArg() > 0 {
				return usage(path, fmt.Errorf("unknown command %q", ctx.Args().First()))
			}
			return cli.ShowSubcommandHelp(ctx)
		}
	}
	for _, s := range c.Subcommands {
		tidyCommand(append(slices.Clone(names), s.Name), s)
	}
	c.Subcommands = append(c.Subcommands, helpCommand(names...))
}

// notRequired clears f's Required field and reports whether it was set (the flag
// types aicdb uses; others keep urfave/cli's own check).
func notRequired(f cli.Flag) bool {
	rf, ok := f.(cli.RequiredFlag)
	if !ok || !rf.IsRequired() {
		return false
	}
	switch f := f.(type) {
	case *cli.StringFlag:
		f.Required = false
	case *cli.IntFlag:
		f.Required = false
	case *cli.Int64Flag:
		f.Required = false
	case *cli.Float64Flag:
		f.Required = false
	case *cli.BoolFlag:
		f.Required = false
	case *cli.PathFlag:
		f.Required = false
	case *cli.DurationFlag:
		f.Required = false
	case *cli.StringSliceFlag:
		f.Required = false
	default:
		return false
	}
	return true
}

// helpCommand replaces urfave/cli's help command under the command path (e.g.
// ["aicdb", "perfdb"]): `help` prints that command's help and `help NAME` its
// subcommand NAME's, each exactly as `--help` does (it runs the app again with
// --help: urfave/cli's own help command renders a command not yet set up without
// its options); an unknown NAME is a one-line usage error (urfave/cli's exits 3).
func helpCommand(path ...string) *cli.Command {
	name := strings.Join(path, " ")
	return &cli.Command{
		Name:      "help",
		Aliases:   []string{"h"},
		Usage:     "Shows a list of commands or help for one command",
		ArgsUsage: "[command]",
		HideHelp:  true,
		Action: func(c *cli.Context) error {
			args := slices.Clone(path)
			if c.NArg() > 0 {
				topic := c.Args().First()
				cmds := c.App.Commands
				if p := c.Lineage()[1].Command; len(path) > 1 && p != nil {
					cmds = p.Subcommands
				}
				i := slices.IndexFunc(cmds, func(s *cli.Command) bool { return s.HasName(topic) && s.Name != "help" })
				if i < 0 {
					return usage(name, fmt.Errorf("unknown command %q", topic))
				}
				args = append(args, cmds[i].Name)
			}
			return c.App.RunContext(c.Context, append(args, "--help"))
		},
	}
}
