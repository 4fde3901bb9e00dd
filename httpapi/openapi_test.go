package httpapi

import (
	"bufio"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// documentedOperations reads the "METHOD path" pairs of docs/openapi.yaml.
func documentedOperations(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("../docs/openapi.yaml")
	if err != nil {
		t.Fatalf("open the OpenAPI document: %v", err)
	}
	defer f.Close()
	pathRe := regexp.MustCompile(`^  (/\S*):\s*$`)
	methodRe := regexp.MustCompile(`^    (get|put|post|patch|delete|head|options):\s*$`)
	ops := map[string]bool{}
	inPaths, current := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if !strings.HasPrefix(line, " ") {
			inPaths, current = line == "paths:", ""
			continue
		}
		if !inPaths {
			continue
		}
		if m := pathRe.FindStringSubmatch(line); m != nil {
			current = m[1]
			continue
		}
		if m := methodRe.FindStringSubmatch(line); m != nil && current != "" {
			ops[strings.ToUpper(m[1])+" "+current] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ops
}

// TestOpenAPI_DocumentsEveryRoute checks docs/openapi.yaml describes exactly the routes
// the router serves, method by method.
func TestOpenAPI_DocumentsEveryRoute(t *testing.T) {
	h := mustNew(t, testConfig(newLeaderNode("n1"), seededReader()))
	routes := map[string]bool{}
	err := chi.Walk(h.(*server).router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if consoleRoute(route) {
			return nil
		}
		routes[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) < 24 {
		t.Fatalf("only %d routes walked", len(routes))
	}
	docs := documentedOperations(t)
	var missing, extra []string
	for r := range routes {
		if !docs[r] {
			missing = append(missing, r)
		}
	}
	for d := range docs {
		if !routes[d] {
			extra = append(extra, d)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("routes missing from docs/openapi.yaml: %v\ndocumented but not routed: %v", missing, extra)
	}
}

// consoleRoute reports whether route serves the web console's pages, which are not part
// of the API (docs/console.md describes them).
func consoleRoute(route string) bool {
	return route == "/" || route == "/ui" || strings.HasPrefix(route, "/ui/")
}

// TestOpenAPI_ListsEveryErrorCode checks that the Error schema's code enum in
// docs/openapi.yaml holds exactly the codes package api defines.
func TestOpenAPI_ListsEveryErrorCode(t *testing.T) {
	src, err := os.ReadFile("../api/types.go")
	if err != nil {
		t.Fatal(err)
	}
	var defined []string
	for _, m := range regexp.MustCompile(`(?m)^\s*Code\w+\s*=\s*"(\w+)"`).FindAllStringSubmatch(string(src), -1) {
		defined = append(defined, m[1])
	}
	doc, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`enum: \[(invalid_argument[^\]]*)\]`).FindStringSubmatch(string(doc))
	if m == nil {
		t.Fatal("docs/openapi.yaml has no enum of error codes starting with invalid_argument")
	}
	var documented []string
	for _, c := range strings.Split(m[1], ",") {
		documented = append(documented, strings.TrimSpace(c))
	}
	sort.Strings(defined)
	sort.Strings(documented)
	if strings.Join(defined, " ") != strings.Join(documented, " ") {
		t.Fatalf("error codes in package api:\n  %v\ndocumented in the Error schema:\n  %v", defined, documented)
	}
}
