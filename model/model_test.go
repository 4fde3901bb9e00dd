package model

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateSettings(t *testing.T) {
	for _, tc := range []struct {
		max int
		ok  bool
	}{
		{1, true}, {DefaultMetadataSize, true}, {HardMaxMetadataBytes, true},
		{0, false}, {-1, false}, {HardMaxMetadataBytes + 1, false},
	} {
		err := ValidateSettings(Settings{MetadataMaxBytes: tc.max})
		var ve *ValidationError
		switch {
		case tc.ok && err != nil:
			t.Errorf("%d: %v", tc.max, err)
		case !tc.ok && (!errors.As(err, &ve) || ve.Field != "metadataMaxBytes"):
			t.Errorf("%d: %v, want a validation error naming metadataMaxBytes", tc.max, err)
		}
	}
	if got := DefaultSettings().Limits(); got != DefaultLimits() {
		t.Fatalf("default settings' limits %+v, want %+v", got, DefaultLimits())
	}
}

func TestCASError(t *testing.T) {
	for _, tc := range []struct {
		e    CASError
		want string
	}{
		{CASError{What: "service s", Expected: 0, Current: 7}, "service s already exists (modify index 7)"},
		{CASError{What: "service s", Expected: 7, Current: 0}, "service s does not exist (expected modify index 7)"},
		{CASError{What: "service s", Expected: 7, Current: 9}, "service s has modify index 9, not 7"},
	} {
		err := error(&tc.e)
		if err.Error() != tc.want || !errors.Is(err, ErrCASMismatch) || errors.Is(err, ErrConflict) {
			t.Errorf("%+v: %q (is cas mismatch %v)", tc.e, err, errors.Is(err, ErrCASMismatch))
		}
	}
}

func TestHardLimitsBoundWhatSettingsAllow(t *testing.T) {
	md := map[string]string{"k": string(make([]byte, 2000))}
	if err := HardLimits().ValidateMetadata("metadata", md); err != nil {
		t.Fatalf("2 KB under the hard ceiling: %v", err)
	}
	if err := DefaultLimits().ValidateMetadata("metadata", md); err == nil {
		t.Fatal("2 KB admitted under the default 1 KiB setting")
	}
}

func TestValidateHealthCheck_DeregisterAfter(t *testing.T) {
	base := HealthCheck{Type: CheckTCP, Interval: Duration(2 * time.Second), Timeout: Duration(time.Second), Rise: 1, Fall: 1}
	for d, ok := range map[time.Duration]bool{
		0: true, 2 * time.Second: true, 72 * time.Hour: true, MaxDeregisterAfter: true,
		-time.Second: false, 500 * time.Millisecond: false, time.Second: false, MaxDeregisterAfter + time.Second: false,
	} {
		hc := base
		hc.DeregisterAfter = Duration(d)
		err := ValidateHealthCheck(hc)
		if ok != (err == nil) {
			t.Errorf("deregisterAfter %s: %v", d, err)
		}
		if err != nil && !strings.Contains(err.Error(), "healthCheck.deregisterAfter") {
			t.Errorf("deregisterAfter %s: error %q does not name the field", d, err)
		}
	}
}

// TestProtectThresholdReached is the table of the one protect-threshold rule (Nacos's:
// healthy/enabled ≤ threshold, with enabled instances to count).
func TestProtectThresholdReached(t *testing.T) {
	for _, tc := range []struct {
		name             string
		healthy, enabled int
		threshold        float64
		want             bool
	}{
		{"threshold 0, every instance down", 0, 3, 0, true},
		{"threshold 0, one instance, down", 0, 1, 0, true},
		{"threshold 0, one of three healthy", 1, 3, 0, false},
		{"threshold 0, all healthy", 3, 3, 0, false},
		{"threshold 0, no instances", 0, 0, 0, false},
		{"threshold 1, no instances", 0, 0, 1, false},
		{"threshold 0.5, all down", 0, 4, 0.5, true},
		{"threshold 1, all healthy", 4, 4, 1, true},
		{"threshold 1, some down", 3, 4, 1, true},
		{"threshold 0.5, exact boundary", 2, 4, 0.5, true},
		{"threshold 0.5, just above", 3, 5, 0.5, false},
		{"threshold 0.25, exact boundary", 1, 4, 0.25, true},
		{"threshold 0.2499, just below the ratio", 1, 4, 0.2499, false},
		{"threshold 0.34, one of three", 1, 3, 0.34, true},
		{"threshold 0.33, one of three", 1, 3, 0.33, false},
		{"threshold 1/3, one of three", 1, 3, 1.0 / 3, true},
		{"threshold 0.6, two of three", 2, 3, 0.6, false},
		{"negative threshold counts as 0", 0, 2, -0.5, true},
		{"negative threshold, one healthy", 1, 2, -0.5, false},
	} {
		if got := ProtectThresholdReached(tc.healthy, tc.enabled, tc.threshold); got != tc.want {
			t.Errorf("%s: ProtectThresholdReached(%d, %d, %v) = %v, want %v", tc.name, tc.healthy, tc.enabled, tc.threshold, got, tc.want)
		}
	}
}
