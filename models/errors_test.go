package models

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestREADMEDocumentsEveryCode keeps the README's error table in step with
// the vocabulary.
func TestREADMEDocumentsEveryCode(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range AllCodes() {
		row := fmt.Sprintf("| %d | %d | `%s` |", c.HTTPStatus, c.Numeric, c.Name)
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md has no error row %q", row)
		}
	}
}
