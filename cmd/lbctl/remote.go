package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/cilium/statedb"
	"go.yaml.in/yaml/v3"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

const defaultAPI = "http://127.0.0.1:9811/statedb"

type row interface {
	TableHeader() []string
	TableRow() []string
}

// remoteTableCmd lists (and with --watch, follows) one table of a running
// agent.
func remoteTableCmd[Obj row](table string, all statedb.Query[Obj]) func(args []string, stdout, stderr io.Writer) error {
	return func(args []string, stdout, stderr io.Writer) error {
		fs := newFlags(table, fmt.Sprintf("Usage: lbctl %s [flags]\n\nLists the %s table of a running agent.", table, table), stderr)
		api := fs.String("api", defaultAPI, "The agent's StateDB HTTP API")
		output := fs.String("o", "table", "Output format: table, json or yaml")
		watch := fs.Bool("watch", false, "Follow changes: print each changed row (deleted rows with '-')")
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if *output != "table" && *output != "json" && *output != "yaml" {
			return fmt.Errorf("-o %q: want table, json or yaml", *output)
		}
		base, err := url.Parse(*api)
		if err != nil || base.Scheme == "" || base.Host == "" {
			return fmt.Errorf("--api %q: want a URL such as %s", *api, defaultAPI)
		}
		remote := statedb.NewRemoteTable[Obj](base, table)
		ctx := context.Background()
		if *watch {
			return watchTable(ctx, remote, table, *api, stdout)
		}
		objs, errs := remote.LowerBound(ctx, all)
		var list []Obj
		if objs != nil { // nil when the request failed
			for obj := range objs {
				list = append(list, obj)
			}
		}
		if err := <-errs; err != nil {
			return fmt.Errorf("reading %s from %s (is the agent running? --api): %w", table, *api, err)
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

func watchTable[Obj row](ctx context.Context, remote *statedb.RemoteTable[Obj], table, api string, w io.Writer) error {
	changes, errs := remote.Changes(ctx)
	if changes == nil { // the request failed
		return fmt.Errorf("watching %s at %s (is the agent running? --api): %w", table, api, <-errs)
	}
	for change := range changes {
		mark := " "
		if change.Deleted {
			mark = "-"
		}
		fmt.Fprintf(w, "%s %s\n", mark, strings.Join(change.Object.TableRow(), "  "))
	}
	if err := <-errs; err != nil {
		return fmt.Errorf("watching %s at %s: %w", table, api, err)
	}
	return nil
}

// maps dumps the maps pinned by an agent.
func mapsCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("maps", "Usage: lbctl maps [flags]\n\nDumps an agent's pinned maps (needs the privileges to read BPF maps).", stderr)
	pinDir := fs.String("pin-dir", bpf.DefaultConfig.LBPinDir, "Where the agent pinned its maps (its --lb-pin-dir)")
	output := fs.String("o", "text", "Output format: text (one sorted line per entry) or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := bpf.OpenPinnedMaps(*pinDir)
	if err != nil {
		return err
	}
	defer m.Close()
	d, err := bpf.TakeDump(m)
	if err != nil {
		return err
	}
	switch *output {
	case "text":
		return d.WriteText(stdout)
	case "json":
		return d.WriteJSON(stdout)
	}
	return fmt.Errorf("-o %q: want text or json", *output)
}

var (
	servicesCmd  = remoteTableCmd[*lb.Service](tables.ServicesTableName, tables.ServiceByName.Query(lb.ServiceName{}))
	frontendsCmd = remoteTableCmd[*lb.Frontend](tables.FrontendsTableName, tables.FrontendByAddress.Query(lb.L3n4Addr{}))
	backendsCmd  = remoteTableCmd[*lb.Backend](tables.BackendsTableName, tables.BackendByAddress.Query(lb.L3n4Addr{}))
)
