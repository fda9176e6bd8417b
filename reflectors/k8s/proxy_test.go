package k8s

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
)

func TestProxyAnnotationsGiveAProxyRedirectOrNameWhatIsWrong(t *testing.T) {
	svc := func(annotations map[string]string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Annotations: annotations},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "grpc", Port: 9000}}},
		}
	}
	for _, tc := range []struct {
		annotations map[string]string
		want        string // the proxy redirect, or "" for none
		err         string
	}{
		{annotations: nil},
		{annotations: map[string]string{AnnotationProxyPort: "15001"}, want: "proxy:15001 (file)"},
		{annotations: map[string]string{AnnotationProxyPort: " 15001 ", AnnotationProxyPorts: "grpc, http,grpc"}, want: "proxy:15001[grpc,http] (file)"},
		{annotations: map[string]string{AnnotationProxyPort: "0"}, err: `service shop/web: annotation lbstate.io/proxy-port: "0" is not a port (1-65535)`},
		{annotations: map[string]string{AnnotationProxyPort: "65536"}, err: `service shop/web: annotation lbstate.io/proxy-port: "65536" is not a port`},
		{annotations: map[string]string{AnnotationProxyPort: "envoy"}, err: `annotation lbstate.io/proxy-port: "envoy" is not a port`},
		{annotations: map[string]string{AnnotationProxyPorts: "http"}, err: `service shop/web: annotation lbstate.io/proxy-ports: needs lbstate.io/proxy-port`},
		{annotations: map[string]string{AnnotationProxyPort: "15001", AnnotationProxyPorts: "http,admin"}, err: `service shop/web: annotation lbstate.io/proxy-ports: "admin" is not the name of one of the Service's ports`},
		{annotations: map[string]string{AnnotationProxyPort: "15001", AnnotationProxyPorts: "http,"}, err: `annotation lbstate.io/proxy-ports: "" is not the name`},
	} {
		pr, ok, err := ConvertProxyRedirect(svc(tc.annotations), lb.SourceFile)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.annotations, err, tc.err)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.annotations, err)
		case tc.want == "" && ok:
			t.Errorf("%v: %s, want none", tc.annotations, pr)
		case tc.want != "" && (!ok || pr.String() != tc.want):
			t.Errorf("%v: %s (%v), want %s", tc.annotations, pr, ok, tc.want)
		}
	}
}
