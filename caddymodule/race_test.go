//go:build race

package caddymodule

// raceEnabled: under the race detector sync.Pool drops items at random.
const raceEnabled = true
