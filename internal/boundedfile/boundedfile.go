// Package boundedfile is how the agent reads a file named by its
// configuration or found in a directory it follows (manifests,
// clustermesh configs and the TLS files they name, the export config):
// only regular files (or links to them), opened without blocking, up to
// a size cap, with errors that name the file and the reason. A FIFO, a
// device such as /dev/zero, or a file over the cap is refused before
// anything is read from it: opening a FIFO blocks until someone writes,
// and reading /dev/zero never ends.
//
//	data, id, err := boundedfile.Read(path, 1<<20, "the 1 MiB limit")
//	if errors.Is(err, boundedfile.ErrNotRegular) { ... }
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular and ErrTooLarge are matched (errors.Is) by the errors of
// Read for a file that is not regular, or larger than its cap.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
)

// Error is a file refused: its message names the file and says why.
type Error struct {
	Path string
	Err  error // ErrNotRegular or ErrTooLarge
	msg  string
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return e.Err }

// ID is what a file was when it was read: a follower reads again only
// the files whose ID changed.
type ID struct {
	dev, ino uint64
	mode     fs.FileMode // the type bits
	size     int64
	mtime    int64
	ctime    int64 // changes with the mode too (a file made readable)
}

// IDOf is the ID of the file fi describes.
func IDOf(fi fs.FileInfo) ID {
	id := ID{mode: fi.Mode().Type(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino, id.ctime = uint64(st.Dev), st.Ino, st.Ctim.Nano()
	}
	return id
}

// SameFile says whether two IDs are of the same file, whatever happened
// to its content.
func (id ID) SameFile(o ID) bool { return id.dev == o.dev && id.ino == o.ino }

// Read reads the file at path (following links) if it is a regular file
// of at most max bytes; limit names the cap in errors (a flag, say).
func Read(path string, max int64, limit string) ([]byte, ID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, ID{}, err
	}
	return ReadStat(path, fi, max, limit)
}

// ReadStat is Read of a file that os.Stat described as fi.
func ReadStat(path string, fi fs.FileInfo, max int64, limit string) ([]byte, ID, error) {
	id := IDOf(fi)
	if err := check(path, fi, max, limit); err != nil {
		return nil, id, err
	}
	// O_NONBLOCK: should the file have been swapped for a FIFO since
	// fi, opening it does not wait for a writer; it is then refused below.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, id, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, id, err
	}
	id = IDOf(fi)
	if err := check(path, fi, max, limit); err != nil {
		return nil, id, err
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, id, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > max { // it grew while being read
		return nil, id, tooLarge(path, int64(len(data)), max, limit)
	}
	return data, id, nil
}

// check says why a file is not read, if it is not.
func check(path string, fi fs.FileInfo, max int64, limit string) error {
	if !fi.Mode().IsRegular() {
		return &Error{Path: path, Err: ErrNotRegular,
			msg: fmt.Sprintf("%s: not a regular file (%s): only regular files, or links to them, are read", path, typeName(fi.Mode()))}
	}
	if fi.Size() > max {
		return tooLarge(path, fi.Size(), max, limit)
	}
	return nil
}

func tooLarge(path string, size, max int64, limit string) error {
	return &Error{Path: path, Err: ErrTooLarge,
		msg: fmt.Sprintf("%s: %d bytes, over %s (%d bytes): not read", path, size, limit, max)}
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}
