package redirectpolicy

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/cilium/hive/script"
	"github.com/cilium/statedb"
	"go.yaml.in/yaml/v3"

	"github.com/lbstate/lbstate/lb"
)

// ScriptCommands returns lrp/list, which prints every policy this node
// applies with what it redirects and why not, and lrp/show, which prints
// one policy's report in YAML. An agent that embeds the library can add
// them to its own script tests.
func ScriptCommands(db *statedb.DB, policies statedb.Table[*Status], frontends statedb.Table[*lb.Frontend]) map[string]script.Cmd {
	return map[string]script.Cmd{
		"lrp/list": script.Command(
			script.CmdUsage{Summary: "List the local redirect policies: what each redirects on this node, to which pods, and why not"},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) != 0 {
					return nil, script.ErrUsage
				}
				txn := db.ReadTxn()
				var b strings.Builder
				tw := tabwriter.NewWriter(&b, 5, 4, 3, ' ', 0)
				fmt.Fprintln(tw, strings.Join(Report{}.TableHeader(), "\t"))
				for _, rep := range Describe(statedb.ToSeq(policies.All(txn)), statedb.ToSeq(frontends.All(txn))) {
					fmt.Fprintln(tw, strings.Join(rep.TableRow(), "\t"))
				}
				tw.Flush()
				out := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
				for i := range out {
					out[i] = strings.TrimRight(out[i], " ")
				}
				return func(*script.State) (string, string, error) { return strings.Join(out, "\n") + "\n", "", nil }, nil
			}),
		"lrp/show": script.Command(
			script.CmdUsage{Summary: "Show a local redirect policy's report in YAML", Args: "source:namespace/name"},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) != 1 {
					return nil, script.ErrUsage
				}
				txn := db.ReadTxn()
				st, _, found := policies.Get(txn, StatusByName.Query(args[0]))
				if !found {
					return nil, fmt.Errorf("no policy %q (want source:namespace/name, such as k8s:kube-system/nodelocaldns)", args[0])
				}
				out, err := yaml.Marshal(Describe(slices.Values([]*Status{st}), statedb.ToSeq(frontends.All(txn)))[0])
				if err != nil {
					return nil, err
				}
				return func(*script.State) (string, string, error) { return string(out), "", nil }, nil
			}),
	}
}
