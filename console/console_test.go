package console

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

func server(t *testing.T) *httptest.Server {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	Register(r)
	s := httptest.NewServer(r)
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// Every page is the same shell with the strict policy; the assets are
// served with their types; no directory is listed.
func TestPagesAndAssets(t *testing.T) {
	s := server(t)
	for _, p := range []string{"/", "/runs", "/runs/abc-123", "/?h=x", "/runs?status=running", "/mcp-servers", "/schedules", "/webhooks", "/compare"} {
		resp, body := get(t, s.URL+p)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<script type="module" src="/console/app.js">`) {
			t.Errorf("%s: %d %.80q", p, resp.StatusCode, body)
		}
		// Without an icon of its own a browser asks for /favicon.ico, which
		// is no console route: with access control on the API answers it 401.
		if !strings.Contains(body, `<link rel="icon" href="/console/favicon.svg"`) {
			t.Errorf("%s: the shell names no icon among the console's assets", p)
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != ContentSecurityPolicy || !strings.Contains(got, "script-src 'self';") {
			t.Errorf("%s: CSP %q", p, got)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", p, resp.Header)
		}
	}
	for asset, ctype := range map[string]string{"app.js": "text/javascript", "run.js": "text/javascript", "console.css": "text/css", "favicon.svg": "image/svg+xml"} {
		resp, body := get(t, s.URL+AssetPrefix+"/"+asset)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("%s: %d %s", asset, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s: no CSP", asset)
		}
	}
	for _, p := range []string{AssetPrefix + "/", AssetPrefix + "/nope.js"} {
		if resp, _ := get(t, s.URL+p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
}

// The strict policy forbids inline script and style, so the shell and
// the scripts must have none: no <script> without src, no style
// attribute, no inline event handler, no innerHTML (text only ever goes
// in as text). Every module a script imports is embedded.
func TestNoInlineCodeAndEveryImportEmbedded(t *testing.T) {
	files, err := fs.Sub(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := fs.ReadFile(files, "index.html")
	for _, bad := range []*regexp.Regexp{regexp.MustCompile(`<script(?:\s+type="module")?>`), regexp.MustCompile(`\sstyle=`), regexp.MustCompile(`\son[a-z]+=`), regexp.MustCompile(`<style`)} {
		if bad.Match(page) {
			t.Errorf("index.html has inline code: %s", bad)
		}
	}
	imports := regexp.MustCompile(`from '\./([a-z]+\.js)'`)
	scripts, _ := fs.Glob(files, "*.js")
	if len(scripts) < 5 {
		t.Fatalf("scripts = %v", scripts)
	}
	for _, name := range scripts {
		src, _ := fs.ReadFile(files, name)
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function", "document.write", ".style."} {
			if strings.Contains(string(src), bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
		for _, m := range imports.FindAllStringSubmatch(string(src), -1) {
			if _, err := fs.Stat(files, m[1]); err != nil {
				t.Errorf("%s imports %s, which is not embedded", name, m[1])
			}
		}
	}
}
