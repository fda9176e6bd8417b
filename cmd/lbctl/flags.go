package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlags returns a subcommand's flag set, printing usage (and the flags
// after it) to stderr.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses the flags of a subcommand that takes no arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	extra, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(extra) > 0 {
		return fmt.Errorf("unexpected argument %q", extra[0])
	}
	return nil
}

// parseInterleaved parses flags that may come before or after positional
// arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
