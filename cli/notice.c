/* SPDX-License-Identifier: MIT */
/*
 * Notices said once per boot and user (cli.h, pw_cli_notice_once).
 *
 * A notice about the machine, not about the command (FUSE over io_uring is off in the
 * kernel), is true until the machine changes, and repeating it at every mount buries what
 * each mount says. It is said once per boot and user: the marker lives in the default socket
 * directory ($XDG_RUNTIME_DIR/piworkfs, /run/piworkfs for root), a tmpfs the system empties
 * at every boot (and a systemd user's at logout), which is the lifetime of a kernel module
 * parameter set by hand; the marker also holds the boot's id, for a directory that outlives
 * a boot, and the notice: a notice that changed (another reason) is said again. Where no marker can
 * be read or written, the notice is said: better twice than never.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ctl/sockets.h"
#include "util.h"

/* Is the marker FILE in DIRFD there and holding TEXT? */
static bool marked(int dirfd, const char *file, const char *text)
{
	size_t len = strlen(text);
	_cleanup_free_ char *buf = malloc(len + 2);
	_cleanup_close_ int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (!buf || fd < 0)
		return false;
	n = read(fd, buf, len + 1);
	return n == (ssize_t)len && memcmp(buf, text, len) == 0;
}

static void mark(int dirfd, const char *file, const char *text)
{
	_cleanup_close_ int fd =
	    openat(dirfd, file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	size_t len = strlen(text);

	if (fd >= 0 && write(fd, text, len) != (ssize_t)len)
		(void)unlinkat(dirfd, file, 0); /* half a marker: say it next time */
}

/* This boot's id (the kernel's random boot_id), or "" where it cannot be read. */
static void boot_id(char *buf, size_t size)
{
	_cleanup_close_ int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, size - 1) : -1;

	buf[n > 0 ? n : 0] = '\0';
}

bool pw_cli_notice_once(const char *name, const char *text)
{
	_cleanup_free_ char *dir = NULL, *file = NULL, *said = NULL;
	_cleanup_close_ int dirfd = -1;
	char boot[64];

	/* the boot's id too: a socket directory that outlives a boot says it again */
	boot_id(boot, sizeof(boot));
	if (pw_ctl_default_dir(&dir) < 0 || pw_ctl_private_dir(dir) < 0 ||
	    asprintf(&file, "notice-%s", name) < 0 || asprintf(&said, "%s%s", boot, text) < 0)
		return true;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return true;
	if (marked(dirfd, file, said))
		return false;
	mark(dirfd, file, said);
	return true;
}
