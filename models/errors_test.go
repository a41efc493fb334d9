package models

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestDocsDocumentEveryCode keeps the error table of docs/errors.md in
// step with the vocabulary.
func TestDocsDocumentEveryCode(t *testing.T) {
	readme, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range AllCodes() {
		row := fmt.Sprintf("| %d | %d | `%s` |", c.HTTPStatus, c.Numeric, c.Name)
		if !strings.Contains(string(readme), row) {
			t.Errorf("docs/errors.md has no error row %q", row)
		}
	}
}

// TestDocsDocumentEveryFailureType keeps the "Failure types" table of
// docs/errors.md in step with AllFailureTypes.
func TestDocsDocumentEveryFailureType(t *testing.T) {
	doc, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ft := range AllFailureTypes() {
		if seen[ft] {
			t.Errorf("AllFailureTypes lists %q twice", ft)
		}
		seen[ft] = true
		row := fmt.Sprintf("\n| `%s` |", ft)
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/errors.md has no failure type row starting %q", strings.TrimSpace(row))
		}
	}
}
