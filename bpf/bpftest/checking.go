package bpftest

import "sync"

// KeepChecking calls check over and over in a goroutine (a reader of the
// maps standing for the datapath, say) until the function it returns is
// first called; that waits for the goroutine to end.
func KeepChecking(check func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			check()
		}
	})
	return sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
}
