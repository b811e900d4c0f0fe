//go:build !unix

package main

import "time"

// processCPU is not measured off unix: the CPU ratios then read 0.
func processCPU() time.Duration { return 0 }
