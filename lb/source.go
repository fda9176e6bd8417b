package lb

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Source is who declared a row: a service declaration, a backend
// instance, a redirect, a proxy redirect, a route, the local node. When
// several sources declare the same thing, the one with the higher
// priority owns it: the service's policy and frontends, the backend's
// parameters, the node in force.
//
// A Source is registered once, with a name and a priority
// (RegisterSource), and its value is its priority: values order as
// sources rank, compare with ==, and fit a row in two bytes. The zero
// value is no source. The built-in sources keep room between them for an
// embedder's own:
//
//	api 500 > file 400 > k8s 300 > kvstore 200 > redirect 100
//
// Local configuration (api, file) outranks what the cluster says (k8s),
// which outranks other clusters (kvstore).
type Source uint16

// The built-in sources, registered before any other.
const (
	SourceAPI      Source = 500
	SourceFile     Source = 400
	SourceK8s      Source = 300
	SourceKVStore  Source = 200
	SourceRedirect Source = 100
)

// sourceRegistry is the process-wide name of each registered source.
// Rows outlive the code that wrote them (a table dump, a script test's
// expected output), so their sources print the same everywhere: the
// registry is global, written rarely (at registration) and read without
// a lock.
type sourceRegistry struct {
	names  map[Source]string
	byName map[string]Source
	// list holds names' pairs for String and Valid, which every Writer
	// call and every object a source converts ask: a scan of a handful
	// of pairs costs less than a map's hash (1.5% of a pipeline's CPU).
	list []namedSource
}

type namedSource struct {
	src  Source
	name string
}

// name returns the name s was registered with.
func (r *sourceRegistry) name(s Source) (string, bool) {
	for i := range r.list {
		if r.list[i].src == s {
			return r.list[i].name, true
		}
	}
	return "", false
}

var (
	sourcesMu  sync.Mutex // serializes RegisterSource
	registered atomic.Pointer[sourceRegistry]
)

func init() {
	registered.Store(&sourceRegistry{names: map[Source]string{}, byName: map[string]Source{}})
	for _, b := range []struct {
		name string
		src  Source
	}{{"api", SourceAPI}, {"file", SourceFile}, {"k8s", SourceK8s}, {"kvstore", SourceKVStore}, {"redirect", SourceRedirect}} {
		if got := MustRegisterSource(b.name, uint16(b.src)); got != b.src {
			panic("lb: built-in source " + b.name + " registered as " + got.String())
		}
	}
}

// RegisterSource registers a source with its name (a DNS label: lower
// case letters, digits and '-', starting with a letter, at most 63
// characters; it prints in tables, logs and metrics labels) and its
// priority (1-65535, higher outranks lower), and returns its identity.
// Registering the same name with the same priority again returns the
// same Source, so every cell of a program may register what it uses; a
// name already registered with another priority, or a priority another
// source holds, is an error naming both.
func RegisterSource(name string, priority uint16) (Source, error) {
	if err := validateSourceName(name); err != nil {
		return 0, err
	}
	if priority == 0 {
		return 0, fmt.Errorf("source %q: priority 0: want 1-65535", name)
	}
	src := Source(priority)
	sourcesMu.Lock()
	defer sourcesMu.Unlock()
	r := registered.Load()
	if old, ok := r.byName[name]; ok {
		if old != src {
			return 0, fmt.Errorf("source %q: priority %d: already registered with priority %d", name, priority, old)
		}
		return src, nil
	}
	if other, ok := r.names[src]; ok {
		return 0, fmt.Errorf("source %q: priority %d: already held by source %q", name, priority, other)
	}
	next := &sourceRegistry{names: maps.Clone(r.names), byName: maps.Clone(r.byName)}
	next.names[src] = name
	next.byName[name] = src
	next.list = append(slices.Clip(r.list), namedSource{src, name})
	registered.Store(next)
	return src, nil
}

// MustRegisterSource is RegisterSource for a package-level variable: it
// panics on an error, which is the program's, not its input's.
func MustRegisterSource(name string, priority uint16) Source {
	src, err := RegisterSource(name, priority)
	if err != nil {
		panic(err)
	}
	return src
}

func validateSourceName(name string) error {
	ok := len(name) > 0 && len(name) <= 63 && name[0] >= 'a' && name[0] <= 'z' && name[len(name)-1] != '-'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	}
	if !ok {
		return fmt.Errorf("source name %q: want a DNS label (lower case letters, digits and '-', starting with a letter, at most 63 characters)", name)
	}
	return nil
}

// ParseSource returns the registered source of that name (in any case).
func ParseSource(name string) (Source, error) {
	r := registered.Load()
	if src, ok := r.byName[strings.ToLower(name)]; ok {
		return src, nil
	}
	names := make([]string, 0, len(r.names))
	for _, s := range Sources() {
		names = append(names, r.names[s])
	}
	return 0, fmt.Errorf("unknown source %q (registered: %s)", name, strings.Join(names, ", "))
}

// Sources lists the registered sources, highest priority first.
func Sources() []Source {
	out := slices.Collect(maps.Keys(registered.Load().names))
	slices.SortFunc(out, Source.Compare)
	return out
}

// String is the source's name; an unregistered value prints as
// "source(N)".
func (s Source) String() string {
	if name, ok := registered.Load().name(s); ok {
		return name
	}
	return "source(" + strconv.Itoa(int(s)) + ")"
}

func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func (s *Source) UnmarshalText(b []byte) (err error) {
	*s, err = ParseSource(string(b))
	return
}

// Valid reports whether s is a registered source.
func (s Source) Valid() bool {
	_, ok := registered.Load().name(s)
	return ok
}

// Priority is the priority s was registered with.
func (s Source) Priority() uint16 { return uint16(s) }

// Outranks reports whether s has a higher priority than other.
func (s Source) Outranks(other Source) bool { return s > other }

// Compare orders sources as they rank: negative when s outranks other,
// so that sorting with it puts the highest priority first.
func (s Source) Compare(other Source) int { return cmp.Compare(other, s) }
