# SPDX-License-Identifier: MIT
"""A request is decided and answered under one policy (docs/internals/fs.md, "One request,
one policy"; fs/req.h).

A burst of creates from several threads runs while the mode flips between build (src/ is
writable) and plan (nothing is). Every create's reply carries the new file's attributes,
which the kernel caches; statx with AT_STATX_DONT_SYNC on the returned descriptor reads that
cached copy without asking the daemon again, so it shows exactly what the CREATE reply said
(a switch's attribute pass only marks the copy stale, it never rewrites it). The audit log
(the view runs with --log-allowed) records the decision of every create with the mode it was
decided under. The property: a create that succeeded was decided under build, and its reply
shows the write bits build gives; a create refused was refused by plan. Nothing here is
timed: the switches land wherever they land, and every outcome is checked against its own
record. (The old code took a new policy reference for the attributes, so a switch between
the decision and the reply sent a create allowed by build with plan's attributes, r--.)
"""

import ctypes
import ctypes.util
import errno
import json
import os
import sys
import threading
import time
import unittest

import harness  # noqa: E402

AT_EMPTY_PATH = 0x1000
AT_STATX_DONT_SYNC = 0x4000
STATX_MODE = 0x2
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint,
                        ctypes.c_char_p]
_libc.statx.restype = ctypes.c_int


def cached_mode(fd):
    """The mode the kernel holds for FD's inode, without a GETATTR (AT_STATX_DONT_SYNC)."""
    buf = ctypes.create_string_buffer(256)  # struct statx is 256 bytes
    if _libc.statx(fd, b"", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MODE, buf) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    # stx_mask u32, stx_blksize u32, stx_attributes u64, stx_nlink, stx_uid, stx_gid u32,
    # then stx_mode u16 at offset 28.
    return int.from_bytes(buf.raw[28:30], sys.byteorder)


class OnePolicyPerRequestTest(harness.MountCase):
    THREADS = 4
    # The switcher flips at least SWITCHES times, and on until both outcomes were seen
    # (a condition, not a duration), but never more than SWITCHES_MAX times.
    SWITCHES = 100
    SWITCHES_MAX = 6000

    def test_create_replies_match_their_recorded_decision(self):
        v = self.mount("build", args=["--log-allowed", "--timeout", "86400"])
        os.umask(0o022)
        results = []  # (rel, errno or 0, mode bits of the reply or None)
        lock = threading.Lock()
        stop = threading.Event()
        problems = []
        seen = {"created": False, "refused": False}

        def switcher():
            self.switch_storm(v, ("build", "plan"), self.SWITCHES_MAX, 30, stop, problems,
                              until=lambda n: n >= self.SWITCHES and all(seen.values()),
                              # room for whole creates between switches, not a timing claim
                              after=lambda rng: time.sleep(rng.random() * 0.002))

        def creator(t):
            mine = []
            try:
                i = 0
                while not stop.is_set():
                    rel = "src/req-%d-%d" % (t, i)
                    i += 1
                    try:
                        fd = os.open(v.path(rel),
                                     os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC,
                                     0o644)
                    except OSError as e:
                        mine.append((rel, e.errno, None))
                        seen["refused"] = True
                        continue
                    seen["created"] = True
                    try:
                        mine.append((rel, 0, cached_mode(fd)))
                    finally:
                        os.close(fd)
            except Exception as e:  # noqa: BLE001
                problems.append("creator %d: %r" % (t, e))
            finally:
                with lock:
                    results.extend(mine)

        threads = [threading.Thread(target=creator, args=(t,)) for t in range(self.THREADS)]
        sw = threading.Thread(target=switcher)
        for th in threads:
            th.start()
        sw.start()
        for th in threads:
            th.join()
        stop.set()
        sw.join()
        self.assertEqual(problems, [])
        created = [r for r in results if r[1] == 0]
        refused = [r for r in results if r[1] != 0]
        # Both outcomes must have happened, or the burst tested nothing.
        self.assertTrue(created and refused, "created %d, refused %d" %
                        (len(created), len(refused)))
        for rel, err, _ in refused:
            self.assertEqual(err, errno.EROFS, "%s: %s" % (rel, errno.errorcode.get(err)))

        # The decision recorded for each create (allowed rows too: --log-allowed).
        wanted = {rel for rel, _, _ in results}
        rows = {}

        def all_recorded():
            p = self.run_pw("log", "--json", "-n", "0", "--project",
                            os.path.realpath(self.project))
            if p.returncode != 0:
                return False
            rows.clear()
            for line in p.stdout.splitlines():
                row = json.loads(line)
                if row.get("op") == "create" and row.get("path") in wanted:
                    rows.setdefault(row["path"], []).append(row)
            return wanted <= set(rows)

        self.assertTrue(harness.wait_until(all_recorded, harness.DEADLINE),
                        "%d creates have no audit row" % len(wanted - set(rows)))
        mismatches = []
        for rel, err, mode in results:
            (row,) = rows[rel]  # one decision per create
            if err == 0:
                # Allowed, by build, and answered with build's attributes: rw-r--r--.
                if row["denied"] or row["mode"] != "build" or mode & 0o777 != 0o644:
                    mismatches.append((rel, "created", oct(mode), row["mode"], row["denied"]))
            elif not row["denied"] or row["mode"] != "plan":
                mismatches.append((rel, "refused", None, row["mode"], row["denied"]))
        self.assertFalse(mismatches, "%d of %d creates were answered under another "
                         "policy than the one that decided them (first: %r)" %
                         (len(mismatches), len(results), mismatches[:5]))


if __name__ == "__main__":
    unittest.main()
