// Package taskvalue names the context values that belong to one task of an
// executor, such as the permits a cluster limiter binds to the task's
// context (executor.LimiterPermit.Bind).
//
// A context answers a value it does not hold by asking its parent, so a
// task submitted with another task's context, or with one derived from it,
// would find that task's values as if they were its own: a task with no
// cluster permit of its own would check the other task's leases and fence
// its writes with the other task's token. The executor's run contexts
// answer a lookup of a Key with nil instead of asking the context the task
// was submitted with: a task finds only the values bound above its own run
// context.
package taskvalue

// Key is a context key of a value that belongs to one task. Keys are
// compared as pointers: each New is a key of its own.
type Key struct{ name string }

// New returns a new key; name says whose values it names, for printing.
func New(name string) *Key { return &Key{name} }

// String returns the key's name.
func (k *Key) String() string { return k.name }

// Is reports whether key is a Key, whose lookup the executor's run contexts
// do not pass on to the context their task was submitted with.
func Is(key any) bool {
	_, ok := key.(*Key)
	return ok
}
