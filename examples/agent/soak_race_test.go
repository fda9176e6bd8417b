//go:build race

package main

// raceEnabled: the race detector's own memory grows with every goroutine
// and lock the process ever had, so RSS says nothing about the agent's.
const raceEnabled = true
