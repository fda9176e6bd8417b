package routestatus

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ControllerName is the controllerName of the status.parents entries
// lbstate writes.
const ControllerName = "lbstate.io/mesh-controller"

// Config is the route status writer's configuration (hive flags).
type Config struct {
	// RouteStatus turns the writer on; it runs only when the hive has a
	// Kubernetes client.
	RouteStatus bool
	// RouteStatusLeaseNamespace and RouteStatusLeaseName name the Lease
	// that elects the one agent that writes.
	RouteStatusLeaseNamespace string
	RouteStatusLeaseName      string
	// RouteStatusLeaseDuration is how long a lease holder that stopped
	// renewing keeps the lease; it renews within 2/3 of it and the others
	// try to take it every 1/6 of it.
	RouteStatusLeaseDuration time.Duration
	// RouteStatusIdentity is this agent's name in the Lease (empty, the
	// default: the host name and the process ID).
	RouteStatusIdentity string
	// RouteStatusQPS and RouteStatusBurst bound the API calls (a read and
	// at most one write per route that changed).
	RouteStatusQPS   float64
	RouteStatusBurst int
}

// DefaultConfig is the default configuration.
var DefaultConfig = Config{
	RouteStatus:               true,
	RouteStatusLeaseNamespace: "kube-system",
	RouteStatusLeaseName:      "lbstate-route-status",
	RouteStatusLeaseDuration:  15 * time.Second,
	RouteStatusQPS:            20,
	RouteStatusBurst:          50,
}

// identity is RouteStatusIdentity, or the host name and process ID.
func (c Config) identity() string {
	if c.RouteStatusIdentity != "" {
		return c.RouteStatusIdentity
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "lbstate"
	}
	return host + "_" + strconv.Itoa(os.Getpid())
}

// Flags registers the configuration's flags.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.Bool("route-status", def.RouteStatus, "Write the status.parents of Gateway API routes on Services (controller "+ControllerName+"), one agent at a time (needs a Kubernetes client)")
	flags.String("route-status-lease-namespace", def.RouteStatusLeaseNamespace, "Namespace of the coordination.k8s.io Lease that elects the agent writing route status")
	flags.String("route-status-lease-name", def.RouteStatusLeaseName, "Name of the Lease that elects the agent writing route status")
	flags.Duration("route-status-lease-duration", def.RouteStatusLeaseDuration, "How long the route status Lease outlives a holder that stopped renewing (a stopped agent releases it at once)")
	flags.String("route-status-identity", def.RouteStatusIdentity, "This agent's identity in the route status Lease (default: host name and process ID)")
	flags.Float64("route-status-qps", def.RouteStatusQPS, "Most API calls per second for route status")
	flags.Int("route-status-burst", def.RouteStatusBurst, "Burst of API calls for route status")
}

// Validate reports a setting that cannot work, naming its flag.
func (c Config) Validate() error {
	switch {
	case !c.RouteStatus:
		return nil
	case len(validation.IsDNS1123Label(c.RouteStatusLeaseNamespace)) > 0:
		return fmt.Errorf("--route-status-lease-namespace: %q is not a namespace name", c.RouteStatusLeaseNamespace)
	case len(validation.IsDNS1123Subdomain(c.RouteStatusLeaseName)) > 0:
		return fmt.Errorf("--route-status-lease-name: %q is not an object name", c.RouteStatusLeaseName)
	case c.RouteStatusLeaseDuration < 600*time.Millisecond:
		return fmt.Errorf("--route-status-lease-duration: %s is shorter than 600ms", c.RouteStatusLeaseDuration)
	case c.RouteStatusQPS <= 0 || c.RouteStatusBurst < 1:
		return fmt.Errorf("--route-status-qps %g, --route-status-burst %d: both must be positive", c.RouteStatusQPS, c.RouteStatusBurst)
	}
	return nil
}

// renewDeadline and retryPeriod derive from the lease duration as
// client-go's defaults do (15s, 10s, 2s), keeping leaderelection's
// rule renewDeadline > 1.2 × retryPeriod.
func (c Config) renewDeadline() time.Duration { return c.RouteStatusLeaseDuration * 2 / 3 }
func (c Config) retryPeriod() time.Duration   { return c.RouteStatusLeaseDuration / 6 }
