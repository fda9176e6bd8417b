package bpf

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cilium/ebpf"
	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"
)

// Cell provides *Maps: kernel maps pinned in --lb-pin-dir when the process
// can create BPF maps, in-memory maps otherwise (--lb-maps chooses), and
// says which in one log line, or why and how to fix it when it falls back.
// A pin directory it refuses (another user's, writable by others, held by
// another agent) is an error in every mode, never a fallback.
// For kernel maps it mounts bpffs on the pin directory's parent (by
// default /sys/fs/bpf) if none is mounted there and the process may. It also provides the lb/maps-* script
// commands.
var Cell = cell.Module(
	"lb-maps",
	"Load-balancing BPF maps",

	cell.Config(DefaultConfig),
	cell.Config(defaultModeConfig),
	cell.Provide(
		newCellMaps,
		func(m *Maps) hive.ScriptCmdsOut { return hive.NewScriptCmds(ScriptCommands(m)) },
	),
)

// ModeConfig chooses kernel or in-memory maps.
type ModeConfig struct {
	// LBMaps is "auto" (kernel maps if possible), "kernel" or "memory".
	LBMaps string
}

var defaultModeConfig = ModeConfig{LBMaps: "auto"}

func (def ModeConfig) Flags(flags *pflag.FlagSet) {
	flags.String("lb-maps", def.LBMaps, "Maps to reconcile into: auto (kernel if the process can create BPF maps), kernel or memory")
}

func newCellMaps(lc cell.Lifecycle, log *slog.Logger, cfg Config, mode ModeConfig) (*Maps, error) {
	var (
		maps     *Maps
		err      error
		fellBack bool
	)
	switch mode.LBMaps {
	case "kernel":
		maps, err = openKernelMaps(log, cfg)
	case "memory":
		maps, err = NewMemoryMaps(cfg, nil)
	case "auto":
		// Only a process that cannot use BPF maps here (no privileges, no
		// bpffs it may mount) falls back. Pinned maps of another layout and
		// a pin directory refused as untrusted or held by another agent
		// are errors to act on, not reasons to stop programming the
		// datapath while reporting normally.
		if maps, err = openKernelMaps(log, cfg); err != nil && !refusedNotUnavailable(err) {
			log.Info("Cannot use kernel BPF maps, using in-memory maps", "reason", err)
			maps, err = NewMemoryMaps(cfg, nil)
			fellBack = true
		}
	default:
		return nil, fmt.Errorf("--lb-maps %q: want auto, kernel or memory", mode.LBMaps)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case fellBack: // the line above said which maps, and why
	case maps.Kind == "kernel":
		log.Info("Using kernel BPF maps", "pin-dir", cfg.LBPinDir)
	default:
		log.Info("Using in-memory maps")
	}
	lc.Append(cell.Hook{OnStop: func(cell.HookContext) error { return maps.Close() }})
	return maps, nil
}

// refusedNotUnavailable tells the errors of openKernelMaps that mean the
// kernel maps could be used but this setup is wrong.
func refusedNotUnavailable(err error) bool {
	return errors.Is(err, ebpf.ErrMapIncompatible) || errors.Is(err, ErrPinDirUntrusted) || errors.Is(err, ErrPinDirInUse)
}

// openKernelMaps mounts bpffs for the pin directory if it needs one (and
// says so), then opens the kernel maps.
func openKernelMaps(log *slog.Logger, cfg Config) (*Maps, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mounted, err := systemBPFFS.ensure(cfg.LBPinDir)
	if err != nil {
		return nil, err
	}
	if mounted != "" {
		log.Info("Mounted bpffs, as no bpffs held the pin directory", "dir", mounted, "pin-dir", cfg.LBPinDir)
	}
	maps, err := NewKernelMaps(cfg)
	if err != nil {
		return nil, err
	}
	for _, r := range maps.Recreated {
		log.Warn("Recreated a pinned map whose layout changed (--lb-recreate-maps): its entries are lost;"+
			" IDs are restored from the maps that were kept",
			"map", r.Name, "pin-dir", cfg.LBPinDir, "reason", r.Reason)
	}
	for _, m := range maps.Migrated {
		log.Info("Migrated a pinned map from an older version's layout, keeping its entries and IDs",
			"map", m.Name, "pin-dir", cfg.LBPinDir, "entries", m.Entries)
	}
	if n := maps.WritesLeftInFlight; n > 0 {
		log.Warn("Ended writes of lb_services that a writer before this agent left in flight (it died mid-write):"+
			" until now the datapath read every master guarded", "writes", n, "pin-dir", cfg.LBPinDir)
	}
	for _, k := range maps.KeptSizes {
		log.Info("Kept a pinned map at its size, not the default: restart with --lb-recreate-maps to recreate it at the default"+
			" (its entries are lost), or give "+k.Flag+" its size",
			"map", k.Name, "pin-dir", cfg.LBPinDir, "entries", k.Pinned, "default", k.Default)
	}
	return maps, nil
}
