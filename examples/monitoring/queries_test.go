package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

// query is one PromQL expression of a dashboard panel, a dashboard
// variable or an alert rule, with the labels its text names outside the
// expression (legend, summary).
type query struct {
	where  string // "services.json: New flows/s by backend (A)"
	expr   string
	labels []string // from {{x}} and $labels.x
}

var legendLabel = regexp.MustCompile(`{{\s*\$?(?:labels\.)?([a-zA-Z_][a-zA-Z0-9_]*)\s*}}|\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)

func namedLabels(texts ...string) []string {
	var out []string
	for _, s := range texts {
		for _, m := range legendLabel.FindAllStringSubmatch(s, -1) {
			if l := m[1] + m[2]; l != "value" {
				out = append(out, l)
			}
		}
	}
	return out
}

type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int        `json:"id"`
		Title      string     `json:"title"`
		Type       string     `json:"type"`
		Datasource datasource `json:"datasource"`
		GridPos    struct {
			X, W int
		} `json:"gridPos"`
		Targets []struct {
			RefID        string     `json:"refId"`
			Datasource   datasource `json:"datasource"`
			Expr         string     `json:"expr"`
			LegendFormat string     `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// The dashboards are importable as they are: unique UIDs, unique panel
// IDs, panels within the grid, and every panel and query on the
// datasource variable (no datasource of the author's own Grafana).
func TestDashboardsAreImportable(t *testing.T) {
	panels, _ := dashboardQueries(t)
	if len(panels) < 25 {
		t.Errorf("%d panel queries, fewer than the issue's panels", len(panels))
	}
	files, _ := filepath.Glob("dashboards/*.json")
	uids := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.UID == "" || d.Title == "" || uids[d.UID] != "" {
			t.Errorf("%s: uid %q (also %q), title %q: want a unique uid and a title", f, d.UID, uids[d.UID], d.Title)
		}
		uids[d.UID] = f
		ids := map[int]bool{}
		want := datasource{Type: "prometheus", UID: "${datasource}"}
		for _, p := range d.Panels {
			if ids[p.ID] || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W == 0 {
				t.Errorf("%s: panel %q: id %d (repeated: %v), x %d, width %d", f, p.Title, p.ID, ids[p.ID], p.GridPos.X, p.GridPos.W)
			}
			ids[p.ID] = true
			if p.Type == "row" {
				continue
			}
			if p.Datasource != want {
				t.Errorf("%s: panel %q: datasource %+v, want %+v", f, p.Title, p.Datasource, want)
			}
			for _, tg := range p.Targets {
				if tg.Datasource != want || tg.RefID == "" || tg.Expr == "" {
					t.Errorf("%s: panel %q: query %q: datasource %+v, refId %q; want %+v and a refId", f, p.Title, tg.Expr, tg.Datasource, tg.RefID, want)
				}
			}
		}
	}
}

// dashboardQueries reads every dashboard: its panels' queries, and its
// variables' label_values() queries as the PromQL Grafana runs for them.
func dashboardQueries(t *testing.T) (panels, variables []query) {
	t.Helper()
	files, err := filepath.Glob("dashboards/*.json")
	if err != nil || len(files) != 3 {
		t.Fatalf("dashboards: %v, %v; want three", files, err)
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), *([a-zA-Z_]+)\)$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name+"/"+v.Type] = true
			if v.Type != "query" {
				continue
			}
			m := labelValues.FindStringSubmatch(v.Definition)
			if m == nil {
				t.Fatalf("%s: variable %s: %q is not label_values(SELECTOR, LABEL)", f, v.Name, v.Definition)
			}
			variables = append(variables, query{where: fmt.Sprintf("%s: variable %s", filepath.Base(f), v.Name),
				expr: fmt.Sprintf("group by (%s) (%s)", m[2], m[1]), labels: []string{m[2]}})
		}
		for _, want := range []string{"datasource/datasource", "node/query", "namespace/query", "service/query"} {
			if !vars[want] {
				t.Errorf("%s: no variable %s", f, want)
			}
		}
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f, p.Title)
			}
			for _, tg := range p.Targets {
				panels = append(panels, query{where: fmt.Sprintf("%s: %s (%s)", filepath.Base(f), p.Title, tg.RefID),
					expr: tg.Expr, labels: namedLabels(tg.LegendFormat)})
			}
		}
	}
	return panels, variables
}

// rule is one alert of rules/lbstate.rules.yml.
type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile("rules/lbstate.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := yaml.UnmarshalStrict(b, &g); err != nil {
		t.Fatalf("rules/lbstate.rules.yml: %v", err)
	}
	var out []rule
	for _, grp := range g.Groups {
		out = append(out, grp.Rules...)
	}
	return out
}

func ruleQueries(t *testing.T) []query {
	var out []query
	for _, r := range readRules(t) {
		out = append(out, query{where: "alert " + r.Alert, expr: r.Expr, labels: namedLabels(r.Annotations["summary"], r.Annotations["description"])})
	}
	return out
}

// targetLabels are the labels Prometheus adds to every series it scrapes
// (instance, job) and the one the README's scrape configuration adds
// (node); le is a histogram bucket's.
var targetLabels = []string{"instance", "job", "node", "le"}

// exported is what a registry exports: each metric family's name and
// label names, from its collectors' descriptions (families that have no
// series yet included) and from what it gathers.
type exported map[string][]string

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
)

func exportedBy(t *testing.T, reg *prometheus.Registry) exported {
	t.Helper()
	out := exported{}
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	for d := range ch {
		s := d.String()
		name, labels := descName.FindStringSubmatch(s), descLabels.FindStringSubmatch(s)
		if name == nil || labels == nil {
			t.Fatalf("cannot read the description %s", s)
		}
		for _, l := range strings.Split(labels[1], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				out[name[1]] = append(out[name[1]], l)
			}
		}
		if _, ok := out[name[1]]; !ok {
			out[name[1]] = nil
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(out[mf.GetName()], l.GetName()) {
					out[mf.GetName()] = append(out[mf.GetName()], l.GetName())
				}
			}
		}
		if _, ok := out[mf.GetName()]; !ok {
			out[mf.GetName()] = nil
		}
	}
	return out
}

// labels returns the label names of a series name, and whether it is
// one the registry exports (a histogram's _bucket, _sum and _count
// included).
func (e exported) labels(series string) ([]string, bool) {
	if l, ok := e[series]; ok {
		return l, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if l, ok := e[strings.TrimSuffix(series, suffix)]; ok && strings.HasSuffix(series, suffix) {
			return l, true
		}
	}
	return nil, false
}

var (
	metricName = regexp.MustCompile(`\b((?:lbstate|go|process)_[a-zA-Z0-9_]+)\b`)
	selector   = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	labelList  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
)

// check returns what q names that the registry does not export: a
// metric, a label a selector matches on that its metric does not have,
// or a label an aggregation, a join or the legend uses that none of the
// query's metrics has.
func (e exported) check(q query) []string {
	var bad []string
	all := slices.Clone(targetLabels)
	for _, m := range metricName.FindAllStringSubmatch(q.expr, -1) {
		l, ok := e.labels(m[1])
		if !ok {
			bad = append(bad, "metric "+m[1])
		}
		all = append(all, l...)
	}
	for _, s := range selector.FindAllStringSubmatch(q.expr, -1) {
		own, _ := e.labels(s[1])
		for _, m := range matcher.FindAllStringSubmatch(s[2], -1) {
			if !slices.Contains(own, m[1]) && !slices.Contains(targetLabels, m[1]) {
				bad = append(bad, fmt.Sprintf("label %s of %s", m[1], s[1]))
			}
		}
	}
	used := slices.Clone(q.labels)
	for _, l := range labelList.FindAllStringSubmatch(q.expr, -1) {
		for _, name := range strings.Split(l[1], ",") {
			if name = strings.TrimSpace(name); name != "" {
				used = append(used, name)
			}
		}
	}
	for _, l := range used {
		if !slices.Contains(all, l) {
			bad = append(bad, "label "+l)
		}
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}
