// Package e2e holds end-to-end tests: the real terraform binary driving the
// built provider against a real PostgreSQL. It has no non-test code.
package e2e
