package api

import (
	"net"
	"strconv"
)

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
