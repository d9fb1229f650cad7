package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// estimateCommand is not built yet; its issue replaces this file.
func estimateCommand() *cli.Command {
	return &cli.Command{
		Name:  "estimate",
		Usage: "(not built yet)",
		Action: func(*cli.Context) error {
			return errors.New("estimate is not built yet")
		},
	}
}
