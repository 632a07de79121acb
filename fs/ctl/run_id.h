/* SPDX-License-Identifier: MIT */
/*
 * A run's id (run_id.c), for the daemon and the program alike. Every `piworkfs run`
 * mounts a view of its own at DIR/run-ID/view, DIR being the control socket directory
 * (a 0700 directory of the person's); ID is the six letters and digits mkdtemp(3) chose for
 * DIR/run-ID, so it is unique among the live runs of the person and names the run wherever the
 * person meets it: the run's first line, `piworkfs status`, `mode --run ID`, `log` and `changes`
 * (which read it back from the mountpoint a row records).
 */
#pragma once

#include <stdbool.h>

#include "pw_limits.h"

/* Whether ID can be a run id: 1 to PW_RUN_ID_MAX ASCII letters and digits. */
bool pw_ctl_run_id_valid(const char *id);

/* The run whose own view is at MOUNTPOINT (DIR/run-ID/view): a malloc'd ID, or NULL (a
 * bare view, a NULL MOUNTPOINT, or no memory). */
char *pw_ctl_run_of_mountpoint(const char *mountpoint);

/* DIR/run-ID/view for ID. Returns 0 with a malloc'd *ret, or -errno. */
int pw_ctl_run_mountpoint(const char *id, char **ret);
