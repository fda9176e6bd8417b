package file

import (
	"io/fs"

	"github.com/lbstate/lbstate/internal/boundedfile"
)

// Every file the agent reads goes through internal/boundedfile: regular
// files only, opened without blocking, up to --manifests-max-file-size.

// fileID is what a file was when the source last looked: a rescan reads
// again only the files whose ID changed.
type fileID = boundedfile.ID

func idOf(fi fs.FileInfo) fileID { return boundedfile.IDOf(fi) }

// readRegular reads the file at path, which os.Stat described as fi (the
// file a link points to), if it is a regular file of at most max bytes.
// Anything else is an error, and is not even opened.
func readRegular(path string, fi fs.FileInfo, max int64) ([]byte, fileID, error) {
	return boundedfile.ReadStat(path, fi, max, "--manifests-max-file-size")
}
