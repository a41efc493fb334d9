package llm

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
)

// otelOptions trace a provider's HTTP requests with the global tracer
// provider (a no-op unless tracing is on), as children of the activity's
// chat span. Nothing is propagated to the provider: a trace id or baggage
// has no business at a third party.
var otelOptions = []otelhttp.Option{
	otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()),
}

// tracedHTTPClient is hc (a plain client when nil) with its transport
// traced; hc itself is not changed.
func tracedHTTPClient(hc *http.Client) *http.Client {
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = otelhttp.NewTransport(base, otelOptions...)
	return c
}

// tracedDoer traces the requests of an AWS SDK HTTP client.
type tracedDoer struct{ rt http.RoundTripper }

func newTracedDoer(next aws.HTTPClient) tracedDoer {
	return tracedDoer{rt: otelhttp.NewTransport(doerTransport{next}, otelOptions...)}
}

func (d tracedDoer) Do(req *http.Request) (*http.Response, error) { return d.rt.RoundTrip(req) }

// doerTransport is an AWS SDK HTTP client as a RoundTripper.
type doerTransport struct{ next aws.HTTPClient }

func (t doerTransport) RoundTrip(req *http.Request) (*http.Response, error) { return t.next.Do(req) }
