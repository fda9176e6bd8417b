package embedetcd

import (
	"os"
	"path/filepath"

	"github.com/cilium/hive/script"
	"github.com/spf13/pflag"
)

// ScriptCommands returns commands that control the server and the
// clustermesh config directory configDir: etcd/stop, etcd/start [--side],
// etcd/config-write NAME (a config for this server, as cluster NAME) and
// etcd/config-remove NAME.
func ScriptCommands(s *Server, configDir string) map[string]script.Cmd {
	return map[string]script.Cmd{
		"etcd/stop": script.Command(
			script.CmdUsage{Summary: "Stop the etcd; its data stays"},
			func(*script.State, ...string) (script.WaitFunc, error) {
				s.Stop()
				return nil, nil
			}),
		"etcd/start": script.Command(
			script.CmdUsage{Summary: "Start the stopped etcd again",
				Flags: func(fs *pflag.FlagSet) {
					fs.Bool("side", false, "Listen on the side port only, which the configured clusters do not know (kvstore/* commands reach it)")
				}},
			func(st *script.State, _ ...string) (script.WaitFunc, error) {
				side, _ := st.Flags.GetBool("side")
				return nil, s.Restart(side)
			}),
		"etcd/config-write": script.Command(
			script.CmdUsage{Summary: "Write a clustermesh config file for this etcd, as the named cluster", Args: "name"},
			func(_ *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) != 1 {
					return nil, script.ErrUsage
				}
				return nil, s.WriteClientConfig(filepath.Join(configDir, args[0]), nil)
			}),
		"etcd/config-remove": script.Command(
			script.CmdUsage{Summary: "Remove a cluster's clustermesh config file", Args: "name"},
			func(_ *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) != 1 {
					return nil, script.ErrUsage
				}
				return nil, os.Remove(filepath.Join(configDir, args[0]))
			}),
	}
}
