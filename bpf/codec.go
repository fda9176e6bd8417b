package bpf

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/lbstate/lbstate/internal/jsontext"
)

// The codec of map values: how each field of an ABI struct is shown in a
// dump (text and JSON) and read back from one (LoadDump). A value type's
// fields are listed once, as a []field, in the order the text dump prints
// them; the text line, the JSON object and the inverse are all derived
// from that list, so that a field added to the struct and to its list
// shows up in dumps, lbctl maps and explain, and survives a dump's round
// trip, with nothing else to change. TestCodecCoversEveryField fails for
// a field of the struct that its list lacks.

// field is one field of a value of type V as dumps show it.
type field[V any] struct {
	// name is its name in the text dump (name=value; "" for value
	// alone, in its place), key its JSON key.
	name, key string
	// optional: the text dump leaves it out when zero. (JSON leaves out
	// every zero field.) textless: the text dump leaves it out always.
	optional, textless bool
	// format returns the field's text and its JSON value, and whether it
	// is zero.
	format func(*V) (text string, js any, zero bool)
	// appendJS, if set, appends the JSON value format returns, encoded,
	// and says whether it is zero: the same bytes, without json.Marshal's
	// reflection and boxing (a dump of a million entries took seconds).
	appendJS func(b []byte, v *V) (out []byte, zero bool, err error)
	// parse sets the field from its JSON value.
	parse func(*V, json.RawMessage) error
}

// numField is a number, shown in decimal.
func numField[V any, N ~uint8 | ~uint16 | ~uint32](name, key string, optional bool, p func(*V) *N) field[V] {
	return field[V]{name: name, key: key, optional: optional,
		format: func(v *V) (string, any, bool) {
			n := *p(v)
			return strconv.FormatUint(uint64(n), 10), n, n == 0
		},
		appendJS: func(b []byte, v *V) ([]byte, bool, error) {
			n := *p(v)
			return strconv.AppendUint(b, uint64(n), 10), n == 0, nil
		},
		parse: func(v *V, raw json.RawMessage) error { return json.Unmarshal(raw, p(v)) },
	}
}

// portField is a port in network order, shown as its number.
func portField[V any](name, key string, optional bool, p func(*V) *[2]byte) field[V] {
	return field[V]{name: name, key: key, optional: optional,
		format: func(v *V) (string, any, bool) {
			n := binary.BigEndian.Uint16(p(v)[:])
			return strconv.FormatUint(uint64(n), 10), n, n == 0
		},
		appendJS: func(b []byte, v *V) ([]byte, bool, error) {
			n := binary.BigEndian.Uint16(p(v)[:])
			return strconv.AppendUint(b, uint64(n), 10), n == 0, nil
		},
		parse: func(v *V, raw json.RawMessage) error {
			var n uint16
			err := json.Unmarshal(raw, &n)
			binary.BigEndian.PutUint16(p(v)[:], n)
			return err
		},
	}
}

// backendIDField is a backend ID that may be BackendReject, which the
// text shows as "reject".
func backendIDField[V any](name, key string, p func(*V) *uint32) field[V] {
	f := numField(name, key, false, p)
	f.format = func(v *V) (string, any, bool) {
		id := *p(v)
		return backendIDString(id), id, id == 0
	}
	return f
}

// namedField is a byte that names one of a set of values (an enum),
// shown by the name nameOf gives it. The inverse asks nameOf for every
// byte, so it cannot drift from the names dumps are written with.
func namedField[V any](name, key string, p func(*V) *uint8, nameOf func(uint8) string) field[V] {
	values := make(map[string]uint8, 256)
	for i := range 256 {
		values[nameOf(uint8(i))] = uint8(i)
	}
	return field[V]{name: name, key: key,
		format: func(v *V) (string, any, bool) {
			s := nameOf(*p(v))
			return s, s, false
		},
		appendJS: func(b []byte, v *V) ([]byte, bool, error) { return jsontext.String(b, nameOf(*p(v))), false, nil },
		parse: func(v *V, raw json.RawMessage) error {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return err
			}
			b, ok := values[s]
			if !ok {
				return fmt.Errorf("unknown %s %q", name, s)
			}
			*p(v) = b
			return nil
		},
	}
}

// bitsField is a byte of flags, shown as the names of the bits set,
// comma-separated (a list in JSON).
func bitsField[V any](name, key string, optional bool, p func(*V) *uint8, names [8]string) field[V] {
	return field[V]{name: name, key: key, optional: optional,
		format: func(v *V) (string, any, bool) {
			var set []string
			for bit, n := range names {
				if *p(v)&(1<<bit) != 0 {
					set = append(set, n)
				}
			}
			return strings.Join(set, ","), set, len(set) == 0
		},
		appendJS: func(b []byte, v *V) ([]byte, bool, error) {
			sep := byte('[')
			for bit, n := range names {
				if *p(v)&(1<<bit) != 0 {
					b = jsontext.String(append(b, sep), n)
					sep = ','
				}
			}
			return append(b, ']'), sep == '[', nil
		},
		parse: func(v *V, raw json.RawMessage) error {
			var set []string
			if err := json.Unmarshal(raw, &set); err != nil {
				return err
			}
			for _, s := range set {
				bit := -1
				for i, n := range names {
					if n != "" && n == s {
						bit = i
					}
				}
				if bit < 0 {
					return fmt.Errorf("unknown %s %q", name, s)
				}
				*p(v) |= 1 << bit
			}
			return nil
		},
	}
}

// appendText appends " name=value" for each field of v, in order (or
// " value" for a field without a name: a positional one).
func appendText[V any](b []byte, fields []field[V], v *V) []byte {
	for _, f := range fields {
		if f.textless {
			continue
		}
		if text, _, zero := f.format(v); !(zero && f.optional) {
			b = append(b, ' ')
			if f.name != "" {
				b = append(b, f.name...)
				b = append(b, '=')
			}
			b = append(b, text...)
		}
	}
	return b
}

// appendJSON appends a member for each non-zero field of v to a JSON
// object that has members already.
func appendJSON[V any](b []byte, fields []field[V], v *V) ([]byte, error) {
	for _, f := range fields {
		if f.appendJS != nil {
			start := len(b)
			b = append(b, ',')
			b = strconv.AppendQuote(b, f.key)
			b = append(b, ':')
			out, zero, err := f.appendJS(b, v)
			if err != nil {
				return nil, err
			}
			if b = out; zero {
				b = b[:start]
			}
			continue
		}
		_, js, zero := f.format(v)
		if zero {
			continue
		}
		val, err := json.Marshal(js)
		if err != nil {
			return nil, err
		}
		b = append(b, ',')
		b = strconv.AppendQuote(b, f.key)
		b = append(b, ':')
		b = append(b, val...)
	}
	return b, nil
}

// textless returns f, left out of the text dump.
func textless[V any](f field[V]) field[V] {
	f.textless = true
	return f
}

// textField is a value shown by its text (lb.L3n4Addr, netip.Addr,
// AddrPort, Prefix: each a TextMarshaler and TextUnmarshaler), which get
// and set read from and write into the ABI value.
func textField[V any, T interface{ String() string }, PT interface {
	*T
	UnmarshalText([]byte) error
}](key string, get func(*V) T, set func(*V, T)) field[V] {
	return field[V]{key: key,
		format: func(v *V) (string, any, bool) {
			t := get(v)
			return t.String(), t, false
		},
		appendJS: func(b []byte, v *V) ([]byte, bool, error) {
			// json.Marshal encodes a TextMarshaler as its text, quoted.
			if m, ok := any(get(v)).(encoding.TextMarshaler); ok {
				text, err := m.MarshalText()
				return jsontext.String(b, text), false, err
			}
			js, err := json.Marshal(get(v))
			return append(b, js...), false, err
		},
		parse: func(v *V, raw json.RawMessage) error {
			var t T
			if err := json.Unmarshal(raw, PT(&t)); err != nil {
				return err
			}
			set(v, t)
			return nil
		},
	}
}

// marshalObject writes v's non-zero fields as one JSON object.
func marshalObject[V any](fields []field[V], v *V) ([]byte, error) {
	return appendObject(nil, fields, v)
}

// unmarshalObject reads what marshalObject writes.
func unmarshalObject[V any](fields []field[V], v *V, data []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	return parseJSON(fields, v, obj)
}

// parseJSON sets v's fields from the members of obj that fields names;
// it ignores others, as a newer agent's dump may have more.
func parseJSON[V any](fields []field[V], v *V, obj map[string]json.RawMessage) error {
	for _, f := range fields {
		raw, ok := obj[f.key]
		if !ok || bytes.Equal(raw, []byte("null")) {
			continue
		}
		if err := f.parse(v, raw); err != nil {
			return fmt.Errorf("%s: %w", f.key, err)
		}
	}
	return nil
}
