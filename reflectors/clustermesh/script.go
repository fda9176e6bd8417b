package clustermesh

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cilium/hive/script"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ScriptCommands returns commands that change and read an etcd, for
// script tests of the clustermesh (the remote cluster's exporter is the
// script): kvstore/update KEY FILE, kvstore/delete KEY,
// kvstore/list [PREFIX] and kvstore/compact. Each command connects
// anew with cfg, so that it finds the etcd wherever cfg's endpoints say
// it listens now.
func ScriptCommands(cfg clientv3.Config) map[string]script.Cmd {
	command := func(usage script.CmdUsage, run func(s *script.State, cli *clientv3.Client, args ...string) (script.WaitFunc, error)) script.Cmd {
		return script.Command(usage, func(s *script.State, args ...string) (script.WaitFunc, error) {
			c := cfg
			c.Context = s.Context()
			if c.DialTimeout == 0 {
				c.DialTimeout = 10 * time.Second
			}
			cli, err := clientv3.New(c)
			if err != nil {
				return nil, err
			}
			defer cli.Close()
			return run(s, cli, args...)
		})
	}
	return map[string]script.Cmd{
		"kvstore/update": command(
			script.CmdUsage{Summary: "Put a key, its value read from a file", Args: "key file"},
			func(s *script.State, cli *clientv3.Client, args ...string) (script.WaitFunc, error) {
				if len(args) != 2 {
					return nil, script.ErrUsage
				}
				value, err := os.ReadFile(s.Path(args[1]))
				if err != nil {
					return nil, err
				}
				_, err = cli.Put(s.Context(), args[0], strings.TrimSpace(string(value)))
				return nil, err
			}),
		"kvstore/delete": command(
			script.CmdUsage{Summary: "Delete a key, or every key under a prefix with --prefix", Args: "key",
				Flags: func(fs *pflag.FlagSet) { fs.Bool("prefix", false, "Delete every key under the prefix") }},
			func(s *script.State, cli *clientv3.Client, args ...string) (script.WaitFunc, error) {
				if len(args) != 1 {
					return nil, script.ErrUsage
				}
				var opts []clientv3.OpOption
				if p, _ := s.Flags.GetBool("prefix"); p {
					opts = append(opts, clientv3.WithPrefix())
				}
				_, err := cli.Delete(s.Context(), args[0], opts...)
				return nil, err
			}),
		"kvstore/list": command(
			script.CmdUsage{Summary: "Print the keys under a prefix and their values, sorted by key", Args: "[prefix]",
				Flags: func(fs *pflag.FlagSet) { fs.Bool("keys-only", false, "Print only the keys") }},
			func(s *script.State, cli *clientv3.Client, args ...string) (script.WaitFunc, error) {
				prefix := ""
				if len(args) > 0 {
					prefix = args[0]
				}
				keysOnly, _ := s.Flags.GetBool("keys-only")
				resp, err := cli.Get(s.Context(), prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
				if err != nil {
					return nil, err
				}
				var b strings.Builder
				for _, kv := range resp.Kvs {
					if keysOnly {
						fmt.Fprintf(&b, "%s\n", kv.Key)
					} else {
						fmt.Fprintf(&b, "# %s\n%s\n", kv.Key, kv.Value)
					}
				}
				return func(*script.State) (string, string, error) { return b.String(), "", nil }, nil
			}),
		"kvstore/compact": command(
			script.CmdUsage{Summary: "Compact the etcd's history up to its current revision",
				Detail: []string{"A watcher behind that revision must list again."}},
			func(s *script.State, cli *clientv3.Client, args ...string) (script.WaitFunc, error) {
				resp, err := cli.Get(s.Context(), "compact-probe")
				if err != nil {
					return nil, err
				}
				_, err = cli.Compact(s.Context(), resp.Header.Revision, clientv3.WithCompactPhysical())
				return nil, err
			}),
	}
}
