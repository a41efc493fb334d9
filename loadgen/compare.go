package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Metric is one figure of a report that rounds are compared on.
type Metric struct {
	Name  string
	Value func(*Report) float64
}

// Metrics are the figures Compare prints for each row.
var Metrics = []Metric{
	{"overhead per LLM call p50 (ms)", func(r *Report) float64 { return r.Overhead.P50 }},
	{"efficiency p50", func(r *Report) float64 { return r.Efficiency.P50 }},
	{"efficiency min", func(r *Report) float64 { return r.Efficiency.Min }},
	{"run wall p50 (ms)", func(r *Report) float64 { return r.RunWall.P50 }},
	{"token → client p50 (ms)", func(r *Report) float64 { return r.TokenLatency.P50 }},
	{"token → client p99 (ms)", func(r *Report) float64 { return r.TokenLatency.P99 }},
	{"token → client max (ms)", func(r *Report) float64 { return r.TokenLatency.Max }},
	{"first token p50 (ms)", func(r *Report) float64 { return r.FirstToken.P50 }},
	{"first token p99 (ms)", func(r *Report) float64 { return r.FirstToken.P99 }},
	{"runs/s", func(r *Report) float64 { return r.RunsPerSecond }},
	{"service CPU per LLM call (ms)", func(r *Report) float64 { return r.CPUPerCallMS }},
	{"failed runs + failed checks", func(r *Report) float64 { return float64(r.Failed + r.CheckFailed) }},
}

// Compare reads the reports of alternating rounds under dir, laid out as
// dir/<label>-r<round>/<row>.json, and prints, for each row and metric,
// every label's value in each round (in round order), their median and
// their range: the spread of rounds, not a best round. labels gives the
// columns' order.
func Compare(w io.Writer, dir string, labels []string) error {
	type key struct{ label, row string }
	rounds := map[key]map[int]*Report{}
	rowSet := map[string]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		i := strings.LastIndex(e.Name(), "-r")
		if i < 0 {
			continue
		}
		label := e.Name()[:i]
		round, err := strconv.Atoi(e.Name()[i+2:])
		if err != nil {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, e.Name(), "*.json"))
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			var r Report
			if err := json.Unmarshal(raw, &r); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			row := strings.TrimSuffix(filepath.Base(f), ".json")
			k := key{label, row}
			if rounds[k] == nil {
				rounds[k] = map[int]*Report{}
			}
			rounds[k][round] = &r
			rowSet[row] = true
		}
	}
	if len(rowSet) == 0 {
		return fmt.Errorf("no reports under %s (want %s/<label>-r<round>/<row>.json)", dir, dir)
	}
	var rows []string
	for r := range rowSet {
		rows = append(rows, r)
	}
	sort.Strings(rows)
	for _, row := range rows {
		fmt.Fprintf(w, "\n== %s\n", row)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "metric")
		for _, l := range labels {
			fmt.Fprintf(tw, "\t%s: rounds\tmedian [min–max]", l)
		}
		fmt.Fprintln(tw, "\t")
		for _, m := range Metrics {
			fmt.Fprint(tw, m.Name)
			for _, l := range labels {
				reps := rounds[key{l, row}]
				var nums []int
				for n := range reps {
					nums = append(nums, n)
				}
				sort.Ints(nums)
				var vals []float64
				var strs []string
				for _, n := range nums {
					v := m.Value(reps[n])
					vals = append(vals, v)
					strs = append(strs, num(v))
				}
				if len(vals) == 0 {
					fmt.Fprint(tw, "\t—\t")
					continue
				}
				s := Summarize(vals)
				fmt.Fprintf(tw, "\t%s\t%s [%s–%s]", strings.Join(strs, " "), num(median(vals)), num(s.Min), num(s.Max))
			}
			fmt.Fprintln(tw, "\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// median is the middle value (the mean of the two middle ones for an even
// count), for a handful of rounds.
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
