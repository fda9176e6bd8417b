package lb

import "github.com/lbstate/lbstate/internal/jsontext"

// AppendJSON appends the backend's JSON (MarshalJSON's bytes) to out,
// without reflection or nested Marshal calls: a table dump encodes a
// million backends (TestBackendJSONAsReflected checks it writes what
// json.Marshal writes of the row).
func (b *Backend) AppendJSON(out []byte) []byte {
	out = appendAddr(append(out, `{"address":`...), b.Address)
	out = append(out, `,"instances":`...)
	if b.Instances == nil {
		out = append(out, "null"...)
	} else {
		out = append(out, '[')
		for i := range b.Instances {
			if i > 0 {
				out = append(out, ',')
			}
			in := &b.Instances[i]
			out = jsontext.String(append(out, `{"service":`...), in.Service.String())
			out = jsontext.String(append(out, `,"source":`...), in.Source.String())
			out = in.Params.appendJSON(append(out, `,"params":`...))
			out = append(out, '}')
		}
		out = append(out, ']')
	}
	if b.Unhealthy {
		out = append(out, `,"unhealthy":true`...)
	}
	if since := b.HealthSince(); !since.IsZero() {
		js, err := since.MarshalJSON()
		if err != nil { // a year past 9999: as json.Marshal reports it
			js = jsontext.String(nil, "marshalling error: "+err.Error())
		}
		out = append(append(out, `,"healthSince":`...), js...)
	}
	if e := b.HealthError(); e != "" {
		out = jsontext.String(append(out, `,"healthError":`...), e)
	}
	return append(out, '}')
}

// appendJSON appends the params' JSON, as json.Marshal writes their
// backendParamsRow.
func (p *BackendParams) appendJSON(out []byte) []byte {
	out = appendAddr(append(out, `{"address":`...), p.Address)
	if names := p.PortNames(); len(names) > 0 {
		out = jsontext.Strings(append(out, `,"portNames":`...), names)
	}
	out = jsontext.Uint(append(out, `,"weight":`...), p.Weight)
	if p.NodeName != "" {
		out = jsontext.String(append(out, `,"nodeName":`...), p.NodeName)
	}
	if p.Zone != "" {
		out = jsontext.String(append(out, `,"zone":`...), p.Zone)
	}
	if z := p.ForZones(); len(z) > 0 {
		out = jsontext.Strings(append(out, `,"forZones":`...), z)
	}
	if n := p.ForNodes(); len(n) > 0 {
		out = jsontext.Strings(append(out, `,"forNodes":`...), n)
	}
	if p.ClusterID != 0 {
		out = jsontext.Uint(append(out, `,"clusterID":`...), p.ClusterID)
	}
	if p.State != 0 {
		out = jsontext.String(append(out, `,"state":`...), p.State.String())
	}
	return append(out, '}')
}

// appendAddr appends a's JSON: its text, quoted ("" when invalid).
func appendAddr(out []byte, a L3n4Addr) []byte {
	if !a.IsValid() {
		return append(out, `""`...)
	}
	start := len(out)
	out = a.appendTo(append(out, '"'))
	for _, c := range out[start+1:] {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return jsontext.String(out[:start], out[start+1:])
		}
	}
	return append(out, '"')
}
