package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// evalCommand is not built yet; its issue replaces this file.
func evalCommand() *cli.Command {
	return &cli.Command{
		Name:  "eval",
		Usage: "(not built yet)",
		Action: func(*cli.Context) error {
			return errors.New("eval is not built yet")
		},
	}
}
