package reconciler

import (
	"encoding/binary"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// master returns what the frontend's master entry in lb_services holds
// beside its ID: the one place a master field is derived from the
// frontend (bpf/doc.go's checklist for adding a field points here).
// writeMasters writes it when it differs from what the state says was
// written.
func (j *task) master() bpf.ServiceMaster {
	m := bpf.ServiceMaster{
		AffinityTimeout: j.fe.Policy.AffinityTimeout(),
		Count:           uint16(len(j.slotIDs) - len(j.standby) - len(j.fallback)),
		Standby:         uint16(len(j.standby)),
		Fallback:        uint16(len(j.fallback)),
		Type:            uint8(j.fe.Type),
		Flags:           flags(j.fe, len(j.ranges) > 0),
		Algorithm:       j.algorithm,
	}
	binary.BigEndian.PutUint16(m.ProxyPort[:], j.fe.ProxyPort())
	return m
}

// flags returns the master entry's flags of a frontend; hasRanges says
// whether source ranges restrict it.
func flags(fe *lb.Frontend, hasRanges bool) uint8 {
	var f uint8
	p := fe.Policy
	// The flag names the policy that selection applied to this frontend.
	if p.TrafficPolicyFor(fe.FrontendParams) == lb.TrafficPolicyLocal {
		if fe.UsesExternalTrafficPolicy() {
			f |= bpf.FlagExtLocal
		} else {
			f |= bpf.FlagIntLocal
		}
	}
	if p.AffinityTimeout() > 0 {
		f |= bpf.FlagAffinity
	}
	if hasRanges {
		f |= bpf.FlagSourceRanges
	}
	if !fe.RedirectedTo().IsZero() {
		f |= bpf.FlagRedirected
		if fe.SkipFromBackend() {
			f |= bpf.FlagSkipFromBackend
		}
	}
	if fe.ProxyPort() != 0 {
		f |= bpf.FlagProxy
	}
	return f
}
