//go:build race

package health

// raceEnabled: the race detector's shadow memory inflates RSS several
// times, so RSS bounds apply only without it.
const raceEnabled = true
