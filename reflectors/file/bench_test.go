package file

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// manyFilesDir writes n files, each a Service and its EndpointSlice, and
// returns the directory and the content of file i with endpoint ip.
func manyFilesDir(tb testing.TB, n int) (string, func(i int, ip string) string) {
	tb.Helper()
	dir := tb.TempDir()
	content := func(i int, ip string) string {
		svc := fmt.Sprintf("svc-%d", i)
		return strings.NewReplacer("web", svc, "10.96.0.1", fmt.Sprintf("10.96.%d.%d", i/256, i%256), "ENDPOINTS", ip).Replace(webYAML)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("svc-%05d.yaml", i)), []byte(content(i, fmt.Sprintf("10.1.%d.%d", i/256, i%256))), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir, content
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEditOneOf20000Files measures one edit of one file in a
// directory of 20,000, from the write until the frontend has the new
// backend: the delay (ns/op, with the 50ms debounce) and the CPU time it
// cost (cpu-ms/edit).
func BenchmarkEditOneOf20000Files(b *testing.B) {
	const n = 20000
	dir, content := manyFilesDir(b, n)
	_, w, db, _, _ := startSource(b, dir, slog.New(slog.DiscardHandler))
	_, initialized := w.Frontends().Initialized(db.ReadTxn())
	select {
	case <-initialized:
	case <-time.After(5 * time.Minute):
		b.Fatal("not initialized after 5 minutes")
	}
	const edited = 4321
	fe := lb.MustParseL3n4Addr(fmt.Sprintf("10.96.%d.%d:80/TCP", edited/256, edited%256))
	b.ResetTimer()
	cpu := cpuTime()
	for i := range b.N {
		ip := fmt.Sprintf("10.2.%d.%d", i/256%256, i%256)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("svc-%05d.yaml", edited)), []byte(content(edited, ip)), 0o644); err != nil {
			b.Fatal(err)
		}
		want := ip + ":8080/TCP"
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			f, _, found := w.Frontends().Get(db.ReadTxn(), tables.FrontendByAddress.Query(fe))
			if found && len(f.Backends) == 1 && f.Backends[0].Address.String() == want {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("edit %d not applied after a minute", i)
			}
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/edit")
}
