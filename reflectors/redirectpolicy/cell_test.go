package redirectpolicy

import (
	"strings"
	"testing"
)

func TestConfigRejectsBadAddressMatcherCIDR(t *testing.T) {
	cfg := DefaultConfig
	cfg.LRPAddressMatcherCIDRs = []string{"169.254.0.0/16", "10.0.0.0/33"}
	if _, err := cfg.Options(); err == nil || !strings.Contains(err.Error(), `--lrp-address-matcher-cidrs: "10.0.0.0/33"`) {
		t.Errorf("error %v, want one naming the flag and the bad CIDR", err)
	}
}
