//go:build !race

package health

const raceEnabled = false
