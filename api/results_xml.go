package api

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/gin-gonic/gin"
)

// FormatXML is spec 001's third result format (json|xml|markdown).
const FormatXML = "xml"

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

// xmlResponseKey marks a request answered in XML (results with format=xml
// or an Accept header that prefers XML): writeError then answers in XML too.
const xmlResponseKey = "api.xml"

// prefersXML tells whether an Accept header ranks application/xml or
// text/xml above application/json (at equal quality, the one listed first
// wins). Wildcards count for neither: a client that accepts anything gets
// JSON, the API's default.
func prefersXML(accept string) bool {
	xmlQ, jsonQ := -1.0, -1.0
	xmlAt, jsonAt := -1, -1
	for i, part := range strings.Split(accept, ",") {
		fields := strings.Split(part, ";")
		media := strings.ToLower(strings.TrimSpace(fields[0]))
		q := 1.0
		for _, p := range fields[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		switch media {
		case "application/xml", "text/xml":
			if q > xmlQ {
				xmlQ, xmlAt = q, i
			}
		case "application/json":
			if q > jsonQ {
				jsonQ, jsonAt = q, i
			}
		}
	}
	if xmlQ <= 0 {
		return false
	}
	return xmlQ > jsonQ || (xmlQ == jsonQ && xmlAt < jsonAt)
}

// negotiateResultFormat is a results request's format: the one asked for
// (format=, or runs/results' "format"), else XML when the Accept header
// prefers it, else JSON. It marks the request for an XML answer when the
// format is XML, or when none was valid and the client prefers XML, so that
// an error is in the language the client reads.
func negotiateResultFormat(c *gin.Context, asked string) (string, error) {
	wantXML := prefersXML(c.GetHeader("Accept"))
	if strings.TrimSpace(asked) == "" && wantXML {
		asked = FormatXML
	}
	format, err := resultFormat(asked)
	if format == FormatXML || (err != nil && wantXML) {
		c.Set(xmlResponseKey, true)
	}
	return format, err
}

// writeXMLBody answers body (an envelope, encoded as JSON first, so that
// its fields keep their JSON names and order) as an XML document with root
// <response>: the same envelope, element for field (see jsonToXML).
func writeXMLBody(c *gin.Context, status int, body any) {
	raw, err := json.Marshal(body)
	var doc string
	if err == nil {
		doc, err = jsonToXML(raw, "response")
	}
	if err != nil {
		// Only an unencodable value gets here; it is the server's fault.
		status, doc = http.StatusInternalServerError, xml.Header+"<response><success>false</success><code>SYSTEM_ERROR</code></response>\n"
	}
	c.Abort()
	c.Data(status, "application/xml; charset=utf-8", []byte(doc))
}
