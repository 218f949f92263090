package load

import (
	"syscall"
	"time"
)

// CPU is the processor time (user plus system) some processes spent during
// one run, and that time divided by the run's operations.
type CPU struct {
	Seconds float64 `json:"seconds"`
	// MicrosPerOp is Seconds over the run's operations, in microseconds;
	// zero for a run without operations.
	MicrosPerOp float64 `json:"us_per_op"`
}

// NewCPU describes d of CPU time spent on ops operations.
func NewCPU(d time.Duration, ops int64) *CPU {
	c := &CPU{Seconds: d.Seconds()}
	if ops > 0 {
		c.MicrosPerOp = float64(d) / float64(time.Microsecond) / float64(ops)
	}
	return c
}

// ProcessCPU returns the processor time (user plus system, every thread)
// this process has spent since it started, from getrusage(RUSAGE_SELF).
func ProcessCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
