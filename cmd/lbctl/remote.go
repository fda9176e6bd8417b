package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/cilium/statedb"
	"go.yaml.in/yaml/v3"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// defaultAPI is where the example agent serves its API (its --api-addr).
var defaultAPI = "http://127.0.0.1:9811"

// startAgent is how to start an agent to look at.
const startAgent = "go run ./examples/agent --manifests examples/demo"

// agentURL parses --api: the agent's base URL, under which it serves
// StateDB at /statedb and the maps' dump at /maps. A bare host:port (its
// --api-addr) means http, and a URL ending in /statedb, which is what
// --api once was, means its base.
func agentURL(api string) (*url.URL, error) {
	raw := api
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("--api %q: want the agent's URL, such as %s", api, defaultAPI)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/statedb")
	return u, nil
}

// agentError says what to do when the agent at base did not answer.
func agentError(base *url.URL, err error) error {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return fmt.Errorf("no agent at %s: start one (%s) or give its --api", base, startAgent)
	}
	return fmt.Errorf("agent at %s: %w (is --api the agent's address?)", base, err)
}

type row interface {
	TableHeader() []string
	TableRow() []string
}

// remoteTableCmd lists (and with --watch, follows) one table of a running
// agent.
func remoteTableCmd[Obj row](table string, all statedb.Query[Obj]) func(args []string, stdout, stderr io.Writer) error {
	return func(args []string, stdout, stderr io.Writer) error {
		fs := newFlags(table, fmt.Sprintf("Usage: lbctl %s [flags]\n\nLists the %s table of a running agent.", table, table), stderr)
		api := fs.String("api", defaultAPI, "The agent's HTTP API (its --api-addr)")
		output := fs.StringP("output", "o", "table", "Output format: table, json or yaml")
		watch := fs.BoolP("watch", "w", false, "Follow changes: print each changed row (deleted rows with '-')")
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if *output != "table" && *output != "json" && *output != "yaml" {
			return fmt.Errorf("-o %q: want table, json or yaml", *output)
		}
		base, err := agentURL(*api)
		if err != nil {
			return err
		}
		remote := statedb.NewRemoteTable[Obj](base.JoinPath("statedb"), table)
		ctx := context.Background()
		if *watch {
			return watchTable(ctx, remote, base, stdout)
		}
		objs, errs := remote.LowerBound(ctx, all)
		var list []Obj
		if objs != nil { // nil when the request failed
			for obj := range objs {
				list = append(list, obj)
			}
		}
		if err := <-errs; err != nil {
			return agentError(base, err)
		}
		return printObjects(stdout, list, *output)
	}
}

func printObjects[Obj row](w io.Writer, objs []Obj, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if objs == nil {
			objs = []Obj{}
		}
		return enc.Encode(objs)
	case "yaml":
		return yaml.NewEncoder(w).Encode(objs)
	case "table":
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		var zero Obj // the header does not depend on the object
		fmt.Fprintln(tw, strings.Join(zero.TableHeader(), "\t"))
		for _, o := range objs {
			fmt.Fprintln(tw, strings.Join(o.TableRow(), "\t"))
		}
		return tw.Flush()
	}
	return fmt.Errorf("-o %q: want table, json or yaml", format)
}

func watchTable[Obj row](ctx context.Context, remote *statedb.RemoteTable[Obj], base *url.URL, w io.Writer) error {
	changes, errs := remote.Changes(ctx)
	if changes == nil { // the request failed
		return agentError(base, <-errs)
	}
	for change := range changes {
		mark := " "
		if change.Deleted {
			mark = "-"
		}
		fmt.Fprintf(w, "%s %s\n", mark, strings.Join(change.Object.TableRow(), "  "))
	}
	if err := <-errs; err != nil {
		return fmt.Errorf("watching the agent at %s: %w (run again once it is back)", base, err)
	}
	return nil
}

var (
	servicesCmd  = remoteTableCmd[*lb.Service](tables.ServicesTableName, tables.ServiceByName.Query(lb.ServiceName{}))
	frontendsCmd = remoteTableCmd[*lb.Frontend](tables.FrontendsTableName, tables.FrontendByAddress.Query(lb.L3n4Addr{}))
	backendsCmd  = remoteTableCmd[*lb.Backend](tables.BackendsTableName, tables.BackendByAddress.Query(lb.L3n4Addr{}))
)
