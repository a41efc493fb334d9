package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/op-stack/executor/tools"
)

// fileRef tells the model about a file the tool returned; the activity
// stores the bytes as an artifact and adds its id.
type fileRef struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Size      int    `json:"size"`
}

// resourceLink is a resource the tool pointed at without sending it.
type resourceLink struct {
	URI       string `json:"uri"`
	Name      string `json:"name,omitempty"`
	MediaType string `json:"media_type,omitempty"`
}

// mapResult turns a CallToolResult into the tool's result. Text is kept
// as text; images, audio and embedded resources become files (their
// bytes never enter the workflow's history: the activity stores them as
// artifacts); structured content is kept as JSON. A result of text only
// is the text itself, which is what a model reads best; anything richer
// is a JSON object {"text", "structured_content", "files", "links"}.
func mapResult(tool string, res *sdk.CallToolResult) (tools.Result, error) {
	var (
		texts []string
		files []tools.File
		refs  []fileRef
		links []resourceLink
	)
	addFile := func(name, mediaType string, data []byte) {
		mt := tools.MediaTypeOf(name, mediaType)
		files = append(files, tools.File{Name: name, MediaType: mt, Data: data})
		refs = append(refs, fileRef{Name: name, MediaType: mt, Size: len(data)})
	}
	for i, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			texts = append(texts, c.Text)
		case *sdk.ImageContent:
			addFile(fileName("", "image", i+1, c.MIMEType), c.MIMEType, c.Data)
		case *sdk.AudioContent:
			addFile(fileName("", "audio", i+1, c.MIMEType), c.MIMEType, c.Data)
		case *sdk.EmbeddedResource:
			if c.Resource == nil {
				continue
			}
			data := c.Resource.Blob
			if data == nil {
				data = []byte(c.Resource.Text)
			}
			addFile(fileName(c.Resource.URI, "resource", i+1, c.Resource.MIMEType), c.Resource.MIMEType, data)
		case *sdk.ResourceLink:
			links = append(links, resourceLink{URI: c.URI, Name: c.Name, MediaType: c.MIMEType})
		default:
			// A content type this client does not know yet: keep its
			// wire form rather than drop it silently.
			raw, err := json.Marshal(c)
			if err != nil {
				return tools.Result{}, fmt.Errorf("tool %s returned content that cannot be encoded: %v", tool, err)
			}
			texts = append(texts, string(raw))
		}
	}
	text := strings.Join(texts, "\n")
	if res.StructuredContent == nil && len(files) == 0 && len(links) == 0 {
		return tools.Result{Content: text}, nil
	}
	body := struct {
		Text              string         `json:"text,omitempty"`
		StructuredContent any            `json:"structured_content,omitempty"`
		Files             []fileRef      `json:"files,omitempty"`
		Links             []resourceLink `json:"links,omitempty"`
	}{text, res.StructuredContent, refs, links}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return tools.Result{}, fmt.Errorf("tool %s returned structured content that cannot be encoded: %v", tool, err)
	}
	return tools.Result{Content: strings.TrimSuffix(buf.String(), "\n"), Files: files}, nil
}

// MaxResultBytes bounds the result text a model is given; a longer one is
// cut with a marker, and kept whole as a file (an artifact of the run).
const MaxResultBytes = 64 << 10

// truncate cuts r's text to MaxResultBytes, on a rune boundary, keeping
// the whole text as a file the marker names.
func truncate(tool string, r tools.Result) tools.Result {
	if len(r.Content) <= MaxResultBytes {
		return r
	}
	cut := MaxResultBytes
	for cut > 0 && !utf8.RuneStart(r.Content[cut]) {
		cut--
	}
	name := unsafeName.ReplaceAllString(tool, "_") + "-result.txt"
	r.Files = append(r.Files, tools.File{Name: name, MediaType: "text/plain; charset=utf-8", Data: []byte(r.Content)})
	r.Content = r.Content[:cut] + fmt.Sprintf("\n[truncated: %d of %d bytes shown; the whole result is stored as the file %s]", cut, len(r.Content), name)
	return r
}
