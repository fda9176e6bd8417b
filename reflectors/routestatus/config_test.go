package routestatus

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidateNamesTheFlag(t *testing.T) {
	if err := DefaultConfig.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tt := range []struct {
		change func(*Config)
		flag   string
	}{
		{func(c *Config) { c.RouteStatusLeaseNamespace = "Kube_System" }, "--route-status-lease-namespace"},
		{func(c *Config) { c.RouteStatusLeaseName = "" }, "--route-status-lease-name"},
		{func(c *Config) { c.RouteStatusLeaseDuration = 100 * time.Millisecond }, "--route-status-lease-duration"},
		{func(c *Config) { c.RouteStatusQPS = 0 }, "--route-status-qps"},
	} {
		c := DefaultConfig
		tt.change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("error %v, want one naming %s", err, tt.flag)
		}
		c.RouteStatus = false
		if err := c.Validate(); err != nil {
			t.Errorf("off: %v, want no error", err)
		}
	}
}
