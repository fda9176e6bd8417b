package bpf

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cilium/hive/script"
	"github.com/spf13/pflag"
)

// ScriptCommands returns the lb/maps-* script commands over m.
func ScriptCommands(m *Maps) map[string]script.Cmd {
	return map[string]script.Cmd{
		"lb/maps-dump": dumpCmd(m),
		"lb/maps-cmp":  cmpCmd(m),
	}
}

func dumpText(m *Maps) (string, error) {
	d, err := TakeDump(m)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = d.WriteText(&buf)
	return buf.String(), err
}

func dumpCmd(m *Maps) script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Dump the load-balancing maps, one sorted line per entry",
			Args:    "[file]",
			Flags: func(fs *pflag.FlagSet) {
				fs.StringP("format", "f", "text", "text or json")
			},
			Detail: []string{"The format is described on bpf.Dump. Without a file the dump goes to stdout."},
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			format, err := s.Flags.GetString("format")
			if err != nil {
				return nil, err
			}
			d, err := TakeDump(m)
			if err != nil {
				return nil, err
			}
			var buf bytes.Buffer
			switch format {
			case "text":
				err = d.WriteText(&buf)
			case "json":
				err = d.WriteJSON(&buf)
			default:
				return nil, fmt.Errorf("--format %q: want text or json", format)
			}
			if err != nil {
				return nil, err
			}
			if len(args) == 1 {
				return nil, os.WriteFile(s.Path(args[0]), buf.Bytes(), 0o644)
			}
			return func(*script.State) (string, string, error) { return buf.String(), "", nil }, nil
		})
}

func cmpCmd(m *Maps) script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Wait until the maps' dump equals a file",
			Args:    "file",
			Flags: func(fs *pflag.FlagSet) {
				fs.Duration("timeout", 5*time.Second, "How long to wait for the maps to match")
			},
			Detail: []string{
				"The file holds the text dump (see lb/maps-dump). The maps are",
				"dumped again until they match or the timeout passes; then the",
				"difference is the error. With -scripttest.update the file is",
				"rewritten from the maps.",
			},
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 1 {
				return nil, script.ErrUsage
			}
			timeout, err := s.Flags.GetDuration("timeout")
			if err != nil {
				return nil, err
			}
			want, err := os.ReadFile(s.Path(args[0]))
			if err != nil {
				return nil, err
			}
			deadline := time.Now().Add(timeout)
			for {
				got, err := dumpText(m)
				if err != nil {
					return nil, err
				}
				if got == string(want) {
					return nil, nil
				}
				if time.Now().After(deadline) {
					if s.DoUpdate {
						s.FileUpdates[args[0]] = got
						return nil, nil
					}
					return nil, fmt.Errorf("maps differ from %s:\n%s", args[0], lineDiff(string(want), got))
				}
				select {
				case <-s.Context().Done():
					return nil, s.Context().Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
}

// lineDiff shows the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var sb strings.Builder
	for _, l := range wl {
		if l != "" && !slices.Contains(gl, l) {
			sb.WriteString("- " + l + "\n")
		}
	}
	for _, l := range gl {
		if l != "" && !slices.Contains(wl, l) {
			sb.WriteString("+ " + l + "\n")
		}
	}
	return sb.String()
}
