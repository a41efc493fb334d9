package loadgen

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's CPU
// times: 100 on every architecture Go supports on Linux.
const clockTicks = 100

// ProcSelector chooses the service's processes on this machine whose CPU
// time the benchmark measures.
type ProcSelector struct {
	// PIDs are measured with all their descendants (`executor dev` and
	// the Temporal dev server it starts, say).
	PIDs []int
	// Match selects, besides, every process whose command name
	// (/proc/<pid>/comm) contains one of these strings, and their
	// descendants; the benchmark's own process is left out.
	Match []string
}

// Empty reports whether the selector selects nothing.
func (s ProcSelector) Empty() bool { return len(s.PIDs) == 0 && len(s.Match) == 0 }

// procStat is one process's line of /proc/<pid>/stat, the fields used.
type procStat struct {
	pid, ppid int
	comm      string
	cpuTicks  uint64 // utime + stime
	startTime uint64 // since boot, in ticks: tells a reused pid apart
}

func readStat(pid int) (procStat, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(raw))
}

// parseStat reads a /proc/<pid>/stat line; the command name is in
// parentheses and may hold spaces and parentheses itself.
func parseStat(line string) (procStat, error) {
	open, close := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || close < open {
		return procStat{}, fmt.Errorf("malformed stat line")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	if err != nil {
		return procStat{}, err
	}
	// Fields after the name, numbered from 3 (state) as in proc(5).
	f := strings.Fields(line[close+1:])
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("short stat line")
	}
	num := func(field int) uint64 {
		v, _ := strconv.ParseUint(f[field-3], 10, 64)
		return v
	}
	return procStat{pid: pid, ppid: int(num(4)), comm: line[open+1 : close], cpuTicks: num(14) + num(15), startTime: num(22)}, nil
}

// allStats reads every process's stat.
func allStats() map[int]procStat {
	out := map[int]procStat{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			out[pid] = st
		}
	}
	return out
}

// CPUSnapshot is the CPU time of the selected processes at one moment.
type CPUSnapshot struct {
	procs map[int]procStat
}

// Snapshot reads the CPU time of the processes s selects now.
func (s ProcSelector) Snapshot() CPUSnapshot {
	all := allStats()
	roots := map[int]bool{}
	for _, p := range s.PIDs {
		roots[p] = true
	}
	self := os.Getpid()
	for pid, st := range all {
		if pid == self {
			continue
		}
		for _, m := range s.Match {
			if m != "" && strings.Contains(st.comm, m) {
				roots[pid] = true
			}
		}
	}
	children := map[int][]int{}
	for pid, st := range all {
		children[st.ppid] = append(children[st.ppid], pid)
	}
	picked := map[int]procStat{}
	var walk func(int)
	walk = func(pid int) {
		st, ok := all[pid]
		if !ok || pid == self {
			return
		}
		if _, done := picked[pid]; done {
			return
		}
		picked[pid] = st
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for pid := range roots {
		walk(pid)
	}
	return CPUSnapshot{procs: picked}
}

// ProcCPU is one process's CPU time between two snapshots.
type ProcCPU struct {
	PID        int     `json:"pid"`
	Command    string  `json:"command"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

// CPUSince is the CPU time each process of s used since before, largest
// first, and their sum. A process started in between counts whole; one
// that ended in between is missing (its time is lost with it).
func (s CPUSnapshot) CPUSince(before CPUSnapshot) ([]ProcCPU, float64) {
	var out []ProcCPU
	var total float64
	for pid, st := range s.procs {
		ticks := st.cpuTicks
		if b, ok := before.procs[pid]; ok && b.startTime == st.startTime {
			ticks -= min(ticks, b.cpuTicks)
		}
		sec := float64(ticks) / clockTicks
		total += sec
		out = append(out, ProcCPU{PID: pid, Command: st.comm, CPUSeconds: sec})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CPUSeconds != out[j].CPUSeconds {
			return out[i].CPUSeconds > out[j].CPUSeconds
		}
		return out[i].PID < out[j].PID
	})
	return out, total
}
