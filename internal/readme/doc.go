// Package readme holds, in its tests, the README's Go snippets, so that
// they compile and stay the README's text; it has no code of its own.
package readme
