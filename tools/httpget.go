package tools

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// KeyHTTPGet is the key of the http_get tool.
const KeyHTTPGet = "http_get"

// HTTP limits of http_get that are not configurable.
const (
	// MaxRedirects is how many redirects http_get follows.
	MaxRedirects = 5
	// maxHeaders and maxHeaderValue bound the headers a model may send.
	maxHeaders     = 32
	maxHeaderValue = 4096
	userAgent      = "op-stack-executor-http_get/1.0"
)

// HTTPGet is the http_get tool configured by cfg: fetch a URL from the
// public internet and return its body as text.
//
// A model's arguments can be steered by whatever text it has read, so the
// tool treats every URL as hostile: only http and https, no credentials in
// URLs, no cookies, the host allowlist applied to every hop, and a network
// guard that refuses every non-public address, and every address of this
// host itself, when the connection is made
// (see dialControl), not merely when the URL is parsed.
func HTTPGet(cfg Config) Tool {
	cfg = cfg.withDefaults()
	var guard func(netip.AddrPort) error
	if !cfg.HTTPAllowPrivate {
		guard = guardAddress
	}
	return newHTTPGet(cfg, guard)
}

type httpGet struct {
	cfg     Config
	allowed []string // normalized HTTPAllowedHosts
	guard   func(netip.AddrPort) error
	client  *http.Client
}

// newHTTPGet builds the tool with a given guard (nil: none), which tests
// replace to tell two loopback servers apart.
func newHTTPGet(cfg Config, guard func(netip.AddrPort) error) *httpGet {
	t := &httpGet{cfg: cfg, guard: guard}
	for _, h := range cfg.HTTPAllowedHosts {
		h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
		h = strings.TrimPrefix(h, "*") // "*.example.com" means ".example.com"
		if h != "" && h != "." {
			t.allowed = append(t.allowed, h)
		}
	}
	dialer := &net.Dialer{Timeout: cfg.HTTPTimeout, KeepAlive: 30 * time.Second}
	if guard != nil {
		dialer.ControlContext = dialControl(guard)
	}
	transport := &http.Transport{
		// No proxy, deliberately: with one, the dialer would only ever see
		// the proxy's address and the guard would judge the wrong host.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    cfg.HTTPTimeout,
		MaxIdleConns:           32,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	t.client = &http.Client{
		Transport: transport,
		Timeout:   cfg.HTTPTimeout,
		// No Jar: no cookies are stored or sent, so one agent's fetches
		// cannot carry a session into another's.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return &policyError{fmt.Sprintf("stopped after %d redirects", MaxRedirects)}
			}
			if err := t.checkURL(req.URL); err != nil {
				return &policyError{fmt.Sprintf("refused redirect to %s: %v", redactURL(req.URL), err)}
			}
			return nil
		},
	}
	return t
}

// policyError is a request the tool refuses to make; retrying cannot help.
type policyError struct{ msg string }

func (e *policyError) Error() string { return e.msg }

func (t *httpGet) Key() string { return KeyHTTPGet }

func (t *httpGet) Description() string {
	d := "Fetch a web page or API response with an HTTP GET request and return its body as text. " +
		"Only public http and https URLs; redirects are followed (at most " + strconv.Itoa(MaxRedirects) + "). " +
		"Bodies larger than " + strconv.FormatInt(t.cfg.HTTPMaxBytes, 10) + " bytes are truncated. " +
		`Returns JSON {"url" (after redirects), "status", "content_type", "body"}; ` +
		"a 4xx status is a normal result, so check it."
	if len(t.allowed) > 0 {
		d += " Allowed hosts: " + strings.Join(t.allowed, ", ") + " (a leading dot means any subdomain)."
	}
	return d
}

func (t *httpGet) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"url":{"type":"string","description":"absolute http or https URL to fetch, e.g. \"https://example.com/page\""},` +
		`"headers":{"type":"object","additionalProperties":{"type":"string"},` +
		`"description":"optional request headers, e.g. {\"Accept\": \"application/json\"}; credentials and cookies are not allowed"}` +
		`},"required":["url"],"additionalProperties":false}`)
}

// httpGetResult is http_get's result.
type httpGetResult struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Body        string `json:"body"`
}

func (t *httpGet) Run(ctx context.Context, arguments json.RawMessage) (string, error) {
	var args struct {
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	if err := DecodeArguments(arguments, &args); err != nil {
		return "", err
	}
	raw := strings.TrimSpace(args.URL)
	if raw == "" {
		return "", errors.New(`invalid arguments: "url" is required`)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("invalid URL %q: %v", raw, errors.Unwrap(err))
	}
	if err := t.checkURL(u); err != nil {
		return "", fmt.Errorf("refusing to fetch %s: %v", redactURL(u), err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("invalid URL %q: %v", raw, err)
	}
	if err := setHeaders(req.Header, args.Headers); err != nil {
		return "", err
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}

	resp, err := t.client.Do(req)
	if err != nil {
		return "", t.classify(ctx, u, err)
	}
	defer resp.Body.Close()
	final := resp.Request.URL
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		msg := fmt.Sprintf("%s answered HTTP %s", redactURL(final), resp.Status)
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			msg += " (Retry-After: " + ra + ")"
		}
		return "", Retryable(errors.New(msg))
	}
	// Read one byte more than the cap to know whether there was more.
	body, err := io.ReadAll(io.LimitReader(resp.Body, t.cfg.HTTPMaxBytes+1))
	if err != nil {
		return "", t.classify(ctx, final, err)
	}
	contentType := resp.Header.Get("Content-Type")
	return marshalResult(httpGetResult{
		URL:         redactURL(final),
		Status:      resp.StatusCode,
		ContentType: contentType,
		Body:        bodyText(body, t.cfg.HTTPMaxBytes, contentType),
	})
}

// checkURL applies the rules every hop must pass before any connection:
// scheme, no credentials, the allowlist and, for literal IP addresses, the
// network guard (which also runs again at dial time).
func (t *httpGet) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" {
			return errors.New("not an absolute URL: it must start with http:// or https://")
		}
		return fmt.Errorf("scheme %q is not allowed: only http and https URLs can be fetched", u.Scheme)
	}
	if u.User != nil {
		return errors.New("credentials in URLs (user:password@) are not allowed")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return errors.New("the URL has no host")
	}
	if len(t.allowed) > 0 && !t.hostAllowed(host) {
		return fmt.Errorf("host %q is not in the allowed hosts (%s)", host, strings.Join(t.allowed, ", "))
	}
	if addr, err := netip.ParseAddr(host); err == nil && t.guard != nil {
		port, _ := strconv.ParseUint(u.Port(), 10, 16)
		if port == 0 {
			port = 80
			if u.Scheme == "https" {
				port = 443
			}
		}
		if err := t.guard(netip.AddrPortFrom(addr, uint16(port))); err != nil {
			return err
		}
	}
	return nil
}

// hostAllowed matches host against the allowlist: an entry "example.com"
// matches that host only; ".example.com" matches its subdomains only, so
// that the allowlist says exactly what it allows.
func (t *httpGet) hostAllowed(host string) bool {
	for _, a := range t.allowed {
		if host == a || (strings.HasPrefix(a, ".") && strings.HasSuffix(host, a)) {
			return true
		}
	}
	return false
}

// headerReasons are headers a model may not set, and why.
var headerReasons = map[string]string{
	"Authorization":       "credentials are not allowed",
	"Proxy-Authorization": "credentials are not allowed",
	"Cookie":              "cookies are not allowed",
	"Host":                "the host comes from the URL",
	"Accept-Encoding":     "the tool negotiates compression itself",
	"Connection":          "it is managed by the tool",
	"Keep-Alive":          "it is managed by the tool",
	"Proxy-Connection":    "it is managed by the tool",
	"Content-Length":      "a GET request has no body",
	"Transfer-Encoding":   "a GET request has no body",
	"Te":                  "it is managed by the tool",
	"Trailer":             "it is managed by the tool",
	"Upgrade":             "it is managed by the tool",
}

// setHeaders checks the model's headers and sets them on h. Invalid names
// and values are refused here with a clear message, rather than by the
// transport with an error that would look like a network failure.
func setHeaders(h http.Header, headers map[string]string) error {
	if len(headers) > maxHeaders {
		return fmt.Errorf("too many headers (%d); the limit is %d", len(headers), maxHeaders)
	}
	for name, value := range headers {
		if !validHeaderName(name) {
			return fmt.Errorf("invalid header name %q", name)
		}
		canonical := http.CanonicalHeaderKey(name)
		if why, bad := headerReasons[canonical]; bad {
			return fmt.Errorf("header %q is not allowed: %s", canonical, why)
		}
		if len(value) > maxHeaderValue {
			return fmt.Errorf("header %q is too long (%d bytes); the limit is %d", canonical, len(value), maxHeaderValue)
		}
		for _, c := range []byte(value) {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return fmt.Errorf("header %q has a control character in its value", canonical)
			}
		}
		h.Set(canonical, value)
	}
	return nil
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// classify turns a failed request into the error the model or the retry
// policy sees. Refusals, unknown hosts and certificate problems are
// permanent; timeouts and other network failures are Retryable.
func (t *httpGet) classify(ctx context.Context, u *url.URL, err error) error {
	target := redactURL(u)
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		if failed, perr := url.Parse(urlErr.URL); perr == nil {
			u, target = failed, redactURL(failed) // the hop that failed, after redirects
		}
	}
	var blocked *blockedError
	if errors.As(err, &blocked) {
		return fmt.Errorf("refusing to connect to %s: %v", u.Hostname(), blocked)
	}
	var policy *policyError
	if errors.As(err, &policy) {
		return policy
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return Retryable(fmt.Errorf("fetching %s: %w", target, ctxErr))
		}
		return fmt.Errorf("fetching %s: %w", target, ctxErr)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		// Most often a mistyped or invented host name: retrying only
		// delays the model's chance to correct it.
		return fmt.Errorf("fetching %s: host %q not found", target, dnsErr.Name)
	}
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostnameErr      x509.HostnameError
		invalidCert      x509.CertificateInvalidError
		verifyErr        *tls.CertificateVerificationError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostnameErr) ||
		errors.As(err, &invalidCert) || errors.As(err, &verifyErr) {
		return fmt.Errorf("fetching %s: the site's TLS certificate is not valid: %v", target, innermost(err))
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return Retryable(fmt.Errorf("fetching %s timed out after %s", target, t.cfg.HTTPTimeout))
	}
	return Retryable(fmt.Errorf("fetching %s failed: %v", target, innermost(err)))
}

// innermost strips url.Error's `Get "…":` prefix, which repeats the URL.
func innermost(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}

// redactURL is u without user information, for messages and results.
func redactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.Redacted()
}

// bodyText turns at most limit+1 bytes of body into the text the model sees:
// cut to limit bytes on a character boundary with a truncation marker, and
// binary content replaced by a note, since its bytes would only waste the
// model's context.
func bodyText(body []byte, limit int64, contentType string) string {
	truncated := int64(len(body)) > limit
	n := len(body)
	if truncated {
		n = int(limit)
		// Back up to the start of a character split by the cut.
		for n > 0 && int(limit)-n < utf8.UTFMax && !utf8.RuneStart(body[n]) {
			n--
		}
	}
	if isBinary(contentType, body[:n]) {
		size := strconv.Itoa(len(body)) + " bytes"
		if truncated {
			size = "more than " + strconv.FormatInt(limit, 10) + " bytes"
		}
		kind := contentType
		if kind == "" {
			kind = http.DetectContentType(body)
		}
		return fmt.Sprintf("[binary content (%s), %s, not shown]", kind, size)
	}
	text := strings.ToValidUTF8(string(body[:n]), "\uFFFD")
	if truncated {
		text += fmt.Sprintf("…[truncated at %d bytes]", limit)
	}
	return text
}

// isBinary reports whether a body is not text: by its declared media type,
// or by a NUL byte, which text formats do not contain.
func isBinary(contentType string, body []byte) bool {
	media, _, _ := mime.ParseMediaType(contentType)
	major, _, _ := strings.Cut(media, "/")
	switch {
	case major == "image" || major == "audio" || major == "video" || major == "font":
		return !strings.HasSuffix(media, "+xml") // image/svg+xml is text
	case media == "application/octet-stream", media == "application/pdf", media == "application/zip",
		media == "application/gzip", media == "application/x-gzip", media == "application/wasm":
		return true
	}
	return bytes.IndexByte(body, 0) >= 0
}
