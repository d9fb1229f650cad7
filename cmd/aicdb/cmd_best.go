package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// bestCommand is not built yet; its issue replaces this file.
func bestCommand() *cli.Command {
	return &cli.Command{
		Name:  "best",
		Usage: "(not built yet)",
		Action: func(*cli.Context) error {
			return errors.New("best is not built yet")
		},
	}
}
