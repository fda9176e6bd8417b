package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

const historyUsage = `Usage: lbctl history [FRONTEND|SERVICE] [flags]

Lists the recent changes of a running agent's frontends (its journal,
bounded by the agent's --history-max-bytes), oldest first: when, what
caused each (the source and the object: "k8s EndpointSlice shop/web-abc
resourceVersion 4711", "health 10.0.2.1:8080 breaker tripped", "kvstore
cluster2 stale"), what changed (backends added and removed, weights,
states, policy fields, overrides set or cleared), and what the reconciler
did with it (done and how long until the maps had it, or its error).
FRONTEND is an address (10.96.0.1:80/TCP), SERVICE a name (shop/web).`

// historyCmd lists (or follows, --watch) the agent's history.
func historyCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("history", historyUsage, stderr)
	apiURL := fs.String("api", defaultAPI, "The agent's HTTP API (its --api-addr)")
	dump := addDumpFlag(fs)
	output := addOutputFlag(fs, "one line per change")
	since := fs.Duration("since", 0, "Only the changes of the last DURATION (e.g. 10m); from a dump, before it was taken")
	watch := fs.Bool("watch", false, "After the changes so far, print new ones as they come (-o json: one object per line)")
	timeout := addTimeoutFlag(fs)
	positional, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	q := url.Values{}
	var keep historyFilter
	switch len(positional) {
	case 0:
	case 1:
		if keep, err = parseHistoryTarget(positional[0], q); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unexpected argument %q: one FRONTEND or SERVICE at most", positional[1])
	}
	if *since < 0 {
		return fmt.Errorf("--since %v: want a duration above 0", *since)
	}
	var c *agentClient
	if *dump != "" {
		if fs.Changed("api") || *watch {
			return errors.New("--dump reads an archive: give neither --api nor --watch with it")
		}
		if c, err = dumpClient(*dump); err != nil {
			return err
		}
		if *since > 0 {
			keep.since = c.archive.manifest.Created.Add(-*since)
		}
	} else {
		if c, err = newAgentClient(*apiURL, *timeout); err != nil {
			return err
		}
		if *since > 0 {
			q.Set("since", since.String())
		}
	}
	ans, err := getHistory(c, q)
	if err != nil {
		return err
	}
	recs := keep.apply(ans.Records)
	if !*watch {
		return printHistory(stdout, output.format, recs)
	}
	p := &historyStream{w: stdout, format: output.format}
	if err := p.print(recs); err != nil {
		return err
	}
	last := uint64(0)
	if n := len(ans.Records); n > 0 {
		last = ans.Records[n-1].Seq
	}
	// A long poll, each shorter than --timeout (the agent says nothing
	// while it waits).
	q.Del("since")
	q.Set("wait", (*timeout / 2).String())
	for {
		q.Set("after", strconv.FormatUint(last, 10))
		ans, err := getHistory(c, q)
		if err != nil {
			return err
		}
		if n := len(ans.Records); n > 0 {
			last = ans.Records[n-1].Seq
		}
		if err := p.print(ans.Records); err != nil {
			return err
		}
	}
}

// historyFilter is what a dump's records are filtered by (the agent
// filters its own).
type historyFilter struct {
	frontend lb.L3n4Addr
	service  lb.ServiceName
	since    time.Time
}

func (f historyFilter) apply(recs []tables.HistoryRecord) []tables.HistoryRecord {
	out := recs[:0]
	for _, r := range recs {
		if f.frontend.IsValid() && r.Frontend != f.frontend || f.service != (lb.ServiceName{}) && r.Service != f.service || r.Time.Before(f.since) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// parseHistoryTarget reads FRONTEND or SERVICE into the query.
func parseHistoryTarget(arg string, q url.Values) (historyFilter, error) {
	if addr, err := lb.ParseL3n4Addr(arg); err == nil {
		q.Set("frontend", addr.String())
		return historyFilter{frontend: addr}, nil
	}
	if strings.Contains(arg, "/") && !strings.Contains(arg, ":") {
		if name, err := lb.ParseServiceName(arg); err == nil {
			q.Set("service", name.String())
			return historyFilter{service: name}, nil
		}
	}
	return historyFilter{}, fmt.Errorf("%q: want a FRONTEND (10.96.0.1:80/TCP) or a SERVICE (namespace/name)", arg)
}

// getHistory reads the agent's (or the archive's) history answer.
func getHistory(c *agentClient, q url.Values) (*api.HistoryAnswer, error) {
	a, err := c.get(strings.TrimPrefix(api.HistoryPath, "/"), q, nil)
	if err != nil {
		if isStatus(err, 404) {
			return nil, fmt.Errorf("%w: the agent serves no history (its api.Agent has no History, or it is older)", err)
		}
		return nil, err
	}
	defer a.Close()
	var ans api.HistoryAnswer
	if err := json.NewDecoder(a).Decode(&ans); err != nil {
		return nil, a.err(fmt.Errorf("reading the history: %w", err))
	}
	return &ans, nil
}

// printHistory prints records as a table, a JSON array or YAML.
func printHistory(w io.Writer, format string, recs []tables.HistoryRecord) error {
	p := newRowPrinter[historyRow](w, format)
	for _, r := range recs {
		if err := p.print(historyRow(r)); err != nil {
			return err
		}
	}
	return p.end()
}

// historyStream prints records as --watch receives them: table rows
// (aligned per arrival), JSON lines, or YAML documents.
type historyStream struct {
	w      io.Writer
	format string
	header bool
}

func (p *historyStream) print(recs []tables.HistoryRecord) error {
	switch p.format {
	case formatJSON:
		enc := json.NewEncoder(p.w)
		for _, r := range recs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	case formatYAML:
		for _, r := range recs {
			data, err := yaml.Marshal(r)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(p.w, "---\n%s", data); err != nil {
				return err
			}
		}
		return nil
	}
	if len(recs) == 0 && p.header {
		return nil
	}
	tw := tabwriter.NewWriter(p.w, 0, 8, 2, ' ', 0)
	if !p.header {
		fmt.Fprintln(tw, strings.Join(historyRow{}.TableHeader(), "\t"))
		p.header = true
	}
	for _, r := range recs {
		fmt.Fprintln(tw, strings.Join(historyRow(r).TableRow(), "\t"))
	}
	return tw.Flush()
}

// historyRow prints a record as one line.
type historyRow tables.HistoryRecord

func (r historyRow) TableHeader() []string {
	return []string{"Time", "Frontend", "Service", "Cause", "Change", "Outcome"}
}

func (r historyRow) TableRow() []string {
	what := tables.HistoryRecord(r).What()
	change := r.Change
	if len(what) > 0 {
		change += ": " + strings.Join(what, ", ")
	}
	outcome := r.Outcome.State
	if r.Outcome.Latency > 0 {
		outcome += " in " + r.Outcome.Latency.Round(time.Microsecond).String()
	}
	if r.Outcome.Error != "" {
		outcome += " (" + r.Outcome.Error + ")"
	}
	return []string{r.Time.Local().Format("15:04:05.000"), r.Frontend.String(), r.Service.String(), r.Cause, change, outcome}
}
