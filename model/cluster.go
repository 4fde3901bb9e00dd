package model

import "regexp"

// MaxClusterIDLen bounds a cluster id.
const MaxClusterIDLen = 64

var clusterIDRe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9\-]*$`)

// ValidateClusterID checks a cluster's identity: letters, digits and '-', at most
// MaxClusterIDLen characters (the first leader makes a random UUID).
func ValidateClusterID(id string) error {
	switch {
	case id == "":
		return Invalid("clusterId", "must not be empty")
	case len(id) > MaxClusterIDLen:
		return Invalid("clusterId", "must be at most %d characters", MaxClusterIDLen)
	case !clusterIDRe.MatchString(id):
		return Invalid("clusterId", "may contain only letters, digits and '-' (and must start with a letter or digit)")
	}
	return nil
}
