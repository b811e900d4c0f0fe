//go:build !unix

package stats

import "time"

// ProcessCPU is not measured off unix: the CPU ratios then read 0.
func ProcessCPU() time.Duration { return 0 }
