// Command backends serves the demo's whoami service (examples/demo/
// whoami.yaml) on this machine's loopback: GET /healthz answers 200 on
// 127.0.0.1:18080 and 127.0.0.2:18080, until Ctrl-C. 127.0.0.3 is left
// out on purpose, so that its breaker trips in an agent run with
// --health. --fail makes 127.0.0.2 answer 500, to watch one trip while
// it still accepts connections.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
)

func main() {
	fail := flag.Bool("fail", false, "127.0.0.2 answers /healthz with 500")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		status := http.StatusOK
		if *fail && ip == "127.0.0.2" {
			status = http.StatusInternalServerError
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "18080"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "backends:", err)
			os.Exit(1)
		}
		fmt.Printf("serving /healthz on %s: %d\n", ln.Addr(), status)
		go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			fmt.Fprintln(w, ip)
		}))
	}
	<-ctx.Done()
}
