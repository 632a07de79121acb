/* SPDX-License-Identifier: MIT */
/*
 * Speed of the bash pre-flight: analysis plus decisions for a typical one-line agent
 * command, and for a 100 KiB script, against the demo project in design mode. Prints the
 * median per analysis. A figure for people (./dev bench), not a test.
 *
 * Usage: bash_speed MODES_DIR PROJECT_DIR
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bash.h"
#include "mode.h"
#include "policy.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median time of ROUNDS analyses of CMD, in microseconds. */
static double measure(const char *cmd, size_t len, const pw_bash_opts *o, const pw_policy *p,
		      int rounds)
{
	double *t = calloc((size_t)rounds, sizeof(*t));
	if (!t)
		exit(1);
	for (int i = 0; i < rounds; i++) {
		pw_bash_result *r = NULL;
		double start = now_us();
		if (pw_bash_analyze(cmd, len, o, &r) < 0) {
			fprintf(stderr, "analysis failed\n");
			exit(1);
		}
		pw_bash_decide(r, p);
		(void)pw_bash_verdict(r);
		t[i] = now_us() - start;
		pw_bash_result_free(r);
	}
	qsort(t, (size_t)rounds, sizeof(*t), cmp_double);
	double med = t[rounds / 2];
	free(t);
	return med;
}

/* A script of about 100 KiB made of varied agent-like lines. */
static char *make_script(size_t *ret_len)
{
	static const char *lines[] = {
	    "(cd src && make -j2 > build.log 2>&1) || echo failed >> docs/design/notes.md\n",
	    "for f in src/*.c; do sed -i 's/foo/bar/' \"$f\"; done\n",
	    "git add -A && git commit -m 'wip' && git log --oneline | head -5\n",
	    "cat README.md | grep -n TODO | tee docs/design/todo.md\n",
	    "if [ -f styles/tokens.css ]; then cp styles/tokens.css /tmp/t.css; fi\n",
	    "find . -name '*.o' -delete; rm -rf build; mkdir -p build && touch build/.keep\n",
	    "echo \"$(date) $(whoami)\" >> docs/design/log.md; npm install --silent\n",
	};
	size_t cap = 110 * 1024, len = 0, i = 0;
	char *s = malloc(cap);
	if (!s)
		exit(1);
	while (len < 100 * 1024) {
		const char *l = lines[i++ % (sizeof(lines) / sizeof(lines[0]))];
		size_t n = strlen(l);
		memcpy(s + len, l, n);
		len += n;
	}
	s[len] = '\0';
	*ret_len = len;
	return s;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s MODES_DIR PROJECT_DIR\n", argv[0]);
		return 2;
	}
	pw_load_opts lo = {.bundled_dir = argv[1], .project_dir = argv[2], .trusted = true};
	pw_modeset *ms = NULL;
	pw_policy *p = NULL;
	if (pw_modeset_load(&lo, &ms) < 0 || pw_policy_compile(ms, "design", &p) < 0) {
		fprintf(stderr, "cannot load the design mode\n");
		return 1;
	}
	int root = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char real[4096];
	if (root < 0 || !realpath(argv[2], real)) {
		perror(argv[2]);
		return 1;
	}
	pw_bash_opts o = {.root_fd = root, .root_path = real, .cwd = ""};
	const char *one = "sed -i s/a/b/ src/*.c > docs/design/out.md; echo x >> /etc/hosts";
	double t1 = measure(one, strlen(one), &o, p, 2000);
	size_t slen;
	char *script = make_script(&slen);
	double t2 = measure(script, slen, &o, p, 30);
	printf("bash pre-flight, design mode, demo project (medians):\n");
	printf("  one-line command        %8.1f us   (target < 200 us)\n", t1);
	printf("  %zu KiB script         %8.2f ms   (target < 50 ms)\n", slen / 1024, t2 / 1000);
	free(script);
	close(root);
	pw_policy_unref(p);
	pw_modeset_free(ms);
	return 0;
}
