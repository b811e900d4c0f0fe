package coarse

// Idle reports whether no refresh timer is armed.
func (c *Clock) Idle() bool { return c.state.Load() == idle }
