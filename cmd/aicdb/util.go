package main

import (
	"strings"
)

// oneLine folds an error message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// isFlagError reports errors that urfave/cli raises for bad flags or arguments.
func isFlagError(err error) bool {
	s := err.Error()
	for _, p := range []string{"flag provided but not defined", "invalid value", "Required flag", "flag needs an argument", "Required flags"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
