package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c, err := load(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8080" || c.DatabaseURL != "" || c.SQLitePath() != ".data/executor.db" || c.TaskQueue != "op-stack-executor" ||
		c.DevServerUIPort != 8233 || c.MaxBodyBytes != 1<<20 || c.ShutdownTimeout != 30*time.Second {
		t.Errorf("defaults = %+v", c)
	}
}

func TestInvalidValuesAreRejected(t *testing.T) {
	for name, value := range map[string]string{"MAX_BODY_BYTES": "-1", "SHUTDOWN_TIMEOUT": "soon", "LOG_FORMAT": "xml", "TEMPORAL_UI_PORT": "x"} {
		_, err := load(func(k string) (string, bool) {
			if k == name {
				return value, true
			}
			return "", false
		})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: want an error naming the variable, got %v", name, value, err)
		}
	}
}

// TestREADMEDocumentsEveryVariable keeps the README's configuration table
// in step with the variables the service reads.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Vars() {
		row := "| `" + v.Name + "` |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md has no configuration row for %s (want a line starting %q)", v.Name, row)
		}
	}
}

func TestMetricsAddr(t *testing.T) {
	c, err := load(func(string) (string, bool) { return "", false })
	if err != nil || c.MetricsAddr != "" {
		t.Fatalf("default METRICS_ADDR = %q, %v; want empty (the API's address)", c.MetricsAddr, err)
	}
	c, err = load(func(k string) (string, bool) {
		if k == "METRICS_ADDR" {
			return " :9100 ", true
		}
		return "", false
	})
	if err != nil || c.MetricsAddr != ":9100" {
		t.Fatalf("METRICS_ADDR = %q, %v", c.MetricsAddr, err)
	}
}
