/* SPDX-License-Identifier: MIT */
/*
 * The history model of the changes methods (changes.h): the change sets and rows of a
 * project read back from the store of originals, the scope a call selects, where each
 * recorded object is now and what a change set left at a path. history.c builds it and
 * lists it (changes.list); diff.c writes git's diff of it (changes.diff); restore.c replays
 * it backwards (changes.undo). None of them knows the control server: changes.c, the
 * methods, hands them a pw_undo_call (what they need of the view and the caller) and turns
 * their pw_undo_fail into the server's answer.
 */
#pragma once

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fs_internal.h"
#include "keep.h"
#include "policy.h"
#include "store/sha256.h"

/* A call's failure: CODE (proto.h), a malloc'd MESSAGE, optional DATA (owned). The methods
 * (changes.c) answer with it. */
typedef struct pw_undo_fail {
	int code;
	char *message;
	json_t *data;
} pw_undo_fail;

/* What a call needs of the view it reached and of its caller. */
typedef struct pw_undo_call {
	pw_fs *fs;
	const char *project, *mountpoint; /* the view's */
	int64_t started_ns;		  /* CLOCK_REALTIME when the view was made */
	bool restricted;		  /* an agent's socket */
	pw_policy *hide; /* an agent's call: the active policy (borrowed), else NULL */
	/* the run whose own view has MOUNTPOINT (malloc'd), or NULL */
	char *(*run_of)(const char *mountpoint);
} pw_undo_call;

typedef struct crow {
	int64_t id, cs, pid, time_ns;
	bool move, exchange, implicit;
	char *path, *path2, *op, *comm, *mode_name, *not_kept, *thread;
	uint64_t src_dev, src_ino;
	pw_undo_orig_object o;
	bool selected;
	bool covered;	   /* put back by an undo that no redo reversed */
	bool now_selected; /* where its object is now lies under a path asked for */
	bool from_undo;	   /* recorded by an undo or a redo */
} crow;

typedef struct cset {
	int64_t id, started_ns, redone_by;
	char *reason, *name, *mode, *undoes;
	char *mountpoint; /* the view's that started it */
	char *run;	  /* the run whose own view started it (run_id.h), or NULL */
} cset;

typedef struct ctx {
	const pw_undo_call *call;
	pw_undo *k;
	pw_fs *fs;
	pw_undo_fail *fail;
	int root;
	crow *rows;
	size_t n_rows;
	cset *sets;
	size_t n_sets;
	char **paths;
	size_t n_paths;
	pw_policy
	    *hide; /* an agent's request: the active policy, whose hidden paths it never sees */
	int64_t min_cs; /* the first change set in scope */
	int64_t end_cs; /* the last change set in scope (INT64_MAX: up to the tree as it is) */
} ctx;

/* SCOPE_UNDO: the latest change set with a change not undone yet (an undo's or a redo's
 * own changes are never chosen by default): a repeated undo steps further back. */
/* SCOPE_MOUNT: since the view asked was last mounted, whichever views (runs) made the change
 * sets since (the default of changes and diff alike). */
enum scope_default { SCOPE_ALL, SCOPE_MOUNT, SCOPE_LATEST, SCOPE_UNDO };

/*
 * ---- what a change set left ---------------------------------------------------------------
 *
 * A change set reads the same whatever came after it: what it left at a path is taken from
 * the record, never from the tree once a later change set has touched that path. Every
 * change through the view records the object before changing it, so the first row of a
 * later change set at that path (followed through the later renames) holds exactly what
 * the change set left there: its metadata, and its content when that row kept it. A row
 * kept for metadata only (a chmod) means that change set did not write the content: it is
 * taken from the next row that kept it, or from the tree. Only a path no later change set
 * touched (always so in the open change set) is read from the tree.
 */
typedef struct after {
	const pw_undo_orig_object *meta; /* the object as left, from a later row; NULL: the tree */
	const pw_undo_orig_object *content; /* its content's record (a blob); NULL: the tree */
	char path[PW_PATH_MAX];		    /* where the change set left it (the tree: where now) */
	char live[PW_PATH_MAX];		    /* where the tree holds what is read from it */
} after;

/* The object A describes, its fields as pw_undo_orig_object's; the tree's read through FD. */
typedef struct state {
	bool exists;
	struct stat st;
	char target[PATH_MAX + 1];
	void *xattrs_owned;
	const void *xattrs;
	size_t xattrs_len;
	const char *blob; /* the content's hash when recorded, else NULL */
	int fd;		  /* O_PATH on the tree's object when anything is read from it, or -1 */
} state;

/*
 * The calls (docs/PROTOCOL.md has their params and results). Each returns 0 with *RET, or
 * -errno with FAIL filled (its code and message are the caller's answer). changes.undo,
 * changes.prune and checkpoint refuse an agent's call (CALL->restricted).
 */
int pw_undo_changes_list(const pw_undo_call *call, json_t *params, json_t **ret,
			 pw_undo_fail *fail);
int pw_undo_changes_diff(const pw_undo_call *call, json_t *params, json_t **ret,
			 pw_undo_fail *fail);
int pw_undo_changes_undo(const pw_undo_call *call, json_t *params, json_t **ret,
			 pw_undo_fail *fail);
int pw_undo_changes_checkpoint(const pw_undo_call *call, json_t *params, json_t **ret,
			       pw_undo_fail *fail);
int pw_undo_changes_prune(const pw_undo_call *call, json_t *params, json_t **ret,
			  pw_undo_fail *fail);

/* The person's methods' refusals to an agent, one text each: the control table's (changes.c,
 * where the server refuses first) and the functions' own (pw_undo_hist_setup). */
#define PW_UNDO_REFUSED_UNDO                                                                       \
	"refused: an agent may list and diff changes but never undo them; ask the person you "     \
	"work for to run `piworkfs undo`"
#define PW_UNDO_REFUSED_PRUNE "refused: an agent may not prune the originals"
#define PW_UNDO_REFUSED_CHECKPOINT "refused: only the person may start a checkpoint"

/*
 * The model's helpers the three files share. CTX is one call's: set up by
 * pw_undo_hist_setup, freed by pw_undo_hist_ctx_done (safe on a zeroed ctx with root -1).
 */

/* Fills X->fail with CODE and a message. Returns its -errno (EINVAL, EPERM, EOPNOTSUPP,
 * EBUSY, ENOENT or EIO by CODE). */
_printf_(3, 4) int pw_undo_hist_failf(ctx *x, int code, const char *fmt, ...);
/* Returns 0 with *RET = O, or -ENOMEM with X's failure filled when O is NULL. */
int pw_undo_hist_done(ctx *x, json_t *o, json_t **ret);
/* X for CALL: the view's keep handle and project root. -errno with FAIL filled when the
 * view keeps no originals or its project cannot be opened, or (-EPERM, PW_RPC_REFUSED) with
 * the text REFUSED when that is not NULL and CALL comes from an agent. */
int pw_undo_hist_setup(ctx *x, const pw_undo_call *call, pw_undo_fail *fail, const char *refused);
void pw_undo_hist_ctx_done(ctx *x);

/* Loads the project's change sets and rows (oldest first) and marks those PARAMS select
 * (since, since_ns, change_set, mode, paths, every; DFLT when they name no scope). The
 * store's lock held. */
int pw_undo_hist_load(ctx *x, json_t *params, enum scope_default dflt);
/* The start of the reading calls (changes.list, changes.diff): X set up for CALL (no refusal)
 * and the history loaded under the store's lock in the view's default scope (since the
 * mount); the store's totals into *RET_BYTES and *RET_BLOBS, when not NULL, read under the
 * same lock. 0, or -errno with FAIL filled (X is then still to be freed). */
int pw_undo_hist_read(ctx *x, const pw_undo_call *call, pw_undo_fail *fail, json_t *params,
		      uint64_t *ret_bytes, uint64_t *ret_blobs);
/* Each path asked for has a change in scope, else -ENOENT naming the first that has none. */
int pw_undo_hist_check_paths_changed(ctx *x, bool undo);

bool pw_undo_hist_path_under(const char *path, const char *top);
/* Is PATH hidden from the agent asking (as a file or as a directory)? Never the person's. */
bool pw_undo_hist_agent_hidden(const ctx *x, const char *path);
/* An undo's or a redo's own change set? */
bool pw_undo_hist_undo_reason(const char *reason);

/* Where the object recorded at PATH by row I is now (PATH carried through the renames
 * recorded after it). OUT holds PW_PATH_MAX bytes. */
void pw_undo_hist_current_path(ctx *x, size_t i, const char *path, char *out);
/* Carries P (PW_PATH_MAX bytes) through the rename M, if it moves P. */
void pw_undo_hist_follow_move(const crow *m, char *p);
/* What the change sets up to END_CS left at PATH, recorded by row I. */
void pw_undo_hist_after_of(ctx *x, size_t i, const char *path, int64_t end_cs, after *a);
/* The object A describes; pw_undo_hist_state_done frees it. */
void pw_undo_hist_state_of(ctx *x, const after *a, state *s);
void pw_undo_hist_state_done(state *s);
/* "created", "deleted", "modified", "metadata", or NULL when row R's change left nothing
 * different at A. */
const char *pw_undo_hist_classify(ctx *x, const crow *r, const after *a);
/* Is row I a new file that a rename of its change set moved over a kept original (an
 * editor's save)? Its change reads as the original's, at the destination. */
bool pw_undo_hist_saved_over(ctx *x, size_t i, const char *cur);
/* Is row I the rename of a file made in the same change set (the temporary of a save)? */
bool pw_undo_hist_temp_move(ctx *x, size_t i);
/* Appends change set C's changes to CHANGES, newest first, net per path (the rows stay
 * exact); *SHOWN counts them up to PW_UNDO_LIST_MAX, WITH_ROW adds each row's index. */
void pw_undo_hist_set_listing(ctx *x, const cset *c, json_t *changes, size_t *shown,
			      bool *truncated, bool with_row);

/* Opens PATH beneath the project, never following a symlink; "" is the root. -errno. */
int pw_undo_hist_open_beneath(ctx *x, const char *path, int flags);
int pw_undo_hist_stat_beneath(ctx *x, const char *path, struct stat *st);
/* The SHA-256 of what FD reads to its end, in hex. -errno. */
int pw_undo_hist_hash_file(int fd, char hex[PW_SHA256_HEX]);
