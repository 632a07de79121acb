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
 * answered under one policy (docs/internals/fs.md).
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

/*
 * The policy slot, fs->slot: the active policy and what is decided under it, req.c's. A
 * switch (switch.c) installs a policy with pw_policy_slot_swap and then waits out the lookup
 * gate and drops the hidden negatives; requests take the policy with pw_fs_policy_get.
 */
/* A name the kernel was told is absent because it is hidden; invalidated on a switch. */
typedef struct pw_hidden_neg {
	fuse_ino_t parent;
	char *name;
	struct pw_hidden_neg *next;
} pw_hidden_neg;

struct pw_policy_slot {
	pthread_mutex_t policy_lock; /* held only to load policy and take a reference */
	pw_policy *policy;
	uint64_t generation;
	/* Held for reading by every request that decides visibility and makes the kernel
	 * cache an entry (lookup, readdirplus); a switch that changes hide rules takes it for
	 * writing once after the swap, so every entry decided under the old policy is known
	 * before the entries to invalidate are collected (switch.c). Writer-preferring. */
	pthread_rwlock_t lookup_gate;
	pthread_mutex_t neg_lock;
	pw_hidden_neg *hidden_negs;
	size_t n_hidden_negs;
};

/* Makes fs->slot holding INITIAL (its reference taken over). 0 or -ENOMEM; on failure
 * INITIAL is released. pw_policy_slot_free releases the policy and the hidden negatives
 * (accepts no slot made). */
int pw_policy_slot_init(pw_fs *fs, pw_policy *initial);
void pw_policy_slot_free(pw_fs *fs);
/* A new reference to the active policy (RET_GEN, may be NULL: its generation); requests
 * take theirs through pw_req_policy, once. */
pw_policy *pw_fs_policy_get(pw_fs *fs, uint64_t *ret_gen);
/* Makes P (its reference taken over) the active policy with the next generation, returned
 * in *RET_GEN; returns the one it replaces (its reference, NULL: none). switch.c. */
pw_policy *pw_policy_slot_swap(pw_fs *fs, pw_policy *p, uint64_t *ret_gen);
/* Remembers that the kernel was told NAME in PARENT is absent because it is hidden (at most
 * 65536 such names: the rest are left to their entry timeout). */
void pw_remember_hidden_neg(pw_fs *fs, fuse_ino_t parent, const char *name);
/* The hidden negatives remembered so far, which the caller now owns (free each name and
 * node); the slot starts a new list. */
pw_hidden_neg *pw_policy_slot_take_negs(pw_fs *fs);

/* The lookup gate (above): a request that decides visibility enters and leaves it; a switch
 * passes it, which waits out every request inside. */
static inline void pw_lookup_gate_enter(pw_fs *fs)
{
	pthread_rwlock_rdlock(&fs->slot->lookup_gate);
}

static inline void pw_lookup_gate_leave(pw_fs *fs)
{
	pthread_rwlock_unlock(&fs->slot->lookup_gate);
}

static inline void pw_lookup_gate_pass(pw_fs *fs)
{
	pthread_rwlock_wrlock(&fs->slot->lookup_gate);
	pthread_rwlock_unlock(&fs->slot->lookup_gate);
}

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
