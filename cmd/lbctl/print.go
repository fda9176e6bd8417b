package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"
)

type row interface {
	TableHeader() []string
	TableRow() []string
}

// rowsPerBlock is how many rows of a table lbctl aligns together: a table
// of more rows is printed in blocks, each aligned on its own, so that
// lbctl's memory does not grow with the table.
const rowsPerBlock = 1000

// rowPrinter prints rows one at a time as a table, a JSON array or a YAML
// sequence: the same output as encoding all of them at once.
type rowPrinter[Obj row] struct {
	w      io.Writer
	format string
	n      int
	tw     *tabwriter.Writer
}

func newRowPrinter[Obj row](w io.Writer, format string) *rowPrinter[Obj] {
	return &rowPrinter[Obj]{w: w, format: format}
}

func (p *rowPrinter[Obj]) print(o Obj) error {
	defer func() { p.n++ }()
	switch p.format {
	case "json":
		data, err := json.MarshalIndent(o, "  ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n  "
		if p.n == 0 {
			sep = "[\n  "
		}
		_, err = fmt.Fprintf(p.w, "%s%s", sep, data)
		return err
	case "yaml":
		data, err := yaml.Marshal([]Obj{o})
		if err != nil {
			return err
		}
		_, err = p.w.Write(data)
		return err
	}
	p.header()
	fmt.Fprintln(p.tw, strings.Join(o.TableRow(), "\t"))
	if (p.n+1)%rowsPerBlock == 0 {
		return p.tw.Flush()
	}
	return nil
}

// end finishes the output.
func (p *rowPrinter[Obj]) end() error {
	switch {
	case p.format == "json" && p.n == 0, p.format == "yaml" && p.n == 0:
		_, err := io.WriteString(p.w, "[]\n")
		return err
	case p.format == "json":
		_, err := io.WriteString(p.w, "\n]\n")
		return err
	case p.format == "yaml":
		return nil
	}
	p.header() // if there were no rows
	return p.tw.Flush()
}

// header starts a table.
func (p *rowPrinter[Obj]) header() {
	if p.tw == nil {
		var zero Obj // the header does not depend on the object
		p.tw = tabwriter.NewWriter(p.w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(p.tw, strings.Join(zero.TableHeader(), "\t"))
	}
}
