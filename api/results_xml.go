package api

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// FormatXML is spec 001's third result format (json|xml|markdown).
const FormatXML = "xml"

// xmlResults is the data of an XML results answer, like markdownResults:
// the document in content, inside the API's JSON envelope.
type xmlResults struct {
	Format  string `json:"format"`
	Content string `json:"content"`
}

// XML renders the results as an XML document with the JSON answer's
// structure, element for field, in the same order: the root is <results>;
// an object's field is an element named as the field, or <entry key="…">
// when the key is not an XML name (team and agent ids may start with a
// digit); a list's items are <item> elements; null is an empty element
// with nil="true"; numbers, booleans and strings are text.
func (r *Results) XML() (string, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	return jsonToXML(raw, "results")
}

// jsonToXML converts one JSON value to an XML document with root element
// root, keeping the order of object fields.
func jsonToXML(raw []byte, root string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	b.WriteString(xml.Header)
	if err := xmlValue(dec, &b, root, nil); err != nil {
		return "", err
	}
	b.WriteString("\n")
	return b.String(), nil
}

// xmlValue reads the next JSON value from dec and writes it as element
// name (with attribute key="…" when key is set).
func xmlValue(dec *json.Decoder, b *strings.Builder, name string, key *string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	open := "<" + name
	if key != nil {
		open += ` key="` + xmlEscape(*key) + `"`
	}
	switch v := tok.(type) {
	case json.Delim:
		b.WriteString(open + ">")
		switch v {
		case '{':
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				child, childKey := k, (*string)(nil)
				if !isXMLName(k) {
					child, childKey = "entry", &k
				}
				if err := xmlValue(dec, b, child, childKey); err != nil {
					return err
				}
			}
		case '[':
			for dec.More() {
				if err := xmlValue(dec, b, "item", nil); err != nil {
					return err
				}
			}
		}
		if _, err := dec.Token(); err != nil && err != io.EOF { // the closing delimiter
			return err
		}
		b.WriteString("</" + name + ">")
	case nil:
		b.WriteString(open + ` nil="true"/>`)
	default:
		b.WriteString(open + ">" + xmlEscape(fmt.Sprint(v)) + "</" + name + ">")
	}
	return nil
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// isXMLName reports whether s can be an element name: a letter or _ first,
// then letters, digits, -, _ or ., and not starting with "xml".
func isXMLName(s string) bool {
	if s == "" || strings.HasPrefix(strings.ToLower(s), "xml") {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || unicode.IsLetter(r):
		case i > 0 && (unicode.IsDigit(r) || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}
