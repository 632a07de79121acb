/* SPDX-License-Identifier: MIT */
/* base/procfs.c: the process name and mount table readers the daemon and the CLI share. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "procfs.h"
#include "util.h"

Test(procfs, comm_of_self_is_the_name_prctl_gives)
{
	char want[16] = "", got[PW_COMM_MAX + 1];

	cr_assert_eq(prctl(PR_SET_NAME, "pw-procfs-test"), 0);
	cr_assert_eq(prctl(PR_GET_NAME, want), 0);
	cr_assert_eq(pw_proc_comm(getpid(), got, sizeof(got)), 0);
	cr_assert_str_eq(got, want, "no newline, the whole name");
}

Test(procfs, comm_is_cut_to_the_buffer)
{
	char got[4];

	cr_assert_eq(prctl(PR_SET_NAME, "pw-procfs-test"), 0);
	cr_assert_eq(pw_proc_comm(getpid(), got, sizeof(got)), 0);
	cr_assert_str_eq(got, "pw-");
}

Test(procfs, comm_of_no_process_is_an_error_and_empty)
{
	char got[PW_COMM_MAX + 1] = "stale";

	cr_assert_eq(pw_proc_comm(0, got, sizeof(got)), -ESRCH);
	cr_assert_str_eq(got, "");
	strcpy(got, "stale");
	cr_assert_eq(pw_proc_comm(-5, got, sizeof(got)), -ESRCH);
	cr_assert_str_eq(got, "");
	strcpy(got, "stale");
	/* Above pid_max (at most 2^22): never a process. */
	cr_assert_eq(pw_proc_comm(1 << 23, got, sizeof(got)), -ENOENT);
	cr_assert_str_eq(got, "");
}

Test(procfs, cached_comm_reads_proc_once_per_pid)
{
	cr_assert_eq(prctl(PR_SET_NAME, "pw-cache-a"), 0);
	const char *c = pw_proc_comm_cached(getpid());
	cr_assert_not_null(c);
	cr_assert_str_eq(c, "pw-cache-a");
	/* The same pid again is answered from the cache: the name read the first time. */
	cr_assert_eq(prctl(PR_SET_NAME, "pw-cache-b"), 0);
	cr_assert_str_eq(pw_proc_comm_cached(getpid()), "pw-cache-a");
	/* Another pid (here: none) replaces the entry, so the next ask reads /proc again. */
	cr_assert_null(pw_proc_comm_cached(1 << 23));
	cr_assert_null(pw_proc_comm_cached(0));
	cr_assert_str_eq(pw_proc_comm_cached(getpid()), "pw-cache-b");
}

Test(procfs, mountinfo_has_the_root_and_proc)
{
	pw_mountinfo *m = NULL;
	size_t n = 0;
	bool root = false, proc = false;

	cr_assert_eq(pw_mountinfo_read(SIZE_MAX, &m, &n), 0);
	cr_assert_gt(n, 0);
	for (size_t i = 0; i < n; i++) {
		cr_assert_not_null(m[i].root);
		cr_assert_not_null(m[i].mountpoint);
		cr_assert_not_null(m[i].fstype);
		cr_assert_eq(m[i].mountpoint[0], '/', "%s", m[i].mountpoint);
		root |= streq(m[i].mountpoint, "/");
		proc |= streq(m[i].mountpoint, "/proc") && streq(m[i].fstype, "proc");
	}
	cr_assert(root, "a mount at /");
	cr_assert(proc, "proc at /proc (this test reads it)");
	pw_mountinfo_free(m, n);
}

Test(procfs, mountinfo_stops_at_max)
{
	pw_mountinfo *m = NULL;
	size_t n = 0;

	cr_assert_eq(pw_mountinfo_read(1, &m, &n), 0);
	cr_assert_eq(n, 1);
	pw_mountinfo_free(m, n);
	pw_mountinfo_free(NULL, 0);
}
