package api

import (
	"encoding/xml"
	"strings"
	"testing"
)

func TestJSONToXML(t *testing.T) {
	doc, err := jsonToXML([]byte(`{"b":1,"a":[true,null,"x<y & \"z\""],"9f1e":{"xmlish":"k"},"":2.5}`), "results")
	if err != nil {
		t.Fatal(err)
	}
	want := xml.Header + `<results><b>1</b><a><item>true</item><item nil="true"/><item>x&lt;y &amp; &#34;z&#34;</item></a>` +
		`<entry key="9f1e"><entry key="xmlish">k</entry></entry><entry key="">2.5</entry></results>` + "\n"
	if doc != want {
		t.Errorf("got  %s\nwant %s", doc, want)
	}
	// Well-formed: a standard parser reads it to the end.
	d := xml.NewDecoder(strings.NewReader(doc))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Errorf("not well-formed: %v", err)
			}
			break
		}
	}
}
