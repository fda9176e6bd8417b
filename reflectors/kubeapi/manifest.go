package kubeapi

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
)

// ManifestDocument is one document of a manifest and the line of the
// manifest it starts on.
type ManifestDocument struct {
	Line int
	Data []byte
}

// SplitManifest splits a YAML stream at its "---" lines, leaving out the
// documents that hold nothing but comments.
func SplitManifest(data []byte) []ManifestDocument {
	var docs []ManifestDocument
	line := 1
	for _, doc := range splitDocuments(data) {
		if !isComment(doc) {
			docs = append(docs, ManifestDocument{Line: line, Data: doc})
		}
		line += bytes.Count(doc, []byte("\n")) + 2 // its lines and the "---" after it
	}
	return docs
}

// Error places err, about the document, in the manifest name:
// "name:LINE: err", on the line err names ("line N" of the document) or
// else the document's first.
func (d ManifestDocument) Error(name string, err error) error {
	at := d.Line
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		at = d.Line + n - 1
	}
	return fmt.Errorf("%s:%d: %w", name, at, err)
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// Start returns the line of the manifest where the document's content
// starts: its first that is neither blank nor a comment.
func (d ManifestDocument) Start() int {
	for i, l := range bytes.Split(d.Data, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			return d.Line + i
		}
	}
	return d.Line
}

// splitDocuments splits a YAML stream at its "---" lines, keeping every
// line so that line numbers can be counted.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur [][]byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if bytes.HasPrefix(l, []byte("---")) && len(bytes.TrimSpace(l[3:])) == 0 {
			docs = append(docs, bytes.Join(cur, []byte("\n")))
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	return append(docs, bytes.Join(cur, []byte("\n")))
}

// isComment reports whether a document holds nothing but blank lines and
// comments.
func isComment(doc []byte) bool {
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}
