// Package snapshot reads and writes Roster's backup archive, the file produced by
// `roster snapshot save` and accepted by `roster snapshot restore`.
//
// # Format (version 1)
//
// An archive is one gzip member holding one tar archive with exactly three regular
// files, in this order:
//
//   - meta.json: a JSON object, see [Meta];
//   - state.db: the bbolt state file, byte for byte;
//   - SHA256SUMS: the SHA-256 of meta.json and of state.db, one line each in the
//     format of sha256sum(1): 64 lowercase hex digits, two spaces, the file name,
//     a newline. `sha256sum -c SHA256SUMS` checks an unpacked archive.
//
// The gzip header is the bare 10-byte header Go's compress/gzip writes for an empty
// gzip.Header (no optional fields, MTIME 0, XFL 0, OS 255); the tar archive ends with
// its two-block end marker and nothing follows it, inside or after the gzip stream.
// Every archive written by [Write] has this shape, and [Read] accepts nothing else.
//
// # Guarantees
//
// [Write] and [Read] stream: their memory use does not depend on the size of state.db.
// [Read] and [Inspect] check the whole archive (gzip checksum, tar structure, member
// names and order, meta.json, both SHA-256 sums, the size of state.db) before they
// return success, so a restore can be refused before anything changes. Every problem
// with the archive itself is reported as a *[FormatError] that matches
// [ErrInvalidArchive] and names the member and what is wrong with it; I/O errors of
// the source are returned as they are.
//
// # Limits
//
// An archive comes from outside, so every number in it is bounded before it is used:
// meta.json's index and term by [MaxIndex] and [MaxTerm] (2^53-1: exact in JSON, far
// from overflowing the arithmetic Raft does with them), the size of state.db by
// [MaxStateSize], each count by [MaxCount], createdAt to the years 1970-2261 and
// rosterVersion to [MaxRosterVersionLen] printable bytes. [Write] refuses to produce
// an archive beyond them and [Read] refuses to accept one. A restore accepts an index
// up to [MaxRestoreIndex] only, half the range, so that the restored cluster keeps
// room to write and to save valid archives.
//
// What [Read] writes to disk is bounded too: state.db may not outgrow
// [ReadOptions].MaxExpansion times the compressed bytes behind it ([DefaultMaxExpansion]
// by default; checked before extraction when the archive's size is known, and before
// every write), and with [ReadOptions].MinFree it must fit on the disk beyond a reserve
// ([ErrNoSpace] otherwise; see [CheckSpace]). Errors of local files name no path: they
// may be answered to whoever sent the archive.
package snapshot
