package tables

import (
	"github.com/cilium/hive/script"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"
)

// setNodeLabelsCmd is lb/set-node-labels: the labels of any node of the
// cluster, which its backends have for topology keys.
func setNodeLabelsCmd(w *Writer) script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Set the labels of a node of the cluster (for topology keys)",
			Args:    "name",
			Flags:   labelsFlag,
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			labels, err := s.Flags.GetStringToString("labels")
			switch {
			case len(args) != 1:
				return nil, script.ErrUsage
			case err != nil:
				return result(err)
			}
			return write(w, func(txn statedb.WriteTxn) error { return w.SetNodeLabels(txn, args[0], labels) })
		})
}

// labelsFlag is the --labels flag of lb/set-node and lb/set-node-labels.
func labelsFlag(fs *pflag.FlagSet) {
	fs.StringToString("labels", nil, "The node's labels, key=value,...")
}

// deleteNodeCmd is lb/delete-node: forget a node's labels.
func deleteNodeCmd(w *Writer) script.Cmd {
	return script.Command(
		script.CmdUsage{Summary: "Forget the labels of a node of the cluster", Args: "name"},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 1 {
				return nil, script.ErrUsage
			}
			return write(w, func(txn statedb.WriteTxn) error { return w.DeleteNode(txn, args[0]) })
		})
}
