package workflows

// SetContinueAsNewSignals sets continueAsNewSignals for a test and returns
// what restores it.
func SetContinueAsNewSignals(n int) func() {
	old := continueAsNewSignals
	continueAsNewSignals = n
	return func() { continueAsNewSignals = old }
}

// SetMaxEventUpdates sets how many event updates an execution takes
// before its validator refuses them, and returns what restores it.
func SetMaxEventUpdates(n int) func() {
	old := maxEventUpdates
	maxEventUpdates = n
	return func() { maxEventUpdates = old }
}
