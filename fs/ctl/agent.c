/* SPDX-License-Identifier: MIT */
/*
 * `agent.open`: see ctl/agent.h. Runs on the control server's thread; the only thing it
 * does that touches the filesystem is binding one socket (never blocks on the network).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "agent.h"
#include "proto.h"
#include "util.h"

#define MAIN_SUFFIX ".sock"
#define AGENT_SUFFIX ".agent.sock"

int pw_ctl_agent_socket_path(const char *main_socket, char **ret)
{
	size_t n, stem;
	char *p;

	if (!main_socket || main_socket[0] != '/')
		return -EINVAL;
	n = strlen(main_socket);
	if (n < strlen(MAIN_SUFFIX) || !streq(main_socket + n - strlen(MAIN_SUFFIX), MAIN_SUFFIX))
		return -EINVAL;
	stem = n - strlen(MAIN_SUFFIX);
	if (stem + strlen(AGENT_SUFFIX) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
		return -ENAMETOOLONG;
	p = malloc(stem + strlen(AGENT_SUFFIX) + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, main_socket, stem);
	strcpy(p + stem, AGENT_SUFFIX);
	*ret = p;
	return 0;
}

static int refuse(pw_ctl_fail *f, int code, const char *msg, int err)
{
	f->code = code;
	if (err) {
		if (asprintf(&f->message, "%s: %s", msg, strerror(err)) < 0)
			f->message = NULL;
	} else {
		f->message = strdup(msg);
	}
	return PW_CTL_FAILED;
}

/* The view's shared agent socket path for PEER into *RET: 0, or PW_CTL_FAILED with RET_FAIL
 * filled (an agent may not open agent sockets). */
static int shared_path(pw_ctl_server *s, const pw_peer *peer, char **ret, pw_ctl_fail *ret_fail)
{
	if (!peer || peer->restricted)
		return refuse(ret_fail, PW_RPC_REFUSED,
			      "refused: an agent may not open agent sockets; only the person "
			      "outside the agent can (piworkfs run does)",
			      0);
	int r = pw_ctl_agent_socket_path(pw_ctl_server_socket_path(s), ret);
	return r < 0 ? refuse(ret_fail, PW_RPC_INTERNAL_ERROR, "agent socket path", -r) : 0;
}

/* Answers with O (*RET_RESULT), or out of memory when O is NULL. */
static int answer(json_t *o, json_t **ret_result, pw_ctl_fail *ret_fail)
{
	if (!o)
		return refuse(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory", 0);
	*ret_result = o;
	return 0;
}

int pw_ctl_agent_open_own(pw_ctl_server *s, pw_ctl_client *c, json_t **ret_result,
			  pw_ctl_fail *ret_fail)
{
	_cleanup_free_ char *shared = NULL, *path = NULL;
	int r = shared_path(s, pw_ctl_client_peer(c), &shared, ret_fail);
	if (r < 0)
		return r;
	size_t stem = strlen(shared) - strlen(AGENT_SUFFIX);
	if (asprintf(&path, "%.*s-%llu.agent.sock", (int)stem, shared,
		     (unsigned long long)pw_ctl_client_serial(c)) < 0)
		return refuse(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory", 0);
	if (strlen(path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
		return refuse(ret_fail, PW_RPC_INTERNAL_ERROR, "agent socket path", ENAMETOOLONG);
	r = pw_ctl_server_add_owned_agent_socket(s, path, pw_ctl_client_serial(c));
	if (r == -EMFILE)
		return refuse(ret_fail, PW_RPC_BUSY, "too many agent sockets on this view", 0);
	if (r < 0)
		return refuse(ret_fail, PW_RPC_INTERNAL_ERROR, "cannot create the agent socket",
			      -r);
	return answer(json_pack("{s:s,s:b,s:b}", "socket", path, "created", true, "own", true),
		      ret_result, ret_fail);
}

int pw_ctl_agent_open(pw_ctl_server *s, const pw_peer *peer, json_t **ret_result,
		      pw_ctl_fail *ret_fail)
{
	_cleanup_free_ char *path = NULL;
	int r = shared_path(s, peer, &path, ret_fail);
	if (r < 0)
		return r;
	r = pw_ctl_server_add_agent_socket(s, path);
	if (r < 0 && r != -EADDRINUSE)
		return refuse(ret_fail, PW_RPC_INTERNAL_ERROR, "cannot create the agent socket",
			      -r);
	return answer(json_pack("{s:s,s:b}", "socket", path, "created", r == 0), ret_result,
		      ret_fail);
}

int pw_ctl_agent_open_at(pw_ctl_server *s, const char *path)
{
	if (!path || path[0] != '/')
		return -EINVAL;
	return pw_ctl_server_add_typed_agent_socket(s, path);
}
