# SPDX-License-Identifier: MIT
"""The privileged half of the FUSE CSI driver pattern (docs/DEPLOY.md), for test_fuse_fd.py.

    fuse_fd_mounter.py PROJECT MOUNTPOINT SOCKET [EXTRA_OPTIONS [UID GID]]

Opens /dev/fuse, mounts it at MOUNTPOINT with mount(2) as libfuse's fuse_mount_sys does
(type fuse.piworkfs, source PROJECT, flags nosuid,nodev, options
fd=N,rootmode=40000,user_id=UID,group_id=GID[,EXTRA_OPTIONS]; UID and GID default to
the helper's own), connects to the Unix socket
SOCKET, sends the descriptor over it (SCM_RIGHTS) and exits, closing its own copy: from then
on the connection lives as long as the server that received it. Needs CAP_SYS_ADMIN. Exit 0
when the descriptor was sent; 1, with the reason on stderr, when anything failed (a mount
made before the failure is detached first). Python 3 standard library only.
"""

import ctypes
import ctypes.util
import os
import socket
import sys

MS_NOSUID = 2
MS_NODEV = 4
MNT_DETACH = 2

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def fail(what):
    e = ctypes.get_errno()
    sys.stderr.write("fuse_fd_mounter: %s: %s\n" % (what, os.strerror(e)))
    sys.exit(1)


def main():
    project, mountpoint, sock_path = sys.argv[1:4]
    extra = sys.argv[4] if len(sys.argv) > 4 else ""
    uid, gid = (int(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 6 else \
        (os.getuid(), os.getgid())
    fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    opts = "fd=%d,rootmode=40000,user_id=%d,group_id=%d" % (fd, uid, gid)
    if extra:
        opts += "," + extra
    if libc.mount(os.fsencode(project), os.fsencode(mountpoint), b"fuse.piworkfs",
                  MS_NOSUID | MS_NODEV, opts.encode()) != 0:
        fail("mount %s" % opts)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(sock_path)
            socket.send_fds(s, [b"fuse"], [fd])
    except OSError as e:
        libc.umount2(os.fsencode(mountpoint), MNT_DETACH)
        sys.stderr.write("fuse_fd_mounter: sending the descriptor: %s\n" % e)
        sys.exit(1)
    os.close(fd)


if __name__ == "__main__":
    main()
