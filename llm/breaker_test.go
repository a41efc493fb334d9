package llm

import (
	"context"
	"errors"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestBreakerStates(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	b := NewBreaker(3, 30*time.Second, clk.now)
	state := func() int {
		for _, s := range b.States() {
			if s.Provider == "p" {
				return s.State
			}
		}
		return -1
	}
	for i := 0; i < 2; i++ {
		if !b.Allow("p") {
			t.Fatal("closed circuit refused a call")
		}
		if b.Failure("p") {
			t.Fatalf("opened after %d failures", i+1)
		}
	}
	b.Success("p") // a success resets the count
	for i := 0; i < 2; i++ {
		b.Allow("p")
		b.Failure("p")
	}
	if state() != BreakerClosed {
		t.Fatalf("state %d, want closed", state())
	}
	b.Allow("p")
	if !b.Failure("p") {
		t.Fatal("third consecutive failure did not open the circuit")
	}
	if state() != BreakerOpen || !b.IsOpen("p") || b.Allow("p") {
		t.Fatal("open circuit let a call through")
	}
	if !b.Allow("q") {
		t.Fatal("another provider's circuit is not affected")
	}
	clk.advance(29 * time.Second)
	if b.Allow("p") {
		t.Fatal("allowed before the cool-down")
	}
	clk.advance(time.Second)
	if state() != BreakerHalfOpen {
		t.Fatalf("state %d after cool-down, want half-open", state())
	}
	if !b.Allow("p") {
		t.Fatal("half-open circuit refused the probe")
	}
	if b.Allow("p") {
		t.Fatal("half-open circuit allowed a second call while probing")
	}
	if !b.Failure("p") {
		t.Fatal("failed probe did not reopen the circuit")
	}
	if b.Allow("p") {
		t.Fatal("reopened circuit let a call through")
	}
	clk.advance(30 * time.Second)
	if !b.Allow("p") {
		t.Fatal("no second probe")
	}
	b.Release("p") // cancelled probe: another may go
	if !b.Allow("p") {
		t.Fatal("no probe after a cancelled one")
	}
	b.Success("p")
	if state() != BreakerClosed || !b.Allow("p") {
		t.Fatal("successful probe did not close the circuit")
	}
	if got := b.States()[0].Openings; got != 2 {
		t.Fatalf("openings %d, want 2", got)
	}
}

func TestBreakerNil(t *testing.T) {
	var b *Breaker
	if !b.Allow("p") || b.Failure("p") || b.IsOpen("p") || b.States() != nil {
		t.Fatal("nil breaker must let everything through")
	}
}

type failingClient struct {
	calls int
	err   error
}

func (c *failingClient) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	c.calls++
	if c.err != nil {
		return nil, c.err
	}
	return &Response{Content: "ok"}, nil
}

func TestRouterBreakerFailsFast(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	br := NewBreaker(2, time.Minute, clk.now)
	r, err := NewRouter(RouterConfig{Providers: []ProviderConfig{{Name: ProviderOpenAI, APIKey: "k"}}, DefaultModel: "m", Breaker: br})
	if err != nil {
		t.Fatal(err)
	}
	fc := &failingClient{err: &Error{Provider: ProviderOpenAI, StatusCode: 500, Retryable: true, Message: "boom"}}
	r.clients[ProviderOpenAI] = fc
	for i := 0; i < 2; i++ {
		if _, err := r.Stream(context.Background(), Request{Model: "m"}, nil); err == nil {
			t.Fatal("want an error")
		}
	}
	_, err = r.Stream(context.Background(), Request{Model: "m"}, nil)
	var le *Error
	if !errors.As(err, &le) || !le.Retryable || !errors.Is(err, ErrCircuitOpen) || fc.calls != 2 {
		t.Fatalf("want a fast retryable circuit-open error without a call, got %v (calls %d)", err, fc.calls)
	}
	clk.advance(time.Minute)
	fc.err = nil
	if _, err := r.Stream(context.Background(), Request{Model: "m"}, nil); err != nil || fc.calls != 3 {
		t.Fatalf("probe: %v (calls %d)", err, fc.calls)
	}
	if br.IsOpen(ProviderOpenAI) {
		t.Fatal("circuit still open after a successful probe")
	}
}
