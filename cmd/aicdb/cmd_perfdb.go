package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// perfdbCommand is not built yet; its issue replaces this file.
func perfdbCommand() *cli.Command {
	return &cli.Command{
		Name:  "perfdb",
		Usage: "(not built yet)",
		Action: func(*cli.Context) error {
			return errors.New("perfdb is not built yet")
		},
	}
}
