package api

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/op-stack/executor/auth"
)

// streamCredential is what an open event stream must recheck of the
// credential it was opened with: the stored API key behind it (the key
// itself, or the key that issued its stream token), a stream token's
// expiry, and, for a credential the store cannot tell about, a check of
// its own.
type streamCredential struct {
	// keyID is the stored API key whose revocation or expiry ends the
	// stream ("" for none).
	keyID string
	// expires ends the stream at that time (a stream token's expiry;
	// zero: never).
	expires time.Time
	// check authenticates the credential again, one query each: used only
	// when the server has no store to ask about keyID.
	check credentialCheck
}

// credentialWatch rechecks the credentials of all the process's open event
// streams together: every interval, one query (store.InvalidAPIKeys) for
// the keys behind every stream, where each stream used to run a lookup of
// its own (one query per open stream every 5 s: 2,000 a second for 10,000
// streams). A stream whose key was revoked or expired, or whose stream
// token expired, is ended. A failed query (the database is down) ends
// nothing: an outage is no revocation.
//
// Its goroutine runs while streams are open and stops with the last one.
type credentialWatch struct {
	every time.Duration
	// invalid returns those of ids that are revoked or expired; nil when
	// the server has no store, and streams then use their own check.
	invalid func(ctx context.Context, ids []string, now time.Time) ([]string, error)
	log     *slog.Logger

	mu      sync.Mutex
	streams map[*watchedStream]struct{}
	running bool
}

// watchedStream is one open stream under the watch.
type watchedStream struct {
	cred          streamCredential
	runID, logKey string
	cancel        context.CancelFunc
}

// add puts a stream under the watch until remove.
func (w *credentialWatch) add(ws *watchedStream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.streams == nil {
		w.streams = map[*watchedStream]struct{}{}
	}
	w.streams[ws] = struct{}{}
	if !w.running {
		w.running = true
		go w.run()
	}
}

// remove takes a stream off the watch.
func (w *credentialWatch) remove(ws *watchedStream) {
	w.mu.Lock()
	delete(w.streams, ws)
	w.mu.Unlock()
}

// run checks every interval until no stream is left.
func (w *credentialWatch) run() {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for range t.C {
		w.mu.Lock()
		if len(w.streams) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		open := make([]*watchedStream, 0, len(w.streams))
		for ws := range w.streams {
			open = append(open, ws)
		}
		w.mu.Unlock()
		w.check(open)
	}
}

// check ends those of open whose credential is no longer valid.
func (w *credentialWatch) check(open []*watchedStream) {
	ctx, cancel := context.WithTimeout(context.Background(), w.every)
	defer cancel()
	now := time.Now()
	var live []*watchedStream
	for _, ws := range open {
		if !ws.cred.expires.IsZero() && !now.Before(ws.cred.expires) {
			w.end(ws)
			continue
		}
		live = append(live, ws)
	}
	if w.invalid == nil {
		// No store to ask at once: each credential checks itself, once per
		// distinct check (streams of one request share none).
		for _, ws := range live {
			if ws.cred.check == nil {
				continue
			}
			if err := ws.cred.check(ctx); errors.Is(err, auth.ErrInvalidCredentials) {
				w.end(ws)
			}
		}
		return
	}
	seen := map[string]bool{}
	var ids []string
	for _, ws := range live {
		if id := ws.cred.keyID; id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	bad, err := w.invalid(ctx, ids, now)
	if err != nil {
		w.log.Debug("credential recheck failed; open streams stay open", "streams", len(live), "error", err)
		return
	}
	revoked := map[string]bool{}
	for _, id := range bad {
		revoked[id] = true
	}
	for _, ws := range live {
		if revoked[ws.cred.keyID] {
			w.end(ws)
		}
	}
}

func (w *credentialWatch) end(ws *watchedStream) {
	w.remove(ws)
	w.log.Info("event stream ended: its credential was revoked or expired", "run_id", ws.runID, "key_id", ws.logKey)
	ws.cancel()
}
