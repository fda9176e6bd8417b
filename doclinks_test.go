package lbstate_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`^#+ (.*)`)
	// issueRef catches what a reader outside the team cannot follow.
	issueRef = regexp.MustCompile(`(?i)\bissues? \d+|\.\./shared/`)
)

// anchors returns a Markdown file's heading anchors, computed as GitHub
// does: lower case, punctuation other than '-' and '_' dropped, spaces
// to '-', and "-N" appended to the Nth repeat of a heading.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		m := mdHeading.FindStringSubmatch(l)
		if fence || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+string(rune('0'+n))] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// Every relative link of the README, of docs/ and of the monitoring
// README names a file of the
// repository, and every #anchor a heading of the page it points to.
func TestDocLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := cache[file]; ok {
			return a
		}
		text, err := os.ReadFile(file)
		if err != nil {
			return nil
		}
		cache[file] = anchors(string(text))
		return cache[file]
	}
	links := 0
	// The monitoring README links into docs/ too.
	for _, doc := range append(docFiles(t), "examples/monitoring/README.md") {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			path, anchor, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: link %q: %v", doc, target, err)
					continue
				}
				if rel, err := filepath.Rel(".", file); err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s: link %q leaves the repository", doc, target)
				}
			}
			if anchor != "" && !anchorsOf(file)[anchor] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", doc, target, file, anchor)
			}
		}
	}
	if links < 50 {
		t.Errorf("found %d relative links in README.md and docs/, the link pattern is broken", links)
	}
}

// The README and docs/ speak to a reader outside the team: no tracker
// issue numbers, no paths outside the repository.
func TestDocsNameNoIssuesAndNoOutsidePaths(t *testing.T) {
	for _, doc := range docFiles(t) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(string(text), "\n") {
			if m := issueRef.FindString(l); m != "" {
				t.Errorf("%s:%d names %q", doc, i+1, m)
			}
		}
	}
}
