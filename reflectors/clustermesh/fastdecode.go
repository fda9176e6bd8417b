package clustermesh

import (
	"bytes"
	"net/netip"
	"slices"

	"github.com/lbstate/lbstate/lb"
)

// decodeFast turns a value into the backends it offers without
// encoding/json's reflection and without the maps of ClusterService: at
// a million remote backends the decoding was an eighth of the
// importer's CPU. It takes only the form exporters write (Cilium's and
// ours): the known fields once each, spelled as they are, strings
// without escapes or non-ASCII bytes, no nulls, every value valid. On
// anything else it gives up (ok false) and the caller decodes with
// DecodeService, which also says what is wrong; so it never decides
// anything the general path would decide otherwise
// (FuzzDecodeFastAgreesWithDecodeService).
//
// want and wantID are the cluster the key must name and the ID the value
// must carry; the result is what DecodeService and LocalBackends give. d
// is scratch space, reused from value to value (a cluster's follower
// has one).
func decodeFast(d *fastDecoder, key string, value []byte, want string, wantID uint32) (name lb.ServiceName, backends []lb.BackendParams, ok bool) {
	cluster, namespace, svc, err := ParseServiceKey(key)
	if err != nil || cluster != want {
		return lb.ServiceName{}, nil, false
	}
	d.reset(value)
	defer d.reset(nil) // no slice of value kept
	if !d.service() || !d.s.end() ||
		string(d.cluster) != cluster || string(d.namespace) != namespace || string(d.name) != svc ||
		d.clusterID != wantID || d.clusterID == 0 || d.clusterID > MaxClusterID {
		return lb.ServiceName{}, nil, false
	}
	name = lb.NewServiceName(namespace, svc)
	if !d.shared {
		return name, nil, true
	}
	backends, ok = d.localBackends()
	return name, backends, ok
}

// fastPort is one port name of one address of a ClusterService's
// backends.
type fastPort struct {
	name  []byte
	proto lb.Protocol
	port  uint16
}

type fastAddr struct {
	raw        []byte // the key, as Zones is keyed
	addr       netip.Addr
	first, end int // its ports, in fastDecoder.ports
}

type fastZone struct {
	raw      []byte
	zone     string
	forZones []string
}

type fastDecoder struct {
	s                        scanner
	cluster, namespace, name []byte
	clusterID                uint32
	shared                   bool
	addrs                    []fastAddr
	ports                    []fastPort
	zones                    []fastZone
	addrBuf                  []netip.Addr
}

func (d *fastDecoder) reset(value []byte) {
	clear(d.addrs)
	clear(d.ports)
	clear(d.zones)
	*d = fastDecoder{s: scanner{b: value}, addrs: d.addrs[:0], ports: d.ports[:0], zones: d.zones[:0], addrBuf: d.addrBuf[:0]}
}

// service reads the top-level object.
func (d *fastDecoder) service() bool {
	var seen uint16
	return d.s.object(func(k []byte) bool {
		var bit uint16
		var ok bool
		switch string(k) {
		case "cluster":
			bit = 1 << 0
			d.cluster, ok = d.s.str()
		case "namespace":
			bit = 1 << 1
			d.namespace, ok = d.s.str()
		case "name":
			bit = 1 << 2
			d.name, ok = d.s.str()
		case "frontends":
			bit = 1 << 3
			ok = d.addresses(false)
		case "backends":
			bit = 1 << 4
			ok = d.addresses(true)
		case "hostnames":
			bit = 1 << 5
			ok = d.s.stringMap()
		case "zones":
			bit = 1 << 6
			ok = d.zoneMap()
		case "labels":
			bit = 1 << 7
			ok = d.s.stringMap()
		case "selector":
			bit = 1 << 8
			ok = d.s.stringMap()
		case "includeExternal":
			bit = 1 << 9
			_, ok = d.s.boolean()
		case "shared":
			bit = 1 << 10
			d.shared, ok = d.s.boolean()
		case "clusterID":
			bit = 1 << 11
			var id uint64
			id, ok = d.s.uint(1<<32 - 1)
			d.clusterID = uint32(id)
		}
		if !ok || seen&bit != 0 {
			return false // unknown, twice, or not as exporters write it
		}
		seen |= bit
		return true
	})
}

// addresses reads frontends or backends (IP -> port name -> L4Addr),
// validating them as Validate does; the backends are kept.
func (d *fastDecoder) addresses(keep bool) bool {
	return d.s.object(func(k []byte) bool {
		a, err := netip.ParseAddr(string(k))
		if err != nil || a.Zone() != "" {
			return false
		}
		first := len(d.ports)
		ok := d.s.object(func(name []byte) bool {
			p := fastPort{name: name}
			var seen uint8
			ok := d.s.object(func(f []byte) bool {
				switch string(f) {
				case "Protocol":
					proto, ok := d.s.str()
					if !ok || seen&1 != 0 {
						return false
					}
					seen |= 1
					var err error
					p.proto, err = lb.ParseProtocol(string(proto))
					return err == nil
				case "Port":
					port, ok := d.s.uint(1<<16 - 1)
					if !ok || seen&2 != 0 || port == 0 {
						return false
					}
					seen |= 2
					p.port = uint16(port)
					return true
				}
				return false
			})
			if !ok || seen != 3 {
				return false
			}
			if keep {
				if slices.ContainsFunc(d.ports[first:], func(q fastPort) bool { return bytes.Equal(q.name, name) }) {
					return false // a name twice: encoding/json keeps the last
				}
				d.ports = append(d.ports, p)
			}
			return true
		})
		if keep {
			d.addrs = append(d.addrs, fastAddr{raw: k, addr: a.Unmap(), first: first, end: len(d.ports)})
		}
		return ok
	})
}

// zoneMap reads zones (IP -> {"zone", "forZones": [{"name"}]}).
func (d *fastDecoder) zoneMap() bool {
	return d.s.object(func(k []byte) bool {
		if slices.ContainsFunc(d.zones, func(z fastZone) bool { return bytes.Equal(z.raw, k) }) {
			return false
		}
		z := fastZone{raw: k}
		var seen uint8
		ok := d.s.object(func(f []byte) bool {
			switch string(f) {
			case "zone":
				if seen&1 != 0 {
					return false
				}
				seen |= 1
				v, ok := d.s.str()
				z.zone = string(v)
				return ok
			case "forZones":
				if seen&2 != 0 {
					return false
				}
				seen |= 2
				return d.s.array(func() bool {
					named := false
					return d.s.object(func(f []byte) bool {
						if string(f) != "name" || named {
							return false
						}
						named = true
						v, ok := d.s.str()
						z.forZones = append(z.forZones, string(v))
						return ok
					}) && named
				})
			}
			return false
		})
		d.zones = append(d.zones, z)
		return ok
	})
}

// localBackends is LocalBackends over what was read.
func (d *fastDecoder) localBackends() ([]lb.BackendParams, bool) {
	// One address under two keys ("::ffff:10.0.0.1" and "10.0.0.1", or
	// the same twice): encoding/json would keep one of them.
	addrs := d.addrBuf[:0]
	for i := range d.addrs {
		addrs = append(addrs, d.addrs[i].addr)
	}
	d.addrBuf = addrs
	slices.SortFunc(addrs, netip.Addr.Compare)
	for i := 1; i < len(addrs); i++ {
		if addrs[i] == addrs[i-1] {
			return nil, false
		}
	}
	out := make([]lb.BackendParams, 0, len(d.addrs))
	var names []string
	for _, a := range d.addrs {
		ports := d.ports[a.first:a.end]
		for j := range ports {
			p := &ports[j]
			if p.name == nil {
				continue // taken with an earlier name of its port
			}
			// Every name of this address at the same port and protocol.
			names = names[:0]
			for k := j; k < len(ports); k++ {
				q := &ports[k]
				if q.name != nil && q.proto == p.proto && q.port == p.port {
					if len(q.name) > 0 { // unnamed: serves every frontend
						names = append(names, string(q.name))
					}
					if k > j {
						q.name = nil
					}
				}
			}
			slices.Sort(names)
			b := lb.BackendParams{
				Address:   lb.NewL3n4Addr(p.proto, a.addr, p.port, lb.ScopeExternal),
				Weight:    lb.DefaultBackendWeight,
				ClusterID: d.clusterID,
			}.WithPortNames(names...)
			if zi := slices.IndexFunc(d.zones, func(z fastZone) bool { return bytes.Equal(z.raw, a.raw) }); zi >= 0 {
				b.Zone = d.zones[zi].zone
				b = b.WithTopologyHints(d.zones[zi].forZones, nil)
			}
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(x, y lb.BackendParams) int { return x.Address.Compare(y.Address) })
	return out, true
}
