package redirectpolicy

import (
	"fmt"
	"strings"
	"testing"
)

// An addressMatcher on an address no frontend packet carries is rejected
// with the policy and field named, as a backend on it is. (0.0.0.0 and
// 127.0.0.1 were once accepted while backends on them were refused.)
func TestValidateRejectsAddressMatcherOnUnroutableAddresses(t *testing.T) {
	spec := func(ip string) string {
		return fmt.Sprintf("redirectFrontend: {addressMatcher: {ip: %q, toPorts: [{port: '53', protocol: UDP}]}}\n", ip) +
			"redirectBackend:\n" + selectDNS + "  toPorts: [{port: '53', protocol: UDP}]\n"
	}
	for ip, why := range map[string]string{
		"0.0.0.0":         "the unspecified address",
		"::":              "the unspecified address",
		"::ffff:0.0.0.0":  "the unspecified address",
		"127.0.0.1":       "a loopback address",
		"127.1.2.3":       "a loopback address",
		"::1":             "a loopback address",
		"224.0.0.251":     "a multicast address",
		"ff02::fb":        "a multicast address",
		"255.255.255.255": "the broadcast address",
	} {
		err := Validate(policy(t, spec(ip)))
		want := "policy kube-system/lrp: spec.redirectFrontend.addressMatcher.ip: "
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), why) {
			t.Errorf("ip %s: error %v, want %q... %q", ip, err, want, why)
		}
		if _, _, cerr := Convert(policy(t, spec(ip)), nil, Options{}); cerr == nil || cerr.Error() != err.Error() {
			t.Errorf("ip %s: Convert error %v, want Validate's %v", ip, cerr, err)
		}
	}
	// The classic redirects stay valid: link-local metadata and node-local
	// DNS addresses, and any unicast address.
	for _, ip := range []string{"169.254.169.254", "169.254.20.10", "10.96.0.10", "fd00::10"} {
		if err := Validate(policy(t, spec(ip))); err != nil {
			t.Errorf("ip %s: %v, want valid", ip, err)
		}
	}
}
