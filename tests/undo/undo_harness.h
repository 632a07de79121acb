/* SPDX-License-Identifier: MIT */
/*
 * The harness of the undo room's unit tests of the keep handle and the changes methods
 * (test_keep.c, test_changes.c): the real code, without FUSE. Each test gets its own temp
 * dir holding a project (a real backing tree, drawn below), a real state database with its
 * store of originals beside it, and a real FUSE layer's pw_fs that is never mounted: its
 * node table and the project root's descriptor, which is all the keep hooks and the methods
 * use of it. The bundled modes are loaded and compiled as a view would.
 *
 *   project/
 *     README.md       "# demo\n"
 *     src/x.c         "int x;\n"
 *     docs/arch.md    "one\ntwo\n"
 *     old/            a directory with one file
 *       f.txt         "f\n"
 *
 * The uh_* changes stand for requests through the view: each does what the FUSE handler
 * (fs/ops_dir.c, fs/ops_file.c) does around its syscall for the undo room: the hook
 * before it, pw_undo_keep_failed when the syscall fails, pw_undo_keep_touched and the node
 * table's bookkeeping after. The hooks, the store and the methods are the code under test.
 */
#pragma once

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "fs_internal.h"
#include "undo/history.h"
#include "undo/keep.h"

typedef struct uh_world {
	char tmp[128], project[256], state[256], db[300], mountpoint[256];
	pw_fs fs; /* never mounted: its node table and root_fd */
	pw_undo *k;
	pw_modeset *ms;
	int64_t started_ns; /* when the "view" was made (pw_undo_call.started_ns) */
} uh_world;

extern uh_world W;

/* Makes the temp dir, the project tree above and the keep handle, and installs MODE as a
 * mount would (a new change set, reason "mount"). NAME names the temp dir. */
void uh_setup(const char *name, const char *mode);
/* Frees everything and removes the temp dir. Safe after a failed setup. */
void uh_teardown(void);

/* Installs MODE (a bundled one) as a switch does: pw_undo_policy_changed with REASON. */
void uh_mode(const char *mode, const char *reason, bool new_set);

/* The node of PATH ("" the root), looked up from the root as the kernel would. */
pw_inode *uh_lookup(const char *path);

/* Changes through the "view". Each asserts that the hook and the syscall succeeded. */
void uh_create(const char *path, const char *text);
void uh_write(const char *path, const char *text); /* open O_TRUNC, write */
void uh_mkdir(const char *path);
void uh_unlink(const char *path);
void uh_rmdir(const char *path);
void uh_rename(const char *from, const char *to);
/* The same with the hooks' result returned and no assertion: -errno from the hook. */
int uh_try_write(const char *path, const char *text);

/* A change outside the view: the backing file written directly, and (a condition, not a
 * sleep) its ctime past when the view last changed that inode. */
void uh_outside_write(const char *path, const char *text);

/* The backing tree's PATH read whole (malloc'd), or NULL when absent. */
char *uh_read(const char *path);
bool uh_exists(const char *path);

/* ---- the store as recorded --------------------------------------------------------------- */

typedef struct uh_row {
	int64_t id, cs;
	bool move, exchange, implicit, present;
	mode_t mode;
	char path[256], path2[256], op[32], blob[PW_SHA256_HEX];
	uint64_t src_ino;
} uh_row;

typedef struct uh_set {
	int64_t id;
	char reason[32], name[64], mode[32];
} uh_set;

/* The project's change sets and rows as the store holds them (deferred rows committed). */
size_t uh_rows(uh_row *out, size_t max);
size_t uh_sets(uh_set *out, size_t max);
/* The one row of change set CS at PATH that is not a parent's (implicit), or NULL. */
const uh_row *uh_row_at(const uh_row *rows, size_t n, int64_t cs, const char *path);
/* The bytes of blob HASH (malloc'd, NUL-terminated). */
char *uh_blob(const char *hash);

/* ---- the methods --------------------------------------------------------------------------- */

/* A call as the person's socket (RESTRICTED false) or an agent's would make it. */
pw_undo_call uh_call(bool restricted);

/* The reply to one control call: its result, or its error code, message and data. */
typedef struct uh_reply {
	json_t *result;
	int code; /* 0: a result */
	char message[512];
	json_t *data;
} uh_reply;

/*
 * Sends LINE (a whole JSON-RPC request, as a client writes it) the way the control server
 * does: parsed (pw_rpc_parse_request), the method looked up in the changes module's table
 * (pw_undo_changes_module), its params checked against that table (pw_rpc_params_check),
 * the person's methods refused to an agent, then the method's function called. The reply
 * is freed by uh_reply_done.
 */
uh_reply uh_rpc_line(const char *line, bool restricted);
/* The same for METHOD with PARAMS (JSON text, NULL: none), from the person. */
uh_reply uh_rpc(const char *method, const char *params);
/* uh_rpc that must succeed: the result (owned by the caller). */
json_t *uh_ok(const char *method, const char *params);
void uh_reply_done(uh_reply *r);

/* The (path, kind) of every change listed by changes.list's result RES, in a set of
 * "kind path" lines ("renamed a -> b" for a rename), sorted, one string, '\n' after each. */
char *uh_kinds(json_t *res);
/* The lines of an undo's result "summary" ("restore src/x.c", "rename back a -> b"). */
char *uh_summary(json_t *res);
