// Package console drives the web console (package console) in headless Chromium
// against in-process Roster clusters: the views, the live updates, the actions and
// the ACL login, as an operator would use them, and the services list over many
// pages. The tests are in console_test.go and scale_test.go;
// they need a Chromium binary (Debian's chromium package) and skip without one,
// except under CI=true, where they fail.
package console
