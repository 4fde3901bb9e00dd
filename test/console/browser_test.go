package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/rosterhq/roster/internal/testtool"
	"github.com/rosterhq/roster/internal/wait"
)

// Viewport is the size of the browser window and of the screenshots: a laptop screen.
const (
	viewportWidth  = 1280
	viewportHeight = 800
)

// chromium returns the path of a Chromium binary: $ROSTER_CHROMIUM, else the first of
// the usual names on PATH. Without one the test is skipped, except under CI=true,
// where it fails (.ci/run installs Debian's chromium package).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ROSTER_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testtool.Missing(t, "Chromium (chromium, chromium-browser, google-chrome or headless-shell on PATH, or ROSTER_CHROMIUM)",
		"Debian: apt-get install chromium")
	return ""
}

// newBrowser starts a headless Chromium for the test and returns its allocator
// context. The browser may reach loopback only: every other host name fails to
// resolve, and every other address goes to a proxy that is not there.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.WindowSize(viewportWidth, viewportHeight),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"),
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.Flag("proxy-bypass-list", "127.0.0.1;localhost"),
		chromedp.UserDataDir(t.TempDir()),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	ctx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	return ctx
}

// tab is one browser tab that fails the test on any error its pages report: an
// uncaught exception or unhandled rejection, a console.error, and any entry of level
// error in the browser's own log, which is where Chromium reports a Content Security
// Policy violation and a resource that failed to load (an answer 4xx or 5xx, a refused
// connection). The only exceptions are the failed loads the test declares with
// allowFailedLoad, each an answer the console is meant to get.
type tab struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	errs    []string       // the errors seen so far
	allowed []failedLoad   // declared by allowFailedLoad
	ignored map[string]int // the allowed failed loads seen, by "status path"
}

// failedLoad is an answer a test expects the console to get: status for a request to
// path (the URL's path, without its query).
type failedLoad struct {
	path   string
	status int
}

// newTab opens a tab of the browser of alloc with a laptop viewport.
func newTab(t *testing.T, alloc context.Context) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	tb := &tab{t: t, ctx: ctx, ignored: map[string]int{}}
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			tb.record("uncaught exception: " + exceptionText(ev.ExceptionDetails))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					if a.Value != nil {
						parts = append(parts, string(a.Value))
					} else {
						parts = append(parts, a.Description)
					}
				}
				tb.record("console.error: " + strings.Join(parts, " "))
			}
		case *cdplog.EventEntryAdded:
			if e := ev.Entry; e != nil && e.Level == cdplog.EntryLevelError && !tb.allowedLoad(e) {
				tb.record(fmt.Sprintf("browser log (%s): %s [%s]", e.Source, e.Text, e.URL))
			}
		}
	})
	if err != nil {
		t.Fatalf("start the browser: %v", err)
	}
	// chromedp enables the Log domain when it attaches to a tab; enable it here too, so
	// that the browser's log entries reach the listener whatever chromedp does.
	if _, err := chromedp.Call(tb.ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the browser log: %v", err)
	}
	tb.do(chromedp.EmulateViewport(viewportWidth, viewportHeight))
	// The listener works: a console.error of a page reaches it.
	tb.do(chromedp.Navigate("about:blank"), chromedp.Evaluate[chromedp.Void](`console.error("listener check")`))
	wait.For(t, 5*time.Second, "the test to see a console error of its page", func() bool { return tb.saw("listener check") })
	tb.forget("listener check")
	t.Cleanup(tb.noErrors)
	return tb
}

// allowFailedLoad declares an answer the console is meant to get, which Chromium logs
// as an error ("Failed to load resource"): status for a request to path, or to any
// path if path is "". The caller says why it is expected. The allowed failed loads
// seen are logged at the end of the test.
func (tb *tab) allowFailedLoad(path string, status int) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.allowed = append(tb.allowed, failedLoad{path: path, status: status})
}

// allowedLoad reports whether a log entry is a failed load that allowFailedLoad
// declared, and counts it.
func (tb *tab) allowedLoad(e *cdplog.Entry) bool {
	if e.Source != cdplog.EntrySourceNetwork || e.URL == "" {
		return false
	}
	u, err := url.Parse(e.URL)
	if err != nil {
		return false
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, a := range tb.allowed {
		if (a.path == "" || u.Path == a.path) && strings.Contains(e.Text, fmt.Sprintf("status of %d ", a.status)) {
			tb.ignored[fmt.Sprintf("%d %s", a.status, u.Path)]++
			return true
		}
	}
	return false
}

// detectorsWork shows that the tab sees the browser-level errors of a console page (it
// must be on one): the page loads a script against the console's Content Security
// Policy and an image that is not there, and both must be reported; they are then
// forgotten.
func (tb *tab) detectorsWork() {
	tb.t.Helper()
	const csp, missing = "csp-detector-check", "/ui/assets/load-detector-check.png"
	tb.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const s = document.createElement('script');
		s.src = 'data:text/javascript,void%%20"%s"';
		document.head.append(s);
		new Image().src = %q;
	})()`, csp, missing)))
	wait.For(tb.t, 10*time.Second, "the test to see a CSP violation and a failed load of the console page", func() bool {
		return tb.saw(csp) && tb.saw(missing)
	})
	tb.forget(csp)
	tb.forget(missing)
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "?"
	}
	s := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		s += " " + d.Exception.Description
	}
	return fmt.Sprintf("%s (%s:%d:%d)", s, d.URL, d.LineNumber, d.ColumnNumber)
}

func (tb *tab) record(s string) {
	tb.mu.Lock()
	tb.errs = append(tb.errs, s)
	tb.mu.Unlock()
}

func (tb *tab) saw(s string) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, e := range tb.errs {
		if strings.Contains(e, s) {
			return true
		}
	}
	return false
}

// forget drops the errors seen so far that contain s: those a check caused on purpose.
func (tb *tab) forget(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	kept := tb.errs[:0]
	for _, e := range tb.errs {
		if !strings.Contains(e, s) {
			kept = append(kept, e)
		}
	}
	tb.errs = kept
}

// noErrors fails the test if a page of the tab threw or reported an error.
func (tb *tab) noErrors() {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, e := range tb.errs {
		tb.t.Errorf("error in the browser: %s", e)
	}
	tb.errs = nil
	for _, k := range slices.Sorted(maps.Keys(tb.ignored)) {
		tb.t.Logf("expected failed loads: %d × %s", tb.ignored[k], k)
	}
	clear(tb.ignored)
}

// do runs actions that return nothing, each within 20 s.
func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	for _, a := range actions {
		ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
		err := chromedp.Do(ctx, a)
		cancel()
		if err != nil {
			tb.t.Fatalf("browser: %v", err)
		}
	}
}

// eval evaluates a JavaScript expression that returns a string.
func (tb *tab) eval(expr string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it is true, failing the test after
// within with what was awaited, the page's location and its main text.
func (tb *tab) waitFor(within time.Duration, what, cond string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, within+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond,
		chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(25*time.Millisecond)))
	if err != nil {
		loc := tb.eval(`location.pathname + location.search`)
		text := tb.eval(`(document.querySelector('main') || document.body).innerText.slice(0, 1500) + [...document.querySelectorAll('dialog[open]')].map(d => "\n[dialog] " + d.innerText.slice(0, 500)).join("")`)
		text += "\ncondition now: " + tb.eval(`String(`+cond+`)`)
		tb.t.Fatalf("waiting %s for %s: %v\nat %s, the page shows:\n%s", within, what, err, loc, text)
	}
}

// click clicks the element of a CSS selector once it is visible. Finding and clicking
// happen in one evaluation in the page: the live views re-render rows as changes
// arrive, and a node found in one DevTools call may be gone by the next.
func (tb *tab) click(css string) {
	tb.t.Helper()
	sel, err := json.Marshal(css)
	if err != nil {
		tb.t.Fatal(err)
	}
	tb.waitFor(10*time.Second, "a visible "+css+" to click", fmt.Sprintf(
		`(() => { const e = document.querySelector(%s); if (!e || e.getClientRects().length === 0) return false; e.click(); return true; })()`, sel))
}

// screenshot captures the viewport as name.png: in the test's artifact directory
// always, and in docs/console/ with ROSTER_UPDATE_SCREENSHOTS=1.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		tb.t.Fatalf("screenshot %s is not a PNG (%d bytes)", name, len(png))
	}
	dirs := []string{tb.t.ArtifactDir()}
	if os.Getenv("ROSTER_UPDATE_SCREENSHOTS") == "1" {
		dirs = append(dirs, filepath.Join("..", "..", "docs", "console"))
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			tb.t.Fatal(err)
		}
	}
}

// saveDownloadsIn makes the browser save the files its pages download in dir, under
// the names the pages suggest; completed reports how many downloads the browser has
// finished writing (the file exists, under its name, before it is complete).
func (tb *tab) saveDownloadsIn(dir string) (completed func() int) {
	tb.t.Helper()
	var done atomic.Int32
	eventsOn := true
	chromedp.ListenBrowser(tb.ctx, func(ev any) {
		if p, ok := ev.(*browser.EventDownloadProgress); ok && p.State == browser.DownloadProgressStateCompleted {
			done.Add(1)
		}
	})
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir, EventsEnabled: &eventsOn,
	}); err != nil {
		tb.t.Fatalf("set the download directory: %v", err)
	}
	return func() int { return int(done.Load()) }
}

// press sends keys to the focused element, as a keyboard would.
func (tb *tab) press(keys string, opts ...chromedp.KeyOption) {
	tb.t.Helper()
	tb.do(chromedp.KeyEvent(keys, opts...))
}

// markWhen has the page note the time (Date.now(), milliseconds since the epoch) at
// which the JavaScript condition cond first holds, checked on every change of the
// DOM; when returns it. It measures how long a change takes to reach the page
// without the delay of polling from the test.
func (tb *tab) markWhen(key, cond string) {
	tb.t.Helper()
	tb.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const marks = window.__marks = window.__marks || {};
		const key = %q;
		delete marks[key];
		const check = () => {
			if (marks[key] === undefined && (%s)) {
				marks[key] = Date.now();
				obs.disconnect();
			}
		};
		const obs = new MutationObserver(check);
		obs.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
		check();
	})()`, key, cond)))
}

// when returns the time markWhen noted for key; the condition must have held.
func (tb *tab) when(key string) time.Time {
	tb.t.Helper()
	ms := tb.eval(fmt.Sprintf(`String((window.__marks || {})[%q])`, key))
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		tb.t.Fatalf("no time noted for %s: %q", key, ms)
	}
	return time.UnixMilli(n)
}
