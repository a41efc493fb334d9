package templating

import (
	"encoding/json"
	"github.com/op-stack/executor/templating/templatingtest"
	"strings"
	"testing"
)

func mustTemplate(t *testing.T, raw string) *Template {
	t.Helper()
	tmpl, err := Parse([]byte(raw))
	if err != nil {
		t.Fatalf("Parse(%s): %v", raw, err)
	}
	return tmpl
}

func TestParseTemplateRejects(t *testing.T) {
	for raw, want := range map[string]string{
		``:                         "empty",
		`   `:                      "empty",
		`[1,2]`:                    "must be a JSON object, got an array",
		`"x"`:                      "must be a JSON object, got a string",
		`{}`:                       "empty object",
		`{"a": }`:                  "not valid JSON",
		`{"a": 1} {"b": 2}`:        "data after",
		`{"a": 1, "a": 2}`:         `duplicate key "a" at the top level`,
		`{"o": {"k": 1, "k": 2}}`:  `duplicate key "k" at o`,
		`{"a": [{"x":1,"x":1}]}`:   `duplicate key "x" at a[0]`,
		`{"a": "unterminated}`:     "not valid JSON",
		`{"a": 1`:                  "not valid JSON",
		`{"a": 1}}`:                "data after",
		`{"a": [1, 2,]}`:           "not valid JSON",
		`{"a": {"b": {"c": [}}}}`:  "not valid JSON",
		`{"a": tru}`:               "not valid JSON",
		`{"a": "x", "b": nul}`:     "not valid JSON",
		`{"a": "x", "b": "y"} xyz`: "data after",
	} {
		_, err := Parse([]byte(raw))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", raw, err, want)
		}
	}
}

// TestCheckSpecExample: spec 001's own filled template matches its
// template, lists in place of placeholders included.
func TestCheckSpecExample(t *testing.T) {
	tmpl := mustTemplate(t, templatingtest.SpecTemplate)
	v, problems := tmpl.Check(templatingtest.SpecAnswer(t))
	if len(problems) > 0 {
		t.Fatalf("spec example rejected: %v", problems)
	}
	out, err := tmpl.Render(v)
	if err != nil {
		t.Fatal(err)
	}
	// Rendered in the template's key order, not sorted.
	wantOrder := []string{`"report_title"`, `"executive_summary"`, `"research_findings"`, `"key_technologies"`, `"market_trends"`, `"challenges"`, `"recommendations"`, `"appendix"`, `"data_sources"`, `"methodology"`}
	last := -1
	for _, k := range wantOrder {
		i := strings.Index(string(out), k)
		if i <= last {
			t.Fatalf("key %s out of template order in %s", k, out)
		}
		last = i
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("rendered output is not JSON: %v\n%s", err, out)
	}
	if back["report_title"] != "AI医疗应用分析报告" || len(back["recommendations"].([]any)) != 5 {
		t.Errorf("rendered = %s", out)
	}
}

func TestCheckShape(t *testing.T) {
	const tmpl = `{
		"title": "Fixed title",
		"summary": "{summarise}",
		"nested": {"a": "{a}", "b": "{b}"},
		"items": [],
		"points": ["{point}"],
		"rows": [{"name": "{name}", "score": 0}],
		"count": 0,
		"flag": false,
		"anything": null
	}`
	valid := map[string]any{
		"title": "Fixed title", "summary": "text", "nested": map[string]any{"a": "x", "b": []any{"y", "z"}},
		"items": []any{1, "two"}, "points": []any{"p1", "p2"}, "rows": []any{map[string]any{"name": "n", "score": 3.5}},
		"count": 7, "flag": true, "anything": map[string]any{"free": []any{1}},
	}
	// with returns valid with one top-level key replaced (or removed, for
	// the deleteKey value).
	with := func(key string, val any) string {
		m := map[string]any{}
		for k, v := range valid {
			m[k] = v
		}
		if val == deleteKey {
			delete(m, key)
		} else {
			m[key] = val
		}
		raw, _ := json.Marshal(m)
		return string(raw)
	}
	cases := []struct {
		name   string
		answer string
		want   []string // substrings of the problems; none means valid
	}{
		{"valid", with("title", "Fixed title"), nil},
		{"fenced", "```json\n" + with("title", "Fixed title") + "\n```", nil},
		{"prose around", "Here you go:\n" + with("title", "Fixed title") + "\nHope it helps.", nil},
		{"no JSON", "I cannot do that.", []string{"contains no JSON object"}},
		{"broken JSON", `{"title": "Fixed title", "summary": }`, []string{"not valid JSON"}},
		{"literal changed", with("title", "Another title"), []string{`title: must be exactly "Fixed title"`}},
		{"literal not a string", with("title", 3), []string{`title: must be the string "Fixed title", got the number 3`}},
		{"placeholder left", with("summary", "{summarise}"), []string{"summary: still the placeholder"}},
		{"placeholder as list", with("summary", []any{"a", "b"}), nil},
		{"placeholder list of non-strings", with("summary", []any{"a", 2}), []string{"summary[1]: must be a string, got the number 2"}},
		{"placeholder as object", with("summary", map[string]any{"x": 1}), []string{"summary: must be a string or an array of strings, got an object"}},
		{"placeholder as number", with("summary", 5), []string{"summary: must be a string or an array of strings, got the number 5"}},
		{"missing key", with("summary", deleteKey), []string{`the top level: missing keys "summary"`}},
		{"extra key", with("extra", "x"), []string{`the top level: keys "extra" are not in the template`}},
		{"nested missing and extra", with("nested", map[string]any{"a": "x", "c": "y"}), []string{`nested: missing keys "b"`, `nested: keys "c" are not in the template`}},
		{"nested not an object", with("nested", "flat text"), []string{`nested: must be an object with the keys "a", "b", got the string "flat text"`}},
		{"array not an array", with("items", "x"), []string{"items: must be an array, got the string"}},
		{"empty template array takes anything", with("items", []any{map[string]any{"k": 1}}), nil},
		{"array element wrong", with("points", []any{"ok", 3}), []string{"points[1]: must be a string, got the number 3"}},
		{"array element list", with("points", []any{[]any{"x"}}), []string{"points[0]: must be a string, got an array"}},
		{"array of objects", with("rows", []any{map[string]any{"name": "n", "score": 1}, map[string]any{"name": "m"}}), []string{`rows[1]: missing keys "score"`}},
		{"array of objects wrong type", with("rows", []any{map[string]any{"name": "n", "score": "high"}}), []string{`rows[0].score: must be a number, got the string "high"`}},
		{"number as string", with("count", "7"), []string{`count: must be a number, got the string "7"`}},
		{"bool as string", with("flag", "true"), []string{`flag: must be a boolean, got the string "true"`}},
		{"null allows anything", with("anything", "text"), nil},
		{"top level array", `[` + with("title", "Fixed title") + `]`, nil}, // the object inside is found
	}
	tp := mustTemplate(t, tmpl)
	for _, c := range cases {
		v, problems := tp.Check(c.answer)
		if len(c.want) == 0 {
			if len(problems) > 0 || v == nil {
				t.Errorf("%s: unexpected problems %v", c.name, problems)
			}
			continue
		}
		if v != nil {
			t.Errorf("%s: returned a value despite problems", c.name)
		}
		joined := strings.Join(problems, "\n")
		for _, w := range c.want {
			if !strings.Contains(joined, w) {
				t.Errorf("%s: problems %q lack %q", c.name, problems, w)
			}
		}
	}
}

// deleteKey marks a key to remove in TestCheckShape.
var deleteKey = &struct{}{}

func TestCheckLimitsProblems(t *testing.T) {
	keys := map[string]any{}
	for i := 0; i < 40; i++ {
		keys[strings.Repeat("k", i+1)] = "{x}"
	}
	raw, _ := json.Marshal(keys)
	tmpl := mustTemplate(t, string(raw))
	_, problems := tmpl.Check(`{"other": 1}`)
	if len(problems) != 2 {
		// one "missing keys" problem listing all 40, one "not in the template"
		t.Fatalf("problems = %d: %v", len(problems), problems)
	}
	answer := map[string]any{}
	for k := range keys {
		answer[k] = 1
	}
	raw, _ = json.Marshal(answer)
	_, problems = tmpl.Check(string(raw))
	if len(problems) != maxListedProblems+1 || !strings.Contains(problems[maxListedProblems], "and 20 more problems") {
		t.Fatalf("problems = %d, last %q", len(problems), problems[len(problems)-1])
	}
}

func TestSchema(t *testing.T) {
	raw, strict := mustTemplate(t, templatingtest.SpecTemplate).Schema()
	if !strict {
		t.Error("the spec template should allow strict structured output")
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s["type"] != "object" || s["additionalProperties"] != false {
		t.Fatalf("schema = %s", raw)
	}
	req := s["required"].([]any)
	if len(req) != 5 || req[0] != "report_title" || req[4] != "appendix" {
		t.Errorf("required = %v", req)
	}
	props := s["properties"].(map[string]any)
	if title := props["report_title"].(map[string]any); title["enum"].([]any)[0] != "AI医疗应用分析报告" {
		t.Errorf("report_title schema = %v", title)
	}
	if _, ok := props["executive_summary"].(map[string]any)["anyOf"]; !ok {
		t.Errorf("executive_summary schema = %v", props["executive_summary"])
	}
	if rf := props["research_findings"].(map[string]any); rf["type"] != "object" || len(rf["required"].([]any)) != 3 {
		t.Errorf("research_findings schema = %v", rf)
	}
	if _, strict := mustTemplate(t, `{"a": [], "b": null}`).Schema(); strict {
		t.Error("empty arrays and nulls are open-ended: not strict")
	}
}

func TestFillOffline(t *testing.T) {
	tmpl := mustTemplate(t, `{"title": "Fixed", "summary": "{ summarise }", "list": ["{item}"], "n": 3, "b": true, "z": null}`)
	out := tmpl.FillOffline()
	want := `{"title":"Fixed","summary":"[offline model] summarise","list":["[offline model] item"],"n":3,"b":true,"z":null}`
	if string(out) != want {
		t.Fatalf("FillOffline = %s, want %s", out, want)
	}
	if _, problems := tmpl.Check(string(out)); len(problems) > 0 {
		t.Fatalf("the offline fill does not match its template: %v", problems)
	}
}
