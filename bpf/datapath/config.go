package datapath

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
)

// Modes of --lb-datapath.
const (
	ModeNone   = "none"
	ModeSocket = "socket"
	ModeTC     = "tc"
	ModeBoth   = "both"
)

// Config says where the reference datapath is attached.
type Config struct {
	// LBDatapath is none (the default: nothing is attached), socket (the
	// cgroup programs, on LBCgroup), tc (the tc programs, on LBDevices
	// and LBWorkloadDevices) or both.
	LBDatapath string
	// LBCgroup is a cgroup v2 directory: the socket programs act on its
	// processes and their descendants'.
	LBCgroup string
	// LBDevices bring traffic from outside (frontends' external scope);
	// LBWorkloadDevices, host ends of local workloads' interfaces, bring
	// traffic from inside (internal scope).
	LBDevices, LBWorkloadDevices []string
	// The conntrack timeouts (bpf.CTTimeouts): a TCP flow no reply has
	// answered, an established TCP flow, a TCP flow after a FIN or RST,
	// and UDP. Zero is the default (bpf.DefaultCTTimeouts).
	LBCTTimeoutSYN, LBCTTimeoutTCP, LBCTTimeoutClose, LBCTTimeoutOther time.Duration
	// LBCTGCInterval is how often the agent deletes expired conntrack
	// entries, while the datapath is attached (zero: 30 s).
	LBCTGCInterval time.Duration
}

// DefaultConfig attaches nothing.
var DefaultConfig = Config{
	LBDatapath: ModeNone, LBCgroup: "/sys/fs/cgroup",
	LBCTTimeoutSYN: bpf.DefaultCTTimeouts.SYN, LBCTTimeoutTCP: bpf.DefaultCTTimeouts.TCP,
	LBCTTimeoutClose: bpf.DefaultCTTimeouts.Close, LBCTTimeoutOther: bpf.DefaultCTTimeouts.Other,
	LBCTGCInterval: 30 * time.Second,
}

// ctTimeouts are the conntrack timeouts c sets, the default for each it
// leaves zero.
func (c Config) ctTimeouts() bpf.CTTimeouts {
	or := func(d, def time.Duration) time.Duration {
		if d == 0 {
			return def
		}
		return d
	}
	def := bpf.DefaultCTTimeouts
	return bpf.CTTimeouts{SYN: or(c.LBCTTimeoutSYN, def.SYN), TCP: or(c.LBCTTimeoutTCP, def.TCP),
		Close: or(c.LBCTTimeoutClose, def.Close), Other: or(c.LBCTTimeoutOther, def.Other)}
}

// gcInterval is the conntrack garbage collector's interval, the
// default's if c leaves it zero.
func (c Config) gcInterval() time.Duration {
	if c.LBCTGCInterval == 0 {
		return DefaultConfig.LBCTGCInterval
	}
	return c.LBCTGCInterval
}

func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("lb-datapath", def.LBDatapath, "Attach lbstate's reference datapath: none, socket (cgroup programs on --lb-cgroup), tc (on --lb-devices) or both")
	flags.String("lb-cgroup", def.LBCgroup, "cgroup v2 directory whose processes' sockets the socket programs balance (with --lb-datapath socket or both)")
	flags.StringSlice("lb-devices", def.LBDevices, "Interfaces whose arriving traffic the tc programs balance, as from outside the node (with --lb-datapath tc or both)")
	flags.StringSlice("lb-workload-devices", def.LBWorkloadDevices, "Host ends of local workloads' interfaces, whose traffic the tc programs balance as from inside the node")
	flags.Duration("lb-ct-timeout-syn", def.LBCTTimeoutSYN, "Conntrack: how long a TCP flow lives after its last packet until a reply answers it")
	flags.Duration("lb-ct-timeout-tcp", def.LBCTTimeoutTCP, "Conntrack: how long an established TCP flow lives after its last packet, either way")
	flags.Duration("lb-ct-timeout-close", def.LBCTTimeoutClose, "Conntrack: how long a TCP flow lives after its last packet once a FIN or RST was seen")
	flags.Duration("lb-ct-timeout-other", def.LBCTTimeoutOther, "Conntrack: how long a UDP flow (and a socket's entry) lives after its last packet")
	flags.Duration("lb-ct-gc-interval", def.LBCTGCInterval, "How often the agent deletes expired conntrack entries (lb_ct) while the datapath is attached")
}

func (c Config) socket() bool { return c.LBDatapath == ModeSocket || c.LBDatapath == ModeBoth }
func (c Config) tc() bool     { return c.LBDatapath == ModeTC || c.LBDatapath == ModeBoth }

// cgroup is the cgroup in use, for logs.
func (c Config) cgroup() string {
	if c.socket() {
		return c.LBCgroup
	}
	return ""
}

// validate reports what keeps the configuration from working, before
// anything is attached.
func (c Config) validate(maps *bpf.Maps) error {
	switch c.LBDatapath {
	case ModeNone:
		return nil
	case ModeSocket, ModeTC, ModeBoth:
	default:
		return fmt.Errorf("--lb-datapath %q: want none, socket, tc or both", c.LBDatapath)
	}
	if err := c.ctTimeouts().Validate(); err != nil {
		return fmt.Errorf("--lb-ct-timeout-*: %w", err)
	}
	if c.LBCTGCInterval < 0 {
		return fmt.Errorf("--lb-ct-gc-interval %s: want a positive duration", c.LBCTGCInterval)
	}
	if maps.Kind != "kernel" {
		return fmt.Errorf("--lb-datapath %s needs kernel maps, and the agent has %s maps (see --lb-maps)", c.LBDatapath, maps.Kind)
	}
	if c.socket() {
		var st unix.Statfs_t
		if err := unix.Statfs(c.LBCgroup, &st); err != nil {
			return fmt.Errorf("--lb-cgroup %s: %w", c.LBCgroup, err)
		}
		if st.Type != unix.CGROUP2_SUPER_MAGIC {
			return fmt.Errorf("--lb-cgroup %s: not a cgroup v2 directory (this machine may mount cgroup v1 there; give a cgroup2 mount)", c.LBCgroup)
		}
	}
	if c.tc() && len(c.LBDevices)+len(c.LBWorkloadDevices) == 0 {
		return errors.New("--lb-datapath " + c.LBDatapath + ": give the interfaces with --lb-devices (or --lb-workload-devices)")
	}
	return nil
}
