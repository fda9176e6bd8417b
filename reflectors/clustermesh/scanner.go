package clustermesh

// scanner reads the JSON of decodeFast: a strict subset, each method
// reporting false on anything outside it (the caller then leaves the
// value to encoding/json). Strings are returned as slices of the input.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next consumes c, after white space, if it comes next.
func (s *scanner) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// str reads a string of printable ASCII without escapes.
func (s *scanner) str() ([]byte, bool) {
	if !s.next('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1 : s.i-1], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// uint reads a non-negative integer of at most max, in JSON's form (no
// leading zeros, no fraction or exponent).
func (s *scanner) uint(max uint64) (uint64, bool) {
	s.space()
	start := s.i
	var n uint64
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		n = n*10 + uint64(s.b[s.i]-'0')
		if n > max {
			return 0, false
		}
	}
	switch digits := s.i - start; {
	case digits == 0, digits > 1 && s.b[start] == '0':
		return 0, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	return n, true
}

func (s *scanner) boolean() (v, ok bool) {
	s.space()
	switch {
	case len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "true":
		s.i += 4
		return true, true
	case len(s.b)-s.i >= 5 && string(s.b[s.i:s.i+5]) == "false":
		s.i += 5
		return false, true
	}
	return false, false
}

// object reads an object, field reading each key's value.
func (s *scanner) object(field func(key []byte) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		k, ok := s.str()
		if !ok || !s.next(':') || !field(k) {
			return false
		}
		if s.next(',') {
			continue
		}
		return s.next('}')
	}
}

// array reads an array, elem reading each element.
func (s *scanner) array(elem func() bool) bool {
	if !s.next('[') {
		return false
	}
	if s.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.next(',') {
			continue
		}
		return s.next(']')
	}
}

// stringMap reads an object of strings.
func (s *scanner) stringMap() bool {
	return s.object(func([]byte) bool {
		_, ok := s.str()
		return ok
	})
}
