package datapath

import (
	"errors"
	"fmt"

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
}

// DefaultConfig attaches nothing.
var DefaultConfig = Config{LBDatapath: ModeNone, LBCgroup: "/sys/fs/cgroup"}

func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("lb-datapath", def.LBDatapath, "Attach lbstate's reference datapath: none, socket (cgroup programs on --lb-cgroup), tc (on --lb-devices) or both")
	flags.String("lb-cgroup", def.LBCgroup, "cgroup v2 directory whose processes' sockets the socket programs balance (with --lb-datapath socket or both)")
	flags.StringSlice("lb-devices", def.LBDevices, "Interfaces whose arriving traffic the tc programs balance, as from outside the node (with --lb-datapath tc or both)")
	flags.StringSlice("lb-workload-devices", def.LBWorkloadDevices, "Host ends of local workloads' interfaces, whose traffic the tc programs balance as from inside the node")
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
