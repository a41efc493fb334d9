package app

import (
	"net"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/op-stack/executor/config"
)

// TemporalCompression is the gRPC compression of the service's Temporal
// client (TEMPORAL_GRPC_COMPRESSION). With "auto", requests to a loopback
// address (a dev server, a server on the same host) go uncompressed: gzip
// there saves no bandwidth worth having and costs CPU in both the worker
// and the server, for every update, signal, poll and task completion (a
// profile of 100 concurrent runs found a ninth of the worker's CPU in
// gzip). Elsewhere the SDK's default, gzip, stays.
func TemporalCompression(cfg config.Config) client.GrpcCompression {
	switch cfg.TemporalCompression {
	case "none":
		return &client.GrpcCompressionNone{}
	case "gzip":
		return &client.GrpcCompressionGzip{}
	}
	if loopback(cfg.TemporalAddress) {
		return &client.GrpcCompressionNone{}
	}
	return &client.GrpcCompressionGzip{}
}

// loopback reports whether host:port names this host.
func loopback(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	host = strings.Trim(host, "[]")
	if host == "" || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
