package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/server/servertest"
)

// scaleServices is how many services TestConsoleServicesAtScale registers. The issue
// asks for a list "sorted and paginated for 10k services", but registering that many
// through the API (one write each, 32 at a time, under -race on the shared two-core
// test machine) is too slow for this test: 10,030 services took 26.5 s on one node
// (38 s for the whole test) and 46 to 80 s on three, where 2,030 take about 2.5 s. The
// console holds one server page at a time whatever the total, so a count that spans
// many pages and does not end on a page boundary makes the point: 41 pages of 50, the
// last one of 30.
const scaleServices = 2030

// TestConsoleServicesAtScale pages through a namespace of many services on one node:
// each page shows its slice of the list in the API's order (group, then name), the
// summary and the pager count the pages, next, previous and last move through them,
// a larger page size means fewer pages, a name search narrows the list, and a service
// registered meanwhile appears on the page it belongs to without a reload (the time
// it takes is logged, not checked).
func TestConsoleServicesAtScale(t *testing.T) {
	alloc := newBrowser(t)
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	node := c.Nodes[0]
	cl := node.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// Every third service is in group "batch", the rest in DEFAULT_GROUP; they are
	// registered in a shuffled order, so the list's order is the API's sort.
	type entry struct{ group, name string }
	all := make([]entry, scaleServices)
	for i := range all {
		g := group
		if i%3 == 0 {
			g = "batch"
		}
		all[i] = entry{g, fmt.Sprintf("svc-%04d", i)}
	}
	todo := make(chan entry)
	go func() {
		defer close(todo)
		for _, i := range rand.New(rand.NewPCG(21, 21)).Perm(len(all)) {
			todo <- all[i]
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			for e := range todo {
				if _, err := cl.UpsertService(ctx, ns, e.group, e.name, api.ServiceRequest{}); err != nil {
					select {
					case errs <- fmt.Errorf("register %s/%s: %w", e.group, e.name, err):
					default:
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("registered %d services through the API in %v", len(all), time.Since(start).Round(100*time.Millisecond))
	slices.SortFunc(all, func(a, b entry) int {
		if d := strings.Compare(a.group, b.group); d != 0 {
			return d
		}
		return strings.Compare(a.name, b.name)
	})

	tb := newTab(t, alloc)
	tb.allowFailedLoad("/v1/acl/token/self", 404) // ACLs off: no login
	allowNoLeader(tb)
	// rows is the condition that the list shows exactly these services, in this order.
	rows := func(want []entry) string {
		var ids []string
		for _, e := range want {
			ids = append(ids, e.group+"/"+e.name)
		}
		b, err := json.Marshal(ids)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('#services tbody tr[data-service]')].map(r => r.dataset.group + "/" + r.dataset.service)) === %q`, b)
	}
	// page is the condition that the view shows page n of pages of a list of total.
	page := func(n, pages, total int) string {
		return fmt.Sprintf(`(document.getElementById('svc-summary') || {}).textContent?.startsWith("%d services in namespace public") && document.getElementById('svc-summary').textContent.includes(" · page %d of %d") && document.querySelector('nav.pager').textContent.includes("Page %d of %d")`,
			total, n, pages, n, pages)
	}
	pages := (len(all) + 49) / 50

	tb.do(chromedp.Navigate(node.URL() + "/ui/services"))
	tb.waitFor(20*time.Second, "the first page of 50", page(1, pages, len(all))+" && "+rows(all[:50]))
	tb.detectorsWork()
	// On the first page there is no previous page to go to.
	if v := tb.eval(`String(!document.querySelector('nav.pager a[rel="prev"]') && !!document.querySelector('nav.pager a[rel="next"]'))`); v != "true" {
		t.Fatalf("on page 1 the pager's previous and next links: %s", tb.eval(`document.querySelector('nav.pager').innerHTML`))
	}
	tb.click(`nav.pager a[rel="next"]`)
	tb.waitFor(10*time.Second, "the second page", `location.search === "?page=2" && `+page(2, pages, len(all))+" && "+rows(all[50:100]))
	tb.click(`nav.pager a[rel="prev"]`)
	tb.waitFor(10*time.Second, "the first page again", `location.search === "" && `+page(1, pages, len(all))+" && "+rows(all[:50]))
	tb.click(`nav.pager a:last-child`)
	tb.waitFor(10*time.Second, "the last page", fmt.Sprintf(`location.search === "?page=%d" && `, pages)+page(pages, pages, len(all))+" && "+rows(all[(pages-1)*50:]))
	if v := tb.eval(`String(!document.querySelector('nav.pager a[rel="next"]') && !!document.querySelector('nav.pager a[rel="prev"]'))`); v != "true" {
		t.Fatalf("on the last page the pager's previous and next links: %s", tb.eval(`document.querySelector('nav.pager').innerHTML`))
	}
	// The back button returns to the first page.
	tb.do(chromedp.NavigateBack())
	tb.waitFor(10*time.Second, "the first page after going back", page(1, pages, len(all))+" && "+rows(all[:50]))

	// 1000 a page: three pages, the first one holding 1000 services.
	tb.do(chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById('svc-size'); s.value = "1000"; s.dispatchEvent(new Event('change')); })()`))
	tb.waitFor(20*time.Second, "the first page of 1000", `location.search === "?size=1000" && `+page(1, (len(all)+999)/1000, len(all))+" && "+rows(all[:1000]))
	tb.do(chromedp.NavigateBack())
	tb.waitFor(10*time.Second, "pages of 50 again", page(1, pages, len(all))+" && "+rows(all[:50]))

	// A search narrows the list: the server matches part of the name, ignoring case.
	const search = "SVC-12"
	var found []entry
	for _, e := range all {
		if strings.Contains(strings.ToLower(e.name), strings.ToLower(search)) {
			found = append(found, e)
		}
	}
	tb.do(chromedp.SendKeys(chromedp.ID("svc-name"), search))
	tb.waitFor(10*time.Second, "the search's first page", `location.search === "?name=`+search+`" && `+page(1, (len(found)+49)/50, len(found))+" && "+rows(found[:50]))

	// A service registered now that sorts onto this page appears without a reload.
	added := entry{found[0].group, found[0].name + "a"}
	want := slices.Concat(found[:1], []entry{added}, found[1:49])
	shown := page(1, (len(found)+1+49)/50, len(found)+1) + " && " + rows(want)
	tb.markWhen("registered", shown)
	sent := time.Now()
	if _, err := cl.UpsertService(ctx, ns, added.group, added.name, api.ServiceRequest{}); err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	tb.waitFor(10*time.Second, "the new service on the page", shown)
	t.Logf("live update: a service registered through the API appeared in the list %v after the request was sent (the API answered after %v)",
		tb.when("registered").Sub(sent).Round(time.Millisecond), answered.Sub(sent).Round(time.Millisecond))
	tb.noErrors()
}
