package isolate

import (
	"encoding/binary"
	"fmt"
	"os"
	"syscall"
)

// POSIX ACL entries as the kernel reads them from system.posix_acl_access
// (include/uapi/linux/posix_acl_xattr.h): a version, then entries sorted
// by tag and id, each a tag, permissions and an id.
const (
	aclVersion   = 2
	aclUserObj   = 0x01
	aclUser      = 0x02
	aclGroupObj  = 0x04
	aclMask      = 0x10
	aclOther     = 0x20
	aclUndefined = 0xffffffff
	aclRWX       = 7
	aclX         = 1
)

// passOnly lets exactly the uids first … first+n-1 pass through dir (search,
// not list, read or write), and no one else but its owner: dir becomes
// 0700 with an ACL entry --x for each of them. A run's directories on a
// shared /tmp are made so, because mode 0711 would let the judged of every
// other run (a grader with --jobs above 1) pass to the names it lists or
// guesses: read another submission's staged programs, write into its /tmp.
// A file system without POSIX ACLs is an error, never a quiet fallback.
func passOnly(dir string, first, n int) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("isolate: %w", err)
	}
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	entry := func(tag, perm uint16, id uint32) {
		b = binary.LittleEndian.AppendUint16(b, tag)
		b = binary.LittleEndian.AppendUint16(b, perm)
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	entry(aclUserObj, aclRWX, aclUndefined)
	for i := range n {
		entry(aclUser, aclX, uint32(first+i))
	}
	entry(aclGroupObj, 0, aclUndefined)
	entry(aclMask, aclX, aclUndefined)
	entry(aclOther, 0, aclUndefined)
	if err := syscall.Setxattr(dir, "system.posix_acl_access", b, 0); err != nil {
		return fmt.Errorf("isolate: letting a run's judged uids (and no others) through %s needs POSIX ACLs on its file system: %w", dir, err)
	}
	return nil
}
