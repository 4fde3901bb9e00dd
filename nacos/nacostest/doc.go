// Package nacostest holds the tests that drive running Roster clusters through the
// Nacos Open API: with the real nacos-sdk-go v1 client and with plain HTTP requests.
// It has no code of its own; the tests live outside package httpapi because the
// in-process cluster helper (server/servertest) imports httpapi.
package nacostest
