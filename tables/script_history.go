package tables

import (
	"fmt"
	"strings"

	"github.com/cilium/hive/script"
	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/lb"
)

// historyCmd is lb/history: the journal's records, one line each and
// without times, so that a script asserts on causes and changes with
// stdout or cmp:
//
//	10.96.0.1:80/TCP changed by k8s EndpointSlice default/web-1 resourceVersion 2: -10.0.0.1:8080/TCP weight 1 active
func historyCmd(w *Writer) script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Print the history of frontend changes (lbctl history), one line each",
			Args:    "[frontend | service]",
			Flags: func(fs *pflag.FlagSet) {
				fs.Bool("outcome", false, "Add what the reconciler did (pending, done, error; no times)")
			},
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			var q HistoryQuery
			switch len(args) {
			case 0:
			case 1:
				if addr, err := lb.ParseL3n4Addr(args[0]); err == nil {
					q.Frontend = addr
				} else if name, err := lb.ParseServiceName(args[0]); err == nil {
					q.Service = name
				} else {
					return nil, fmt.Errorf("%q: want a frontend (10.96.0.1:80/TCP) or a service (namespace/name)", args[0])
				}
			default:
				return nil, script.ErrUsage
			}
			outcome, _ := s.Flags.GetBool("outcome")
			recs, _ := w.History().Records(q)
			var b strings.Builder
			for _, r := range recs {
				b.WriteString(HistoryLine(r))
				if outcome {
					b.WriteString(" [" + r.Outcome.State + "]")
				}
				b.WriteByte('\n')
			}
			out := b.String()
			return func(*script.State) (string, string, error) { return out, "", nil }, nil
		})
}

// What lists what the change did: "+BACKEND" for each backend added,
// "-BACKEND" for each removed, then the other changes.
func (r HistoryRecord) What() []string {
	var what []string
	for _, a := range r.Added {
		what = append(what, "+"+a)
	}
	for _, d := range r.Removed {
		what = append(what, "-"+d)
	}
	return append(what, r.Changed...)
}

// HistoryLine prints a record in one line, without its time and outcome.
func HistoryLine(r HistoryRecord) string {
	what := r.What()
	line := fmt.Sprintf("%s %s by %s", r.Frontend, r.Change, r.Cause)
	if len(what) > 0 {
		line += ": " + strings.Join(what, ", ")
	}
	return line
}
