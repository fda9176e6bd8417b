package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/tables"
)

const (
	// AgentPath is where the API serves what the agent is: its version
	// and its effective flags (AgentInfo), for lbctl dump.
	AgentPath = "/agent"
	// MetricsPath is where the API serves the agent's metrics, in the
	// Prometheus text format, so that lbctl dump needs no other address.
	MetricsPath = "/metrics"
)

// Agent is what an agent tells about itself through the API
// (RegisterAgent).
type Agent struct {
	// Version is the agent's own version; empty for its main module's
	// (runtime/debug.ReadBuildInfo).
	Version string
	// Flags are the agent's parsed flags (those its hive registered, and
	// its own): read at each request, so they say what is in force.
	// Values of flags whose names say they are secret are redacted
	// (SecretFlag).
	Flags *pflag.FlagSet
	// Gatherer is the agent's metrics registry (metrics.Cell provides
	// it); nil serves no MetricsPath.
	Gatherer prometheus.Gatherer
	// History is the journal of frontend changes (tables.Writer's
	// History), served at HistoryPath; nil serves none.
	History *tables.History
}

// AgentInfo is the JSON document at AgentPath.
type AgentInfo struct {
	Version string `json:"version"`
	// Lbstate is the version of the lbstate module the agent is built
	// with; Go, the toolchain's.
	Lbstate string `json:"lbstate"`
	Go      string `json:"go"`
	Flags   []Flag `json:"flags"`
}

// Flag is one flag of the agent, as it is in force.
type Flag struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Default string `json:"default"`
	// Changed says the value was given, not defaulted.
	Changed bool `json:"changed,omitempty"`
	// Redacted says Value and Default were withheld (SecretFlag).
	Redacted bool `json:"redacted,omitempty"`
}

// redacted replaces a secret flag's value.
const redacted = "[redacted]"

// SecretFlag says whether a flag's value is withheld from AgentPath: its
// name has token, password, secret or credential in it. lbstate's own
// flags carry none (files hold keys and credentials, and the API names
// the files only); the rule is for an embedder's.
func SecretFlag(name string) bool {
	name = strings.ToLower(name)
	for _, s := range []string{"token", "password", "passwd", "secret", "credential"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// Info returns what AgentPath serves for a.
func (a Agent) Info() AgentInfo {
	info := AgentInfo{Version: a.Version, Lbstate: "unknown", Go: runtime.Version(), Flags: []Flag{}}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" {
			info.Version = bi.Main.Version
		}
		if bi.Main.Path == lbstateModule {
			info.Lbstate = bi.Main.Version
		}
		for _, dep := range bi.Deps {
			if dep.Path == lbstateModule {
				info.Lbstate = dep.Version
			}
		}
	}
	if a.Flags != nil {
		a.Flags.VisitAll(func(f *pflag.Flag) {
			fl := Flag{Name: f.Name, Value: f.Value.String(), Default: f.DefValue, Changed: f.Changed}
			if SecretFlag(f.Name) {
				fl.Value, fl.Default, fl.Redacted = redacted, redacted, true
			}
			info.Flags = append(info.Flags, fl)
		})
	}
	return info
}

const lbstateModule = "github.com/lbstate/lbstate"

// RegisterAgent mounts a on mux at AgentPath, its metrics at
// MetricsPath and its history at HistoryPath, within DefaultLimits.
func RegisterAgent(mux *http.ServeMux, log *slog.Logger, a Agent) {
	DefaultLimits.RegisterAgent(mux, log, a)
}

// RegisterAgent is RegisterAgent within l.
func (l Limits) RegisterAgent(mux *http.ServeMux, log *slog.Logger, a Agent) {
	h := l.AgentHandler(log, a)
	mux.Handle(AgentPath, h)
	if a.Gatherer != nil {
		mux.Handle(MetricsPath, h)
	}
	if a.History != nil {
		mux.Handle(HistoryPath, h)
	}
}

// AgentHandler is a's AgentPath and MetricsPath as one handler within l,
// to mount under a prefix beside Handler.
func (l Limits) AgentHandler(log *slog.Logger, a Agent) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(AgentPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(a.Info())
	})
	if a.Gatherer != nil {
		mux.Handle(MetricsPath, promhttp.HandlerFor(a.Gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	}
	if a.History != nil {
		mux.Handle(HistoryPath, l.historyHandler(a.History))
	}
	return l.Wrap(log, mux)
}
