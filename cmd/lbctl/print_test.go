package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/lbstate/lbstate/lb"
)

// Printing rows one at a time gives what encoding them all at once gives:
// a JSON array, a YAML sequence.
func TestRowPrinterMatchesEncodingAllRows(t *testing.T) {
	all := []*lb.Backend{
		{Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP")},
		{Address: lb.MustParseL3n4Addr("10.0.0.2:80/TCP"), Unhealthy: true},
		{Address: lb.MustParseL3n4Addr("[2001:db8::1]:53/UDP")},
	}
	for n := range len(all) + 1 {
		rows := all[:n]
		var wantJSON bytes.Buffer
		enc := json.NewEncoder(&wantJSON)
		enc.SetIndent("", "  ")
		if err := enc.Encode(append([]*lb.Backend{}, rows...)); err != nil {
			t.Fatal(err)
		}
		wantYAML, err := yaml.Marshal(rows)
		if err != nil {
			t.Fatal(err)
		}
		for format, want := range map[string][]byte{"json": wantJSON.Bytes(), "yaml": wantYAML} {
			var got bytes.Buffer
			p := newRowPrinter[*lb.Backend](&got, format)
			for _, r := range rows {
				if err := p.print(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.end(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%d rows as %s:\n%s\nwant\n%s", n, format, got.Bytes(), want)
			}
		}
	}
}
