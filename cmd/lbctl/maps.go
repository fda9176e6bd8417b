package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// defaultPinDir is where the agent pins its maps by default.
var defaultPinDir = bpf.DefaultConfig.LBPinDir

// mapsPath is where an agent serves bpf.DumpHandler, under its API.
const mapsPath = "maps"

// mapsSource is where maps and explain read an agent's maps: the pinned
// maps themselves, or the dump the agent serves over its API, which is all
// there is of in-memory maps and all a user without the privileges for BPF
// maps may read.
type mapsSource struct {
	fs       *pflag.FlagSet
	pinDir   string
	api      string
	timeout  *time.Duration
	dumpFile *string      // --dump: an archive of lbctl dump
	archive  *dumpArchive // opened from dump
}

func addSourceFlags(fs *pflag.FlagSet) *mapsSource {
	s := &mapsSource{fs: fs}
	fs.StringVar(&s.pinDir, "lb-pin-dir", defaultPinDir, "Read the maps pinned here (the agent's --lb-pin-dir); the default when they are there")
	fs.StringVar(&s.api, "api", defaultAPI, "Else read the maps' dump from the agent's HTTP API (its --api-addr)")
	s.dumpFile = addDumpFlag(fs)
	s.timeout = addTimeoutFlag(fs)
	return s
}

// pinned says whether to read pinned maps: the ones the user chose, else
// pinned maps when they are there.
func (s *mapsSource) pinned() (bool, error) {
	pinSet, apiSet := s.fs.Changed("lb-pin-dir"), s.fs.Changed("api")
	switch {
	case *s.dumpFile != "" && (pinSet || apiSet):
		return false, errors.New("--dump reads an archive: drop --lb-pin-dir and --api")
	case *s.dumpFile != "":
		return false, nil
	case pinSet && apiSet:
		return false, errors.New("give --lb-pin-dir or --api, not both")
	case pinSet || apiSet:
		return pinSet, nil
	}
	_, err := os.Stat(filepath.Join(s.pinDir, "lb_services"))
	return err == nil, nil
}

// dump reads the maps' dump.
func (s *mapsSource) dump() (*bpf.Dump, error) {
	pinned, err := s.pinned()
	if err != nil {
		return nil, err
	}
	if pinned {
		m, err := s.openPinned()
		if err != nil {
			return nil, err
		}
		defer m.Close()
		return bpf.TakeDump(m)
	}
	d, err := s.fetch()
	if err != nil {
		return nil, err
	}
	return &d.Dump, nil
}

// mapsFor returns maps to walk for a flow to fe. Close them when done.
func (s *mapsSource) mapsFor(fe lb.L3n4Addr) (*bpf.Maps, error) {
	pinned, err := s.pinned()
	if err != nil {
		return nil, err
	}
	if pinned {
		return s.openPinned()
	}
	d, err := s.fetch()
	if err != nil {
		return nil, err
	}
	// The dump only counts the slots of each Maglev table; one flow's
	// backend is in fe's whole table.
	for _, e := range d.Services {
		if e.Frontend == fe && e.Slot == 0 && e.Algorithm == bpf.AlgorithmMaglev {
			if d, err = s.fetch(e.RevNatID); err != nil {
				return nil, err
			}
			break
		}
	}
	if s.archive != nil {
		s.archive.rebaseAffinity(d)
	}
	return loadDump(d)
}

func (s *mapsSource) openPinned() (*bpf.Maps, error) {
	m, err := bpf.OpenPinnedMaps(s.pinDir)
	if err != nil && !s.fs.Changed("lb-pin-dir") {
		return nil, fmt.Errorf("%w; or read the agent's dump with --api", err)
	}
	return m, err
}

// fetch reads the dump the agent serves, with the Maglev tables of
// maglevIDs.
func (s *mapsSource) fetch(maglevIDs ...uint32) (*bpf.DumpWithTables, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	base := c.base
	q := url.Values{}
	for _, id := range maglevIDs {
		q.Add("maglev", strconv.FormatUint(uint64(id), 10))
	}
	a, err := c.get(mapsPath, q, nil)
	switch {
	case errors.As(err, new(*noAgentError)) && !s.fs.Changed("api"):
		return nil, fmt.Errorf("no pinned maps in %s and no agent at %s: start the agent (%s) or give --lb-pin-dir / --api",
			s.pinDir, base, startAgent)
	case isStatus(err, http.StatusNotFound):
		return nil, fmt.Errorf("the agent at %s does not serve its maps at /%s: read its pinned maps with --lb-pin-dir", base, mapsPath)
	case err != nil:
		return nil, err
	}
	defer a.Close()
	var d bpf.DumpWithTables
	if err := json.NewDecoder(a).Decode(&d); err != nil {
		return nil, fmt.Errorf("agent at %s: reading its maps: %w", base, err)
	}
	return &d, nil
}

// loadDump returns in-memory maps holding d, just large enough.
func loadDump(d *bpf.DumpWithTables) (*bpf.Maps, error) {
	cfg := bpf.DefaultConfig
	for _, table := range d.MaglevTables {
		cfg.LBMaglevTableSize = uint32(len(table))
	}
	size := func(n int) uint32 { return uint32(max(n, 1)) }
	cfg.LBBackendsMax, cfg.LBMaglevMax, cfg.LBRevNatMax = size(len(d.Backends)), size(len(d.Maglev)), size(len(d.RevNat))
	cfg.LBServicesMax, cfg.LBSourceRangesMax, cfg.LBAffinityMax = size(len(d.Services)), size(len(d.SourceRanges)), size(len(d.Affinity))
	m, err := bpf.NewMemoryMaps(cfg, nil)
	if err != nil {
		return nil, err
	}
	if err := bpf.LoadDump(m, &d.Dump, d.MaglevTables); err != nil {
		return nil, fmt.Errorf("%w; run again", err)
	}
	return m, nil
}

// mapsCmd dumps an agent's maps.
func mapsCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("maps", "Usage: lbctl maps [flags]\n\nDumps an agent's maps: the pinned ones when --lb-pin-dir has them (reading\nthem takes the privileges for BPF maps), else the dump the agent serves\nunder --api.", stderr)
	src := addSourceFlags(fs)
	output := addOutputFlag(fs, "one sorted line per entry; text is its old name")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	d, err := src.dump()
	if err != nil {
		return err
	}
	switch output.format {
	case formatJSON:
		return d.WriteJSON(stdout)
	case formatYAML:
		return writeYAML(stdout, d)
	}
	return d.WriteText(stdout)
}
