package monitoring

import (
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// required says whether a missing prometheus or promtool fails the test
// instead of skipping it: in CI (LBSTATE_REQUIRE_BPF=1, which .ci/run
// sets, or LBSTATE_REQUIRE_PROMETHEUS=1).
func required() bool {
	return os.Getenv("LBSTATE_REQUIRE_BPF") == "1" || os.Getenv("LBSTATE_REQUIRE_PROMETHEUS") == "1"
}

// lookPath returns the path of a Prometheus binary, skipping the test
// when it is not installed (failing it where required).
func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if required() {
			t.Fatalf("%s is required (Debian: apt-get install prometheus): %v", name, err)
		}
		t.Skipf("%s not installed (Debian: apt-get install prometheus)", name)
	}
	return p
}

// promtool check rules accepts the rules file, and promtool test rules
// passes: each alert fires when it should and stays quiet when it
// should not (rules/lbstate.rules_test.yml).
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool := lookPath(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "lbstate.rules.yml"},
		{"test", "rules", "lbstate.rules_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "rules"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// Every alert has unit tests that expect it to fire and expect it to
// stay quiet, a summary naming its object, and a runbook in the README
// at the anchor its runbook_url names.
func TestEveryAlertIsUnitTestedAndHasARunbook(t *testing.T) {
	b, err := os.ReadFile("rules/lbstate.rules_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rules := readRules(t)
	if len(rules) < 6 {
		t.Fatalf("%d alerts, want at least the six of issue 29", len(rules))
	}
	for _, r := range rules {
		if !fires[r.Alert] || !quiet[r.Alert] {
			t.Errorf("alert %s: a unit test that fires it: %v; one that keeps it quiet: %v", r.Alert, fires[r.Alert], quiet[r.Alert])
		}
		if !strings.Contains(r.Annotations["summary"], "{{ $labels.") {
			t.Errorf("alert %s: the summary %q names no object", r.Alert, r.Annotations["summary"])
		}
		anchor := strings.ToLower(r.Alert)
		if !strings.HasSuffix(r.Annotations["runbook_url"], "/examples/monitoring/README.md#"+anchor) {
			t.Errorf("alert %s: runbook_url %q, want README.md#%s", r.Alert, r.Annotations["runbook_url"], anchor)
		}
		if !regexp.MustCompile(`(?m)^#+ ` + r.Alert + `$`).Match(readme) {
			t.Errorf("alert %s: README.md has no heading %q for its runbook", r.Alert, r.Alert)
		}
	}
}

// The PrometheusRule manifest holds exactly the rules of the plain rules
// file.
func TestPrometheusRuleHoldsTheSameRules(t *testing.T) {
	read := func(path string) map[string]any {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return v
	}
	plain, manifest := read("rules/lbstate.rules.yml"), read("rules/lbstate-prometheusrule.yaml")
	if manifest["apiVersion"] != "monitoring.coreos.com/v1" || manifest["kind"] != "PrometheusRule" {
		t.Fatalf("lbstate-prometheusrule.yaml is a %v %v, want a monitoring.coreos.com/v1 PrometheusRule", manifest["apiVersion"], manifest["kind"])
	}
	spec, _ := manifest["spec"].(map[string]any)
	if !reflect.DeepEqual(spec, plain) {
		t.Errorf("the PrometheusRule's spec differs from lbstate.rules.yml:\nspec:  %v\nrules: %v", spec, plain)
	}
}
