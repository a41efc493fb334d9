// Package templating fills the output templates of spec 001 §4
// (results/format): it parses and checks a template, checks a model's
// answer against it, renders the answer in the template's key order,
// derives the JSON schema the model answers with, fills a template without
// a model, and writes the formatting prompts. It is used by the API (to
// refuse a bad template before any work) and by the FormatResults activity
// (which runs the model calls), and imports nothing of the module but
// models.
package templating

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// maxListedProblems bounds the problems reported to the model and in the
// final error: a wildly wrong answer must not produce a wall of text.
const maxListedProblems = 20

// Kinds of template values.
const (
	kindObject = "an object"
	kindArray  = "an array"
	kindString = "a string"
	kindNumber = "a number"
	kindBool   = "a boolean"
	kindNull   = "null"
)

// Template is a parsed output template (spec 001 §4): a JSON object whose
// object keys are kept in order, so the filled answer comes back in the
// template's order.
type Template struct {
	root *tmplNode
}

type tmplNode struct {
	kind  string
	keys  []string // object keys in order
	props map[string]*tmplNode
	items []*tmplNode // array elements
	str   string
}

// placeholder reports whether a template string asks to be filled: it is
// wrapped in braces, like "{从研究团队结果中提取关键技术}".
func (n *tmplNode) placeholder() bool {
	s := strings.TrimSpace(n.str)
	return n.kind == kindString && len(s) >= 2 && strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}")
}

// Parse parses an output template. It must be a JSON object with at
// least one key and no duplicate keys at any level; the error says what is
// wrong and where.
func Parse(raw []byte) (*Template, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("the output template is empty: it must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	root, err := parseNode(dec, "")
	if err != nil {
		return nil, fmt.Errorf("the output template is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the output template has data after its JSON object")
	}
	if root.kind != kindObject {
		return nil, fmt.Errorf("the output template must be a JSON object, got %s", root.kind)
	}
	if len(root.keys) == 0 {
		return nil, errors.New("the output template is an empty object: give it the keys to fill")
	}
	return &Template{root: root}, nil
}

func parseNode(dec *json.Decoder, path string) (*tmplNode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &tmplNode{kind: kindObject, props: map[string]*tmplNode{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key := kt.(string)
				if _, dup := n.props[key]; dup {
					return nil, fmt.Errorf("duplicate key %q at %s", key, pathOrRoot(path))
				}
				child, err := parseNode(dec, joinPath(path, key))
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, key)
				n.props[key] = child
			}
			_, err := dec.Token() // '}'
			return n, err
		case '[':
			n := &tmplNode{kind: kindArray}
			for dec.More() {
				child, err := parseNode(dec, fmt.Sprintf("%s[%d]", path, len(n.items)))
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, child)
			}
			_, err := dec.Token() // ']'
			return n, err
		}
	case string:
		return &tmplNode{kind: kindString, str: v}, nil
	case json.Number:
		return &tmplNode{kind: kindNumber, str: v.String()}, nil
	case bool:
		return &tmplNode{kind: kindBool, str: fmt.Sprint(v)}, nil
	case nil:
		return &tmplNode{kind: kindNull}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func pathOrRoot(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

// Check parses a model's answer tolerantly (bare or in a code fence, with
// prose around the object) and checks it against the template. It returns
// the decoded answer and nil, or the problems, each naming its path:
//
//   - an object must have exactly the template object's keys;
//   - a placeholder string may be filled with a string or an array of
//     strings, but not left as the placeholder;
//   - any other template string is fixed text and must come back unchanged
//     (inside arrays only its type counts);
//   - arrays must be arrays, their elements shaped like the template
//     array's first element (any elements when it is empty);
//   - numbers and booleans must keep their type; null allows anything.
func (t *Template) Check(answer string) (any, []string) {
	obj := ExtractObject(stripFences(answer))
	if obj == "" {
		return nil, []string{"the answer contains no JSON object"}
	}
	dec := json.NewDecoder(strings.NewReader(obj))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, []string{fmt.Sprintf("the answer is not valid JSON: %v", err)}
	}
	var problems []string
	checkNode(t.root, v, "", false, &problems)
	if len(problems) > maxListedProblems {
		n := len(problems) - maxListedProblems
		problems = append(problems[:maxListedProblems], fmt.Sprintf("… and %d more problems", n))
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return v, nil
}

func checkNode(n *tmplNode, v any, path string, inArray bool, problems *[]string) {
	at := pathOrRoot(path)
	switch n.kind {
	case kindNull:
		return
	case kindObject:
		obj, ok := v.(map[string]any)
		if !ok {
			*problems = append(*problems, fmt.Sprintf("%s: must be an object with the keys %s, got %s", at, quoteKeys(n.keys), describe(v)))
			return
		}
		var missing, extra []string
		for _, k := range n.keys {
			if _, ok := obj[k]; !ok {
				missing = append(missing, k)
			}
		}
		for k := range obj {
			if _, ok := n.props[k]; !ok {
				extra = append(extra, k)
			}
		}
		if len(missing) > 0 {
			*problems = append(*problems, fmt.Sprintf("%s: missing keys %s", at, quoteKeys(missing)))
		}
		if len(extra) > 0 {
			sort.Strings(extra)
			*problems = append(*problems, fmt.Sprintf("%s: keys %s are not in the template; remove them", at, quoteKeys(extra)))
		}
		for _, k := range n.keys {
			if child, ok := obj[k]; ok {
				checkNode(n.props[k], child, joinPath(path, k), false, problems)
			}
		}
	case kindArray:
		arr, ok := v.([]any)
		if !ok {
			*problems = append(*problems, fmt.Sprintf("%s: must be an array, got %s", at, describe(v)))
			return
		}
		if len(n.items) == 0 {
			return
		}
		for i, el := range arr {
			checkNode(n.items[0], el, fmt.Sprintf("%s[%d]", path, i), true, problems)
		}
	case kindString:
		if n.placeholder() {
			switch x := v.(type) {
			case string:
				if strings.TrimSpace(x) == strings.TrimSpace(n.str) {
					*problems = append(*problems, fmt.Sprintf("%s: still the placeholder %q; replace it with the content it asks for", at, n.str))
				}
			case []any:
				if inArray {
					*problems = append(*problems, fmt.Sprintf("%s: must be a string, got an array", at))
					return
				}
				for i, el := range x {
					if _, ok := el.(string); !ok {
						*problems = append(*problems, fmt.Sprintf("%s[%d]: must be a string, got %s", path, i, describe(el)))
					}
				}
			default:
				want := "a string or an array of strings"
				if inArray {
					want = "a string"
				}
				*problems = append(*problems, fmt.Sprintf("%s: must be %s, got %s", at, want, describe(v)))
			}
			return
		}
		s, ok := v.(string)
		switch {
		case !ok:
			*problems = append(*problems, fmt.Sprintf("%s: must be the string %q, got %s", at, n.str, describe(v)))
		case !inArray && s != n.str:
			*problems = append(*problems, fmt.Sprintf("%s: must be exactly %q (fixed text of the template), got %q", at, n.str, Truncate(s, 200)))
		}
	case kindNumber:
		if _, ok := v.(json.Number); !ok {
			*problems = append(*problems, fmt.Sprintf("%s: must be a number, got %s", at, describe(v)))
		}
	case kindBool:
		if _, ok := v.(bool); !ok {
			*problems = append(*problems, fmt.Sprintf("%s: must be a boolean, got %s", at, describe(v)))
		}
	}
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return kindObject
	case []any:
		return kindArray
	case string:
		return fmt.Sprintf("the string %q", Truncate(x, 80))
	case json.Number:
		return "the number " + x.String()
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	}
	return fmt.Sprintf("%T", v)
}

func quoteKeys(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}

// ExtractObject returns the text from the first "{" to the last "}" of a
// model's answer, dropping prose around a JSON object; "" when there is
// none.
func ExtractObject(s string) string {
	start := strings.Index(s, "{")
	end := strings.LastIndex(s, "}")
	if start < 0 || end <= start {
		return ""
	}
	return s[start : end+1]
}

// stripFences removes a Markdown code fence around an answer.
func stripFences(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "```") {
		return s
	}
	s = strings.TrimPrefix(s, "```")
	if nl := strings.IndexByte(s, '\n'); nl >= 0 {
		s = s[nl+1:] // the info string, e.g. "json"
	}
	return strings.TrimSuffix(strings.TrimSpace(s), "```")
}

// Render encodes a checked answer with its object keys in the template's
// order (encoding/json would sort them).
func (t *Template) Render(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := renderNode(&b, t.root, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func renderNode(b *bytes.Buffer, n *tmplNode, v any) error {
	switch {
	case n != nil && n.kind == kindObject:
		obj, ok := v.(map[string]any)
		if !ok {
			break
		}
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, k)
			b.WriteByte(':')
			if err := renderNode(b, n.props[k], obj[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case n != nil && n.kind == kindArray && len(n.items) > 0:
		arr, ok := v.([]any)
		if !ok {
			break
		}
		b.WriteByte('[')
		for i, el := range arr {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := renderNode(b, n.items[0], el); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b.Write(raw)
	return nil
}

func writeJSON(b *bytes.Buffer, v any) {
	raw, _ := json.Marshal(v)
	b.Write(raw)
}

// Schema derives the JSON schema the model is asked to answer with, and
// whether it fits strict structured output (every object's keys required,
// no additional properties, no open-ended values). Placeholders allow a
// string or an array of strings; fixed text is a one-value enum.
func (t *Template) Schema() (json.RawMessage, bool) {
	strict := true
	raw, _ := json.Marshal(schemaOf(t.root, &strict, false))
	return raw, strict
}

func schemaOf(n *tmplNode, strict *bool, inArray bool) map[string]any {
	switch n.kind {
	case kindObject:
		props := make(map[string]any, len(n.keys))
		for _, k := range n.keys {
			props[k] = schemaOf(n.props[k], strict, false)
		}
		return map[string]any{"type": "object", "properties": props, "required": append([]string{}, n.keys...), "additionalProperties": false}
	case kindArray:
		if len(n.items) == 0 {
			*strict = false
			return map[string]any{"type": "array"}
		}
		return map[string]any{"type": "array", "items": schemaOf(n.items[0], strict, true)}
	case kindString:
		switch {
		case inArray:
			return map[string]any{"type": "string"}
		case n.placeholder():
			return map[string]any{"anyOf": []any{
				map[string]any{"type": "string"},
				map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			}}
		default:
			return map[string]any{"type": "string", "enum": []string{n.str}}
		}
	case kindNumber:
		return map[string]any{"type": "number"}
	case kindBool:
		return map[string]any{"type": "boolean"}
	}
	*strict = false
	return map[string]any{}
}

// FillOffline fills the template without a model: placeholders become
// labelled stand-in text, everything else stays as the template has it.
func (t *Template) FillOffline() json.RawMessage {
	var b bytes.Buffer
	fillOffline(&b, t.root)
	return b.Bytes()
}

func fillOffline(b *bytes.Buffer, n *tmplNode) {
	switch n.kind {
	case kindObject:
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, k)
			b.WriteByte(':')
			fillOffline(b, n.props[k])
		}
		b.WriteByte('}')
	case kindArray:
		b.WriteByte('[')
		for i, el := range n.items {
			if i > 0 {
				b.WriteByte(',')
			}
			fillOffline(b, el)
		}
		b.WriteByte(']')
	case kindString:
		if n.placeholder() {
			inner := strings.TrimSpace(n.str)
			writeJSON(b, "[offline model] "+strings.TrimSpace(inner[1:len(inner)-1]))
			return
		}
		writeJSON(b, n.str)
	case kindNull:
		b.WriteString("null")
	default: // numbers and booleans, as written
		b.WriteString(n.str)
	}
}
