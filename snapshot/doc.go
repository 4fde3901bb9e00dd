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
// the source and of the local disk are returned as they are.
package snapshot
