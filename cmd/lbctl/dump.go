package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/bpf"
)

// dumpFormat names lbctl dump's archives; dumpVersion is the version of
// their layout that this lbctl writes and the newest it reads. A layout
// change that an older lbctl would misread takes a new version.
const (
	dumpFormat  = "lbstate-dump"
	dumpVersion = 2 // 2: history/ holds the journal of changes
)

// The archive's entries (docs/lbctl.md, "lbctl dump"): the manifest comes
// first, so that a reader checks the version before anything else.
const (
	manifestEntry = "manifest.json"
	agentEntry    = "agent.json"                // GET /agent: version and flags
	mapsEntry     = "maps/dump.json"            // GET /maps: the maps' dump
	maglevEntry   = "maps/maglev.jsonl"         // GET /maps/maglev: every Maglev table
	tablesDir     = "tables/"                   // GET /statedb/dump, one file per table
	metricsEntry  = "metrics.txt"               // GET /metrics: Prometheus text format
	historyDir    = "history/"                  // the journal of changes
	historyEntry  = historyDir + "history.json" // GET /history: every record the agent keeps (version 2)
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

// noHistory is why an archive of format version 1 has no history/ (its
// manifest says so).
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
		MonotonicSeconds: bpf.MonotonicSeconds(), Missing: map[string]string{}}

	// The parts are read at once: most of the time is the agent's,
	// encoding its answers, and an agent has more than one core.
	var (
		wg    sync.WaitGroup
		names []string
	)
	errs := make([]error, 5)
	for i, part := range []func() error{
		func() error { return spoolGet(c, "agent", filepath.Join(spool, agentEntry)) },
		func() error { return spoolMaps(c, spool) },
		func() (err error) { names, err = spoolTables(c, spool); return err },
		func() error { return spoolGet(c, "metrics", filepath.Join(spool, metricsEntry)) },
		func() error { return spoolGet(c, "history", filepath.Join(spool, historyEntry)) },
	} {
		wg.Go(func() { errs[i] = part() })
	}
	wg.Wait()
	m.Tables = names
	// What is optional in an agent (an embedder may not mount it) is
	// said missing; what is not fails the dump.
	for i, entry := range []string{agentEntry, mapsEntry, "", metricsEntry, historyEntry} {
		switch err := errs[i]; {
		case err == nil:
		case entry != "" && isStatus(err, http.StatusNotFound):
			m.Missing[entry] = "the agent does not serve it: " + err.Error()
			fmt.Fprintf(stderr, "lbctl dump: no %s: %v\n", entry, err)
		default:
			return 0, err
		}
	}
	if _, gone := m.Missing[mapsEntry]; gone {
		m.Missing[maglevEntry] = m.Missing[mapsEntry]
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
	if _, gone := m.Missing[historyEntry]; !gone {
		entries = append(entries, historyEntry)
	}
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
	f, err := createFile(file)
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
	entries, err := maglevEntries(dumpFile)
	if err != nil {
		return false, fmt.Errorf("the agent's maps: %w", err)
	}
	want := make(map[uint32]bpf.MaglevEntry, len(entries))
	for _, e := range entries {
		want[e.RevNatID] = e
	}
	a, err := c.get(strings.TrimPrefix(api.MaglevTablesPath, "/"), nil, nil)
	if err != nil {
		return false, err
	}
	defer a.Close()
	f, err := createFile(file)
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
// tables' names. It splits the answer by lines, in the layout of
// StateDB's WriteJSON (one object a line): decoding a million objects
// only to copy them took longer than the rest of the dump.
func spoolTables(c *agentClient, spool string) ([]string, error) {
	a, err := c.get("statedb/dump", nil, nil)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	r := bufio.NewReaderSize(a, 1<<20)
	var (
		names []string
		table *bufio.Writer
		file  *os.File
		sep   string
		line  []byte
	)
	defer func() {
		if file != nil {
			file.Close()
		}
	}()
	for n := 1; ; n++ {
		line, err = readLine(r, line[:0])
		if err == io.EOF && len(line) == 0 {
			return nil, errors.New("reading the agent's tables: the answer ends early")
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("reading the agent's tables: %w", err)
		}
		bad := func(why string) error {
			return fmt.Errorf("reading the agent's tables: line %d (%.80q): %s, not the layout of StateDB's dump", n, line, why)
		}
		switch {
		case n == 1:
			if string(line) != "{" && string(line) != "{}" {
				return nil, bad("want {")
			}
			if string(line) == "{}" {
				return names, nil
			}
		case table == nil && string(line) == "}":
			return names, nil
		case table == nil:
			var name string
			quoted, ok := strings.CutSuffix(strings.TrimSpace(string(line)), ": [")
			if !ok || json.Unmarshal([]byte(quoted), &name) != nil {
				return nil, bad(`want "TABLE": [`)
			}
			if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
				return nil, bad("a table named " + quoted)
			}
			if file, err = createFile(filepath.Join(spool, tablesDir, name+".json")); err != nil {
				return nil, err
			}
			table, sep = bufio.NewWriterSize(file, 1<<20), "\n"
			table.WriteString("[")
			names = append(names, name)
		case string(line) == "  ]" || string(line) == "  ],":
			table.WriteString("\n]\n")
			if err := table.Flush(); err != nil {
				return nil, err
			}
			if err := file.Close(); err != nil {
				return nil, err
			}
			table, file = nil, nil
		default:
			obj := bytes.TrimSuffix(bytes.TrimPrefix(line, []byte("    ")), []byte(","))
			if len(obj) == 0 || obj[0] == ' ' {
				return nil, bad("want an object")
			}
			table.WriteString(sep)
			table.Write(obj)
			sep = ",\n"
		}
		if err == io.EOF {
			return nil, errors.New("reading the agent's tables: the answer ends early")
		}
	}
}

// readLine appends the next line of r, without its newline, to buf.
func readLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		part, err := r.ReadSlice('\n')
		buf = append(buf, part...)
		if err != bufio.ErrBufferFull {
			return bytes.TrimSuffix(buf, []byte("\n")), err
		}
	}
}

// createFile creates file, and its directory.
func createFile(file string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
}

// maglevEntries reads the Maglev entries of the maps' dump in file. It
// finds their lines in the dump's indented layout (bpf.Dump.WriteJSON)
// and decodes those only: decoding the whole dump, a million backends,
// took seconds. A dump in another layout is decoded whole.
func maglevEntries(file string) ([]bpf.MaglevEntry, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var (
		section []byte
		line    []byte
		in      bool
	)
	for {
		line, err = readLine(r, line[:0])
		if err != nil && err != io.EOF {
			return nil, err
		}
		switch s := string(line); {
		case !in && (s == `  "maglev": null,` || s == `  "maglev": [],`):
			return nil, nil
		case !in && s == `  "maglev": [`:
			in, section = true, append(section, '[')
		case in && (s == "  ]," || s == "  ]"):
			var entries []bpf.MaglevEntry
			err := json.Unmarshal(append(section, ']'), &entries)
			return entries, err
		case in:
			section = append(section, line...)
		}
		if err == io.EOF {
			break
		}
	}
	var d struct {
		Maglev []bpf.MaglevEntry `json:"maglev"`
	}
	if err := readJSONFile(file, &d); err != nil {
		return nil, err
	}
	return d.Maglev, nil
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
// and returns its size. Each entry is compressed on its own, a core
// each, into a gzip member of its own: members one after another are
// one gzip stream (RFC 1952), which tar, gzip and Go's gzip.Reader read
// as a whole, and the tar inside is the same.
func writeArchive(path, spool string, entries []string) (int64, error) {
	entries = slices.Compact(entries)
	members := make([]string, len(entries))
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for i, name := range entries {
		members[i] = filepath.Join(spool, fmt.Sprintf(".member-%d.gz", i))
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			errs[i] = compressEntry(members[i], spool, name)
		})
	}
	wg.Wait()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".lbctl-dump-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is none
	for i, member := range members {
		if errors.Is(errs[i], os.ErrNotExist) {
			continue // missing, as the manifest says
		}
		if err == nil {
			err = errs[i]
		}
		if err == nil {
			err = appendFile(tmp, member)
		}
	}
	if err == nil { // the tar's end, a member of its own
		zw, _ := gzip.NewWriterLevel(tmp, gzip.BestSpeed)
		if err = tar.NewWriter(zw).Close(); err == nil {
			err = zw.Close()
		}
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

// compressEntry writes the spooled entry name, as a tar entry (header,
// content, padding: no end of archive), gzipped into member.
func compressEntry(member, spool, name string) error {
	f, err := os.Open(filepath.Join(spool, name))
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(member, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	bw := bufio.NewWriterSize(out, 1<<20)
	// Speed over size: a dump is taken when something is wrong, and
	// JSON compresses well at any level.
	zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{Name: name, Mode: 0o600, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil { // pads the entry; Close would end the archive
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return out.Close()
}

// appendFile copies file to the end of w.
func appendFile(w io.Writer, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
