/* SPDX-License-Identifier: MIT */
/*
 * The plan methods (docs/PROTOCOL.md "Plans"): plan.list, plan.show, plan.status, plan.done,
 * plan.approve and plan.reopen, a module of the control server (server.h).
 *
 * Authority. Approving and reopening are the person's (like a loosening): the server refuses
 * them to agent sockets before the handler runs. Marking a task done changes no file and no
 * permission, only the progress in the state database, so an agent may do it. Approval is
 * enforced by the filesystem, not by this module: plan.approve records the plan in the state
 * database and reloads the view, whose modeset then holds the plan as a protected path
 * (fs/ctl/view.c), so every process is refused in every mode but off.
 *
 * The plan files are read (and, on approval and reopening, their frontmatter rewritten) in
 * the backing directory, resolved beneath the project root without following symlinks.
 */
#pragma once

#include "server.h"

extern const pw_ctl_module pw_ctl_plan_module;

/*
 * What plan.approve does, for PEER (the person, or a request they granted: ctl/request.c's
 * plan.request_approval): records plan NAME approved, reloads the view so that the
 * filesystem protects it, rewrites its frontmatter. Returns 0, or a PW_RPC_* error code
 * with a malloc'd one-line reason in *ret_why (may stay NULL on ENOMEM). The only function
 * of this module that another calls: asking for approval shares the consent bar of asking
 * to switch.
 */
int pw_ctl_plan_approve(pw_view *v, const pw_peer *peer, const char *name, char **ret_why);
