package snapshot

import (
	"bytes"
	"crypto/sha256"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
)

// TestWriteRead_MemoryDoesNotGrowWithSize streams a 64 MiB state through Write and
// Read, connected by a pipe, and checks that the heap in use stays far below the
// state's size: neither side may hold the state (or the archive) in memory.
func TestWriteRead_MemoryDoesNotGrowWithSize(t *testing.T) {
	const size = 32 << 20
	const limit = 16 << 20

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	src := newSynthState(size)

	pr, pw := io.Pipe()
	writeErr := make(chan error, 1)
	go func() {
		err := Write(pw, testMeta(), src, size)
		pw.CloseWithError(err)
		writeErr <- err
	}()
	dir := t.TempDir()
	a, err := Read(pr, ReadOptions{Dir: dir})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	defer a.Close()
	if err := <-writeErr; err != nil {
		t.Fatalf("Write: %v", err)
	}
	src.sample()

	if peak := src.peak - base; src.peak < base || peak > limit {
		t.Errorf("heap in use grew by %d MiB while streaming %d MiB, want at most %d MiB", peak>>20, size>>20, limit>>20)
	}
	t.Logf("heap in use: %.1f MiB before, %.1f MiB at peak, over %d samples", float64(base)/(1<<20), float64(src.peak)/(1<<20), src.samples)

	if a.Meta.Size != size {
		t.Errorf("Meta.Size = %d, want %d", a.Meta.Size, size)
	}
	f, err := os.Open(a.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h.Sum(nil), src.hash.Sum(nil)) {
		t.Error("extracted state differs from the state written")
	}
}

// synthState generates a state of the given size without storing it: 4 KiB pages,
// each a quarter random and the rest zero, like a sparse bbolt file. Every MiB it
// samples the heap in use, which covers both sides of the pipe.
type synthState struct {
	remaining int64
	rng       *rand.ChaCha8
	page      []byte
	off       int
	hash      hash.Hash
	sinceLast int
	peak      uint64
	samples   int
}

func newSynthState(size int64) *synthState {
	return &synthState{remaining: size, rng: rand.NewChaCha8([32]byte{9}), page: make([]byte, 4096), off: 4096, hash: sha256.New()}
}

func (s *synthState) Read(p []byte) (int, error) {
	if s.remaining == 0 {
		return 0, io.EOF
	}
	if s.off == len(s.page) {
		_, _ = s.rng.Read(s.page[:64])
		s.off = 0
	}
	n := copy(p, s.page[s.off:min(len(s.page), s.off+int(min(s.remaining, int64(len(p)))))])
	s.off += n
	s.remaining -= int64(n)
	s.hash.Write(p[:n])
	if s.sinceLast += n; s.sinceLast >= 1<<20 {
		s.sinceLast = 0
		s.sample()
	}
	return n, nil
}

func (s *synthState) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.peak = max(s.peak, ms.HeapInuse)
	s.samples++
}
