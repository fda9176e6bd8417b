package lb_test

import (
	"fmt"

	"github.com/lbstate/lbstate/lb"
)

func ExampleParseL3n4Addr() {
	for _, s := range []string{"10.96.0.1:80/TCP", "[2001:db8::1]:53/udp", "10.96.0.1:30080/TCP/i", "10.96.0.1:80/TPC"} {
		a, err := lb.ParseL3n4Addr(s)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(a, a.Protocol(), a.Scope())
	}
	// Output:
	// 10.96.0.1:80/TCP TCP external
	// [2001:db8::1]:53/UDP UDP external
	// 10.96.0.1:30080/TCP/i TCP internal
	// error: address "10.96.0.1:80/TPC": unknown protocol "TPC" (want TCP, UDP, SCTP or ANY)
}

func ExampleServiceParams_Validate() {
	p := lb.ServiceParams{
		Name:   lb.NewServiceName("default", "web"),
		Source: lb.SourceK8s,
		Frontends: []lb.FrontendParams{
			{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP},
			{Address: lb.MustParseL3n4Addr("10.96.0.1:443/TCP")},
		},
	}
	fmt.Println(p.Validate())
	// Output: service default/web: frontends[1]: 10.96.0.1:443/TCP: type: missing or unknown service type (want one of ClusterIP, NodePort, LoadBalancer, ExternalIP, HostPort, LocalRedirect)
}

func ExampleServiceName() {
	local := lb.NewServiceName("default", "web")
	remote := local.WithCluster("east")
	parsed := lb.MustParseServiceName("default/web")
	fmt.Println(local, remote, local == parsed, local == remote)
	// Output: default/web east/default/web true false
}
