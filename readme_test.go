package lbstate_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docFiles are the README and the pages of docs/ it links to.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md")
	}
	return append([]string{"README.md"}, pages...)
}

var (
	goBlock     = regexp.MustCompile("(?m)^```go\n")
	markedBlock = regexp.MustCompile("(?s)<!-- example: (\\S+) -->\n```go\n(.*?)```")
)

// Every Go block of the README and of docs/ is marked <!-- example: FILE -->
// and stands verbatim (line by line, indentation aside) in FILE, an
// Example test that compiles and runs, or a program whose Example beside
// it runs it: the documentation's code cannot rot.
func TestREADMEExamplesAreRunnable(t *testing.T) {
	total := 0
	for _, doc := range docFiles(t) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := markedBlock.FindAllStringSubmatch(string(text), -1)
		if n := len(goBlock.FindAllString(string(text), -1)); n != len(blocks) {
			t.Errorf("%s has %d Go blocks, %d of them marked with the Example that holds them", doc, n, len(blocks))
		}
		if doc == "README.md" && len(blocks) == 0 {
			t.Error("README.md has no runnable Go example (Using the library)")
		}
		total += len(blocks)
		for _, b := range blocks {
			file, code := b[1], b[2]
			src, err := os.ReadFile(file)
			if err != nil {
				t.Errorf("%s: %v", doc, err)
				continue
			}
			if !hasExample(t, file, src) {
				t.Errorf("%s: neither %s nor a test file beside it has an Example function", doc, file)
			}
			if !strings.Contains(normalize(string(src)), normalize(code)) {
				t.Errorf("%s's example is not in %s verbatim:\n%s", doc, file, code)
			}
		}
	}
	if total < 3 {
		t.Errorf("%d marked examples in README.md and docs/, want the library's, the Writer's and the source's", total)
	}
}

// hasExample says whether src, the text of file, or a test file of its
// package has an Example function.
func hasExample(t *testing.T, file string, src []byte) bool {
	if strings.Contains(string(src), "func Example") {
		return true
	}
	tests, err := filepath.Glob(filepath.Join(filepath.Dir(file), "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tests {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "func Example") {
			return true
		}
	}
	return false
}

// normalize drops indentation and blank lines.
func normalize(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
