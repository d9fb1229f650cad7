package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// initCommand is not built yet; its issue replaces this file.
func initCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "(not built yet)",
		Action: func(*cli.Context) error {
			return errors.New("init is not built yet")
		},
	}
}
