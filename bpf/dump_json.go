package bpf

import (
	"bufio"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/lbstate/lbstate/internal/jsontext"
)

// WriteJSON writes the dump as one JSON object, a member a map, an entry
// a line:
//
//	{
//	  "backends": [
//	    {"id":1,"address":"10.0.0.1:8080/TCP","state":"active"},
//	    ...
//	  ],
//	  "maglev": null,
//	  ...
//	}
//
// It streams: a dump of a million backends is written as it is encoded,
// never held whole, and each entry is encoded by its map's field list
// without reflection. What json.Unmarshal reads into a Dump is the same
// as from json.Marshal's encoding.
func (d *Dump) WriteJSON(w io.Writer) error { return d.writeJSON(w, nil) }

// writeJSON writes the dump, and the Maglev tables if any as the member
// "maglevTables" (DumpWithTables).
func (d *Dump) writeJSON(w io.Writer, tables map[uint32][]uint32) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString("{\n")
	var (
		line []byte
		err  error
	)
	line, err = writeMember(bw, line, "backends", d.Backends, func(b []byte, e *BackendEntry) ([]byte, error) {
		return appendObject(b, backendFields, &e.Backend)
	})
	if err == nil {
		line, err = writeMember(bw, line, "maglev", d.Maglev, func(b []byte, e *MaglevEntry) ([]byte, error) {
			js, err := json.Marshal(e)
			return append(b, js...), err
		})
	}
	if err == nil {
		line, err = writeMember(bw, line, "revnat", d.RevNat, func(b []byte, e *RevNatEntry) ([]byte, error) {
			return appendObject(b, revNatFields, &e.RevNatValue)
		})
	}
	if err == nil {
		line, err = writeMember(bw, line, "services", d.Services, func(b []byte, e *ServiceEntry) ([]byte, error) { return e.appendJSON(b) })
	}
	if err == nil {
		line, err = writeMember(bw, line, "sourceRanges", d.SourceRanges, func(b []byte, e *SourceRangeEntry) ([]byte, error) {
			return appendObject(b, sourceRangeFields, &e.SourceRangeKey)
		})
	}
	if err == nil {
		_, err = writeMember(bw, line, "affinity", d.Affinity, func(b []byte, e *AffinityEntry) ([]byte, error) {
			return appendObject(b, affinityFields, e)
		})
	}
	if err != nil {
		return err
	}
	if d.FlowSeed != "" {
		bw.WriteString(",\n  \"flowSeed\": ")
		bw.Write(jsontext.String(nil, d.FlowSeed))
	}
	if len(tables) > 0 {
		bw.WriteString(",\n  \"maglevTables\": {")
		sep := "\n    "
		for _, id := range slices.Sorted(maps.Keys(tables)) {
			js, err := json.Marshal(tables[id])
			if err != nil {
				return err
			}
			bw.WriteString(sep)
			bw.WriteString(strconv.Quote(strconv.FormatUint(uint64(id), 10)))
			bw.WriteString(": ")
			bw.Write(js)
			sep = ",\n    "
		}
		bw.WriteString("\n  }")
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

// writeMember writes `  "key": [` and an entry a line, or null for a nil
// list (as json.Marshal writes a nil slice), after the previous member's
// comma; line is scratch space, returned for reuse.
func writeMember[E any](bw *bufio.Writer, line []byte, key string, entries []E, enc func([]byte, *E) ([]byte, error)) ([]byte, error) {
	if key != "backends" {
		bw.WriteString(",\n")
	}
	bw.WriteString(`  "` + key + `": `)
	switch {
	case entries == nil:
		bw.WriteString("null")
		return line, nil
	case len(entries) == 0:
		bw.WriteString("[]")
		return line, nil
	}
	bw.WriteString("[\n")
	for i := range entries {
		line = append(line[:0], "    "...)
		var err error
		if line, err = enc(line, &entries[i]); err != nil {
			return line, err
		}
		if i < len(entries)-1 {
			line = append(line, ',')
		}
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return line, err
		}
	}
	bw.WriteString("  ]")
	return line, nil
}

// appendObject appends v's non-zero fields as one JSON object
// (marshalObject's encoding).
func appendObject[V any](b []byte, fields []field[V], v *V) ([]byte, error) {
	start := len(b)
	b, err := appendJSON(b, fields, v)
	if err != nil {
		return b, err
	}
	if len(b) == start {
		return append(b, "{}"...), nil
	}
	b[start] = '{' // in place of the first member's comma
	return append(b, '}'), nil
}
