package gateway

// IdleConns returns the number of client connections idle between
// requests, or 0 before Serve runs.
func IdleConns(g *Gateway) int {
	l := g.clients.Load()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idle.Len()
}
