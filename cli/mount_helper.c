/* SPDX-License-Identifier: MIT */
/*
 * mount(8)'s helper for views: `mount -t fuse.piworkfs PROJECT MOUNTPOINT -o mode=build`,
 * an fstab line or a systemd .mount unit run /sbin/mount.fuse.piworkfs (or
 * mount.piworkfs), a link to this program, as
 *
 *   mount.fuse.piworkfs PROJECT MOUNTPOINT [-sfnv] [-o OPTIONS]
 *
 * which is `piworkfs mount PROJECT MOUNTPOINT -o OPTIONS`: the view's own options
 * (mode=M, ...) and fstab's (noauto, user, x-systemd.*, ...) are sorted out there.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "output.h"
#include "util.h"

bool pw_mount_helper_called(const char *argv0)
{
	const char *base = argv0 ? strrchr(argv0, '/') : NULL;

	base = base ? base + 1 : argv0;
	return base && (streq(base, "mount.fuse.piworkfs") || streq(base, "mount.piworkfs"));
}

int pw_mount_helper(int argc, char **argv)
{
	const char *operands[2] = {NULL, NULL}, *opts = NULL;
	bool fake = false;
	int n = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (streq(a, "-o") && i + 1 < argc) {
			opts = argv[++i];
		} else if (startswith(a, "-o") && a[2]) {
			opts = a + 2;
		} else if (streq(a, "-t") && i + 1 < argc) {
			i++; /* the type: ours */
		} else if (a[0] == '-' && a[1] && strspn(a + 1, "sfnvw") == strlen(a + 1)) {
			/* mount(8)'s: sloppy, fake, no mtab, verbose, read-write (-w) */
			fake = fake || strchr(a, 'f');
		} else if (a[0] == '-') {
			pw_err("mount",
			       "unknown option '%s' from mount(8) (usage: mount.fuse.piworkfs "
			       "PROJECT MOUNTPOINT [-sfnv] [-o OPTIONS])",
			       a);
			return PW_EXIT_USAGE;
		} else if (n < 2) {
			operands[n++] = a;
		} else {
			pw_err("mount",
			       "unexpected argument '%s' (usage: mount.fuse.piworkfs PROJECT "
			       "MOUNTPOINT [-o OPTIONS])",
			       a);
			return PW_EXIT_USAGE;
		}
	}
	if (n < 2) {
		pw_err("mount", "usage: mount.fuse.piworkfs PROJECT MOUNTPOINT [-o OPTIONS]");
		return PW_EXIT_USAGE;
	}
	if (fake)
		return PW_EXIT_OK; /* mount -f: do everything but the mount */
	/* Silent on success, as mount(8) and its other helpers are; errors go to stderr. */
	if (!freopen("/dev/null", "w", stdout))
		return PW_EXIT_SYSTEM;
	char *mount_argv[] = {(char *)"mount",
			      (char *)operands[0],
			      (char *)operands[1],
			      (char *)"-o",
			      (char *)(opts ? opts : "defaults"),
			      NULL};
	return cmd_mount(5, mount_argv);
}
