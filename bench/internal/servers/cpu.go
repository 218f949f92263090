package servers

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat: USER_HZ,
// which the kernel fixes at 100 per second for user space on every
// architecture Go runs on, whatever its internal tick rate.
const clockTicks = 100

// CPU returns the processor time (user plus system, every thread) that the
// system's node processes have spent since they started, summed over the
// members. Each member is the process the launcher started: the server
// binary itself for Janus and etcd, and the JVM for ZooKeeper, which runs
// java directly rather than through a start script. The figure counts in
// clock ticks of 10 ms, so take differences over runs of seconds.
func (s *System) CPU() (time.Duration, error) {
	var total time.Duration
	for _, p := range s.procs {
		d, err := procCPU(p.cmd.Process.Pid)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p.name, err)
		}
		total += d
	}
	return total, nil
}

// procCPU reads the CPU time process pid has spent from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	ticks, err := parseStatCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return time.Duration(ticks) * (time.Second / clockTicks), nil
}

// parseStatCPU returns utime+stime, fields 14 and 15 of a /proc/<pid>/stat
// line, in clock ticks. The second field is the command name in
// parentheses, which may itself hold spaces and parentheses, so the fields
// are counted from after the last ')'.
func parseStatCPU(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat line without a command name: %q", stat)
	}
	// rest[0] is field 3 (state), so field n is rest[n-3].
	rest := strings.Fields(stat[i+1:])
	if len(rest) < 13 {
		return 0, fmt.Errorf("stat line with %d fields after the command name, want at least 13: %q", len(rest), stat)
	}
	var total uint64
	for _, f := range rest[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat CPU field %q: %w", f, err)
		}
		total += n
	}
	return total, nil
}
