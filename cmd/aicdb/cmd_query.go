package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// queryCommand is not built yet; its issue replaces this file.
func queryCommand() *cli.Command {
	return &cli.Command{
		Name:  "query",
		Usage: "(not built yet)",
		Action: func(*cli.Context) error {
			return errors.New("query is not built yet")
		},
	}
}
