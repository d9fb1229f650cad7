package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// sweepCommand is not built yet; its issue replaces this file.
func sweepCommand() *cli.Command {
	return &cli.Command{
		Name:  "sweep",
		Usage: "(not built yet)",
		Action: func(*cli.Context) error {
			return errors.New("sweep is not built yet")
		},
	}
}
