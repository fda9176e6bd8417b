package bpf_test

import (
	"slices"
	"testing"

	"github.com/lbstate/lbstate/bpf"
)

// verifierBudget is the share of the kernel's 1,000,000 verified
// instructions a program may use: the rest is headroom for the next
// feature and for older or stricter verifiers.
const verifierBudget = 500_000

// Every program of the reference datapath stays within half the
// verifier's complexity limit, with connection reports off and on; the
// counts are logged (go test -v) so that a change's cost shows.
func TestDatapathProgramsKeepVerifierHeadroom(t *testing.T) {
	for _, reports := range []bool{false, true} {
		t.Run(map[bool]string{false: "reports-off", true: "reports-on"}[reports], func(t *testing.T) {
			checkVerifierHeadroom(t, bpf.DatapathOptions{CTTimeouts: bpf.DefaultCTTimeouts, ConnectionReports: reports})
		})
	}
}

func checkVerifierHeadroom(t *testing.T, opts bpf.DatapathOptions) {
	h := newDatapathOptions(t, dpConfig(), opts)
	names := h.dp.ProgramNames()
	slices.Sort(names)
	for _, name := range names {
		info, err := h.dp.Program(name).Info()
		if err != nil {
			t.Fatal(err)
		}
		n, ok := info.VerifiedInstructions()
		if !ok {
			t.Skip("the kernel does not report verified instructions")
		}
		t.Logf("%-18s %7d verified instructions", name, n)
		if n > verifierBudget {
			t.Errorf("%s: %d verified instructions, over the budget of %d", name, n, verifierBudget)
		}
	}
}
