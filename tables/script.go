package tables

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/hive/script"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/lbstate/lbstate/lb"
)

// backendsDoc is the YAML form the lb/upsert-backends command reads: one
// source's backends of one service.
type backendsDoc struct {
	Service  lb.ServiceName     `json:"service"`
	Source   lb.Source          `json:"source"`
	Backends []lb.BackendParams `json:"backends"`
}

// ScriptCommands returns the lb/* script commands that drive a Writer. An
// agent that embeds the library can add them to its own script tests
// (statedb's db/* commands then inspect the tables).
func ScriptCommands(w *Writer) map[string]script.Cmd {
	inits := &initializers{w: w, done: map[string]func(statedb.WriteTxn){}}
	return map[string]script.Cmd{
		"lb/upsert-service":       upsertServiceCmd(w),
		"lb/delete-service":       deleteServiceCmd(w),
		"lb/upsert-backends":      upsertBackendsCmd(w),
		"lb/release-backends":     releaseBackendsCmd(w),
		"lb/delete-source":        deleteSourceCmd(w),
		"lb/set-health":           setHealthCmd(w),
		"lb/set-redirect":         setRedirectCmd(w),
		"lb/clear-redirect":       clearRedirectCmd(w),
		"lb/set-proxy-redirect":   setProxyRedirectCmd(w),
		"lb/clear-proxy-redirect": clearProxyRedirectCmd(w),
		"lb/set-route":            setRouteCmd(w),
		"lb/clear-route":          clearRouteCmd(w),
		"lb/set-node":             setNodeCmd(w),
		"lb/set-node-labels":      setNodeLabelsCmd(w),
		"lb/delete-node":          deleteNodeCmd(w),
		"lb/init-register":        inits.registerCmd(),
		"lb/init-done":            inits.doneCmd(),
		"lb/history":              historyCmd(w),
	}
}

// write runs fn in one write transaction, committing only if it succeeds.
func write(w *Writer, fn func(txn statedb.WriteTxn) error) (script.WaitFunc, error) {
	txn := w.WriteTxn()
	defer txn.Abort()
	if err := fn(txn); err != nil {
		return result(err)
	}
	txn.Commit()
	return nil, nil
}

// serviceCmd makes a command that takes --source, a service name and
// from min to max more arguments (max -1: any number), and runs fn on
// them in one write transaction.
func serviceCmd(w *Writer, usage script.CmdUsage, min, max int,
	fn func(s *script.State, txn statedb.WriteTxn, src lb.Source, name lb.ServiceName, rest []string) error) script.Cmd {
	return script.Command(usage, func(s *script.State, args ...string) (script.WaitFunc, error) {
		src, err := getSource(s)
		if err != nil {
			return result(err)
		}
		if len(args) < 1+min || max >= 0 && len(args) > 1+max {
			return nil, script.ErrUsage
		}
		name, err := lb.ParseServiceName(args[0])
		if err != nil {
			return result(err)
		}
		return write(w, func(txn statedb.WriteTxn) error { return fn(s, txn, src, name, args[1:]) })
	})
}

// result reports err on the command's stderr, so that scripts can match it
// with 'stderr' after '! cmd'.
func result(err error) (script.WaitFunc, error) {
	if err == nil {
		return nil, nil
	}
	return func(*script.State) (string, string, error) { return "", err.Error() + "\n", err }, nil
}

func sourceFlag(fs *pflag.FlagSet) {
	fs.StringP("source", "s", "k8s", "The source that makes the change")
}

func getSource(s *script.State) (lb.Source, error) {
	name, err := s.Flags.GetString("source")
	if err != nil {
		return 0, err
	}
	return lb.ParseSource(name)
}

func upsertServiceCmd(w *Writer) script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Upsert services from YAML files (lb.ServiceParams, one per document)",
			Args:    "file...",
			Detail: []string{
				"Each document is one source's declaration of a service, e.g.:",
				"  name: default/web",
				"  source: k8s",
				"  frontends:",
				"  - {address: 10.96.0.1:80/TCP, type: ClusterIP, portName: http}",
				"  extTrafficPolicy: Local",
			},
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			return write(w, func(txn statedb.WriteTxn) error {
				return forEachDoc(s, args, func(p lb.ServiceParams) error { return w.UpsertService(txn, p) })
			})
		})
}

func deleteServiceCmd(w *Writer) script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Delete a source's declaration of services",
			Args:    "name...",
			Flags:   sourceFlag,
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			src, err := getSource(s)
			if err != nil {
				return result(err)
			}
			return write(w, func(txn statedb.WriteTxn) error {
				for _, arg := range args {
					name, err := lb.ParseServiceName(arg)
					if err != nil {
						return err
					}
					if err := w.DeleteService(txn, name, src); err != nil {
						return err
					}
				}
				return nil
			})
		})
}

func upsertBackendsCmd(w *Writer) script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Upsert backends from YAML files (one service and source per document)",
			Args:    "file...",
			Flags: func(fs *pflag.FlagSet) {
				fs.Bool("replace", false, "Replace the source's whole backend set of the service (SetBackends)")
			},
			Detail: []string{
				"Each document names a service and a source and lists backends, e.g.:",
				"  service: default/web",
				"  source: k8s",
				"  backends:",
				"  - {address: 10.0.0.1:8080/TCP, portNames: [http], nodeName: n1, zone: a}",
				"  - {address: 10.0.0.2:8080/TCP, weight: 20, state: terminating}",
				"A backend without a weight gets lb.DefaultBackendWeight.",
			},
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			replace, err := s.Flags.GetBool("replace")
			if err != nil {
				return result(err)
			}
			return write(w, func(txn statedb.WriteTxn) error {
				return forEachDoc(s, args, func(d backendsDoc) error {
					if replace {
						return w.SetBackends(txn, d.Service, d.Source, d.Backends...)
					}
					return w.UpsertBackends(txn, d.Service, d.Source, d.Backends...)
				})
			})
		})
}

func releaseBackendsCmd(w *Writer) script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Release a source's backends of a service",
			Args:    "service address...",
			Flags:   sourceFlag,
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			src, err := getSource(s)
			if err != nil {
				return result(err)
			}
			if len(args) < 2 {
				return nil, script.ErrUsage
			}
			name, err := lb.ParseServiceName(args[0])
			if err != nil {
				return result(err)
			}
			addrs := make([]lb.L3n4Addr, 0, len(args)-1)
			for _, arg := range args[1:] {
				a, err := lb.ParseL3n4Addr(arg)
				if err != nil {
					return result(err)
				}
				addrs = append(addrs, a)
			}
			return write(w, func(txn statedb.WriteTxn) error {
				return w.ReleaseBackends(txn, name, src, addrs...)
			})
		})
}

func deleteSourceCmd(w *Writer) script.Cmd {
	return script.Command(
		script.CmdUsage{Summary: "Delete everything a source contributed", Args: "source"},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 1 {
				return nil, script.ErrUsage
			}
			src, err := lb.ParseSource(args[0])
			if err != nil {
				return result(err)
			}
			return write(w, func(txn statedb.WriteTxn) error { return w.DeleteSource(txn, src) })
		})
}

func setHealthCmd(w *Writer) script.Cmd {
	return script.Command(
		script.CmdUsage{Summary: "Set a backend's health", Args: "address healthy|unhealthy"},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 2 || (args[1] != "healthy" && args[1] != "unhealthy") {
				return nil, script.ErrUsage
			}
			addr, err := lb.ParseL3n4Addr(args[0])
			if err != nil {
				return result(err)
			}
			return write(w, func(txn statedb.WriteTxn) error {
				return w.SetBackendHealth(txn, addr, args[1] == "healthy")
			})
		})
}

func setRedirectCmd(w *Writer) script.Cmd {
	return serviceCmd(w, script.CmdUsage{
		Summary: "Redirect a service's frontends to another service's backends",
		Args:    "service target",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringP("source", "s", "redirect", "The source that sets the redirect")
			fs.Bool("skip-from-backend", false, "Leave the target's backends' own traffic to the service's backends")
		},
	}, 1, 1, func(s *script.State, txn statedb.WriteTxn, src lb.Source, name lb.ServiceName, rest []string) error {
		skip, err := s.Flags.GetBool("skip-from-backend")
		if err != nil {
			return err
		}
		to, err := lb.ParseServiceName(rest[0])
		if err != nil {
			return err
		}
		return w.SetRedirect(txn, name, lb.Redirect{Source: src, To: to, SkipFromBackend: skip})
	})
}

func clearRedirectCmd(w *Writer) script.Cmd {
	return serviceCmd(w, script.CmdUsage{
		Summary: "Clear the redirect a source set on a service",
		Args:    "service",
		Flags:   func(fs *pflag.FlagSet) { fs.StringP("source", "s", "redirect", "The source that set the redirect") },
	}, 0, 0, func(_ *script.State, txn statedb.WriteTxn, src lb.Source, name lb.ServiceName, _ []string) error {
		return w.ClearRedirect(txn, name, src)
	})
}

func setProxyRedirectCmd(w *Writer) script.Cmd {
	return serviceCmd(w, script.CmdUsage{
		Summary: "Send new flows of a service's frontends to the L7 proxy on this node",
		Args:    "service proxy-port [port-name...]",
		Flags:   func(fs *pflag.FlagSet) { fs.StringP("source", "s", "api", "The source that sets the proxy redirect") },
		Detail: []string{
			"Port names limit the proxy redirect to the frontends of those ports; without, it covers every frontend.",
		},
	}, 1, -1, func(_ *script.State, txn statedb.WriteTxn, src lb.Source, name lb.ServiceName, rest []string) error {
		port, err := strconv.ParseUint(rest[0], 10, 16)
		if err != nil {
			return fmt.Errorf("proxy port %q: %w", rest[0], err)
		}
		return w.SetProxyRedirect(txn, name, lb.ProxyRedirect{Source: src, ProxyPort: uint16(port), Ports: rest[1:]})
	})
}

func clearProxyRedirectCmd(w *Writer) script.Cmd {
	return serviceCmd(w, script.CmdUsage{
		Summary: "Clear the L7 proxy redirect a source set on a service",
		Args:    "service",
		Flags:   func(fs *pflag.FlagSet) { fs.StringP("source", "s", "api", "The source that set the proxy redirect") },
	}, 0, 0, func(_ *script.State, txn statedb.WriteTxn, src lb.Source, name lb.ServiceName, _ []string) error {
		return w.ClearProxyRedirect(txn, name, src)
	})
}

// routeDoc is the YAML form lb/set-route reads: a route and the service
// it is set on.
type routeDoc struct {
	Service lb.ServiceName `json:"service"`
	lb.Route
}

func setRouteCmd(w *Writer) script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Set traffic-split routes on services from YAML files (one per document)",
			Args:    "file...",
			Detail: []string{
				"Each document is a service and the route to set on it (lb.Route), e.g.:",
				"  service: default/web",
				"  source: api",
				"  name: TCPRoute default/web",
				"  port: 80            # optional: only that service port's frontends",
				"  backends:",
				"  - {service: default/web-primary, weight: 90}",
				"  - {service: default/web-canary, port: 8080, weight: 10}",
			},
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			return write(w, func(txn statedb.WriteTxn) error {
				return forEachDoc(s, args, func(d routeDoc) error { return w.SetRoute(txn, d.Service, d.Route) })
			})
		})
}

func clearRouteCmd(w *Writer) script.Cmd {
	return serviceCmd(w, script.CmdUsage{
		Summary: "Clear the route a source set on a service (and port)",
		Args:    "service",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringP("source", "s", "api", "The source that set the route")
			fs.Uint16("port", 0, "The service port the route covers (0: every port)")
		},
	}, 0, 0, func(s *script.State, txn statedb.WriteTxn, src lb.Source, name lb.ServiceName, _ []string) error {
		port, err := s.Flags.GetUint16("port")
		if err != nil {
			return err
		}
		return w.ClearRoute(txn, name, src, port)
	})
}

func setNodeCmd(w *Writer) script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Declare the local node's name, zone and labels (the highest-priority source's is in force)",
			Args:    "name",
			Flags: func(fs *pflag.FlagSet) {
				fs.String("zone", "", "The node's zone (topology.kubernetes.io/zone)")
				labelsFlag(fs)
				sourceFlag(fs)
			},
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 1 {
				return nil, script.ErrUsage
			}
			zone, err := s.Flags.GetString("zone")
			if err != nil {
				return result(err)
			}
			labels, err := s.Flags.GetStringToString("labels")
			if err != nil {
				return result(err)
			}
			src, err := getSource(s)
			if err != nil {
				return result(err)
			}
			return write(w, func(txn statedb.WriteTxn) error {
				return w.SetLocalNode(txn, src, lb.Node{Name: args[0], Zone: zone, Labels: labels})
			})
		})
}

// initializers lets a script register pending sources and mark them done.
type initializers struct {
	w    *Writer
	mu   sync.Mutex
	done map[string]func(statedb.WriteTxn)
}

func (in *initializers) registerCmd() script.Cmd {
	return script.Command(
		script.CmdUsage{Summary: "Register sources whose initial sync the tables wait for", Args: "name..."},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			in.mu.Lock()
			defer in.mu.Unlock()
			if err := in.check(args, false); err != nil {
				return result(err)
			}
			for _, name := range args {
				done, err := in.w.RegisterInitializer(name)
				if err != nil {
					return result(err)
				}
				in.done[name] = done
			}
			return nil, nil
		})
}

func (in *initializers) doneCmd() script.Cmd {
	return script.Command(
		script.CmdUsage{Summary: "Mark registered sources as synced", Args: "name..."},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			in.mu.Lock()
			defer in.mu.Unlock()
			// Check every name first: a done function works once, so none
			// may be spent in a transaction that is then aborted.
			if err := in.check(args, true); err != nil {
				return result(err)
			}
			return write(in.w, func(txn statedb.WriteTxn) error {
				for _, name := range args {
					in.done[name](txn)
				}
				return nil
			})
		})
}

// check reports a name listed twice, or one that is (registered false) or
// is not (registered true) already registered.
func (in *initializers) check(names []string, registered bool) error {
	if len(names) == 0 {
		return script.ErrUsage
	}
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			return fmt.Errorf("initializer %q listed twice", name)
		}
		seen[name] = true
		if _, ok := in.done[name]; ok != registered {
			if registered {
				return fmt.Errorf("initializer %q not registered", name)
			}
			return fmt.Errorf("initializer %q already registered", name)
		}
	}
	return nil
}

// forEachDoc decodes every YAML document of every file into a T and calls
// fn with it. Decoding is strict: an unknown field is an error.
func forEachDoc[T any](s *script.State, files []string, fn func(T) error) error {
	if len(files) == 0 {
		return script.ErrUsage
	}
	for _, file := range files {
		data, err := os.ReadFile(s.Path(file))
		if err != nil {
			return err
		}
		docs, err := decodeYAML[T](data)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		for _, d := range docs {
			if err := fn(d); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
		}
	}
	return nil
}

// decodeYAML decodes a multi-document YAML stream into values of T through
// their JSON form, so that the JSON field names and decoders apply.
// Unknown fields are errors.
func decodeYAML[T any](data []byte) ([]T, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []T
	for i := 0; ; i++ {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if doc == nil {
			continue
		}
		js, err := json.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		jd := json.NewDecoder(bytes.NewReader(js))
		jd.DisallowUnknownFields()
		var v T
		if err := jd.Decode(&v); err != nil {
			return nil, fmt.Errorf("document %d: %s", i+1, strings.TrimPrefix(err.Error(), "json: "))
		}
		out = append(out, v)
	}
}
