/* SPDX-License-Identifier: MIT */
/*
 * The harness of test_ctl (ctl_harness.c): a test double of the FUSE layer, a view and its
 * control server over a temp project (the fixture tree test_ctl.c draws), a tiny raw
 * client, and children run as this binary executed again. The tests are test_ctl.c
 * (sockets, methods, hostile clients), test_ctl_authority.c (authority, modules, reload),
 * test_ctl_notify.c (denied and mode.changed notifications) and test_ctl_jobs.c.
 */
#pragma once

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/audit.h"
#include "ctl/methods.h"
#include "ctl/request.h"
#include "ctl/server.h"
#include "fs.h"
#include "pw_limits.h"
#include "proto.h"
#include "store/state.h"
#include "util.h"
#include "ctl/view.h"

/* The real operations are the pw_fs's (fs/switch.c, with libfuse), wired by fs/daemon.c;
 * this stand-in keeps just the active policy, a generation and what the originals hook
 * was told, so the test can check exactly what the view installed. */
typedef struct fake_fs {
	pthread_mutex_t lock;
	pw_policy *active;
	uint64_t generation;
	unsigned installed;   /* policy_installed calls */
	char last_reason[16]; /* and the last one's reason */
	bool last_new_set;
	/* While set: the mode each generation from log_base on installed (log[g - log_base]). */
	char (*log)[16];
	uint64_t log_base, log_len;
} fake_fs_t;

/* How long a test waits for something the server must do before calling it a failure. */
#define DEADLINE_MS 60000
/* The suite's idle timeout: no client of a test is dropped for being slow on a busy box. */
#define LONG_IDLE_MS 600000u
/* The idle timeout of the tests that check it. */
#define SHORT_IDLE_MS 300u

struct child_env {
	char name[64], path[300], report[32], asan[512], ubsan[512];
	char *envp[6];
	int report_fd;
};

extern char tmp[64], proj[128], mnt[128], global[128], rundir[128], dbpath[128];
extern fake_fs_t fake_fs;
/* The test double's operations, and the active policy it holds (a new reference). */
extern const pw_view_fs_ops fake_ops;
pw_policy *fake_get_policy(void *ctx, uint64_t *ret_generation);
/* What the daemon serves, but the changes methods, which need the FUSE layer (changes.h). */
#define N_MODULES 2
extern const pw_ctl_use modules[N_MODULES];
extern pw_state *state;
extern pw_audit *audit;
extern pw_view *view;
extern pw_ctl_server *srv;
extern const char *sock;

void writefile(const char *path, const char *text);

void start_view(const char *initial, bool with_audit);

/* Replaces the server with one using TUN (the view stays). */
void restart_server(const pw_ctl_tuning *tun);

/* Replaces the server with one using TUN (NULL: the defaults) that serves the N modules
 * USES instead of the suite's (the view stays). */
void restart_server_with(const pw_ctl_tuning *tun, const pw_ctl_use *uses, size_t n);

void stop_view(void);

void setup(void);

int connect_to(const char *path);

int connect_main(void);

void send_all(int fd, const char *s);

/* Reads one line (up to 2 MiB) or returns NULL on EOF/timeout/error. Byte at a time is
 * slow but simple and keeps later lines in the socket. */
char *read_line(int fd);

void child_env(struct child_env *ce, const char *name, const char *path, int report);

/* In the forked child: async-signal-safe calls only, then the exec. The report descriptor
 * (named in CE) stays open across it. Never returns. */
_Noreturn void exec_child(const struct child_env *ce);

json_t *read_msg(int fd);

/* Sends a request with id 1 and returns the reply (asserting its jsonrpc and id). */
json_t *rpc(int fd, const char *method, const char *params);

json_t *result_of(json_t *reply);

/* Calls METHOD with PARAMS (as rpc) and asserts that it succeeded; the reply is freed. */
void rpc_ok(int fd, const char *method, const char *params);

int error_code(json_t *reply);

const char *error_message(json_t *reply);

const char *sget(json_t *o, const char *k);

const char *active_mode(void);

int64_t now_ms(void);

pw_ctl_stats stats(void);

/* A normal client must still get `status` answered whatever else is going on. */
void assert_served(int fd);

/* Waits for FD to be closed by the server: true on EOF or ECONNRESET within the deadline.
 * Lines still queued before the close are skipped. */
bool wait_closed(int fd);

/*
 * Connects to the main socket and calls METHOD, returning the connection once the call
 * succeeded. Under SHORT_IDLE_MS a loaded machine may let the idle timeout pass between
 * connect and the request reaching the server; that drop is the timeout working, not what
 * the caller tests, so it connects again (until the deadline).
 */
int connect_and_call(const char *method, const char *params);

/* Adds an agent socket at TMP/NAME to the server (asserted); returns its path, which stays
 * until the next call. */
const char *add_agent_socket(const char *name);

/* Connects to an agent socket just added (the server thread adopts it on its next turn;
 * until then the kernel already queues connections, so the first try normally works). */
int connect_agent(const char *path);

int other_uid_child(const char *path, int report);
int inside_subscriber(const char *agent_path, int report);
int inside_switch_watcher(const char *agent_path, int report);

/*
 * Runs the child NAME (see maybe_a_child) with AGENT_PATH as the first process of a new PID
 * namespace, as under `piworkfs run`: a helper makes the namespace and waits for it. Returns
 * the helper's pid and, in *RET_IN, what the child reports; its first line, which must start
 * with "ready", in READY.
 */
pid_t start_inside(const char *name, const char *agent_path, FILE **ret_in, char *ready,
		   size_t size);

/* Reads what the child reports until it exits into HEARD, then asserts that it and its
 * helper exited 0 (WHO names it in the failure, with what it reported). */
void finish_inside(pid_t helper, FILE *in, char *heard, size_t size, const char *who);

/* In a child: connects to AGENT_PATH and subscribes to EVENTS (a JSON array). Returns 0
 * with the connection in *RET_FD, or the child's exit status for what failed (11, 12). */
int subscribe_inside(const char *agent_path, const char *events, int *ret_fd);

/* In a child: the next line on FD parsed as JSON (a notification), or NULL on EOF or a line
 * that is not JSON. The caller frees it. */
json_t *read_notification(int fd);

/*
 * Evaluates COND until it holds or DEADLINE_MS passes; yields whether it held. For
 * conditions another thread makes true (the server's counters, the active mode): polling
 * with a short pause is the wait, the deadline only turns a hang into a failure.
 */
#define WAIT_UNTIL(cond)                                                                           \
	({                                                                                         \
		int64_t _t0 = now_ms();                                                            \
		bool _ok;                                                                          \
		while (!(_ok = (cond)) && now_ms() - _t0 < DEADLINE_MS)                            \
			usleep(2000);                                                              \
		_ok;                                                                               \
	})
