package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// The output formats of every command that lists rows (kubectl's and
// statedb's db/show's choice): an aligned table for people, JSON and YAML
// for scripts.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// outputFormats are the accepted -o values; an alias maps to the format
// it names. "text" is what maps called its table until lbctl had one -o
// for all commands: scripts that pass it keep working, on every command.
var outputFormats = map[string]string{
	formatTable: formatTable, formatJSON: formatJSON, formatYAML: formatYAML,
	"text": formatTable,
}

// outputFlag is the value of -o, --output. parseArgs checks it once the
// flags are parsed, so that a bad value reads as lbctl's other bad values
// do (-o "xml": want table, json or yaml), not wrapped in pflag's words.
type outputFlag struct{ format, given string }

// addOutputFlag registers -o, --output on a listing command. table says
// what the table format prints for that command.
func addOutputFlag(fs *pflag.FlagSet, table string) *outputFlag {
	o := &outputFlag{format: formatTable}
	fs.VarP(o, "output", "o", fmt.Sprintf("Output format: table (%s), json or yaml", table))
	return o
}

func (o *outputFlag) String() string { return o.format }

// Type is "string", as for the flag's plain-string predecessor: the help
// reads "-o, --output string".
func (o *outputFlag) Type() string { return "string" }

func (o *outputFlag) Set(s string) error {
	o.given, o.format = s, outputFormats[strings.ToLower(s)]
	return nil
}

// check reports a format no command knows.
func (o *outputFlag) check() error {
	if o.format == "" {
		return fmt.Errorf("-o %q: want table, json or yaml", o.given)
	}
	return nil
}

// writeYAML writes v as YAML with the field names and order of its JSON
// encoding, for the values lbctl prints that have JSON tags only: -o yaml
// and -o json then show the same document.
func writeYAML(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		return err
	}
	plainStyle(&doc)
	out, err := yaml.Marshal(&doc) // as rowPrinter's, the default indentation
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// plainStyle drops the JSON flow style and quotes the decoder keeps, so
// that the encoder writes block YAML and quotes only what needs quotes.
func plainStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plainStyle(c)
	}
}
