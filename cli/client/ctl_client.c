/* SPDX-License-Identifier: MIT */
/*
 * The control socket client (ctl_client.h has the contract): view discovery through
 * /proc/self/mountinfo, and blocking calls with a timeout over one connection.
 */
#include "ctl_client.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl/sockets.h"
#include "path.h"
#include "procfs.h"
#include "pw_limits.h"
#include "proto.h"
#include "util.h"

struct pw_ctl_conn {
	int fd;
	unsigned timeout_ms;
	char *buf;
	size_t len, cap;
	int64_t next_id;
};

/* ---- discovery ------------------------------------------------------------------------- */

void pw_ctl_mounts_free(pw_ctl_mount *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(m[i].mountpoint);
		free(m[i].source);
	}
	free(m);
}

size_t pw_ctl_mount_around(const pw_ctl_mount *m, size_t n, const char *path, bool project_known)
{
	size_t best = SIZE_MAX, best_len = 0;

	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(m[i].mountpoint);
		if (project_known && (!m[i].source || m[i].source[0] != '/'))
			continue;
		if (pw_path_beneath(path, m[i].mountpoint) >= 0 &&
		    (best == SIZE_MAX || len > best_len)) {
			best = i;
			best_len = len;
		}
	}
	return best;
}

int pw_ctl_list_mounts(pw_ctl_mount **ret, size_t *ret_n)
{
	pw_mountinfo *m = NULL;
	pw_ctl_mount *v = NULL;
	size_t n_m = 0, n = 0;
	int r = pw_mountinfo_read(SIZE_MAX, &m, &n_m);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n_m; i++) {
		if (!streq(m[i].fstype, "fuse.piworkfs"))
			continue;
		pw_ctl_mount *nv = realloc(v, (n + 1) * sizeof(*v));
		if (!nv)
			goto nomem;
		v = nv;
		/* The user_id= super option, not a longer one ending in it. */
		const char *super = m[i].super_opts,
			   *uid = super ? strstr(super, "user_id=") : NULL;
		v[n] = (pw_ctl_mount){
		    .mountpoint = TAKE_PTR(m[i].mountpoint),
		    .source = TAKE_PTR(m[i].source),
		    .uid = uid && (uid == super || uid[-1] == ',') ? strtol(uid + 8, NULL, 10) : -1,
		};
		n++;
	}
	pw_mountinfo_free(m, n_m);
	*ret = v;
	*ret_n = n;
	return 0;
nomem:
	pw_mountinfo_free(m, n_m);
	pw_ctl_mounts_free(v, n);
	return -ENOMEM;
}

/* Is there a socket (or a link to one) at PATH? */
static bool is_socket(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* A directory only UID can change: /tmp/piworkfs-UID could have been made by someone
 * else, and a socket there answered by them. */
static bool dir_owned_by(const char *dir, unsigned uid)
{
	struct stat st;

	return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid &&
	       !(st.st_mode & 022);
}

/*
 * The places a daemon may have put the socket of MOUNTPOINT, in the order tried: the
 * default dir of this environment (where a daemon with --socket-dir also leaves a link to
 * its socket), then the dirs a daemon started with another environment uses: the owner's
 * /tmp/piworkfs-UID (no XDG_RUNTIME_DIR), /run/user/UID/piworkfs (a login session),
 * /run/piworkfs (root). UID is the mount's owner (-1: ours).
 */
int pw_ctl_view_socket(const char *mountpoint, long uid, char **ret)
{
	_cleanup_free_ char *first = NULL;
	unsigned u = uid >= 0 ? (unsigned)uid : (unsigned)geteuid();
	char alt[3][64];
	int r = pw_ctl_socket_path(NULL, mountpoint, &first);

	if (r == 0 && is_socket(first)) {
		*ret = TAKE_PTR(first);
		return 0;
	}
	snprintf(alt[0], sizeof(alt[0]), "/tmp/piworkfs-%u", u);
	snprintf(alt[1], sizeof(alt[1]), "/run/user/%u/piworkfs", u);
	snprintf(alt[2], sizeof(alt[2]), "%s", u == 0 ? "/run/piworkfs" : "");
	for (size_t i = 0; i < ELEMENTSOF(alt); i++) {
		char *sock = NULL;
		if (!alt[i][0] || !dir_owned_by(alt[i], u) ||
		    pw_ctl_socket_path(alt[i], mountpoint, &sock) < 0)
			continue;
		if (is_socket(sock)) {
			*ret = sock;
			return 0;
		}
		free(sock);
	}
	if (r < 0)
		return r;
	*ret = TAKE_PTR(first); /* none answers: name the usual place in messages */
	return 0;
}

/*
 * Not inside a view: the view of the project REAL lies in (from the backing directory or
 * any directory under it, as the README promises every command), the deepest project
 * first, the caller's own views before others', one with a socket. SIZE_MAX: none.
 */
static size_t backing_view(const pw_ctl_mount *m, size_t n, const char *real)
{
	size_t best = SIZE_MAX, best_len = 0;
	bool best_mine = false;

	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *sock = NULL;
		bool mine = m[i].uid < 0 || m[i].uid == (long)getuid();
		size_t len = m[i].source ? strlen(m[i].source) : 0;

		if (!m[i].source || m[i].source[0] != '/' || pw_path_beneath(real, m[i].source) < 0)
			continue;
		if (best != SIZE_MAX &&
		    (best_mine > mine || (best_mine == mine && len <= best_len)))
			continue;
		if (pw_ctl_view_socket(m[i].mountpoint, m[i].uid, &sock) < 0 || !is_socket(sock))
			continue;
		best = i;
		best_len = len;
		best_mine = mine;
	}
	return best;
}

int pw_ctl_find_view_full(const char *path, char **ret_socket, char **ret_mountpoint)
{
	const char *env = getenv("PIWORKFS_SOCKET");
	_cleanup_free_ char *real = NULL;
	pw_ctl_mount *m = NULL;
	size_t n = 0, best;
	char *sock = NULL, *mp = NULL;
	int r;

	if (env && env[0]) {
		struct stat st;
		if (stat(env, &st) < 0 || !S_ISSOCK(st.st_mode))
			return -ENOENT;
		sock = strdup(env);
		if (!sock)
			return -ENOMEM;
		*ret_socket = sock;
		if (ret_mountpoint)
			*ret_mountpoint = NULL;
		return 0;
	}
	real = realpath(path ? path : ".", NULL);
	if (!real)
		return negative_errno();
	r = pw_ctl_list_mounts(&m, &n);
	if (r < 0)
		return r;
	best = pw_ctl_mount_around(m, n, real, false);
	if (best == SIZE_MAX)
		best = backing_view(m, n, real);
	if (best == SIZE_MAX) {
		pw_ctl_mounts_free(m, n);
		return -ENOENT;
	}
	r = pw_ctl_view_socket(m[best].mountpoint, m[best].uid, &sock);
	if (r == 0 && ret_mountpoint) {
		mp = strdup(m[best].mountpoint);
		if (!mp) {
			free(sock);
			r = -ENOMEM;
		}
	}
	pw_ctl_mounts_free(m, n);
	if (r < 0)
		return r;
	*ret_socket = sock;
	if (ret_mountpoint)
		*ret_mountpoint = mp;
	return 0;
}

int pw_ctl_find_view(const char *path, char **ret_socket, char **ret_project)
{
	_cleanup_free_ char *sock = NULL;
	char *project = NULL;
	int r = pw_ctl_find_view_full(path, &sock, NULL);

	if (r < 0)
		return r;
	if (ret_project) {
		json_t *res = NULL;
		if (pw_ctl_call_socket(sock, "status", NULL, &res, NULL, NULL) == 0) {
			const char *p = json_string_value(json_object_get(res, "project"));
			project = p ? strdup(p) : NULL;
		}
		json_decref(res);
		*ret_project = project;
	}
	*ret_socket = TAKE_PTR(sock);
	return 0;
}

/* ---- connection ------------------------------------------------------------------------ */

int pw_ctl_connect(const char *socket_path, unsigned timeout_ms, pw_ctl_conn **ret)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_close_ int fd = -1;
	pw_ctl_conn *c;

	if (strlen(socket_path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, socket_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return negative_errno();
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = TAKE_FD(fd);
	c->timeout_ms = timeout_ms ? timeout_ms : 10000;
	c->next_id = 1;
	*ret = c;
	return 0;
}

void pw_ctl_close(pw_ctl_conn *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	free(c);
}

int pw_ctl_fd(const pw_ctl_conn *c)
{
	return c ? c->fd : -1;
}

static int send_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		p += n;
		len -= n;
	}
	return 0;
}

/* Reads one reply line into *ret (parsed). TIMEOUT_MS < 0: no timeout. */
static int read_reply(pw_ctl_conn *c, int timeout_ms, pw_rpc_reply *ret)
{
	int64_t deadline = timeout_ms < 0 ? -1 : pw_clock_ms(CLOCK_MONOTONIC) + timeout_ms;

	for (;;) {
		char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
		if (nl) {
			size_t len = nl - c->buf;
			int r = pw_rpc_parse_reply(c->buf, len, ret);
			memmove(c->buf, nl + 1, c->len - len - 1);
			c->len -= len + 1;
			return r;
		}
		if (c->len > PW_RPC_REPLY_MAX)
			return -EBADMSG;
		if (c->cap - c->len < 65536) {
			size_t cap = c->cap ? c->cap * 2 : 65536;
			char *b = realloc(c->buf, cap);
			if (!b)
				return -ENOMEM;
			c->buf = b;
			c->cap = cap;
		}
		int wait = -1;
		if (deadline >= 0) {
			int64_t left = deadline - pw_clock_ms(CLOCK_MONOTONIC);
			if (left <= 0)
				return -ETIMEDOUT;
			wait = (int)left;
		}
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		int r = poll(&p, 1, wait);
		if (r < 0 && errno != EINTR)
			return negative_errno();
		if (r <= 0)
			continue;
		ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return negative_errno();
		}
		c->len += n;
	}
}

int pw_ctl_call(pw_ctl_conn *c, const char *method, json_t *params, json_t **ret_result,
		int *ret_code, char **ret_message)
{
	return pw_ctl_call_data(c, method, params, ret_result, ret_code, ret_message, NULL);
}

int pw_ctl_call_data(pw_ctl_conn *c, const char *method, json_t *params, json_t **ret_result,
		     int *ret_code, char **ret_message, json_t **ret_data)
{
	json_t *id = json_integer(c->next_id++);
	json_t *req = pw_rpc_request_new(id, method, params);
	_cleanup_free_ char *line = NULL;
	size_t len;
	int r;

	if (!req) {
		json_decref(id);
		return -ENOMEM;
	}
	r = pw_rpc_serialize(req, PW_MSG_MAX, &line, &len);
	json_decref(req);
	if (r < 0) {
		json_decref(id);
		return r;
	}
	r = send_all(c->fd, line, len);
	if (r < 0) {
		json_decref(id);
		return r;
	}
	for (;;) {
		pw_rpc_reply rep;
		r = read_reply(c, c->timeout_ms == PW_CTL_WAIT_ALL ? -1 : (int)c->timeout_ms, &rep);
		if (r < 0)
			break;
		if (rep.kind == PW_RPC_REPLY_NOTIFICATION) {
			pw_rpc_reply_done(&rep);
			continue;
		}
		/* A reply with a null id is the server refusing the connection (busy, uid). */
		if (!json_equal(rep.id, id) && !json_is_null(rep.id)) {
			pw_rpc_reply_done(&rep);
			continue;
		}
		if (rep.kind == PW_RPC_REPLY_RESULT) {
			*ret_result = json_incref(rep.result);
			r = 0;
		} else {
			if (ret_code)
				*ret_code = rep.error_code;
			if (ret_message)
				*ret_message = strdup(rep.error_message);
			if (ret_data)
				*ret_data = rep.error_data ? json_incref(rep.error_data) : NULL;
			r = -EREMOTE;
		}
		pw_rpc_reply_done(&rep);
		break;
	}
	json_decref(id);
	return r;
}

int pw_ctl_read_notification(pw_ctl_conn *c, int timeout_ms, char **ret_method, json_t **ret_params)
{
	for (;;) {
		pw_rpc_reply rep;
		int r = read_reply(c, timeout_ms, &rep);
		if (r < 0)
			return r;
		if (rep.kind != PW_RPC_REPLY_NOTIFICATION) {
			pw_rpc_reply_done(&rep);
			continue;
		}
		char *m = strdup(rep.method);
		if (!m) {
			pw_rpc_reply_done(&rep);
			return -ENOMEM;
		}
		*ret_method = m;
		*ret_params = json_incref(rep.params);
		pw_rpc_reply_done(&rep);
		return 0;
	}
}

int pw_ctl_call_socket(const char *socket_path, const char *method, json_t *params,
		       json_t **ret_result, int *ret_code, char **ret_message)
{
	return pw_ctl_call_socket_data(socket_path, method, params, ret_result, ret_code,
				       ret_message, NULL);
}

/* The one-shot call: connect with TIMEOUT_MS, call, close. */
static int call_socket(const char *socket_path, unsigned timeout_ms, const char *method,
		       json_t *params, json_t **ret_result, int *ret_code, char **ret_message,
		       json_t **ret_data)
{
	pw_ctl_conn *c = NULL;
	int r = pw_ctl_connect(socket_path, timeout_ms, &c);

	if (r < 0) {
		json_decref(params);
		return r;
	}
	r = pw_ctl_call_data(c, method, params, ret_result, ret_code, ret_message, ret_data);
	pw_ctl_close(c);
	return r;
}

int pw_ctl_call_socket_data(const char *socket_path, const char *method, json_t *params,
			    json_t **ret_result, int *ret_code, char **ret_message,
			    json_t **ret_data)
{
	return call_socket(socket_path, 0, method, params, ret_result, ret_code, ret_message,
			   ret_data);
}

int pw_ctl_call_socket_timed(const char *socket_path, unsigned timeout_ms, const char *method,
			     json_t *params, json_t **ret_result, int *ret_code, char **ret_message)
{
	return call_socket(socket_path, timeout_ms, method, params, ret_result, ret_code,
			   ret_message, NULL);
}

int pw_ctl_call_at(const char *path, const char *method, json_t *params, json_t **ret_result,
		   int *ret_code, char **ret_message)
{
	return pw_ctl_call_at_data(path, method, params, ret_result, ret_code, ret_message, NULL);
}

int pw_ctl_call_at_data(const char *path, const char *method, json_t *params, json_t **ret_result,
			int *ret_code, char **ret_message, json_t **ret_data)
{
	return pw_ctl_call_at_timed(path, 0, method, params, ret_result, ret_code, ret_message,
				    ret_data);
}

int pw_ctl_call_at_timed(const char *path, unsigned timeout_ms, const char *method, json_t *params,
			 json_t **ret_result, int *ret_code, char **ret_message, json_t **ret_data)
{
	_cleanup_free_ char *sock = NULL;
	int r = pw_ctl_find_view_full(path, &sock, NULL);

	if (r < 0) {
		json_decref(params);
		return r;
	}
	return call_socket(sock, timeout_ms, method, params, ret_result, ret_code, ret_message,
			   ret_data);
}

/*
 * The socket of a live view of PROJECT (a real path) whose daemon answers, the caller's own
 * first (so that from the backing directory check, allowed and why ask the view of that
 * project). Returns 0 with a malloc'd *ret_socket, -ENOENT when there is none, -errno.
 */
static int find_project_view(const char *project, char **ret_socket)
{
	pw_ctl_mount *m = NULL;
	size_t n = 0;
	int r = pw_ctl_list_mounts(&m, &n);

	if (r < 0)
		return r;
	r = -ENOENT;
	for (int pass = 0; pass < 2 && r == -ENOENT; pass++)
		for (size_t i = 0; i < n && r == -ENOENT; i++) {
			bool mine = m[i].uid < 0 || m[i].uid == (long)getuid();
			char *sock = NULL;
			pw_ctl_conn *c = NULL;

			if (!streq_ptr(m[i].source, project) || mine != (pass == 0))
				continue;
			if (pw_ctl_view_socket(m[i].mountpoint, m[i].uid, &sock) < 0)
				continue;
			if (pw_ctl_connect(sock, 0, &c) < 0) {
				free(sock);
				continue;
			}
			pw_ctl_close(c);
			*ret_socket = sock;
			r = 0;
		}
	pw_ctl_mounts_free(m, n);
	return r;
}

int pw_ctl_live_call(const char *cwd, const char *project, const char *method, json_t *params,
		     json_t **ret_result, int *ret_code, char **ret_message, json_t **ret_data)
{
	json_t *copy = params ? json_deep_copy(params) : NULL;
	int r =
	    pw_ctl_call_at_data(cwd, method, params, ret_result, ret_code, ret_message, ret_data);

	if (r == -ENOENT && project && !getenv("PIWORKFS_SOCKET")) {
		/* Not inside a view: from the backing directory, the view of that project. */
		_cleanup_free_ char *sock = NULL;
		r = find_project_view(project, &sock);
		if (r == 0)
			r = pw_ctl_call_socket_data(sock, method, TAKE_PTR(copy), ret_result,
						    ret_code, ret_message, ret_data);
	}
	json_decref(copy);
	return r == -ECONNREFUSED ? -ENOENT : r; /* a stale mount whose daemon is gone */
}

int pw_ctl_live_mode(const char *cwd, const char *project, char **ret_mode)
{
	json_t *res = NULL;
	const char *mode;
	char *m;
	int r = pw_ctl_live_call(cwd, project, "mode.get", NULL, &res, NULL, NULL, NULL);

	if (r == -EREMOTE)
		return -EIO;
	if (r < 0)
		return r;
	mode = json_string_value(json_object_get(res, "mode"));
	m = mode ? strdup(mode) : NULL;
	json_decref(res);
	if (!m)
		return -EBADMSG;
	*ret_mode = m;
	return 0;
}

int pw_ctl_live_lane(const char *cwd, json_t **ret)
{
	json_t *res = NULL, *lane;
	int r = pw_ctl_call_at(cwd, "status", NULL, &res, NULL, NULL);

	if (r == -ENOENT || r == -ECONNREFUSED) {
		*ret = json_array();
		return *ret ? 0 : -ENOMEM;
	}
	if (r < 0)
		return r == -EREMOTE ? -EIO : r;
	lane = json_object_get(res, "lane");
	*ret = json_is_array(lane) ? json_incref(lane) : json_array();
	json_decref(res);
	return *ret ? 0 : -ENOMEM;
}
