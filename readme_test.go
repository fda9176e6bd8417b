package lbstate_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every Go block of the README that is marked <!-- example: FILE --> stands
// verbatim (line by line, indentation aside) in FILE, an Example test that
// compiles and runs: the README's code cannot rot.
func TestREADMEExamplesAreRunnable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)<!-- example: (\\S+) -->\n```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 2 {
		t.Fatalf("%d marked examples in the README, want the library's and the source's", len(blocks))
	}
	for _, b := range blocks {
		file, code := b[1], b[2]
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "func Example") {
			t.Errorf("%s has no Example function", file)
		}
		if !strings.Contains(normalize(string(src)), normalize(code)) {
			t.Errorf("the README's example is not in %s verbatim:\n%s", file, code)
		}
	}
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
