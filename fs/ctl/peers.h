/* SPDX-License-Identifier: MIT */
/*
 * The other live views of a view's project, told that the approved plans changed (peers.c).
 *
 * Approval lives in the state database, and each view compiles the approved plans into every
 * policy it installs (ctl/frozen.h). A view reads them when it loads; so that an approval (or
 * a reopening) holds in every view of the project when `plan approve` returns, including each
 * `piworkfs run`'s own view started before it, the view that approves calls `plan.sync` on
 * every other live view of the project and waits for each to install the plans.
 *
 * Which views: the project's FUSE mounts of the same owner in /proc/self/mountinfo, each
 * reached at its control socket in the approving view's socket directory (the name follows
 * from the mountpoint, sockets.h). A view whose socket is missing or refuses connections is
 * not serving yet or any more: a daemon reads the approved plans again once its socket
 * listens (daemon.c), after any approval recorded before, so skipping it is safe; a mount
 * whose daemon is gone serves nothing. A view that does not answer within
 * PW_PLAN_SYNC_WAIT_MS (a stopped or hung daemon), or answers with an error, is reported: the
 * approval stands (the database holds it, and that view will protect the plan at its next load),
 * but the person is told it may not be protected there yet.
 *
 * Calls block: they run on a job's thread (plan_methods.c), never on the server thread,
 * which must stay free to answer other views' plan.sync meanwhile (two views approving at
 * once would otherwise wait for each other).
 */
#pragma once

#include <jansson.h>

#include "view.h"

/*
 * Calls plan.sync on every other live view of V's project whose socket lives in SOCKET_DIR,
 * all at once, and waits for their answers up to PW_PLAN_SYNC_WAIT_MS in all, giving up
 * early when CANCEL_FD (may be -1) becomes readable. Returns a JSON array (NULL on
 * allocation failure) with one object per view found: {"mountpoint", "run": ID or null,
 * "outcome", "reason"}, outcome one of
 *   "frozen"         the view installed the plans the database holds
 *   "unprotected"    it installed them, but its mode protects nothing (off)
 *   "fails-closed"   it could not apply them and fails closed (reason: why)
 *   "not-serving"    no daemon listens at its socket (starting, or gone)
 *   "other-database" its daemon keeps another state database, where this approval is not
 *   "no-answer"      it did not answer in time, or answered with an error (reason: which);
 *                    with a null mountpoint: views that could not be told at all (the mount
 *                    table unreadable, more than PW_PLAN_PEERS_MAX of them)
 */
json_t *pw_ctl_peers_sync(pw_view *v, const char *socket_dir, int cancel_fd);

/* Does the array of outcomes ARR hold a view that may still write an approved plan
 * ("no-answer")? */
bool pw_ctl_peers_unconfirmed(const json_t *arr);
