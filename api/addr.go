package api

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// BaseURL parses the address of a node's HTTP API, either "host:port" (plain HTTP) or
// an http or https URL such as "https://roster.example:8848/prefix". The URL returned
// has no trailing slash, query or fragment (a path prefix is kept): a route's path is
// appended to its String(). Every place that takes such an address (the client, a
// follower forwarding to the leader, a node joining a cluster, the CLI) parses it here.
func BaseURL(addr string) (*url.URL, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return nil, errors.New("empty address")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("address %q: scheme must be http or https", addr)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("address %q has no host", addr)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	return u, nil
}

// JoinAddr formats an instance address as the API's paths carry it: ip:port, IPv6 in
// brackets.
func JoinAddr(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

// SplitAddr parses ip:port (IPv6 in brackets) into its parts, without validating them.
func SplitAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}
