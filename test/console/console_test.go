package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/testnet"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server/servertest"
	"github.com/rosterhq/roster/snapshot"
)

const (
	ns    = "public"
	group = "DEFAULT_GROUP"
)

// backend is a TCP listener on loopback standing in for an instance, so that a TCP
// probe of it succeeds while it is open.
type backend = testnet.Backend

func newBackend(t *testing.T) *backend { return testnet.New(t, "127.0.0.1") }

func ptr[T any](v T) *T { return &v }

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// seed registers the services the views show: orders, TCP-probed every second on two
// real listeners; payments and inventory on NONE clusters, one payments instance set
// unhealthy; a service in another group.
func seed(ctx context.Context, t *testing.T, c *client.Client) (b1, b2 *backend) {
	t.Helper()
	idx := must[uint64](t)
	idx(c.UpsertService(ctx, ns, group, "orders", api.ServiceRequest{ProtectThreshold: ptr(0.4), Metadata: map[string]string{"team": "checkout"}}))
	idx(c.UpsertCluster(ctx, ns, group, "orders", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{
		Type: "TCP", Interval: "1s", Timeout: "400ms", Rise: 1, Fall: 1,
	}}))
	b1, b2 = newBackend(t), newBackend(t)
	for _, b := range []*backend{b1, b2} {
		idx(c.RegisterInstance(ctx, ns, group, "orders", "127.0.0.1", b.Port(), api.InstanceRequest{
			Weight: ptr(1.0), Metadata: map[string]string{"version": "1.4.2", "zone": "a"},
		}))
	}
	idx(c.UpsertService(ctx, ns, group, "payments", api.ServiceRequest{ProtectThreshold: ptr(0.7)}))
	for _, svc := range []string{"payments", "inventory"} {
		idx(c.UpsertCluster(ctx, ns, group, svc, "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}))
	}
	for i := 1; i <= 3; i++ {
		idx(c.RegisterInstance(ctx, ns, group, "payments", "127.0.0.2", 9000+i, api.InstanceRequest{}))
	}
	idx(c.SetInstanceHealth(ctx, ns, group, "payments", "127.0.0.2", 9003, false))
	idx(c.RegisterInstance(ctx, ns, group, "inventory", "127.0.0.3", 7000, api.InstanceRequest{Cluster: ptr("DEFAULT")}))
	idx(c.UpsertCluster(ctx, ns, "billing", "invoices", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}))
	idx(c.RegisterInstance(ctx, ns, "billing", "invoices", "127.0.0.4", 8080, api.InstanceRequest{}))
	return b1, b2
}

// rowCells is a JavaScript expression: the trimmed texts of the cells of the first row
// matching css, or null.
func rowCells(css string) string {
	return fmt.Sprintf(`(() => { const r = document.querySelector(%q); return r ? [...r.cells].map(c => c.textContent.trim()) : null; })()`, css)
}

// countsAre is a condition: the services row of name shows these instance, healthy and
// unhealthy counts.
func countsAre(name string, total, healthy, unhealthy int) string {
	return fmt.Sprintf(`(() => { const c = %s; return !!c && c[2] === %q && c[3] === %q && c[4] === %q; })()`,
		rowCells(fmt.Sprintf(`#services tr[data-service=%q]`, name)), strconv.Itoa(total), strconv.Itoa(healthy), strconv.Itoa(unhealthy))
}

func instanceRow(port int) string {
	return fmt.Sprintf(`#instances tr[data-addr="127.0.0.1:%d"]`, port)
}

// TestConsole drives the console of a 3-node cluster without ACLs through a follower:
// the services list and its counts, the service view following probes and
// deregistrations live, an edit and a deregistration through the UI, the cluster and
// snapshot views, the back button; then, on a cluster with ACLs, the login.
func TestConsole(t *testing.T) {
	alloc := newBrowser(t)
	start := time.Now()
	c := servertest.New(t, 3, servertest.FastTimeouts())
	c.MustLeader()
	follower := c.Nodes[c.Followers()[0]]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := follower.Client()
	b1, b2 := seed(ctx, t, cl)

	tb := newTab(t, alloc)
	// With ACLs off the node answers GET /v1/acl/token/self with 404: that is how the
	// console learns that there is no login.
	tb.allowFailedLoad("/v1/acl/token/self", 404)
	allowNoLeader(tb)

	// A browser asking for / is sent to the console, which opens on the services.
	tb.do(chromedp.Navigate(follower.URL() + "/"))
	tb.waitFor(10*time.Second, "the services view after GET /", `location.pathname === "/ui/services" && !!document.querySelector('#services tbody tr[data-service]')`)
	tb.detectorsWork()

	// The list shows every service of the namespace with its counts.
	tb.waitFor(10*time.Second, "the counts of orders and payments",
		countsAre("orders", 2, 2, 0)+" && "+countsAre("payments", 3, 2, 1)+" && "+countsAre("inventory", 1, 1, 0)+" && "+countsAre("invoices", 1, 1, 0))
	// payments has 2 of 3 healthy, at or below its threshold of 0.7; orders 2 of 2, above 0.4.
	tb.waitFor(10*time.Second, "the protect threshold states",
		fmt.Sprintf(`(%s || [])[5] === "0.7 reached" && (%s || [])[5] === "0.4 not reached"`,
			rowCells(`#services tr[data-service="payments"]`), rowCells(`#services tr[data-service="orders"]`)))
	tb.screenshot("services")
	keyboard(t, tb)

	// Filtering by name keeps the URL shareable and asks the server.
	tb.do(chromedp.SendKeys(chromedp.ID("svc-name"), "pay"))
	tb.waitFor(10*time.Second, "the name filter", `location.search.includes("name=pay") && document.querySelectorAll('#services tbody tr[data-service]').length === 1 && !!document.querySelector('#services tr[data-service="payments"]')`)
	tb.click(`nav a[data-nav="services"]`)
	tb.waitFor(10*time.Second, "the unfiltered list", `location.search === "" && document.querySelectorAll('#services tbody tr[data-service]').length === 4`)
	// The back button returns to the filtered list, filter field included.
	tb.do(chromedp.NavigateBack())
	tb.waitFor(10*time.Second, "the filtered list after going back", `location.search.includes("name=pay") && document.getElementById('svc-name').value === "pay" && !document.querySelector('#services tr[data-service="orders"]')`)
	tb.click(`nav a[data-nav="services"]`)
	tb.waitFor(10*time.Second, "the unfiltered list again", `document.querySelectorAll('#services tbody tr[data-service]').length === 4`)

	// The list links to each service with a plain link.
	href := tb.eval(`document.querySelector('#services tr[data-service="orders"] a').getAttribute('href')`)
	if href != "/ui/namespaces/public/groups/DEFAULT_GROUP/services/orders" {
		t.Fatalf("the orders link is %q", href)
	}
	tb.click(`#services tr[data-service="orders"] a`)
	tb.waitFor(10*time.Second, "both orders instances healthy",
		fmt.Sprintf(`!!document.querySelector('%s[data-health="healthy"]') && !!document.querySelector('%s[data-health="healthy"]')`, instanceRow(b1.Port()), instanceRow(b2.Port())))
	tb.waitFor(10*time.Second, "the TCP check spec of the DEFAULT cluster", `(document.querySelector('#clusters tr[data-cluster="DEFAULT"]') || {}).textContent?.includes("TCP connect") && document.querySelector('#clusters tr[data-cluster="DEFAULT"]').textContent.includes("1s / 400ms")`)
	tb.waitFor(10*time.Second, "a successful last probe", fmt.Sprintf(`(document.querySelector('%s') || {}).textContent?.includes("success")`, instanceRow(b1.Port())))
	// From here on, a reload would lose this mark.
	tb.do(chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`))

	// The leader's probe fails once the listener closes: the row turns red and says so.
	b1.Close()
	took := time.Now()
	tb.waitFor(15*time.Second, "the closed instance shown unhealthy", fmt.Sprintf(`!!document.querySelector('%s[data-health="unhealthy"] .health.bad')`, instanceRow(b1.Port())))
	t.Logf("a closed listener showed unhealthy after %v (probe interval 1s, fall 1)", time.Since(took).Round(10*time.Millisecond))
	colour := tb.eval(fmt.Sprintf(`getComputedStyle(document.querySelector('%s .health .dot')).backgroundColor`, instanceRow(b1.Port())))
	if colour != "rgb(207, 34, 46)" {
		t.Errorf("the unhealthy dot is %s, want the red rgb(207, 34, 46)", colour)
	}
	if text := tb.eval(fmt.Sprintf(`document.querySelector('%s .health').textContent`, instanceRow(b1.Port()))); text != "unhealthy" && text != "unhealthy (changing)" {
		t.Errorf("the health cell says %q", text)
	}
	tb.waitFor(10*time.Second, "the failed probe's outcome", fmt.Sprintf(`(document.querySelector('%s') || {}).textContent?.includes("refused")`, instanceRow(b1.Port())))
	// The other nodes confirmed the transition: each node's view is shown with the probe.
	tb.waitFor(10*time.Second, "the nodes' views of the confirmation", fmt.Sprintf(`/Last confirmation: .*n\d down/.test((document.querySelector('%s .vantages') || {}).textContent || "")`, instanceRow(b1.Port())))
	tb.waitFor(10*time.Second, "the change announced to screen readers", `document.getElementById('announcer').textContent.includes("is now unhealthy")`)
	tb.screenshot("service")

	// A deregistration through the API disappears without a reload. The time from the
	// API call to the change of the page is logged, not checked: the issue asks for
	// under a second, which a loaded machine cannot promise.
	gone := fmt.Sprintf(`!document.querySelector('%s')`, instanceRow(b2.Port()))
	tb.markWhen("deregistered", gone)
	sent := time.Now()
	if _, err := cl.DeregisterInstance(ctx, ns, group, "orders", "127.0.0.1", b2.Port()); err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	tb.waitFor(10*time.Second, "the deregistered instance gone", gone)
	shown := tb.when("deregistered")
	t.Logf("live update: an API deregistration left the service view %v after the request was sent (the API answered after %v)",
		shown.Sub(sent).Round(time.Millisecond), answered.Sub(sent).Round(time.Millisecond))

	// Edit the weight through the UI; the API sees it.
	tb.click(fmt.Sprintf(`%s button[aria-label="Edit 127.0.0.1:%d"]`, instanceRow(b1.Port()), b1.Port()))
	tb.do(chromedp.WaitVisible(chromedp.CSS(`dialog[open] input[name="weight"]`)),
		chromedp.SetValue(chromedp.CSS(`dialog[open] input[name="weight"]`), "7"))
	tb.click(`dialog[open] button[type="submit"]`)
	tb.waitFor(10*time.Second, "the dialog closed", `!document.querySelector('dialog')`)
	wait.For(t, 10*time.Second, "weight 7 through the API", func() bool {
		res, _, err := cl.Instance(ctx, ns, group, "orders", "127.0.0.1", b1.Port(), client.QueryOptions{})
		return err == nil && res.Instance.Weight == 7
	})
	tb.waitFor(10*time.Second, "weight 7 in the row", fmt.Sprintf(`(%s || [])[2] === "7"`, rowCells(instanceRow(b1.Port()))))

	// Register an instance and change the cluster's check through the UI.
	b3 := newBackend(t)
	tb.click(`#register`)
	tb.do(chromedp.WaitVisible(chromedp.CSS(`dialog[open] input[name="ip"]`)),
		chromedp.SetValue(chromedp.CSS(`dialog[open] input[name="ip"]`), "127.0.0.1"),
		chromedp.SetValue(chromedp.CSS(`dialog[open] input[name="port"]`), strconv.Itoa(b3.Port())),
		chromedp.SetValue(chromedp.CSS(`dialog[open] textarea[name="metadata"]`), "version=1.5.0\nzone=b"))
	tb.click(`dialog[open] button[type="submit"]`)
	tb.waitFor(10*time.Second, "the registered instance in the list", fmt.Sprintf(`!!document.querySelector('%s')`, instanceRow(b3.Port())))
	got, _, err := cl.Instance(ctx, ns, group, "orders", "127.0.0.1", b3.Port(), client.QueryOptions{})
	if err != nil || got.Instance.Metadata["version"] != "1.5.0" || got.Instance.Metadata["zone"] != "b" || got.Instance.Cluster != "DEFAULT" {
		t.Fatalf("the instance registered through the console: %+v, %v", got.Instance, err)
	}
	tb.click(`#clusters tr[data-cluster="DEFAULT"] button`)
	tb.do(chromedp.WaitVisible(chromedp.CSS(`dialog[open] input[name="interval"]`)),
		chromedp.SetValue(chromedp.CSS(`dialog[open] input[name="interval"]`), "2s"))
	tb.click(`dialog[open] button[type="submit"]`)
	tb.waitFor(10*time.Second, "the new interval in the clusters table", `(document.querySelector('#clusters tr[data-cluster="DEFAULT"]') || {}).textContent?.includes("2s / 400ms")`)
	cs, _, err := cl.Cluster(ctx, ns, group, "orders", "DEFAULT", client.QueryOptions{})
	if err != nil || cs.Cluster.HealthCheck.Type != "TCP" || cs.Cluster.HealthCheck.Interval.String() != "2s" || cs.Cluster.HealthCheck.Fall != 1 {
		t.Fatalf("the check changed through the console: %+v, %v", cs.Cluster.HealthCheck, err)
	}
	if _, err := cl.DeregisterInstance(ctx, ns, group, "orders", "127.0.0.1", b3.Port()); err != nil {
		t.Fatal(err)
	}

	// Deregister through the UI, behind a confirmation.
	tb.click(fmt.Sprintf(`%s button[aria-label="Deregister 127.0.0.1:%d"]`, instanceRow(b1.Port()), b1.Port()))
	tb.waitFor(10*time.Second, "the confirmation", `(document.querySelector('dialog[open]') || {}).textContent?.includes("cannot be undone")`)
	tb.click(`dialog[open] button[type="submit"]`)
	wait.For(t, 10*time.Second, "the instance gone through the API", func() bool {
		_, _, err := cl.Instance(ctx, ns, group, "orders", "127.0.0.1", b1.Port(), client.QueryOptions{})
		return client.IsNotFound(err)
	})
	tb.waitFor(10*time.Second, "no instances left", `!document.querySelector('#instances tr[data-addr]')`)
	if tb.eval(`String(window.__sameDocument)`) != "true" {
		t.Fatal("the page was reloaded")
	}

	// Cluster: three members, the leader, this node ready.
	tb.click(`nav a[data-nav="cluster"]`)
	tb.waitFor(10*time.Second, "three members", `location.pathname === "/ui/cluster" && document.querySelectorAll('#members tr[data-member]').length === 3`)
	// Leadership may move while the test runs (a loaded machine): the view names the
	// leader the cluster has.
	wait.For(t, 10*time.Second, "the view to name the leader", func() bool {
		i := c.Leader()
		return i >= 0 && tb.eval(`(document.getElementById('leader-id') || {}).textContent || ""`) == c.Nodes[i].ID
	})
	tb.waitFor(10*time.Second, "this node ready", `!!document.querySelector('#ready .health.good')`)
	tb.waitFor(10*time.Second, "the members' progress", `[...document.querySelectorAll('#members tr[data-member]')].every(r => /^\d+$/.test(r.cells[6].textContent) && /^\d+$/.test(r.cells[8].textContent))`)
	// The list comes from the leader, which knows when it last heard from each follower.
	tb.waitFor(10*time.Second, "the members' last contact", `[...document.querySelectorAll('#members tr[data-member]')].every(r => r.cells[1].textContent.includes("leader") ? r.cells[5].textContent === "leader" : / ago$/.test(r.cells[5].textContent))`)
	tb.screenshot("cluster")

	// An operator hands leadership over from the view.
	before := c.Leader()
	tb.click(`#transfer`)
	tb.click(`dialog[open] button[type="submit"]`)
	wait.For(t, 15*time.Second, "a new leader, named by the view", func() bool {
		i := c.Leader()
		return i >= 0 && i != before && tb.eval(`(document.getElementById('leader-id') || {}).textContent || ""`) == c.Nodes[i].ID
	})
	c.MustLeader()

	testSnapshot(ctx, t, tb, cl)
	tb.screenshot("snapshot")

	// The back button returns to the cluster view.
	tb.do(chromedp.NavigateBack())
	tb.waitFor(10*time.Second, "the cluster view after going back", `location.pathname === "/ui/cluster" && !!document.querySelector('#members tr[data-member]')`)

	tb.noErrors()
	t.Logf("console without ACLs: %v", time.Since(start).Round(100*time.Millisecond))
	t.Run("ACL", testLogin)
}

// allowNoLeader allows 503 answers to any request: while leadership moves (the
// transfer the test asks for, or an election on a loaded machine, whose clusters run
// with short Raft timeouts) the API answers 503 (no leader; not ready), which the
// console shows as it is, and its live streams try again.
func allowNoLeader(tb *tab) {
	tb.allowFailedLoad("", 503)
}

// keyboard walks the services view (showing the seeded services) with the keyboard:
// from the heading the view focuses, Shift+Tab goes back up to the skip link, which
// shows itself; Enter on it moves the focus to the main content; Tab from there reaches
// the first service's link, and Enter opens that service's view. It returns to the
// list with the back button.
func keyboard(t *testing.T, tb *tab) {
	t.Helper()
	tb.waitFor(10*time.Second, "the view's heading focused", `document.activeElement === document.querySelector('main h1')`)
	focused := `(() => { const e = document.activeElement; return e ? e.tagName + (e.id ? '#' + e.id : '') + ' ' + (e.textContent || '').trim().slice(0, 40) : 'nothing'; })()`
	for i := 0; tb.eval(`String(document.activeElement.classList.contains('skip'))`) != "true"; i++ {
		if i == 10 {
			t.Fatalf("Shift+Tab from the heading did not reach the skip link in 10 presses; the focus is on %s", tb.eval(focused))
		}
		tb.press(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift))
	}
	if v := tb.eval(`String(document.activeElement.getBoundingClientRect().left >= 0)`); v != "true" {
		t.Errorf("the focused skip link is not on the screen")
	}
	tb.press(kb.Enter)
	tb.waitFor(5*time.Second, "the skip link to move the focus to the main content", `document.activeElement === document.getElementById('main') && location.pathname === "/ui/services"`)
	first := `document.querySelector('#services tbody tr[data-service] a')`
	for i := 0; tb.eval(`String(document.activeElement === `+first+`)`) != "true"; i++ {
		if i == 15 {
			t.Fatalf("Tab from the main content did not reach the first service's link in 15 presses; the focus is on %s", tb.eval(focused))
		}
		tb.press(kb.Tab)
	}
	href := tb.eval(first + `.getAttribute('href')`)
	tb.press(kb.Enter)
	tb.waitFor(10*time.Second, "Enter on the link to open the service's view", fmt.Sprintf(`location.pathname === %q && !!document.querySelector('#instances tr[data-addr]')`, href))
	tb.do(chromedp.NavigateBack())
	tb.waitFor(10*time.Second, "the services list again", `location.pathname === "/ui/services" && document.querySelectorAll('#services tbody tr[data-service]').length === 4`)
}

// testSnapshot drives the snapshot view: the download saves an archive of the current
// state; an archive saved through the API, picked for restore, shows its index and
// counts, and so does the confirmation; cancelling sends nothing, confirming restores
// it (an instance registered after the save is gone again, through the API). It leaves
// the view showing the restored archive's summary.
func testSnapshot(ctx context.Context, t *testing.T, tb *tab, cl *client.Client) {
	t.Helper()
	idx := must[uint64](t)
	tb.click(`nav a[data-nav="snapshot"]`)
	tb.waitFor(10*time.Second, "the snapshot view", `location.pathname === "/ui/snapshot" && !!document.getElementById('download')`)
	dir := t.TempDir()
	archive := filepath.Join(dir, "saved.snap")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cl.SaveSnapshot(ctx, f, false)
	if err1 := f.Close(); err == nil {
		err = err1
	}
	if err != nil {
		t.Fatal(err)
	}
	// Named as the download names it, for the screenshot.
	named := filepath.Join(dir, fmt.Sprintf("roster-%d.snap", info.Index))
	if err := os.Rename(archive, named); err != nil {
		t.Fatal(err)
	}
	archive = named
	saved := inspect(t, archive)
	want := snapshot.Counts{Namespaces: 1, Services: 4, Instances: 5}
	if saved.Index != info.Index || saved.Counts != want {
		t.Fatalf("the archive saved through the API: index %d, counts %+v; want index %d, counts %+v", saved.Index, saved.Counts, info.Index, want)
	}
	// Registered after the save: the restore must remove it again.
	idx(cl.UpsertCluster(ctx, ns, group, "late", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}))
	lateIndex := idx(cl.RegisterInstance(ctx, ns, group, "late", "127.0.0.6", 6000, api.InstanceRequest{}))

	// The download button saves the current state, "late" included, as roster-<index>.snap.
	downloads := filepath.Join(dir, "downloads")
	if err := os.Mkdir(downloads, 0o755); err != nil {
		t.Fatal(err)
	}
	completed := tb.saveDownloadsIn(downloads)
	tb.click(`#download`)
	var got string
	wait.For(t, 20*time.Second, "the downloaded archive in "+downloads, func() bool {
		if completed() != 1 {
			return false
		}
		m, _ := filepath.Glob(filepath.Join(downloads, "roster-*.snap"))
		if len(m) == 1 {
			got = m[0]
		}
		return got != ""
	})
	down := inspect(t, got)
	want = snapshot.Counts{Namespaces: 1, Services: 5, Instances: 6}
	if down.Index < lateIndex || down.Counts != want || filepath.Base(got) != fmt.Sprintf("roster-%d.snap", down.Index) {
		t.Fatalf("the downloaded %s: index %d, counts %+v; want an index of at least %d, counts %+v, and the index in the name",
			filepath.Base(got), down.Index, down.Counts, lateIndex, want)
	}
	tb.waitFor(10*time.Second, "the download's status", fmt.Sprintf(`(document.getElementById('download-status') || {}).textContent?.includes("as of index %d")`, down.Index))

	// The archive saved before "late" is picked: its index and counts show before anything
	// is sent, and the confirmation names them.
	tb.do(chromedp.SetUploadFiles(chromedp.CSS("#archive"), []string{archive}))
	tb.waitFor(10*time.Second, "the archive's index and counts",
		fmt.Sprintf(`(document.getElementById('archive-index') || {}).textContent?.startsWith("%d /") && document.getElementById('archive-counts').textContent === "1 namespace, 4 services, 5 instances"`, saved.Index))
	// The page counts the restore uploads it starts.
	tb.do(chromedp.Evaluate[chromedp.Void](`(() => {
		window.__restores = 0;
		const fetch0 = window.fetch;
		window.fetch = (url, init) => {
			if (init && init.method === 'PUT' && String(url).startsWith('/v1/snapshot')) window.__restores++;
			return fetch0(url, init);
		};
	})()`))
	confirmation := fmt.Sprintf(`Every member’s state is replaced by the state at index %d: 1 namespace, 4 services and 5 instances.`, saved.Index)
	tb.click(`#restore`)
	tb.waitFor(10*time.Second, "the confirmation naming the index and counts", fmt.Sprintf(
		`(document.querySelector('dialog[open]') || {}).textContent?.includes(%q) && document.querySelector('dialog[open] button[type="submit"]').textContent === "Restore index %d"`, confirmation, saved.Index))
	// Cancel: nothing is sent, nothing changes.
	tb.click(`dialog[open] button[type="button"]`)
	tb.waitFor(10*time.Second, "the confirmation closed", `!document.querySelector('dialog')`)
	if n := tb.eval(`String(window.__restores)`); n != "0" {
		t.Fatalf("cancelling the confirmation started %s restore uploads", n)
	}
	if _, _, err := cl.Instance(ctx, ns, group, "late", "127.0.0.6", 6000, client.QueryOptions{}); err != nil {
		t.Fatalf("after cancelling, the instance registered after the save: %v", err)
	}
	if text := tb.eval(`document.getElementById('restore-status').textContent`); text != "" {
		t.Fatalf("after cancelling, the restore status says %q", text)
	}

	// Confirm: the cluster goes back to the archive.
	tb.click(`#restore`)
	tb.click(`dialog[open] button[type="submit"]`)
	tb.waitFor(30*time.Second, "the restore reported", `(document.getElementById('restore-status') || {}).textContent?.startsWith("Restored.") && !document.querySelector('dialog')`)
	if n := tb.eval(`String(window.__restores)`); n != "1" {
		t.Fatalf("the confirmed restore started %s uploads, want 1", n)
	}
	wait.For(t, 15*time.Second, "the instance registered after the save gone, through the API", func() bool {
		_, _, err := cl.Instance(ctx, ns, group, "late", "127.0.0.6", 6000, client.QueryOptions{})
		return client.IsNotFound(err)
	})
	res, _, err := cl.Services(ctx, ns, client.ServicesQuery{})
	if err != nil || res.Total != 4 {
		t.Fatalf("after the restore: %d services, %v; want the archive's 4", res.Total, err)
	}
	now, _, err := cl.Instances(ctx, ns, group, "payments", client.InstancesQuery{})
	if err != nil || len(now.Instances) != 3 {
		t.Fatalf("after the restore, payments has %d instances, %v; want 3", len(now.Instances), err)
	}
}

// inspect checks the archive at path as the node would before a restore (the state
// included) and returns its meta.json.
func inspect(t *testing.T, path string) snapshot.Meta {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := snapshot.Inspect(f, snapshot.ReadOptions{Dir: t.TempDir(), Check: snapshot.CheckState})
	if err != nil {
		t.Fatalf("%s is not a valid archive: %v", filepath.Base(path), err)
	}
	return m
}

// testLogin: with ACLs on, an anonymous session sees the login prompt; a pasted token
// loads the views; a token without operator rights sees a plain 403; logout asks again.
func testLogin(t *testing.T) {
	alloc := newBrowser(t)
	c := servertest.New(t, 3, servertest.FastTimeouts(), servertest.WithACL())
	c.MustLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	node := c.Nodes[c.Followers()[0]]
	mgmt, err := node.Client().ACLBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin := client.New(node.HTTPAddr, client.WithToken(mgmt.SecretID))
	// The node the browser uses knows the token once it applied the bootstrap.
	wait.For(t, 10*time.Second, "the management token known to "+node.ID, func() bool {
		_, err := admin.TokenSelf(ctx)
		return err == nil
	})
	if _, err := admin.RegisterInstance(ctx, ns, group, "orders", "127.0.0.5", 8080, api.InstanceRequest{}); err != nil {
		t.Fatal(err)
	}
	reader, err := admin.CreateToken(ctx, api.ACLTokenRequest{Description: "read-only", Rules: api.ACLRules{Namespaces: map[string]string{"*": "read"}}})
	if err != nil {
		t.Fatal(err)
	}

	tb := newTab(t, alloc)
	// The anonymous session and the wrong token get 401 from GET /v1/acl/token/self; the
	// read-only token gets 403 from the members' list. The test checks that each is shown.
	tb.allowFailedLoad("/v1/acl/token/self", 401)
	tb.allowFailedLoad("/v1/cluster/members", 403)
	allowNoLeader(tb)
	tb.do(chromedp.Navigate(node.URL() + "/ui/services"))
	tb.waitFor(10*time.Second, "the login prompt", `location.pathname === "/ui/login" && !!document.querySelector('form#login input#token')`)
	tb.detectorsWork()
	if next := tb.eval(`new URLSearchParams(location.search).get("next")`); next != "/ui/services" {
		t.Fatalf("the login prompt returns to %q", next)
	}
	tb.screenshot("login")

	// A wrong token is refused with the API's message.
	tb.do(chromedp.SendKeys(chromedp.ID("token"), "00000000-0000-4000-8000-000000000000"))
	tb.click(`form#login button[type="submit"]`)
	tb.waitFor(10*time.Second, "the refusal", `(document.querySelector('#login [role="alert"]') || {}).textContent?.includes("Not accepted")`)

	tb.do(chromedp.SetValue(chromedp.ID("token"), mgmt.SecretID))
	tb.click(`form#login button[type="submit"]`)
	tb.waitFor(10*time.Second, "the services after login", `location.pathname === "/ui/services" && !!document.querySelector('#services tr[data-service="orders"]')`)
	tb.waitFor(10*time.Second, "the logout button", `document.getElementById('session').textContent.includes("Log out")`)
	tb.click(`#services tr[data-service="orders"] a`)
	tb.waitFor(10*time.Second, "the instance and its actions", `!!document.querySelector('#instances tr[data-addr="127.0.0.5:8080"] button') && !!document.getElementById('register')`)

	// Log out, and in again with a read-only token: no actions, and the cluster view's
	// 403 is shown as it is.
	tb.click(`#session button`)
	tb.waitFor(10*time.Second, "the login prompt after logout", `location.pathname === "/ui/login" && sessionStorage.length === 0`)
	tb.do(chromedp.SetValue(chromedp.ID("token"), reader.SecretID))
	tb.click(`form#login button[type="submit"]`)
	tb.waitFor(10*time.Second, "the services for the read-only token", `!!document.querySelector('#services tr[data-service="orders"]')`)
	tb.click(`#services tr[data-service="orders"] a`)
	tb.waitFor(10*time.Second, "the instance without actions", `!!document.querySelector('#instances tr[data-addr="127.0.0.5:8080"]') && !document.querySelector('#instances tr[data-addr] button') && !document.getElementById('register')`)
	tb.click(`nav a[data-nav="cluster"]`)
	tb.waitFor(10*time.Second, "the 403 shown plainly", `(document.querySelector('main [role="alert"]') || {}).textContent?.includes("Permission denied") && document.querySelector('main [role="alert"]').textContent.includes("operator")`)
	tb.noErrors()
}
