/* SPDX-License-Identifier: MIT */
/* Run ids and the mountpoints of runs' own views (run_id.h). */
#include "run_id.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sockets.h"
#include "util.h"

bool pw_ctl_run_id_valid(const char *id)
{
	size_t n = 0;

	if (!id)
		return false;
	for (; id[n]; n++)
		if (!((id[n] >= 'a' && id[n] <= 'z') || (id[n] >= 'A' && id[n] <= 'Z') ||
		      (id[n] >= '0' && id[n] <= '9')))
			return false;
	return n > 0 && n <= PW_RUN_ID_MAX;
}

int pw_ctl_run_mountpoint(const char *id, char **ret)
{
	_cleanup_free_ char *dir = NULL;
	int r;

	if (!pw_ctl_run_id_valid(id))
		return -EINVAL;
	r = pw_ctl_default_dir(&dir);
	if (r < 0)
		return r;
	return asprintf(ret, "%s/run-%s/view", dir, id) < 0 ? -ENOMEM : 0;
}

char *pw_ctl_run_of_mountpoint(const char *mountpoint)
{
	_cleanup_free_ char *dir = NULL;
	const char *rest, *end;
	char *id;

	/* Only under our control socket directory: a bare view the person mounted at some
	 * .../run-x/view of theirs is no run. */
	if (!mountpoint || pw_ctl_default_dir(&dir) < 0)
		return NULL;
	size_t n = strlen(dir);
	if (strncmp(mountpoint, dir, n) != 0 || strncmp(mountpoint + n, "/run-", 5) != 0)
		return NULL;
	rest = mountpoint + n + 5;
	end = strchr(rest, '/');
	if (!end || !streq(end, "/view"))
		return NULL;
	id = strndup(rest, (size_t)(end - rest));
	if (id && !pw_ctl_run_id_valid(id)) {
		free(id);
		return NULL;
	}
	return id;
}
