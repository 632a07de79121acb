/* SPDX-License-Identifier: MIT */
/*
 * A method's or a job's failure, shared by the server (server.h, which answers with it)
 * and its jobs (jobs.h, which carry it back from their thread). Types only.
 */
#pragma once

#include <jansson.h>

/* A method's failure: CODE (proto.h), a malloc'd MESSAGE, optional DATA (owned). */
typedef struct pw_ctl_fail {
	int code;
	char *message;
	json_t *data;
} pw_ctl_fail;

/*
 * What a handler (or a job) returns when it failed and filled its pw_ctl_fail: the server
 * answers with that error. Below -4095, the errno range, so it never reads as an -errno
 * (-1 is -EPERM) when a helper's result passes through `r < 0` tests on its way up.
 */
#define PW_CTL_FAILED (-4096)
