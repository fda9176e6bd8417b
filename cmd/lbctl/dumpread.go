package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/statedb"
	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// dumpArchive is an archive lbctl dump wrote, read in place of the agent:
// each request of the read API that lbctl makes is answered from it.
type dumpArchive struct {
	path     string
	manifest dumpManifest
}

// addDumpFlag registers --dump on a command that reads an agent.
func addDumpFlag(fs *pflag.FlagSet) *string {
	return fs.String("dump", "", "Read an archive of lbctl dump instead of a running agent, offline")
}

// openDump opens the archive at path and checks its manifest.
func openDump(path string) (*dumpArchive, error) {
	a := &dumpArchive{path: path}
	r, err := a.open(manifestEntry)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := json.NewDecoder(r).Decode(&a.manifest); err != nil {
		return nil, fmt.Errorf("--dump %s: %s: %w", path, manifestEntry, err)
	}
	switch m := a.manifest; {
	case m.Format != dumpFormat:
		return nil, fmt.Errorf("--dump %s: format %q, want %q (not an archive of lbctl dump)", path, m.Format, dumpFormat)
	case m.Version < 1 || m.Version > dumpVersion:
		return nil, fmt.Errorf("--dump %s: layout version %d; this lbctl reads versions 1 to %d (a newer lbctl wrote it)", path, m.Version, dumpVersion)
	}
	return a, nil
}

// dumpClient is a client of the agent that the archive at path holds.
func dumpClient(path string) (*agentClient, error) {
	a, err := openDump(path)
	if err != nil {
		return nil, err
	}
	return &agentClient{base: &url.URL{Scheme: "file", Path: path}, archive: a}, nil
}

// entryReader is one entry of the archive.
type entryReader struct {
	io.Reader
	f *os.File
}

func (r *entryReader) Close() error { return r.f.Close() }

// open returns the entry name. A tar.gz is read from its start: the
// entries a command reads most (maps, then tables) come early.
func (a *dumpArchive) open(name string) (io.ReadCloser, error) {
	f, err := os.Open(a.path)
	if err != nil {
		return nil, fmt.Errorf("--dump: %w", err)
	}
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("--dump %s: not a tar.gz of lbctl dump: %w", a.path, err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			f.Close()
			why := "lbctl dump did not write it"
			if w, ok := a.manifest.Missing[name]; ok {
				why = w
			} else if w, ok := a.manifest.Missing[historyDir]; ok && strings.HasPrefix(name, historyDir) {
				why = w // version 1: the directory was reserved
			}
			return nil, &missingEntryError{path: a.path, name: name, why: why}
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("--dump %s: %w", a.path, err)
		}
		if hdr.Name == name {
			return &entryReader{Reader: tr, f: f}, nil
		}
	}
}

// missingEntryError is an entry that the archive lacks.
type missingEntryError struct{ path, name, why string }

func (e *missingEntryError) Error() string {
	return fmt.Sprintf("the dump %s has no %s: %s", e.path, e.name, e.why)
}

// get answers a request of the read API (agentClient.get) from the
// archive.
func (a *dumpArchive) get(path string, query url.Values, body []byte) (*answer, error) {
	var (
		r   io.ReadCloser
		err error
	)
	switch {
	case strings.HasPrefix(path, rowsPath):
		r, err = a.rows(strings.TrimPrefix(path, rowsPath), query)
	case path == mapsPath && len(query["maglev"]) > 0:
		r, err = a.mapsWithTables(query["maglev"])
	case path == mapsPath:
		r, err = a.open(mapsEntry)
	case path == strings.TrimPrefix(api.MaglevTablesPath, "/"):
		r, err = a.open(maglevEntry)
	case path == "agent":
		r, err = a.open(agentEntry)
	case path == "metrics":
		r, err = a.open(metricsEntry)
	case path == "history":
		r, err = a.open(historyEntry)
	case strings.HasPrefix(path, "statedb/changes/"):
		err = errors.New("a dump does not change: drop --watch")
	default:
		err = fmt.Errorf("the dump %s cannot answer %s", a.path, path)
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &answer{body: r, ctx: ctx, cancel: cancel}, nil
}

// rows answers a read of a table's rows (api.RowsPath), as lbctl's
// commands make them: the whole table, in the order the archive holds it
// (its primary index's).
func (a *dumpArchive) rows(table string, query url.Values) (io.ReadCloser, error) {
	if len(query) > 0 {
		return nil, fmt.Errorf("the dump %s answers reads of whole tables only", a.path)
	}
	return a.table(table)
}

// table answers with every object of table, one query response each.
func (a *dumpArchive) table(table string) (io.ReadCloser, error) {
	if !slices.Contains(a.manifest.Tables, table) {
		return nil, &statusError{url: a.path, status: "404 Not Found", code: 404,
			msg: fmt.Sprintf("no table %q in the dump (it has %s)", table, strings.Join(a.manifest.Tables, ", "))}
	}
	r, err := a.open(tablesDir + table + ".json")
	if err != nil {
		return nil, err
	}
	// The objects, one query response each, as the API streams them.
	pr, pw := io.Pipe()
	go func() {
		defer r.Close()
		pw.CloseWithError(tableAsQuery(r, pw))
	}()
	return pr, nil
}

// tableAsQuery writes the JSON array of objects that r reads as lines of
// statedb.QueryResponse.
func tableAsQuery(r io.Reader, w io.Writer) error {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	for dec.More() {
		var obj json.RawMessage
		if err := dec.Decode(&obj); err != nil {
			return err
		}
		if err := enc.Encode(statedb.QueryResponse{Obj: obj}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// mapsWithTables answers a request for the maps' dump with the Maglev
// tables of ids (bpf.DumpWithTables), as the agent's DumpHandler does.
func (a *dumpArchive) mapsWithTables(ids []string) (io.ReadCloser, error) {
	var d bpf.DumpWithTables
	if err := a.readJSON(mapsEntry, &d); err != nil {
		return nil, err
	}
	want := map[uint32]bool{}
	for _, s := range ids {
		id, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("maglev=%q: want a rev-NAT ID", s)
		}
		want[uint32(id)] = true
	}
	d.MaglevTables = map[uint32][]uint32{}
	r, err := a.open(maglevEntry)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	dec := json.NewDecoder(r)
	for {
		var t api.MaglevTable
		if err := dec.Decode(&t); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("the dump %s: %s: %w", a.path, maglevEntry, err)
		}
		if want[t.RevNatID] {
			d.MaglevTables[t.RevNatID] = t.Table
		}
	}
	data, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (a *dumpArchive) readJSON(name string, v any) error {
	r, err := a.open(name)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := json.NewDecoder(r).Decode(v); err != nil {
		return fmt.Errorf("the dump %s: %s: %w", a.path, name, err)
	}
	return nil
}

// rebaseAffinity moves the last-used times of d's affinity pins from the
// dump's clock to this host's, keeping each pin's age: explain then
// judges a pin's expiry as it would have when the dump was taken. The
// clock is unsigned and wraps, and so does the arithmetic.
func (a *dumpArchive) rebaseAffinity(d *bpf.DumpWithTables) {
	shift := bpf.MonotonicSeconds() - a.manifest.MonotonicSeconds
	for i := range d.Affinity {
		d.Affinity[i].LastUsed += shift
	}
}

// client is the client of the agent, or of the archive with --dump.
func (s *mapsSource) client() (*agentClient, error) {
	if *s.dumpFile == "" {
		return newAgentClient(s.api, *s.timeout)
	}
	c, err := dumpClient(*s.dumpFile)
	if err == nil {
		s.archive = c.archive
	}
	return c, err
}

// simulateDump prints what simulate prints for the agent an archive
// holds: its frontends joined with its maps, as they were, where
// simulate -f computes them from manifests.
func simulateDump(fs *pflag.FlagSet, offline *pipelineFlags, path string, showMaps bool, format string, stdout io.Writer) error {
	if offline.given() {
		return errors.New("give -f DIR or --dump FILE, not both")
	}
	if err := offline.unused(); err != nil {
		return fmt.Errorf("%w; --dump reads what the agent used", err)
	}
	c, err := dumpClient(path)
	if err != nil {
		return err
	}
	var fes []*lb.Frontend
	err = eachRow(c, tables.FrontendsTableName, func(fe *lb.Frontend) error {
		fes = append(fes, fe)
		return nil
	})
	if err != nil {
		return err
	}
	var d bpf.Dump
	if err := c.archive.readJSON(mapsEntry, &d); err != nil {
		return err
	}
	return printSimulation(stdout, buildViews(slices.Values(fes), &d), &d, showMaps, format)
}
