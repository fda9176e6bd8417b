package file

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// fileID is what a file was when the source last looked: a rescan reads
// again only the files whose ID changed.
type fileID struct {
	dev, ino uint64
	mode     fs.FileMode // the type bits
	size     int64
	mtime    int64
	ctime    int64 // changes with the mode too (a file made readable)
}

func idOf(fi fs.FileInfo) fileID {
	id := fileID{mode: fi.Mode().Type(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino, id.ctime = uint64(st.Dev), st.Ino, st.Ctim.Nano()
	}
	return id
}

// sameFile says whether two IDs are of the same file, whatever happened
// to its content.
func (id fileID) sameFile(o fileID) bool { return id.dev == o.dev && id.ino == o.ino }

// readRegular reads the file at path, which os.Stat described as fi (the
// file a link points to), if it is a regular file of at most max bytes.
// Anything else is an error that is not even opened: opening a FIFO
// blocks until someone writes to it, and reading /dev/zero never ends.
func readRegular(path string, fi fs.FileInfo, max int64) ([]byte, fileID, error) {
	id := idOf(fi)
	if err := checkFile(path, fi, max); err != nil {
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
	id = idOf(fi)
	if err := checkFile(path, fi, max); err != nil {
		return nil, id, err
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, id, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > max { // it grew while being read
		return nil, id, tooLarge(path, int64(len(data)), max)
	}
	return data, id, nil
}

// checkFile says why a file is not read, if it is not.
func checkFile(path string, fi fs.FileInfo, max int64) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (%s): only regular files, or links to them, are read", path, typeName(fi.Mode()))
	}
	if fi.Size() > max {
		return tooLarge(path, fi.Size(), max)
	}
	return nil
}

func tooLarge(path string, size, max int64) error {
	return fmt.Errorf("%s: %d bytes, over --manifests-max-file-size (%d bytes): not read", path, size, max)
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
