package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fetch runs http_get with url and optional headers.
func fetch(t *testing.T, tool Tool, rawURL string, headers map[string]string) (httpGetResult, error) {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"url": rawURL, "headers": headers})
	out, err := tool.Run(context.Background(), args)
	var res httpGetResult
	if err == nil {
		if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
			t.Fatalf("result %q is not JSON: %v", out, jerr)
		}
	}
	return res, err
}

// countingServer is an httptest server that counts the requests it got.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func hello(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, "hello")
}

func portOf(t *testing.T, srv *httptest.Server) string {
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

func TestHTTPGetRefusesLoopbackByDefault(t *testing.T) {
	srv, hits := countingServer(t, hello)
	tool := HTTPGet(Config{})

	// httptest listens on 127.0.0.1: a literal IP, refused before dialing.
	_, err := fetch(t, tool, srv.URL, nil)
	if err == nil || !strings.Contains(err.Error(), "loopback/private addresses are not allowed") ||
		!strings.Contains(err.Error(), "127.0.0.1 is a loopback address") || IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}

	// A name that resolves to loopback gets through the URL checks and is
	// refused when the connection is made.
	_, err = fetch(t, tool, "http://localhost:"+portOf(t, srv)+"/", nil)
	if err == nil || !strings.Contains(err.Error(), "refusing to connect to localhost") ||
		!strings.Contains(err.Error(), "loopback/private addresses are not allowed") || IsRetryable(err) {
		t.Fatalf("localhost: err = %v", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("the server got %d requests", hits.Load())
	}

	for _, u := range []string{
		"http://[::1]:" + portOf(t, srv) + "/",
		"http://[::ffff:127.0.0.1]/",
		"http://169.254.169.254/latest/meta-data/",
		"http://10.0.0.1/", "http://192.168.1.1/", "http://100.64.0.1/", "http://0.0.0.0/", "http://[fd00::1]/",
	} {
		if _, err := fetch(t, tool, u, nil); err == nil || !strings.Contains(err.Error(), "loopback/private addresses are not allowed") {
			t.Errorf("%s: err = %v", u, err)
		}
	}
}

func TestHTTPGetAllowPrivate(t *testing.T) {
	var gotUA, gotAccept, gotCookie string
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		gotUA, gotAccept, gotCookie = r.UserAgent(), r.Header.Get("Accept"), r.Header.Get("Cookie")
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s"})
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>a & b</p>")
	})
	tool := HTTPGet(Config{HTTPAllowPrivate: true})
	res, err := fetch(t, tool, srv.URL+"/page", map[string]string{"accept": "text/html"})
	if err != nil {
		t.Fatal(err)
	}
	want := httpGetResult{URL: srv.URL + "/page", Status: 200, ContentType: "text/html", Body: "<p>a & b</p>"}
	if res != want {
		t.Fatalf("result = %+v, want %+v", res, want)
	}
	if gotUA != userAgent || gotAccept != "text/html" {
		t.Fatalf("User-Agent %q, Accept %q", gotUA, gotAccept)
	}
	// No cookie jar: the cookie set above is not sent back.
	if _, err := fetch(t, tool, srv.URL, nil); err != nil || gotCookie != "" {
		t.Fatalf("cookie sent back: %q, %v", gotCookie, err)
	}
	// The result is JSON without HTML escaping.
	args, _ := json.Marshal(map[string]string{"url": srv.URL})
	out, err := tool.Run(context.Background(), args)
	if err != nil || !strings.Contains(out, `"body":"<p>a & b</p>"`) {
		t.Fatalf("raw result %s, %v", out, err)
	}
}

func TestHTTPGetAllowlist(t *testing.T) {
	srv, hits := countingServer(t, hello)
	tool := HTTPGet(Config{HTTPAllowPrivate: true, HTTPAllowedHosts: []string{"Example.com", "*.example.org"}})
	_, err := fetch(t, tool, srv.URL, nil)
	if err == nil || !strings.Contains(err.Error(), `host "127.0.0.1" is not in the allowed hosts (example.com, .example.org)`) || IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the server was reached")
	}

	g := newHTTPGet(Config{HTTPAllowedHosts: []string{"Example.com.", ".example.org", " api.test "}}.withDefaults(), nil)
	for host, want := range map[string]bool{
		"example.com": true, "www.example.com": false, "notexample.com": false,
		"example.org": false, "a.example.org": true, "a.b.example.org": true, "badexample.org": false,
		"api.test": true, "x.api.test": false,
	} {
		if got := g.hostAllowed(host); got != want {
			t.Errorf("hostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
	if !strings.Contains(g.Description(), "example.com, .example.org, api.test") {
		t.Errorf("description does not list the allowed hosts: %s", g.Description())
	}
}

func TestHTTPGetStatuses(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "status %d", code)
	})
	tool := HTTPGet(Config{HTTPAllowPrivate: true})

	res, err := fetch(t, tool, srv.URL+"/404", nil)
	if err != nil || res.Status != 404 || res.Body != "status 404" {
		t.Fatalf("404: %+v, %v", res, err)
	}
	for _, code := range []string{"500", "503"} {
		_, err = fetch(t, tool, srv.URL+"/"+code, nil)
		if err == nil || !IsRetryable(err) || !strings.Contains(err.Error(), "HTTP "+code) {
			t.Fatalf("%s: err = %v, want a retryable error", code, err)
		}
	}
	_, err = fetch(t, tool, srv.URL+"/429", nil)
	if err == nil || !IsRetryable(err) || !strings.Contains(err.Error(), "Retry-After: 7") {
		t.Fatalf("429: err = %v", err)
	}
}

func TestHTTPGetTruncates(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, strings.Repeat("0123456789", 100))
	})
	res, err := fetch(t, HTTPGet(Config{HTTPAllowPrivate: true, HTTPMaxBytes: 25}), srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "0123456789012345678901234…[truncated at 25 bytes]"; res.Body != want {
		t.Fatalf("body = %q, want %q", res.Body, want)
	}
	// Exactly at the cap: nothing is cut.
	res, err = fetch(t, HTTPGet(Config{HTTPAllowPrivate: true, HTTPMaxBytes: 1000}), srv.URL, nil)
	if err != nil || len(res.Body) != 1000 {
		t.Fatalf("body of %d bytes, %v", len(res.Body), err)
	}
}

func TestBodyText(t *testing.T) {
	body := []byte("aéé") // a, then two 2-byte characters
	if got := bodyText(body, 4, "text/plain"); got != "aé…[truncated at 4 bytes]" {
		t.Fatalf("split character: %q", got)
	}
	if got := bodyText([]byte("ok\xff"), 10, ""); got != "ok\uFFFD" {
		t.Fatalf("invalid UTF-8: %q", got)
	}
	if got := bodyText([]byte("\x89PNG\r\n"), 10, "image/png"); got != "[binary content (image/png), 6 bytes, not shown]" {
		t.Fatalf("binary: %q", got)
	}
	if got := bodyText([]byte("a\x00b"), 10, ""); !strings.HasPrefix(got, "[binary content") {
		t.Fatalf("NUL bytes: %q", got)
	}
	if got := bodyText([]byte("<svg/>"), 10, "image/svg+xml"); got != "<svg/>" {
		t.Fatalf("svg: %q", got)
	}
}

func TestHTTPGetTimeoutIsRetryable(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	start := time.Now()
	_, err := fetch(t, HTTPGet(Config{HTTPAllowPrivate: true, HTTPTimeout: 150 * time.Millisecond}), srv.URL, nil)
	if err == nil || !IsRetryable(err) || !strings.Contains(err.Error(), "timed out after 150ms") {
		t.Fatalf("err = %v, want a retryable timeout", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
}

func TestHTTPGetConnectionRefusedIsRetryable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = fetch(t, HTTPGet(Config{HTTPAllowPrivate: true}), "http://"+addr+"/", nil)
	if err == nil || !IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
}

func TestHTTPGetRedirects(t *testing.T) {
	var srv *httptest.Server
	srv, _ = countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/hops/"):
			n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hops/"))
			if n == 0 {
				fmt.Fprint(w, "arrived")
				return
			}
			http.Redirect(w, r, fmt.Sprintf("/hops/%d", n-1), http.StatusFound)
		case r.URL.Path == "/away":
			http.Redirect(w, r, "http://evil.example/steal", http.StatusMovedPermanently)
		case r.URL.Path == "/file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		}
	})
	tool := HTTPGet(Config{HTTPAllowPrivate: true, HTTPAllowedHosts: []string{"127.0.0.1"}})

	res, err := fetch(t, tool, srv.URL+"/hops/5", nil)
	if err != nil || res.Body != "arrived" || res.URL != srv.URL+"/hops/0" {
		t.Fatalf("5 redirects: %+v, %v", res, err)
	}
	_, err = fetch(t, tool, srv.URL+"/hops/6", nil)
	if err == nil || !strings.Contains(err.Error(), "stopped after 5 redirects") || IsRetryable(err) {
		t.Fatalf("6 redirects: %v", err)
	}
	// No DNS lookup happens: the redirect is refused before any connection.
	_, err = fetch(t, tool, srv.URL+"/away", nil)
	if err == nil || !strings.Contains(err.Error(), `refused redirect to http://evil.example/steal: host "evil.example" is not in the allowed hosts`) || IsRetryable(err) {
		t.Fatalf("redirect off the allowlist: %v", err)
	}
	_, err = fetch(t, tool, srv.URL+"/file", nil)
	if err == nil || !strings.Contains(err.Error(), `scheme "file" is not allowed`) {
		t.Fatalf("redirect to file: %v", err)
	}
}

// A redirect from an allowed site to a name that resolves to a forbidden
// address is stopped at dial time. Both servers are on loopback, so the
// test's guard forbids one of them by port.
func TestHTTPGetRedirectToForbiddenAddressRefusedAtDial(t *testing.T) {
	inner, innerHits := countingServer(t, hello)
	innerPort := portOf(t, inner)
	outer, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+innerPort+"/secret", http.StatusFound)
	})
	guard := func(ap netip.AddrPort) error {
		if strconv.Itoa(int(ap.Port())) == innerPort {
			return &blockedError{addr: ap.Addr(), reason: "private"}
		}
		return nil
	}
	tool := newHTTPGet(Config{}.withDefaults(), guard)
	_, err := fetch(t, tool, outer.URL, nil)
	if err == nil || !strings.Contains(err.Error(), "refusing to connect to localhost") ||
		!strings.Contains(err.Error(), "loopback/private addresses are not allowed") || IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
	if innerHits.Load() != 0 {
		t.Fatal("the forbidden server was reached")
	}
}

func TestHTTPGetRefusesBadRequests(t *testing.T) {
	tool := HTTPGet(Config{HTTPAllowPrivate: true})
	cases := []struct {
		url     string
		headers map[string]string
		want    string
	}{
		{"", nil, `"url" is required`},
		{"example.com/page", nil, "not an absolute URL"},
		{"file:///etc/passwd", nil, `scheme "file" is not allowed`},
		{"ftp://example.com/", nil, `scheme "ftp" is not allowed`},
		{"http://user:secret@127.0.0.1/", nil, "credentials in URLs"},
		{"http:///path", nil, "no host"},
		{"http://127.0.0.1/", map[string]string{"Cookie": "a=b"}, `header "Cookie" is not allowed`},
		{"http://127.0.0.1/", map[string]string{"authorization": "Bearer x"}, `header "Authorization" is not allowed`},
		{"http://127.0.0.1/", map[string]string{"Host": "internal"}, `header "Host" is not allowed`},
		{"http://127.0.0.1/", map[string]string{"bad name": "x"}, "invalid header name"},
		{"http://127.0.0.1/", map[string]string{"X-A": "a\r\nInjected: 1"}, "control character"},
	}
	for _, tc := range cases {
		_, err := fetch(t, tool, tc.url, tc.headers)
		if err == nil || !strings.Contains(err.Error(), tc.want) || IsRetryable(err) {
			t.Errorf("%s %v: err = %v, want %q", tc.url, tc.headers, err, tc.want)
		}
		if strings.Contains(fmt.Sprint(err), "secret") {
			t.Errorf("error leaks the URL password: %v", err)
		}
	}
}

func TestAddressClass(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "127.5.5.5": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"10.1.2.3": "private", "172.16.0.1": "private", "192.168.0.1": "private", "fc00::1": "private", "fd12::1": "private",
		"169.254.169.254": "link-local", "fe80::1": "link-local",
		"100.64.0.1": "CGNAT", "100.127.255.255": "CGNAT",
		"0.0.0.0": "unspecified", "::": "unspecified", "0.1.2.3": "unspecified",
		"224.0.0.1": "link-local", "239.1.1.1": "multicast", "ff02::1": "link-local", "ff0e::1": "multicast",
		"255.255.255.255": "reserved",
		"64:ff9b::7f00:1": "loopback (through NAT64)",
		// Public addresses, including one just past CGNAT and a NAT64 one.
		"8.8.8.8": "", "1.1.1.1": "", "100.128.0.1": "", "2001:4860:4860::8888": "", "64:ff9b::808:808": "",
	} {
		if got := addressClass(netip.MustParseAddr(addr)); got != want {
			t.Errorf("addressClass(%s) = %q, want %q", addr, got, want)
		}
	}
}

// TestHTTPGetRefusesTheHostsOwnAddresses: an address of one of this
// host's interfaces is refused even when it is public (issue 23 item 9):
// a server listening on it is this host's. The machine's own addresses
// are enumerated; those addressClass already refuses are checked too.
func TestHTTPGetRefusesTheHostsOwnAddresses(t *testing.T) {
	own, err := interfaceAddrs()
	if err != nil {
		t.Fatalf("list interface addresses: %v", err)
	}
	tool := HTTPGet(Config{})
	var public int
	for _, a := range own {
		if a.IsLoopback() || a.IsLinkLocalUnicast() {
			continue
		}
		if addressClass(a) == "" {
			public++
		}
		// A server on the address, so that a request that got through
		// would be answered and counted.
		ln, err := net.Listen("tcp", netip.AddrPortFrom(a, 0).String())
		if err != nil {
			t.Logf("cannot listen on %s: %v", a, err)
			continue
		}
		var hits atomic.Int32
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) })}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		u := "http://" + ln.Addr().String() + "/"
		if _, err := fetch(t, tool, u, nil); err == nil || !strings.Contains(err.Error(), "loopback/private addresses are not allowed") || IsRetryable(err) {
			t.Errorf("%s: err = %v", u, err)
		}
		if hits.Load() != 0 {
			t.Errorf("%s: the host's own server got %d requests", u, hits.Load())
		}
	}
	t.Logf("checked %d interface addresses, %d of them public", len(own), public)

	// The same rule with a public address the test controls, whatever
	// this machine's interfaces are: 8.8.8.8 as "this host's".
	guard := hostGuard(func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("8.8.8.8")}, nil })
	err = guard(netip.MustParseAddrPort("8.8.8.8:443"))
	if err == nil || err.Error() != "8.8.8.8 is an address of this host; loopback/private addresses are not allowed" {
		t.Errorf("8.8.8.8 as the host's own: err = %v", err)
	}
	if err := guard(netip.MustParseAddrPort("[::ffff:8.8.8.8]:443")); err == nil {
		t.Error("::ffff:8.8.8.8 as the host's own was allowed")
	}
	if err := guard(netip.MustParseAddrPort("1.1.1.1:443")); err != nil {
		t.Errorf("1.1.1.1: err = %v", err)
	}
	// Unlisted interfaces: fail closed.
	failing := hostGuard(func() ([]netip.Addr, error) { return nil, fmt.Errorf("netlink refused") })
	if err := failing(netip.MustParseAddrPort("1.1.1.1:443")); err == nil {
		t.Error("a guard that could not list the interfaces allowed 1.1.1.1")
	}
	// The unspecified addresses reach this host too.
	for _, u := range []string{"http://0.0.0.0/", "http://[::]/"} {
		if _, err := fetch(t, tool, u, nil); err == nil || !strings.Contains(err.Error(), "unspecified") {
			t.Errorf("%s: err = %v", u, err)
		}
	}
}
