package bpf

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// The state byte of lb_backends is an lb.BackendState: each LB_BACKEND_*
// constant of the header must have the value of the state of the same
// name, and every state must have its constant, or a datapath reading the
// header would misread a state the control plane writes.
func TestBackendStatesMatchHeader(t *testing.T) {
	h, err := os.ReadFile("include/lb.h")
	if err != nil {
		t.Fatal(err)
	}
	inHeader := map[string]int{}
	for _, m := range regexp.MustCompile(`LB_BACKEND_(\w+)\s*=\s*(\d+)`).FindAllStringSubmatch(string(h), -1) {
		v, _ := strconv.Atoi(m[2])
		inHeader[strings.ReplaceAll(strings.ToLower(m[1]), "_", "-")] = v
	}
	for v := 0; ; v++ {
		var s lb.BackendState
		name := lb.BackendState(v).String()
		if s.UnmarshalText([]byte(name)) != nil {
			if len(inHeader) != v {
				t.Errorf("the header has %d backend states, lb has %d: %v", len(inHeader), v, inHeader)
			}
			return
		}
		if got, ok := inHeader[name]; !ok || got != v {
			t.Errorf("state %s is %d in lb, LB_BACKEND_%s in the header: %d (found %v)",
				name, v, strings.ToUpper(strings.ReplaceAll(name, "-", "_")), got, ok)
		}
	}
}
