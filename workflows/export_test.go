package workflows

// SetContinueAsNewSignals sets continueAsNewSignals for a test and returns
// what restores it.
func SetContinueAsNewSignals(n int) func() {
	old := continueAsNewSignals
	continueAsNewSignals = n
	return func() { continueAsNewSignals = old }
}
