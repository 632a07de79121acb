/* SPDX-License-Identifier: MIT */
/*
 * One FUSE request's facts, gathered once: the request, the caller's credentials, one
 * reference to the policy it is decided and answered under (and that policy's generation),
 * and, for requests about a name, the parent node, the name and the name's project path.
 *
 * Why: a handler used to pass (fs, parent, name) to every helper (check, hide, truthful
 * attributes, keep, watch), and each helper worked the rest out again: the path was built
 * once per helper and the policy reference taken once per helper, so one create could be
 * decided under one mode and have its attributes drawn under another. A request now takes
 * the policy at most once (at its first question, so a request that asks nothing locks
 * nothing) and builds the name's path at most once (at first use): a request is decided and
 * answered under one policy (docs/ARCHITECTURE.md).
 *
 * Lifetime: declare one with PW_REQ(r) in the handler; pw_req_begin (the caller's
 * credentials) or pw_req_init (the daemon's own) fills it; it is released at scope exit
 * (credentials restored if still switched, policy reference dropped, heap path freed).
 * Reply through pw_req_reply_err, or call pw_req_leave before a reply of another kind:
 * replies go out with the daemon's own credentials. Never copy one.
 */
#pragma once

#include "creds.h"
#include "fs_internal.h"
#include "resolve.h"
#include "watch.h"

typedef struct pw_req {
	fuse_req_t req; /* NULL for work the daemon does on its own behalf */
	pw_fs *fs;
	pw_creds_saved creds;
	bool in_creds;	   /* between pw_req_begin and pw_req_leave */
	pw_policy *policy; /* NULL until pw_req_policy; then one reference, held to the end */
	uint64_t gen;
	/* The name the request is about (pw_req_name): NULL parent for a request about a node. */
	pw_inode *parent;
	const char *name;
	/* PARENT/NAME's project path, built at the first pw_req_path (path_err then set). */
	bool path_built;
	int path_err;
	pw_path path;
} pw_req;

/* A new reference to the active policy (RET_GEN, may be NULL: its generation); requests
 * take theirs through pw_req_policy, once. */
pw_policy *pw_fs_policy_get(pw_fs *fs, uint64_t *ret_gen);

void pw_req_done(pw_req *r);
#define PW_REQ(var)                                                                                \
	char var##_pbuf_[PW_PATH_MAX];                                                             \
	_cleanup_(pw_req_done) pw_req var = {.path = {.s = NULL, .buf = var##_pbuf_}}

/* Starts R for REQ with the caller's credentials (creds.c). Returns 0, or -errno after
 * having answered REQ with the error: the handler then just returns. */
int pw_req_begin(pw_req *r, fuse_req_t req);
/* Starts R for REQ (may be NULL) with the daemon's own credentials: for handlers that act
 * through a descriptor the caller opened (write, read). */
void pw_req_init(pw_req *r, fuse_req_t req);
/* Switches a request started with pw_req_init to the caller's credentials, as
 * pw_req_begin does (a handler that answers some cases from memory first). */
int pw_req_enter(pw_req *r);
/* Restores the daemon's credentials (idempotent): before a reply. */
void pw_req_leave(pw_req *r);
/* Leaves the credentials and answers the request with the positive errno ERR. */
void pw_req_reply_err(pw_req *r, int err);

/* The policy R is decided and answered under: taken at the first call, the same after.
 * RET_GEN (may be NULL) gets its generation. */
const pw_policy *pw_req_policy(pw_req *r, uint64_t *ret_gen);

/* Makes R about NAME in PARENT; a previous name's path is dropped (readdirplus moves one
 * request from entry to entry; the policy stays). */
void pw_req_name(pw_req *r, pw_inode *parent, const char *name);
/* The project path of R's name, built at the first call: 0 and *RET, or the build's error
 * (-ENOENT, -ENAMETOOLONG, -ENOMEM), the same at every call. */
int pw_req_path(pw_req *r, const char **ret);
/* The path of R's parent, a copy of the prefix of R's path (never built again): 0, or the
 * error of pw_req_path. */
int pw_req_parent_path(pw_req *r, pw_path *ret);
/* Is (PARENT, NAME) R's own name? */
bool pw_req_is_name(const pw_req *r, const pw_inode *parent, const char *name);

/* watch.c for R's name: see pw_watch_expect. */
int pw_req_expect(pw_req *r, pw_expect_kind kind);
