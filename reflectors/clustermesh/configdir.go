package clustermesh

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbstate/lbstate/internal/boundedfile"
	"github.com/lbstate/lbstate/internal/dirfollow"

	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

const (
	// configDebounce is how long the directory is left to settle after
	// an event (a Secret update swaps several links).
	configDebounce = 100 * time.Millisecond
	// configPoll is how often the directory is read anyway: certificates
	// it names live elsewhere and change without an event here.
	configPoll = 5 * time.Second
)

func newConfigDir(dir string, cfg Config, im *Importer, src *reflectors.Source) *configDir {
	return &configDir{dir: dir, cfg: cfg, im: im, src: src, acted: map[string][32]byte{}, bad: map[string][32]byte{},
		links: dirfollow.Links{Log: src.Log(), What: "the clustermesh config directory"}}
}

// configDir follows --clustermesh-config: a file per remote cluster,
// named by the cluster. A file added connects its cluster, changed (or
// a file it names changed) reconnects it, removed disconnects it and
// removes its backends at once.
type configDir struct {
	dir   string
	cfg   Config
	im    *Importer
	src   *reflectors.Source
	acted map[string][32]byte // the version of each file last acted on
	bad   map[string][32]byte // the content of each bad file reported
	links dirfollow.Links     // dangling links, logged
}

// load reads the directory. A file that cannot be read or parsed is
// reported and left as it was acted on before.
func (d *configDir) load() (map[string]Remote, map[string][32]byte, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("--clustermesh-config %s: %w", d.dir, err)
	}
	remotes, versions := map[string]Remote{}, map[string][32]byte{}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(d.dir, name)
		if strings.HasPrefix(name, ".") { // a Secret volume's ..data and its kind
			continue
		}
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			d.links.Missing(path) // a dangling link is logged
		} else {
			d.links.Present(path)
		}
		if err != nil || fi.IsDir() {
			continue
		}
		data, _, err := boundedfile.ReadStat(path, fi, maxFileSize, "the clustermesh file size limit")
		if err == nil && !isEtcdFile(data) {
			continue // a certificate or key beside the configs
		}
		var etcd clientv3.Config
		var version [32]byte
		bad := data
		if err == nil {
			etcd, version, err = parseEtcdFile(path, data)
		} else {
			bad = []byte(err.Error()) // a FIFO, a device, a file too large: reported once
		}
		if err != nil {
			if v, ok := d.acted[name]; ok {
				versions[name] = v // keep the cluster as it is
			}
			if v := sha256.Sum256(bad); d.bad[name] != v {
				d.bad[name] = v // reported once
				d.src.Reject(tables.AsInvalid(fmt.Errorf("--clustermesh-config: cluster %s: %w", name, err)))
			}
			continue
		}
		delete(d.bad, name)
		remotes[name] = Remote{
			Name: name, Etcd: etcd,
			SyncTimeout: d.cfg.ClustermeshSyncTimeout, StaleTimeout: d.cfg.ClustermeshStaleTimeout,
		}
		versions[name] = version
	}
	return remotes, versions, nil
}

// initial reads the clusters to start with; those that are not valid
// are reported and left out.
func (d *configDir) initial() []Remote {
	remotes, versions, err := d.load()
	if err != nil {
		d.src.Reject(tables.AsInvalid(err)) // the directory is the user's input
	}
	var out []Remote
	for _, name := range slices.Sorted(maps.Keys(remotes)) {
		r := remotes[name]
		d.acted[name] = versions[name]
		if err := r.validate(d.im.self); err != nil {
			d.src.Reject(tables.AsInvalid(fmt.Errorf("--clustermesh-config: %w", err)))
			continue
		}
		out = append(out, r)
	}
	return out
}

// sync acts on what changed since the last look.
func (d *configDir) sync() {
	remotes, versions, err := d.load()
	if err != nil {
		d.src.Log().Warn("Reading the clustermesh config directory; the clusters stay as they are", "error", err)
		return
	}
	connected := d.im.Connected()
	for name := range d.acted {
		if _, found := versions[name]; found {
			continue
		}
		delete(d.acted, name)
		if slices.Contains(connected, name) {
			if err := d.im.Remove(name); err != nil { // not the config's fault
				d.src.Log().Error("Removing a remote cluster failed", "cluster", name, "error", err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(remotes)) {
		v := versions[name]
		if old, found := d.acted[name]; found && old == v {
			continue
		}
		d.acted[name] = v
		if err := d.im.Update(remotes[name]); errors.Is(err, tables.ErrInvalid) {
			d.src.Reject(fmt.Errorf("--clustermesh-config: %w", err))
		} else if err != nil {
			d.src.Log().Error("Updating a remote cluster failed", "cluster", name, "error", err)
		}
	}
}

// follow looks at the directory after each burst of events, and every
// configPoll, until ctx is done (internal/dirfollow, as the manifests
// source follows its directory). Should the directory not be there to
// follow, it is looked for every configPoll.
func (d *configDir) follow(ctx context.Context) {
	cfg := dirfollow.Config{
		Dir: d.dir, What: "the clustermesh config directory",
		Debounce: configDebounce, MaxDelay: configDebounce, Poll: configPoll, GonePoll: configPoll,
		Log: d.src.Log(),
	}
	for {
		err := dirfollow.Follow(ctx, cfg, func([]string, bool) { d.sync() })
		if err == nil || ctx.Err() != nil {
			return
		}
		d.src.Log().Warn("Not following the clustermesh config directory; looking again", "dir", d.dir, "in", configPoll, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(configPoll):
		}
	}
}
