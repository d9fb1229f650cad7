package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// oracleCommand is not built yet; its issue replaces this file.
func oracleCommand() *cli.Command {
	return &cli.Command{
		Name:  "oracle",
		Usage: "(not built yet)",
		Action: func(*cli.Context) error {
			return errors.New("oracle is not built yet")
		},
	}
}
