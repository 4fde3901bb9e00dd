package snapshot

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// formatSums returns SHA256SUMS for the two checksummed members, in the format of
// sha256sum(1).
func formatSums(metaSum, stateSum [32]byte) []byte {
	return fmt.Appendf(nil, "%x  %s\n%x  %s\n", metaSum, metaName, stateSum, stateName)
}

// parseSums parses SHA256SUMS strictly: lines of exactly "<64 lowercase hex
// digits><two spaces><name>\n", naming meta.json and state.db once each and nothing
// else.
func parseSums(data []byte) (map[string][32]byte, error) {
	if len(data) == 0 {
		return nil, errors.New("is empty")
	}
	if data[len(data)-1] != '\n' {
		return nil, errors.New("last line does not end with a newline")
	}
	sums := make(map[string][32]byte, 2)
	for i, line := range strings.Split(string(data[:len(data)-1]), "\n") {
		digest, name, ok := strings.Cut(line, "  ")
		var sum [32]byte
		if !ok || len(digest) != hex.EncodedLen(len(sum)) || !isLowerHex(digest) {
			return nil, fmt.Errorf("line %d is not \"<sha256 in lowercase hex>  <file name>\": %q", i+1, clip(line, 100))
		}
		if _, err := hex.Decode(sum[:], []byte(digest)); err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		if name != metaName && name != stateName {
			return nil, fmt.Errorf("line %d lists unexpected file %q (only %s and %s belong)", i+1, clip(name, 100), metaName, stateName)
		}
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("lists %s twice", name)
		}
		sums[name] = sum
	}
	for _, name := range []string{metaName, stateName} {
		if _, ok := sums[name]; !ok {
			return nil, fmt.Errorf("does not list %s", name)
		}
	}
	return sums, nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
