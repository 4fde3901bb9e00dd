package snapshot

import (
	"fmt"

	"github.com/rosterhq/roster/store"
)

// CheckState is the ReadOptions.Check for Roster's own state files. state.db must
// pass store.CheckFile (a bbolt file with Roster's schema whose every record
// decodes), hold exactly the numbers of namespaces, services and instances that
// meta.json records, and have applied no Raft entry beyond meta.json's index. A
// damaged file yields an error wrapping store.ErrCorrupt.
func CheckState(statePath string, meta Meta) error {
	counts, applied, err := store.CheckFile(statePath)
	if err != nil {
		return err
	}
	got := Counts{Namespaces: counts.Namespaces, Services: counts.Services, Instances: counts.Instances}
	if got != meta.Counts {
		return fmt.Errorf("holds %d namespaces, %d services and %d instances; meta.json says %d, %d and %d",
			got.Namespaces, got.Services, got.Instances, meta.Counts.Namespaces, meta.Counts.Services, meta.Counts.Instances)
	}
	if applied > meta.Index {
		return fmt.Errorf("has applied the Raft log up to index %d, beyond meta.json's index %d", applied, meta.Index)
	}
	return nil
}
