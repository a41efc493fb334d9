// Package clustertest runs the service as it is deployed: separate
// `executor serve -role api` and `-role worker` processes, two of each,
// against a real PostgreSQL-backed Temporal server (`make cluster`) and one
// PostgreSQL database, with the fake OpenAI-compatible server of llm/llmfake
// as the model. Its tests have the build tag "cluster", so `make test` does
// not run them; `make cluster-test` starts the server and does (see
// docs/cluster.md).
//
//	CLUSTER_TEMPORAL_ADDRESS  the server (default 127.0.0.1:7333, what `make cluster` starts)
//	CLUSTER_DATABASE_URL      PostgreSQL where the test creates, and drops, a database of its own
//	                          (default postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)
package clustertest
