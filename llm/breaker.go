package llm

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Breaker states, as exported in the metrics gauge.
const (
	BreakerClosed   = 0
	BreakerHalfOpen = 1
	BreakerOpen     = 2
)

// ErrCircuitOpen is the cause of the *Error a call gets while its
// provider's circuit is open.
var ErrCircuitOpen = errors.New("circuit open")

// BreakerState is one provider's circuit, for metrics and /readyz.
type BreakerState struct {
	Provider string
	State    int    // BreakerClosed, BreakerHalfOpen or BreakerOpen
	Openings uint64 // how often it opened since the process started
}

// StateName is the state in words: closed, half-open or open.
func (s BreakerState) StateName() string {
	switch s.State {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// Breaker is a circuit breaker per provider, shared by the calls of one
// process. A provider's circuit opens after Failures consecutive retryable
// failures; while open, calls fail fast. After Cooldown one call (the
// probe) goes through: its success closes the circuit, its failure opens
// it again for another cool-down. A nil *Breaker lets every call through.
type Breaker struct {
	failures int
	cooldown time.Duration
	now      func() time.Time

	mu    sync.Mutex
	state map[string]*circuit
}

type circuit struct {
	failures int
	state    int
	openedAt time.Time
	probing  bool // half-open with its probe under way
	openings uint64
}

// NewBreaker returns a breaker opening after failures consecutive
// retryable failures (<= 0: 5) and probing after cooldown (<= 0: 30s). now
// is the clock, nil meaning time.Now (tests pass a fake one).
func NewBreaker(failures int, cooldown time.Duration, now func() time.Time) *Breaker {
	if failures <= 0 {
		failures = 5
	}
	if cooldown <= 0 {
		cooldown = 30 * time.Second
	}
	if now == nil {
		now = time.Now
	}
	return &Breaker{failures: failures, cooldown: cooldown, now: now, state: map[string]*circuit{}}
}

func (b *Breaker) circuit(provider string) *circuit {
	c := b.state[provider]
	if c == nil {
		c = &circuit{}
		b.state[provider] = c
	}
	return c
}

// Allow says whether a call to provider may go ahead. While the circuit is
// open it answers false, until the cool-down is over: then the circuit is
// half-open and one call, the probe, is allowed at a time.
func (b *Breaker) Allow(provider string) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuit(provider)
	switch c.state {
	case BreakerOpen:
		if b.now().Sub(c.openedAt) < b.cooldown {
			return false
		}
		c.state, c.probing = BreakerHalfOpen, true
		return true
	case BreakerHalfOpen:
		if c.probing {
			return false
		}
		c.probing = true
		return true
	}
	return true
}

// Release ends an allowed call that reached no verdict on the provider (it
// was cancelled): a half-open circuit may send another probe.
func (b *Breaker) Release(provider string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.circuit(provider).probing = false
}

// Success records a call the provider answered (a rejected request counts:
// the provider is up). It closes the circuit.
func (b *Breaker) Success(provider string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuit(provider)
	c.failures, c.state, c.probing = 0, BreakerClosed, false
}

// Failure records a retryable failure; it reports whether this failure
// opened the circuit.
func (b *Breaker) Failure(provider string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuit(provider)
	c.failures++
	c.probing = false
	if c.state == BreakerHalfOpen || (c.state == BreakerClosed && c.failures >= b.failures) {
		c.state, c.openedAt = BreakerOpen, b.now()
		c.openings++
		return true
	}
	return false
}

// IsOpen says whether calls to provider fail fast now (open, cool-down not
// over), without taking a probe.
func (b *Breaker) IsOpen(provider string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.state[provider]
	return c != nil && c.state == BreakerOpen && b.now().Sub(c.openedAt) < b.cooldown
}

// States lists the circuits of the providers called so far, by name.
func (b *Breaker) States() []BreakerState {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]BreakerState, 0, len(b.state))
	for p, c := range b.state {
		st := c.state
		if st == BreakerOpen && b.now().Sub(c.openedAt) >= b.cooldown {
			st = BreakerHalfOpen // the next call is the probe
		}
		out = append(out, BreakerState{Provider: p, State: st, Openings: c.openings})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	return out
}

// openError is the fail-fast error of a call while provider's circuit is
// open: retryable, so that the activity's retry policy waits for the probe.
func (b *Breaker) openError(provider, model string) *Error {
	return &Error{
		Provider:  provider,
		Model:     model,
		Retryable: true,
		Message:   fmt.Sprintf("circuit open for provider %s after %d consecutive failures; next probe within %s", provider, b.failures, b.cooldown),
		Cause:     ErrCircuitOpen,
	}
}
