package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// errHelp ends a subcommand that printed its usage because it was asked to.
var errHelp = errors.New("help shown")

// newFlags returns a subcommand's flag set, printing usage (and the flags
// after it) to stderr. Flags that mirror the agent's have its names
// (--lb-algorithm); the names lbctl had before are still accepted.
func newFlags(name, usage string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false // in the order registered: the important ones first
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if n, ok := oldNames[name]; ok {
			return pflag.NormalizedName(n)
		}
		return pflag.NormalizedName(name)
	})
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nFlags:\n%s", usage, fs.FlagUsages())
	}
	return fs
}

// oldNames are lbctl's flag names from before it took the agent's.
var oldNames = map[string]string{
	"pin-dir":           "lb-pin-dir",
	"algorithm":         "lb-algorithm",
	"maglev-table-size": "lb-maglev-table-size",
	"node-name":         "k8s-node-name",
}

// parseFlags parses the flags of a subcommand that takes no arguments.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	positional, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(positional) > 0 {
		return fmt.Errorf("unexpected argument %q (lbctl %s takes flags only; see --help)", positional[0], fs.Name())
	}
	return nil
}

// parseArgs parses flags, which may come before or after the positional
// arguments, and returns the positional ones.
func parseArgs(fs *pflag.FlagSet, args []string) ([]string, error) {
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		return nil, errHelp
	}
	if err != nil {
		return nil, flagError(fs, args, err)
	}
	// Values that can only be judged whole (-o) say what is wrong with
	// them once parsed.
	fs.VisitAll(func(f *pflag.Flag) {
		if v, ok := f.Value.(interface{ check() error }); ok && err == nil {
			err = v.check()
		}
	})
	if err != nil {
		return nil, err
	}
	return fs.Args(), nil
}

// flagError says how to fix a bad flag. lbctl's flags once took one dash
// (-algorithm), so a long flag given that way gets its spelling with two.
func flagError(fs *pflag.FlagSet, args []string, err error) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && fs.Lookup(name) != nil {
			return fmt.Errorf("%v: long flags take two dashes: -%s", err, a)
		}
	}
	return fmt.Errorf("%v (lbctl %s --help lists the flags)", err, fs.Name())
}
