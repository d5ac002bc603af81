package quota

// Kill ends the background work of q's leases as a crash of its instance
// would: nothing is settled or given back, and what it holds in the
// state stays there until it expires.
func (q *Quota) Kill() {
	l := q.leases
	l.mu.Lock()
	started := l.started
	l.stopped.Store(true)
	l.mu.Unlock()
	if started {
		close(l.stop)
		<-l.ended
	}
}

// ActiveLeases is how many subjects the background work of q's leases
// still visits.
func (q *Quota) ActiveLeases() int {
	l := q.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.subjects)
}

// Resending reports whether q still holds Applies to send again.
func (q *Quota) Resending() bool {
	r := &q.resend
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}
