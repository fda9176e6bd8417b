// Package jsontext appends JSON values to byte slices exactly as
// encoding/json writes them, without its reflection: for the encoders of
// rows and map entries that dumps write by the million.
package jsontext

import (
	"encoding/json"
	"strconv"
)

// String appends s as a JSON string, as json.Marshal writes it (which
// escapes <, > and & too).
func String[S string | []byte](b []byte, s S) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			js, _ := json.Marshal(string(s))
			return append(b, js...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Strings appends ss as a JSON array of strings; null for a nil slice.
func Strings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = String(b, s)
	}
	return append(b, ']')
}

// Key appends `,"key":`, or `"key":` as the first member (when b ends
// with the object's '{').
func Key(b []byte, key string) []byte {
	if len(b) > 0 && b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// Uint appends n in decimal.
func Uint[N ~uint8 | ~uint16 | ~uint32 | ~uint64](b []byte, n N) []byte {
	return strconv.AppendUint(b, uint64(n), 10)
}
