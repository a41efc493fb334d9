//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import "context"

// lockFile does nothing where flock(2) is missing: concurrent migrations of
// one SQLite file then rely on SQLite's own locking alone.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	return func() {}, nil
}
