package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/bpf"
)

// dumpFormat names lbctl dump's archives; dumpVersion is the version of
// their layout that this lbctl writes and the newest it reads. A layout
// change that an older lbctl would misread takes a new version.
const (
	dumpFormat  = "lbstate-dump"
	dumpVersion = 1
)

// The archive's entries (docs/lbctl.md, "lbctl dump"): the manifest comes
// first, so that a reader checks the version before anything else.
const (
	manifestEntry = "manifest.json"
	agentEntry    = "agent.json"        // GET /agent: version and flags
	mapsEntry     = "maps/dump.json"    // GET /maps: the maps' dump
	maglevEntry   = "maps/maglev.jsonl" // GET /maps/maglev: every Maglev table
	tablesDir     = "tables/"           // GET /statedb/dump, one file per table
	metricsEntry  = "metrics.txt"       // GET /metrics: Prometheus text format
	historyDir    = "history/"          // reserved: the journal of changes
)

// dumpManifest is manifest.json.
type dumpManifest struct {
	Format  string    `json:"format"`
	Version int       `json:"version"`
	Created time.Time `json:"created"`
	API     string    `json:"api"`
	// MonotonicSeconds is the datapath's clock (bpf.MonotonicSeconds)
	// when the dump was taken, on the host lbctl ran on: the clock of
	// lb_affinity's last-used times, which explain --dump reads them by.
	MonotonicSeconds uint32 `json:"monotonicSeconds"`
	// Tables are the tables of tables/, in the order the API served them.
	Tables []string `json:"tables"`
	// Missing says, per entry or directory that the archive lacks, why.
	Missing map[string]string `json:"missing,omitempty"`
}

// noHistory is why the archive has no history/ (format version 1).
const noHistory = "the agent keeps no journal of changes yet; a later format version fills history/"

// dumpAttemptsMaglev bounds how often lbctl dump reads the maps and their
// Maglev tables again when they changed between the two reads.
const dumpAttemptsMaglev = 3

func dumpCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dump", "Usage: lbctl dump -o FILE [flags]\n\nWrites one archive (tar.gz) of what a running agent holds: every table, the\nmaps' dump and every Maglev table, its version and flags, its metrics. Read it\nback with --dump FILE on frontends, services, backends, redirects, routes,\nmaps, explain and simulate. It holds no key, token or kubeconfig: flags\nthat name files are kept as names, and secret flags are redacted.", stderr)
	out := fs.StringP("output", "o", "", "The archive to write (required), e.g. node-a.lbdump.tar.gz")
	apiURL := fs.String("api", defaultAPI, "The agent's HTTP API (its --api-addr)")
	timeout := addTimeoutFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		fs.Usage()
		return errors.New("-o FILE is required: where to write the archive")
	}
	c, err := newAgentClient(*apiURL, *timeout)
	if err != nil {
		return err
	}
	start := time.Now()
	n, err := writeDump(c, *out, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d bytes in %v\n", *out, n, time.Since(start).Round(time.Millisecond))
	return nil
}

// writeDump reads the agent c talks to into an archive at path and
// returns its size. Each part is spooled to a temporary directory first:
// a tar header gives its entry's size, and the agent streams its answers.
func writeDump(c *agentClient, path string, stderr io.Writer) (int64, error) {
	spool, err := os.MkdirTemp("", "lbctl-dump-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(spool)
	m := &dumpManifest{Format: dumpFormat, Version: dumpVersion, Created: time.Now().UTC(), API: c.base.String(),
		MonotonicSeconds: bpf.MonotonicSeconds(), Missing: map[string]string{historyDir: noHistory}}

	// What is optional in an agent (an embedder may not mount it) is
	// said missing; what is not fails the dump.
	optional := func(entry string, err error) error {
		if isStatus(err, http.StatusNotFound) {
			m.Missing[entry] = "the agent does not serve it: " + err.Error()
			fmt.Fprintf(stderr, "lbctl dump: no %s: %v\n", entry, err)
			return nil
		}
		return err
	}
	if err := optional(agentEntry, spoolGet(c, "agent", filepath.Join(spool, agentEntry))); err != nil {
		return 0, err
	}
	if err := optional(mapsEntry, spoolMaps(c, spool)); err != nil {
		return 0, err
	}
	if _, gone := m.Missing[mapsEntry]; gone {
		m.Missing[maglevEntry] = m.Missing[mapsEntry]
	}
	if m.Tables, err = spoolTables(c, spool); err != nil {
		return 0, err
	}
	if err := optional(metricsEntry, spoolGet(c, "metrics", filepath.Join(spool, metricsEntry))); err != nil {
		return 0, err
	}
	if len(m.Missing) == 0 {
		m.Missing = nil
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(spool, manifestEntry), append(data, '\n'), 0o600); err != nil {
		return 0, err
	}
	entries := []string{manifestEntry, agentEntry, mapsEntry, maglevEntry}
	for _, t := range m.Tables {
		entries = append(entries, tablesDir+t+".json")
	}
	entries = append(entries, metricsEntry)
	return writeArchive(path, spool, entries)
}

// spoolGet writes the answer to GET path to file.
func spoolGet(c *agentClient, path, file string) error {
	a, err := c.get(path, nil, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	return writeFile(file, a)
}

// writeFile writes what r reads to a new file.
func writeFile(file string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// spoolMaps writes the maps' dump and every Maglev table, read again
// while the two reads disagree (the reconciler wrote between them).
func spoolMaps(c *agentClient, spool string) error {
	dumpFile, maglevFile := filepath.Join(spool, mapsEntry), filepath.Join(spool, maglevEntry)
	for attempt := 1; ; attempt++ {
		os.Remove(dumpFile)
		os.Remove(maglevFile)
		if err := spoolGet(c, mapsPath, dumpFile); err != nil {
			return err
		}
		consistent, err := spoolMaglev(c, dumpFile, maglevFile)
		if err != nil || consistent {
			return err
		}
		if attempt == dumpAttemptsMaglev {
			return fmt.Errorf("the agent's Maglev tables changed during each of %d reads of its maps; try again", dumpAttemptsMaglev)
		}
	}
}

// spoolMaglev writes every Maglev table to file, and says whether they
// are those the dump in dumpFile counts.
func spoolMaglev(c *agentClient, dumpFile, file string) (bool, error) {
	var d bpf.Dump
	if err := readJSONFile(dumpFile, &d); err != nil {
		return false, fmt.Errorf("the agent's maps: %w", err)
	}
	want := make(map[uint32]bpf.MaglevEntry, len(d.Maglev))
	for _, e := range d.Maglev {
		want[e.RevNatID] = e
	}
	a, err := c.get(strings.TrimPrefix(api.MaglevTablesPath, "/"), nil, nil)
	if err != nil {
		return false, err
	}
	defer a.Close()
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return false, err
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	dec := json.NewDecoder(a)
	consistent := true
	for n := 0; ; n++ {
		var line json.RawMessage
		if err := dec.Decode(&line); err == io.EOF {
			consistent = consistent && n == len(want)
			break
		} else if err != nil {
			return false, fmt.Errorf("reading the agent's Maglev tables: %w", err)
		}
		var t api.MaglevTable
		if err := json.Unmarshal(line, &t); err != nil {
			return false, fmt.Errorf("reading the agent's Maglev tables: %w", err)
		}
		if e, ok := want[t.RevNatID]; !ok || e.Matches(t.Table) != nil {
			consistent = false
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return false, err
	}
	return consistent, f.Close()
}

// spoolTables writes each table of the agent's /statedb/dump (one read
// transaction: the tables agree with each other) to tables/NAME.json, a
// JSON array of its objects as the API served them, and returns the
// tables' names.
func spoolTables(c *agentClient, spool string) ([]string, error) {
	a, err := c.get("statedb/dump", nil, nil)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(a, 1<<20))
	bad := func(err error) error { return fmt.Errorf("reading the agent's tables: %w", err) }
	if err := expectDelim(dec, '{'); err != nil {
		return nil, bad(err)
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad(err)
		}
		name, ok := tok.(string)
		if !ok || name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
			return nil, bad(fmt.Errorf("a table named %v", tok))
		}
		if err := spoolTable(dec, filepath.Join(spool, tablesDir, name+".json")); err != nil {
			return nil, bad(fmt.Errorf("table %s: %w", name, err))
		}
		names = append(names, name)
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, bad(err)
	}
	return names, nil
}

// spoolTable copies one table's array of objects from dec to file.
func spoolTable(dec *json.Decoder, file string) error {
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("[")
	sep := "\n"
	for dec.More() {
		var obj json.RawMessage
		if err := dec.Decode(&obj); err != nil {
			return err
		}
		w.WriteString(sep)
		w.Write(obj)
		sep = ",\n"
	}
	w.WriteString("\n]\n")
	if err := expectDelim(dec, ']'); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("want %v, got %v", want, tok)
	}
	return nil
}

func readJSONFile(file string, v any) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return json.NewDecoder(bufio.NewReader(f)).Decode(v)
}

// writeArchive writes the spooled entries that exist, in order, as a
// tar.gz at path (through a temporary file: a failed dump leaves none),
// and returns its size.
func writeArchive(path, spool string, entries []string) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".lbctl-dump-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is none
	bw := bufio.NewWriterSize(tmp, 1<<20)
	// Speed over size: a dump is taken when something is wrong, and
	// JSON compresses well at any level.
	zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Compact(entries) {
		if err := addEntry(tw, spool, name); errors.Is(err, os.ErrNotExist) {
			continue // missing, as the manifest says
		} else if err != nil {
			tmp.Close()
			return 0, err
		}
	}
	err = tw.Close()
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(tmp.Name())
	if err != nil {
		return 0, err
	}
	return fi.Size(), os.Rename(tmp.Name(), path)
}

func addEntry(tw *tar.Writer, spool, name string) error {
	f, err := os.Open(filepath.Join(spool, name))
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: name, Mode: 0o600, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
