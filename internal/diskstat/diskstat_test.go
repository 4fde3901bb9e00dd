package diskstat

import "testing"

func TestOf_TheTempDirectory(t *testing.T) {
	u, err := Of(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if u.Total == 0 || u.Free > u.Total || u.FreeFraction() <= 0 || u.FreeFraction() > 1 {
		t.Fatalf("usage %+v (fraction %v)", u, u.FreeFraction())
	}
	if _, err := Of("/no/such/dir/at/all"); err == nil {
		t.Fatal("a missing path has a usage")
	}
}
