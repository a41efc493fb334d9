// Package templatingtest holds spec 001's formatting example for the tests
// of the packages that format: the template and the answer that fills it.
package templatingtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// SpecTemplate is spec 001 §4's output_template, verbatim.
const SpecTemplate = `{
    "report_title": "AI医疗应用分析报告",
    "executive_summary": "{从所有团队结果中提取执行摘要}",
    "research_findings": {
      "key_technologies": "{从研究团队结果中提取关键技术}",
      "market_trends": "{从分析结果中提取市场趋势}",
      "challenges": "{从分析结果中提取挑战}"
    },
    "recommendations": "{从写作团队结果中提取建议}",
    "appendix": {
      "data_sources": "{列出所有数据来源}",
      "methodology": "{描述研究方法}"
    }
  }`

// SpecAnswer is the filled template of spec 001's example response (its
// data), lists and all, read from api/testdata.
func SpecAnswer(t testing.TB) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "api", "testdata", "spec001_format_response.json"))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	return string(resp.Data)
}
