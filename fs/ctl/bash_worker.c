/* SPDX-License-Identifier: MIT */
/*
 * The bash pre-flight in a worker process (bash_worker.h says what it holds and why).
 *
 * Why a fork per request and no exec: the worker needs the compiled policy of the mode
 * asked about, and a fork hands it over as it is, with nothing to serialize and nothing
 * for the worker to parse but the shell text itself. The price is that the worker's memory
 * is a copy of the daemon's (names the daemon has seen, the audit queue): a worker taken
 * over through a parser bug could put them in its answer, which goes to the client that
 * asked (docs/SECURITY.md). It can do nothing else: no privilege, no descriptor but the
 * project root and its pipe, no system call beyond the filter below.
 *
 * fork() in a multi-threaded process leaves the child with only the calling thread; the
 * child therefore touches nothing another thread may have held locked at the fork except
 * malloc, which glibc makes safe across fork. AddressSanitizer's allocator (GCC 12's and
 * clang 15's libasan) is not: a child forked while another thread holds one of its
 * size-class locks hangs at its first allocation of that class (seen in ts_parser_new, the
 * daemon's FUSE threads allocating beside it). A sanitized build therefore gives a worker a
 * shorter wait and forks a new one when it does not answer (WORKER_ATTEMPTS).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bash/bash.h"
#include "bash_worker.h"
#include "pw_limits.h"
#include "util.h"

/* How long a worker may take. The analysis bounds its own work (PW_BASH_TARGETS_MAX and a
 * step budget); this only catches a worker that hangs, on a machine however loaded. */
#define WORKER_DEADLINE_MS 60000

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PW_ASAN_FORK_UNSAFE 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PW_ASAN_FORK_UNSAFE 1
#endif
#ifdef PW_ASAN_FORK_UNSAFE
#define WORKER_ATTEMPTS 4
#define WORKER_ATTEMPT_MS (WORKER_DEADLINE_MS / WORKER_ATTEMPTS)
#else
#define WORKER_ATTEMPTS 1
#define WORKER_ATTEMPT_MS WORKER_DEADLINE_MS
#endif

#if defined(__x86_64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/* ---- in the worker ------------------------------------------------------------------- */

#ifdef NATIVE_AUDIT_ARCH
#define LOAD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define ALLOW_NR(n)                                                                                \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define KILL BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)

/* Allows what the analysis, malloc and jansson need; kills on anything else. openat may not
 * ask for write access or creation, and write goes to the answer pipe only. */
static int install_filter(int out_fd)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_AUDIT_ARCH, 1, 0),
	    KILL,
	    LOAD_NR,
#ifdef __x86_64__
	    /* x32 system calls share the architecture; refuse their number range. */
	    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1),
	    KILL,
#endif
	    /* write(fd, ...): only to the answer pipe. */
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 0, 4),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)out_fd, 1, 0),
	    KILL,
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    /* openat(dirfd, path, flags): reading only. */
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 4),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K,
		     O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | (O_TMPFILE & ~O_DIRECTORY),
		     0, 1),
	    KILL,
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    ALLOW_NR(SYS_close),
	    ALLOW_NR(SYS_getdents64),
	    ALLOW_NR(SYS_newfstatat),
	    ALLOW_NR(SYS_fstat),
	    ALLOW_NR(SYS_statx),
	    ALLOW_NR(SYS_fcntl),
	    ALLOW_NR(SYS_lseek),
	    ALLOW_NR(SYS_brk),
	    ALLOW_NR(SYS_mmap),
	    ALLOW_NR(SYS_munmap),
	    ALLOW_NR(SYS_mremap),
	    ALLOW_NR(SYS_mprotect),
	    ALLOW_NR(SYS_madvise),
	    ALLOW_NR(SYS_futex),
	    ALLOW_NR(SYS_getrandom),
	    ALLOW_NR(SYS_getpid),
	    ALLOW_NR(SYS_gettid),
	    ALLOW_NR(SYS_clock_gettime),
	    ALLOW_NR(SYS_sched_yield),
	    ALLOW_NR(SYS_sigaltstack),
	    ALLOW_NR(SYS_rt_sigprocmask),
	    ALLOW_NR(SYS_rt_sigreturn),
	    ALLOW_NR(SYS_exit),
	    ALLOW_NR(SYS_exit_group),
	    KILL,
	};
	struct sock_fprog prog = {.len = ELEMENTSOF(f), .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return negative_errno();
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		return negative_errno();
	return 0;
}
#else
static int install_filter(int out_fd)
{
	return -ENOTSUP; /* no filter written for this architecture: fail closed */
}
#endif

/* Closes every descriptor but A and B. */
static void close_all_but(int a, int b)
{
	int lo = a < b ? a : b, hi = a < b ? b : a;
	if (lo > 0)
		close_range(0, lo - 1, 0);
	if (hi > lo + 1)
		close_range(lo + 1, hi - 1, 0);
	close_range(hi + 1, ~0u, 0);
}

/* Drops to UID/GID when root: the project root becomes the process's root directory, no
 * supplementary groups, and a check that the way back is closed. */
static int drop_privileges(int root_fd, uid_t uid, gid_t gid)
{
	if (geteuid() != 0)
		return 0; /* an unprivileged daemon's worker is the daemon's own user */
	if (fchdir(root_fd) < 0 || chroot(".") < 0)
		return negative_errno();
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return negative_errno();
	if (uid == 0 || setresuid(0, 0, 0) == 0 || geteuid() == 0)
		return -EPERM;
	return 0;
}

static bool write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

bool pw_bash_hidden_path(const pw_policy *hide, const char *path, bool is_dir)
{
	char buf[PW_PATH_MAX];
	size_t n = strlen(path);

	if (!hide || !path[0] || !pw_policy_has_hide_rules(hide))
		return false;
	if (n >= sizeof(buf))
		return true;
	memcpy(buf, path, n + 1);
	for (char *s = strchr(buf, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		bool h = pw_policy_is_hidden(hide, buf, true);
		*s = '/';
		if (h)
			return true;
	}
	return pw_policy_is_hidden(hide, path, is_dir);
}

static bool hidden_cb(const char *path, bool is_dir, void *arg)
{
	return pw_bash_hidden_path(arg, path, is_dir);
}

/* The answer: a 32-bit status (0, or the analysis's -errno), then on 0 the verdict's JSON. */
static int analyze(const pw_bash_job *job, int out_fd)
{
	pw_bash_opts bo = {.root_fd = job->root_fd,
			   .root_path = job->root_path,
			   .cwd = job->cwd,
			   .hidden = job->hide ? hidden_cb : NULL,
			   .hidden_arg = (void *)job->hide};
	pw_bash_result *res = NULL;
	int32_t status = pw_bash_analyze(job->command, job->len, &bo, &res);
	char *text = NULL;
	if (status == 0) {
		pw_bash_decide(res, job->policy);
		json_t *o = pw_bash_result_json(res);
		text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		if (!text)
			status = -ENOMEM;
	}
	if (!write_all(out_fd, &status, sizeof(status)))
		return 1;
	if (text && !write_all(out_fd, text, strlen(text)))
		return 1;
	return 0;
}

_Noreturn static void worker_main(const pw_bash_job *job, int out_fd, uid_t uid, gid_t gid)
{
	pid_t parent = getppid();
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(2);
	/* jansson picks its hash seed at the first object made in the process: from
	 * /dev/urandom (open and read), else from gettimeofday. In the sandbox below the first
	 * is out of the chroot and read is refused, the second a system call the filter kills
	 * on a machine whose clock the vDSO cannot read. Pick it now. */
	json_object_seed(0);
	close_all_but(job->root_fd, out_fd);
	if (drop_privileges(job->root_fd, uid, gid) < 0)
		_exit(3);
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || install_filter(out_fd) < 0)
		_exit(3);
	_exit(analyze(job, out_fd));
}

/* ---- in the daemon ------------------------------------------------------------------- */

/* Whom the worker runs as when the daemon is root: the project's owner, so it reads the
 * tree as the person whose project it is; nobody when root owns it. */
static void worker_identity(int root_fd, uid_t *ret_uid, gid_t *ret_gid)
{
	struct stat st;
	uid_t uid = 65534;
	gid_t gid = 65534;
	struct passwd pw, *found = NULL;
	char buf[1024];

	if (getpwnam_r("nobody", &pw, buf, sizeof(buf), &found) == 0 && found) {
		uid = found->pw_uid;
		gid = found->pw_gid;
	}
	if (fstat(root_fd, &st) == 0 && st.st_uid != 0) {
		uid = st.st_uid;
		if (st.st_gid != 0)
			gid = st.st_gid;
	}
	*ret_uid = uid;
	*ret_gid = gid;
}

/* Reads the worker's whole answer into *ret (malloc'd, *ret_len bytes). -ETIMEDOUT when the
 * deadline passes first, -ECANCELED when CANCEL_FD (>= 0) becomes readable first, -ECHILD
 * when the answer is larger than PW_BASH_WORKER_ANSWER_MAX. */
static int read_answer(int fd, int cancel_fd, char **ret, size_t *ret_len)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	int64_t deadline = pw_clock_ms(CLOCK_MONOTONIC) + WORKER_ATTEMPT_MS;

	for (;;) {
		int64_t left = deadline - pw_clock_ms(CLOCK_MONOTONIC);
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN},
					{.fd = cancel_fd, .events = POLLIN}};
		int k = poll(pfd, cancel_fd >= 0 ? 2 : 1, (int)left);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		if (k == 0)
			continue;
		if (cancel_fd >= 0 && pfd[1].revents)
			return -ECANCELED;
		if (len == cap && cap >= PW_BASH_WORKER_ANSWER_MAX)
			return -ECHILD;
		if (PW_GROW(buf, cap, len, 65536) < 0)
			return -ENOMEM;
		ssize_t r = pw_read_once(fd, buf + len, cap - len);
		if (r < 0)
			return (int)r;
		if (r == 0)
			break;
		len += (size_t)r;
	}
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

static int reap(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -ECHILD;
	return st;
}

static int parse_answer(const char *buf, size_t len, json_t **ret)
{
	int32_t status;
	if (len < sizeof(status))
		return -ECHILD;
	memcpy(&status, buf, sizeof(status));
	if (status != 0)
		return status == -E2BIG || status == -EINVAL || status == -ENOTSUP ||
			       status == -ENOMEM
			   ? status
			   : -ECHILD;
	json_error_t err;
	json_t *o =
	    json_loadb(buf + sizeof(status), len - sizeof(status), JSON_REJECT_DUPLICATES, &err);
	if (!o || !json_is_object(o) || !json_is_string(json_object_get(o, "verdict"))) {
		json_decref(o);
		return -ECHILD;
	}
	*ret = o;
	return 0;
}

/* One worker: forked, read until it answers, is cancelled or its attempt's time is up
 * (-ETIMEDOUT, the worker killed), reaped. */
static int run_once(const pw_bash_job *job, int cancel_fd, uid_t uid, gid_t gid,
		    json_t **ret_result)
{
	_cleanup_free_ char *answer = NULL;
	_cleanup_close_ int rd = -1, wr = -1;
	size_t len = 0;
	int p[2], r;

	if (pipe2(p, O_CLOEXEC) < 0)
		return negative_errno();
	rd = p[0];
	wr = p[1];
	pid_t pid = fork();
	if (pid < 0)
		return negative_errno();
	if (pid == 0)
		worker_main(job, wr, uid, gid);
	close(TAKE_FD(wr));

	r = read_answer(rd, cancel_fd, &answer, &len);
	if (r < 0)
		kill(pid, SIGKILL);
	int st = reap(pid);
	if (r < 0)
		return r;
	if (st < 0 || !WIFEXITED(st))
		return -ECHILD;
	if (WEXITSTATUS(st) == 3)
		return -EPERM;
	if (WEXITSTATUS(st) != 0)
		return -ECHILD;
	return parse_answer(answer, len, ret_result);
}

int pw_bash_worker_run(const pw_bash_job *job, json_t **ret_result)
{
	return pw_bash_worker_run_cancellable(job, -1, ret_result);
}

int pw_bash_worker_run_cancellable(const pw_bash_job *job, int cancel_fd, json_t **ret_result)
{
	uid_t uid;
	gid_t gid;
	int r = -ETIMEDOUT;

	if (job->root_fd < 0)
		return -EBADF;
	worker_identity(job->root_fd, &uid, &gid);
	for (int i = 0; i < WORKER_ATTEMPTS && r == -ETIMEDOUT; i++)
		r = run_once(job, cancel_fd, uid, gid, ret_result);
	return r;
}
