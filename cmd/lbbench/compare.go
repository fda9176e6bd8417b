package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// anchor is a saved run to compare with: the output of Cilium's
// load-balancer benchmark (pkg/loadbalancer/benchmark/cmd, as
// shared/bench/cilium-anchor.sh builds it), or an lbbench -json line.
type anchor struct {
	Insert  float64 `json:"insert_services_per_sec"`
	Delete  float64 `json:"delete_services_per_sec"`
	Bytes   float64 `json:"bytes_in_use_per_service"`
	Objects float64 `json:"objects_per_service"`
}

// comparison is our figures over the anchor's (above 1: we insert and
// delete faster; below 1: we use less memory).
type comparison struct {
	Anchor  anchor  `json:"anchor"`
	Insert  float64 `json:"insert_ratio"`
	Delete  float64 `json:"delete_ratio"`
	Bytes   float64 `json:"bytes_ratio"`
	Objects float64 `json:"objects_ratio"`
}

var (
	// Cilium's benchmark prints, per phase ("Insert:", "Delete:"), its
	// rounds and then "Avg: ... N services per second", and at the end
	// "Avg: Allocated ... per service: N objs, NB alloc, NB in-use".
	anchorRate   = regexp.MustCompile(`(?m)^Avg:.*?([0-9.]+) services per second`)
	anchorMemory = regexp.MustCompile(`(?m)^Avg: Allocated.*per service:\s*([0-9.]+) objs,\s*[0-9.]+B alloc,\s*([0-9.]+)B in-use`)
	anchorPhase  = regexp.MustCompile(`(?m)^(Insert|Delete)\b`)
)

// readAnchor reads a saved run from path.
func readAnchor(path string) (anchor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return anchor{}, err
	}
	a, err := parseAnchor(string(data))
	if err != nil {
		return anchor{}, fmt.Errorf("-compare %s: %w", path, err)
	}
	return a, nil
}

func parseAnchor(text string) (anchor, error) {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); strings.HasPrefix(last, "{") {
		var r result
		if err := json.Unmarshal([]byte(last), &r); err != nil {
			return anchor{}, fmt.Errorf("last line: %w", err)
		}
		return anchor{r.InsertServicesPerSecAv, r.DeleteServicesPerSecAv, r.BytesInUsePerService, r.ObjectsPerService}, nil
	}
	var a anchor
	phases := anchorPhase.FindAllStringSubmatchIndex(text, -1)
	for i, p := range phases {
		end := len(text)
		if i+1 < len(phases) {
			end = phases[i+1][0]
		}
		m := anchorRate.FindStringSubmatch(text[p[0]:end])
		if m == nil {
			continue
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		switch text[p[2]:p[3]] {
		case "Insert":
			a.Insert = v
		case "Delete":
			a.Delete = v
		}
	}
	if m := anchorMemory.FindStringSubmatch(text); m != nil {
		a.Objects, _ = strconv.ParseFloat(m[1], 64)
		a.Bytes, _ = strconv.ParseFloat(m[2], 64)
	}
	if a.Insert == 0 || a.Delete == 0 || a.Bytes == 0 || a.Objects == 0 {
		return anchor{}, errors.New("want Cilium's benchmark output (an Insert and a Delete average in services per second, and the memory per service) or an lbbench -json line")
	}
	return a, nil
}

// compare prints our figures against the anchor's and returns the ratios.
func compare(res result, a anchor, out io.Writer) *comparison {
	c := &comparison{
		Anchor:  a,
		Insert:  res.InsertServicesPerSecAv / a.Insert,
		Delete:  res.DeleteServicesPerSecAv / a.Delete,
		Bytes:   res.BytesInUsePerService / a.Bytes,
		Objects: res.ObjectsPerService / a.Objects,
	}
	fmt.Fprintf(out, "against the anchor: insert %.0f vs %.0f services/s = %.2fx, delete %.0f vs %.0f = %.2fx, "+
		"heap %.0f vs %.0f B/service = %.2fx, objects %.1f vs %.1f = %.2fx\n",
		res.InsertServicesPerSecAv, a.Insert, c.Insert, res.DeleteServicesPerSecAv, a.Delete, c.Delete,
		res.BytesInUsePerService, a.Bytes, c.Bytes, res.ObjectsPerService, a.Objects, c.Objects)
	return c
}
