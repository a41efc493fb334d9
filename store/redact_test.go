package store_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/op-stack/executor/store"
	"github.com/op-stack/executor/store/storetest"
)

// proxy forwards TCP connections to target until closed, then drops them
// all: the database "goes away" under an open store.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestConnectionErrorsNameNoHostUserOrDatabase opens a store through a
// proxy, takes the proxy away, and checks that the errors store methods
// return say the database is unavailable, are still recognised as such,
// and name neither the host, the port, the user nor the database: they
// reach API answers and run errors that tenants read.
func TestConnectionErrorsNameNoHostUserOrDatabase(t *testing.T) {
	raw := storetest.PostgresURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	st, err := store.Open(u.String(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	p.close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, getErr := st.GetRun(ctx, "some-run")
	_, _, listErr := st.ListRuns(ctx, store.RunFilter{ListFilter: store.ListFilter{Page: 1, PageSize: 10}})
	pingErr := st.Ping(ctx)
	user := u.User.Username()
	db := strings.TrimPrefix(u.Path, "/")
	for name, err := range map[string]error{"GetRun": getErr, "ListRuns": listErr, "Ping": pingErr} {
		if err == nil {
			t.Errorf("%s: no error with the database gone", name)
			continue
		}
		if !store.IsUnavailable(err) {
			t.Errorf("%s: %v is not recognised as unavailable", name, err)
		}
		msg := err.Error()
		for _, secret := range []string{u.Host, p.ln.Addr().String(), "user=" + user, "database=" + db, "127.0.0.1"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%s: error %q names %q", name, msg, secret)
			}
		}
		if !strings.HasPrefix(msg, "database unavailable") {
			t.Errorf("%s: error %q", name, msg)
		}
		var unwrapped interface{ Unwrap() error }
		if !errors.As(err, &unwrapped) {
			t.Errorf("%s: the cause is not kept for the logs", name)
		}
	}
}
