package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Key is a provider's API key as the process holds it now. A key read from
// a file (NewKeyFile) can be replaced while the process runs: Reload reads
// the file again, and every request after that sends the new key, so a key
// is rotated without a restart. Safe for concurrent use. A Key never
// prints its value: String and the log attributes name the provider and
// the file only.
type Key struct {
	provider string
	file     string // empty: the key came from the environment and never changes

	mu       sync.RWMutex
	value    string
	previous []string // keys replaced by Reload, still scrubbed from error texts
}

// maxKeyFileBytes bounds a key file: keys are tens of bytes, and a path
// pointing at something else should fail clearly, not be sent as a header.
const maxKeyFileBytes = 16 << 10

// maxPreviousKeys bounds how many replaced keys a Key keeps scrubbing.
const maxPreviousKeys = 4

// NewKey is a fixed key (from the environment); empty means no key.
func NewKey(provider, value string) *Key {
	return &Key{provider: provider, value: value}
}

// NewKeyFile reads a provider's key from path. The file holds the key
// alone; surrounding white space (a trailing newline) is ignored. An
// unreadable or empty file is an error, which names the file but never
// its content.
func NewKeyFile(provider, path string) (*Key, error) {
	v, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	return &Key{provider: provider, file: path, value: v}, nil
}

func readKeyFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("key file %s: %w", path, err)
	}
	if len(raw) > maxKeyFileBytes {
		return "", fmt.Errorf("key file %s: larger than %d bytes, not a key", path, maxKeyFileBytes)
	}
	v := string(bytes.TrimSpace(raw))
	switch {
	case v == "":
		return "", fmt.Errorf("key file %s is empty", path)
	case strings.ContainsAny(v, "\r\n"):
		return "", fmt.Errorf("key file %s holds more than one line; it must hold the key alone", path)
	}
	return v, nil
}

// Provider is the provider the key is for.
func (k *Key) Provider() string { return k.provider }

// File is the file the key is read from, "" for a key from the
// environment.
func (k *Key) File() string { return k.file }

// Get is the key to send now; "" means none.
func (k *Key) Get() string {
	if k == nil {
		return ""
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.value
}

// scrub replaces the current key and the ones it replaced in msg. Keys
// shorter than 8 characters are placeholders such as "none" for local
// servers; replacing them would mangle ordinary words.
func (k *Key) scrub(msg string) string {
	if k == nil {
		return msg
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, v := range append([]string{k.value}, k.previous...) {
		if len(v) >= 8 {
			msg = strings.ReplaceAll(msg, v, "[redacted]")
		}
	}
	return msg
}

// Reload reads the key's file again and, when it holds a different key,
// makes it the key of every later request. A key from the environment has
// nothing to reread. When the file cannot be read, or is empty (being
// rewritten, say), the key in use stays and the error says why.
func (k *Key) Reload() (changed bool, err error) {
	if k == nil || k.file == "" {
		return false, nil
	}
	v, err := readKeyFile(k.file)
	if err != nil {
		return false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if v == k.value {
		return false, nil
	}
	k.previous = append([]string{k.value}, k.previous...)
	if len(k.previous) > maxPreviousKeys {
		k.previous = k.previous[:maxPreviousKeys]
	}
	k.value = v
	return true, nil
}

// String names the key without its value, so a Key logged by mistake
// leaks nothing.
func (k *Key) String() string {
	if k == nil {
		return "no key"
	}
	if k.file != "" {
		return fmt.Sprintf("key of %s (file %s)", k.provider, k.file)
	}
	return "key of " + k.provider
}

// LogValue keeps the value out of structured logs too.
func (k *Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// ReloadKeys rereads every key read from a file (Key.Reload) and logs, per
// provider, whether its key changed; never a key. It returns how many
// changed. A SIGHUP and the file poll (WatchKeys) both end here.
func ReloadKeys(keys []*Key, log *slog.Logger) int {
	changed := 0
	for _, k := range keys {
		if k.File() == "" {
			continue
		}
		ok, err := k.Reload()
		switch {
		case err != nil:
			log.Warn("provider key not reread; the key in use stays", "provider", k.Provider(), "file", k.File(), "error", err)
		case ok:
			changed++
			log.Info("provider key rotated: later requests send the new key", "provider", k.Provider(), "file", k.File())
		}
	}
	return changed
}

// WatchKeys rereads the keys' files every poll (0: never by itself) and
// whenever reload receives (the process's SIGHUP), until ctx ends. A
// failed reread is logged once per change of its error, so a missing file
// does not fill the log every poll.
func WatchKeys(ctx context.Context, keys []*Key, poll time.Duration, reload <-chan os.Signal, log *slog.Logger) {
	var files []*Key
	for _, k := range keys {
		if k.File() != "" {
			files = append(files, k)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Provider() < files[j].Provider() })
	var tick <-chan time.Time
	if poll > 0 && len(files) > 0 {
		t := time.NewTicker(poll)
		defer t.Stop()
		tick = t.C
	}
	lastErr := map[*Key]string{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
			log.Info("SIGHUP: rereading provider key files", "files", len(files))
			ReloadKeys(files, log)
			clear(lastErr)
		case <-tick:
			for _, k := range files {
				ok, err := k.Reload()
				switch {
				case err != nil:
					if msg := err.Error(); lastErr[k] != msg {
						lastErr[k] = msg
						log.Warn("provider key not reread; the key in use stays", "provider", k.Provider(), "file", k.File(), "error", err)
					}
				case ok:
					delete(lastErr, k)
					log.Info("provider key rotated: later requests send the new key", "provider", k.Provider(), "file", k.File())
				default:
					delete(lastErr, k)
				}
			}
		}
	}
}

// KeyCheck is what CheckKeys learned of one provider's key.
type KeyCheck struct {
	Provider string
	// Err is nil when the provider accepted the key; an *Error with
	// KeyRejected when it refused it; anything else when the check could
	// not tell (see OpenAICompatible.CheckKey).
	Err error
}

// Rejected tells whether the provider refused the key.
func (c KeyCheck) Rejected() bool {
	var le *Error
	return errors.As(c.Err, &le) && le.KeyRejected()
}

// keyChecker is a client that can check its key.
type keyChecker interface {
	CheckKey(ctx context.Context) error
}

// CheckKeys asks every configured OpenAI-compatible provider whether it
// accepts its key (LLM_CHECK_KEYS_AT_START), each within timeout, in
// parallel; sorted by provider. Bedrock's credentials come from the AWS
// chain, which renews them itself, and are not checked; nor is the offline
// model, which has no key.
func (r *Router) CheckKeys(ctx context.Context, timeout time.Duration) []KeyCheck {
	names := slices.Sorted(maps.Keys(r.providers))
	out := make([]KeyCheck, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		out[i].Provider = name
		kc, ok := r.clients[name].(keyChecker)
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			err := kc.CheckKey(cctx)
			if err != nil && cctx.Err() != nil && ctx.Err() == nil {
				err = &Error{Provider: name, Retryable: true, Message: fmt.Sprintf("no answer within %v", timeout)}
			}
			out[i].Err = err
		}()
	}
	wg.Wait()
	return out
}
