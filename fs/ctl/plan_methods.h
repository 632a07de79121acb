/* SPDX-License-Identifier: MIT */
/*
 * The plan methods (docs/PROTOCOL.md "Plans"): plan.list, plan.show, plan.status, plan.done,
 * plan.approve and plan.reopen, a module of the control server (server.h).
 *
 * Authority. Approving and reopening are the person's (like a loosening): the server refuses
 * them to agent sockets before the handler runs. Marking a task done changes no file and no
 * permission, only the progress in the state database, so an agent may do it. Approval is
 * enforced by the filesystem, not by this module: plan.approve records the plan in the state
 * database and has every live view of the project install it (plan.sync, peers.h), whose
 * policies then hold the plan as a protected path (fs/ctl/view.c, ctl/frozen.h), so every
 * process is refused in every mode but off. plan.sync is the person's side too: agent
 * sockets are refused it (the views call each other on their main sockets).
 *
 * The plan files are read (and, on approval and reopening, their frontmatter rewritten) in
 * the backing directory, resolved beneath the project root without following symlinks.
 */
#pragma once

#include "server.h"

extern const pw_ctl_module pw_ctl_plan_module;

/*
 * What plan.approve does, for PEER (the person, or a request they granted: ctl/request.c's
 * plan.request_approval), in the view of server S: records plan NAME approved, installs it
 * as a protected path in this view and in every other live view of the project (peers.h),
 * each before this returns, then rewrites its frontmatter. CANCEL_FD (-1: none) cuts the
 * wait for the other views short when the server stops. Returns 0 with the outcome of every
 * view in *ret_views (may be NULL; peers.h's objects, this view's first, with "self": true),
 * or a PW_RPC_* error code with a malloc'd one-line reason in *ret_why (may stay NULL on
 * ENOMEM). The only function of this module that another calls: asking for approval shares
 * the consent bar of asking to switch.
 */
int pw_ctl_plan_approve(pw_ctl_server *s, const pw_peer *peer, const char *name, int cancel_fd,
			char **ret_why, json_t **ret_views);
