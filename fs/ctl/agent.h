/* SPDX-License-Identifier: MIT */
/*
 * The `agent.open` control method: gives a view its agent socket, the restricted entrance
 * that `piworkfs run` binds into its sandbox (docs/SECURITY.md, docs/PROTOCOL.md).
 *
 * A view has at most one shared agent socket, at a path derived from its main socket's path (so
 * every `piworkfs run` on the same view shares it and the server's listener table never
 * grows with the number of runs): the main socket's name with ".sock" replaced by
 * ".agent.sock", in the same 0700 directory. The server unlinks it when it stops.
 */
#pragma once

#include <jansson.h>

#include "server.h"
#include "view.h"

/*
 * The agent socket path for the main socket MAIN_SOCKET (absolute, ending in ".sock").
 * Returns 0 with a malloc'd *ret, -EINVAL (MAIN_SOCKET does not end in ".sock"),
 * -ENAMETOOLONG (the result does not fit sun_path), -ENOMEM.
 */
int pw_ctl_agent_socket_path(const char *main_socket, char **ret);

/*
 * The handler of `agent.open` (no params). Only an unrestricted peer may ask: a restricted
 * one gets PW_RPC_REFUSED (an agent cannot mint entrances). Creates the agent socket unless
 * a live one is already there, and answers {"socket": PATH}. A live socket at PATH is taken
 * to be this server's own: PATH lies in the server's private 0700 directory, so only a
 * process of the mounting uid outside any sandbox could have put one there.
 * Returns 0 with *ret_result, or PW_CTL_FAILED with *ret_fail filled (code and malloc'd
 * message).
 */
int pw_ctl_agent_open(pw_ctl_server *s, const pw_peer *peer, json_t **ret_result,
		      pw_ctl_fail *ret_fail);

/*
 * `agent.open {"own": true}`: an agent socket of the caller's own (`piworkfs run` opens one
 * per sandbox), at the main socket's name with ".sock" replaced by "-SERIAL.agent.sock",
 * closed and unlinked when the calling connection closes. Requests to switch made through
 * it are shown to that connection alone (ctl/request.h). Refusals as above; at most
 * PW_CTL_LISTENERS_MAX - 1 agent sockets per view at once (PW_RPC_BUSY beyond).
 */
int pw_ctl_agent_open_own(pw_ctl_server *s, pw_ctl_client *c, json_t **ret_result,
			  pw_ctl_fail *ret_fail);

/*
 * The agent socket of `mount --agent-socket PATH` (the daemon makes it at start, after the
 * control socket): for an agent that no `piworkfs run` serves, in another container of a
 * pod, which is given PATH's directory and never the operator socket's (docs/DEPLOY.md).
 * Restricted like every agent socket, owned by nobody (it lives as long as the daemon), and
 * its requests to loosen are allowed only with their target typed (ctl/request.h).
 * PATH's directory is made (0700) when missing and otherwise left as it is (a volume's
 * root); the socket is 0600 and a stale one at PATH is replaced. Returns 0, or -errno:
 * -EADDRINUSE (a live socket is at PATH), -EEXIST (something that is not a socket is),
 * -EMFILE (too many agent sockets), others from mkdir(2), socket(2) and bind(2).
 */
int pw_ctl_agent_open_at(pw_ctl_server *s, const char *path);
