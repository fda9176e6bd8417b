package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// startCPUProfile profiles into path (none: does nothing) until stop.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// phaseProfile starts a CPU profile of phase in round it (from 0) if
// --profile-phase asks for it: into PATH.N for the round's number N,
// never the first round's, whose first-time allocations of the heap and
// the kernel maps' elements the later rounds do not pay. It returns what
// stops it.
func (o options) phaseProfile(phase string, it int) (stop func()) {
	if o.profilePhase != phase || it == 0 {
		return func() {}
	}
	stop, err := startCPUProfile(fmt.Sprintf("%s.%d", o.cpuProfile, it+1))
	if err != nil {
		fmt.Fprintf(os.Stderr, "lbbench: %s profile of round %d: %v\n", phase, it+1, err)
		return func() {}
	}
	return stop
}

// startTrace writes an execution trace into path (none: does nothing)
// until stop, with mutex and blocking events profiled meanwhile (written
// beside it as PATH.mutex and PATH.block), to see where the pipeline's
// goroutines wait for each other.
func startTrace(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(10000) // one blocking event sampled per 10 µs blocked
	return func() {
		trace.Stop()
		f.Close()
		for _, name := range []string{"mutex", "block"} {
			if pf, err := os.Create(path + "." + name); err == nil {
				pprof.Lookup(name).WriteTo(pf, 0)
				pf.Close()
			}
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
	}, nil
}
