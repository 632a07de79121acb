/* SPDX-License-Identifier: MIT */
/*
 * What known commands write: ONE table (writers[] below), one row per command name, naming
 * the handler that maps the command's arguments to targets and the options that take a
 * value (so the scanner, bash_cmd.c, can tell option values from file arguments). To teach
 * the analysis a new command, add a row; reuse a handler when one fits (bw_h_all: every file
 * argument is written; read_only[]: writes nothing; bw_h_copy: cp/mv-like). The handlers live by
 * kind of command: bash_files.c, bash_archives.c, bash_builds.c, bash_git.c, bash_wrappers.c.
 *
 * A command that is not in the table is "unknown", never allowed. Wrappers (env, sudo,
 * nice, xargs, find -exec, sh -c, ...) find the command they run and dispatch it again,
 * one level deeper.
 */
#include <string.h>

#include "bash_archives.h"
#include "bash_builds.h"
#include "bash_cmd.h"
#include "bash_files.h"
#include "bash_git.h"
#include "bash_targets.h"
#include "bash_wrappers.h"
#include "bash_writers.h"
#include "pw_limits.h"
#include "util.h"

static void h_none(bw_cmd *k)
{
}

static void h_unknown(bw_cmd *k)
{
	bw_unknown(k, k->w->note ? k->w->note : "the analysis cannot tell what it writes");
}

#define ALL(n, o, s, l)                                                                            \
	{                                                                                          \
		.name = n, .fn = bw_h_all, .op = o, .arg_short = s, .arg_long = l                  \
	}
#define WRAP(n, s, l)                                                                              \
	{                                                                                          \
		.name = n, .fn = bw_h_wrap, .arg_short = s, .arg_long = l, .raw = true             \
	}
#define SHELL(n)                                                                                   \
	{                                                                                          \
		.name = n, .fn = bw_h_shell, .raw = true                                           \
	}
#define RUNS(n, why)                                                                               \
	{                                                                                          \
		.name = n, .fn = h_unknown, .note = why                                            \
	}
/* The options of a command and its twins (GNU's, a version's). */
#define CP_OPTS .arg_short = "tS", .arg_long = "|target-directory|suffix|"
#define SED_OPTS .arg_short = "efl", .opt_short = "i", .arg_long = "|expression|file|line-length|"
#define AWK_OPTS .arg_short = "fvFi", .arg_long = "|file|assign|include|"
#define GZIP_OPTS .arg_short = "S", .arg_long = "|suffix|"
#define MAKE_OPTS .arg_short = "CfIjlo", .arg_long = "|directory|file|"
#define PIP_OPTS                                                                                   \
	.arg_short = "trcedw",                                                                     \
	.arg_long = "|target|requirement|constraint|editable|dest|wheel-dir|index-url|"
#define PYTHON_OPTS .arg_short = "mcWXtrdw", .arg_long = "|target|requirement|dest|wheel-dir|"

/* Commands that write nothing in the project, whatever their arguments. */
static const char read_only[] =
    "|cat|ls|grep|egrep|fgrep|rg|ag|ack|head|tail|wc|echo|printf|test|[|[[|true|false|:|pwd|"
    "which|whereis|type|hash|diff|cmp|comm|stat|file|less|more|tree|du|df|id|whoami|date|uname|"
    "hostname|cut|tr|basename|dirname|realpath|readlink|seq|sleep|ps|kill|export|set|unset|local|"
    "declare|typeset|readonly|shift|exit|return|break|continue|wait|trap|alias|unalias|shopt|"
    "umask|ulimit|jobs|fg|bg|disown|printenv|nproc|free|uptime|tput|clear|column|xxd|od|hexdump|"
    "md5sum|sha1sum|sha256sum|sha512sum|cksum|b2sum|nl|fold|rev|paste|join|expand|unexpand|fmt|"
    "tac|base64|fd|fdfind|locate|man|help|jq|bat|batcat|lsof|getconf|locale|zcat|bzcat|xzcat|"
    "zgrep|strings|nm|objdump|readelf|ldd|size|cloc|tokei|getent|groups|history|dirs|let|caller|"
    "compgen|complete|yes|numfmt|tsort|expr|bc|factor|shuf|look|pgrep|top|htop|";

/* The others. Sorted by nothing in particular; lookup is linear over ~120 rows, once per
 * command. */
static const bw_writer writers[] = {
    /* Plain writers: every file argument. */
    ALL("rm", PW_OP_UNLINK, NULL, NULL),
    ALL("unlink", PW_OP_UNLINK, NULL, NULL),
    ALL("shred", PW_OP_OPEN_WRITE, "nsx", "|iterations|size|random-source|"),
    ALL("rmdir", PW_OP_RMDIR, NULL, NULL),
    ALL("mkdir", PW_OP_MKDIR, "m", "|mode|context|"),
    ALL("touch", PW_OP_UTIMENS, "rdt", "|reference|date|time|"),
    ALL("truncate", PW_OP_TRUNCATE, "sro", "|size|reference|io-blocks|"),
    ALL("tee", PW_OP_OPEN_WRITE, NULL, "|output-error|"),
    ALL("mkfifo", PW_OP_MKNOD, "mZ", "|mode|context|"),
    ALL("mknod", PW_OP_MKNOD, "mZ", "|mode|context|"),
    ALL("sponge", PW_OP_OPEN_WRITE, NULL, NULL),
    ALL("setfattr", PW_OP_SETXATTR, "nvx", "|name|value|remove|"),
    ALL("chattr", PW_OP_SETXATTR, "pv", NULL),
    ALL("fallocate", PW_OP_FALLOCATE, "olx", "|offset|length|"),
    {.name = "chmod", .fn = bw_h_mode_first, .op = PW_OP_CHMOD, .arg_long = "|reference|"},
    {.name = "chown", .fn = bw_h_mode_first, .op = PW_OP_CHOWN, .arg_long = "|from|"},
    {.name = "chgrp", .fn = bw_h_mode_first, .op = PW_OP_CHOWN},
    {.name = "setfacl", .fn = bw_h_mode_first, .op = PW_OP_SETXATTR, .arg_short = "mMxX"},

    /* Source and destination. */
    {.name = "cp", .fn = bw_h_copy, CP_OPTS},
    {.name = "mv", .fn = bw_h_copy, CP_OPTS},
    {.name = "install",
     .fn = bw_h_copy,
     .arg_short = "tSmogZ",
     .arg_long = "|target-directory|suffix|mode|owner|group|strip-program|"},
    {.name = "ln", .fn = bw_h_copy, CP_OPTS},
    {.name = "rsync",
     .fn = bw_h_rsync,
     .arg_short = "efTB",
     .arg_long = "|rsh|filter|exclude|include|exclude-from|include-from|temp-dir|"
		 "backup-dir|suffix|chmod|chown|"},
    {.name = "dd", .fn = bw_h_dd, .raw = true},

    /* Editors of files in place. */
    {.name = "sed", .fn = bw_h_sed, SED_OPTS},
    {.name = "gsed", .fn = bw_h_sed, SED_OPTS},
    {.name = "perl", .fn = bw_h_perl, .arg_short = "eEIMmx", .opt_short = "i0lCd"},
    {.name = "awk", .fn = bw_h_awk, AWK_OPTS},
    {.name = "gawk", .fn = bw_h_awk, AWK_OPTS},
    {.name = "mawk", .fn = bw_h_awk, .arg_short = "fvF"},
    {.name = "yq", .fn = bw_h_inplace, .arg_short = "o", .arg_long = "|output-format|"},
    {.name = "clang-format", .fn = bw_h_inplace, .arg_long = "|style|assume-filename|"},
    {.name = "gofmt", .fn = bw_h_inplace, .arg_short = "r"},
    {.name = "rustfmt", .fn = bw_h_inplace, .arg_long = "|edition|config-path|"},
    {.name = "black", .fn = bw_h_inplace, .arg_short = "lt", .arg_long = "|line-length|"},
    {.name = "prettier", .fn = bw_h_inplace, .arg_long = "|config|parser|"},
    {.name = "eslint", .fn = bw_h_inplace, .arg_short = "cf", .arg_long = "|config|format|"},

    /* Output files given by an option. */
    {.name = "sort",
     .fn = bw_h_sort,
     .arg_short = "otkST",
     .arg_long = "|output|field-separator|key|buffer-size|temporary-directory|"},
    {.name = "uniq", .fn = bw_h_sort, .arg_short = "fsw"},
    {.name = "split",
     .fn = bw_h_split,
     .arg_short = "abCdlnt",
     .arg_long = "|suffix-length|bytes|line-bytes|lines|number|additional-suffix|"},
    {.name = "csplit", .fn = bw_h_split, .arg_short = "bfn", .arg_long = "|prefix|digits|"},
    {.name = "curl",
     .fn = bw_h_curl,
     .arg_short = "oDcdHXuAeEbFKrTwxyYzmU",
     .arg_long = "|output|dump-header|cookie-jar|data|header|request|user|user-agent|"
		 "referer|cert|form|config|range|upload-file|write-out|proxy|max-time|"
		 "output-dir|data-raw|data-binary|json|connect-timeout|cookie|"},
    {.name = "wget",
     .fn = bw_h_wget,
     .arg_short = "OoaiBtTwQPDRAlXIUe",
     .arg_long = "|output-document|output-file|append-output|directory-prefix|tries|"
		 "timeout|user-agent|header|input-file|level|"},
    {.name = "patch",
     .fn = bw_h_patch,
     .arg_short = "pioDdrBYzFVg",
     .arg_long = "|strip|input|output|directory|reject-file|"},

    /* Archives and compression. */
    {.name = "tar",
     .fn = bw_h_tar,
     .arg_short = "fCTXbKNgIH",
     .arg_long = "|file|directory|files-from|exclude-from|exclude|use-compress-program|"
		 "transform|owner|group|mode|format|"},
    {.name = "bsdtar", .fn = bw_h_tar, .arg_short = "fCTXb", .arg_long = "|file|directory|"},
    {.name = "unzip", .fn = bw_h_unzip, .arg_short = "dxP"},
    {.name = "zip", .fn = bw_h_zip, .arg_short = "xitn"},
    {.name = "gzip", .fn = bw_h_compress, GZIP_OPTS},
    {.name = "gunzip", .fn = bw_h_compress, GZIP_OPTS},
    {.name = "bzip2", .fn = bw_h_compress},
    {.name = "bunzip2", .fn = bw_h_compress},
    {.name = "xz", .fn = bw_h_compress, .arg_short = "FCT"},
    {.name = "unxz", .fn = bw_h_compress},
    {.name = "zstd", .fn = bw_h_compress, .arg_short = "oD"},
    {.name = "unzstd", .fn = bw_h_compress, .arg_short = "oD"},
    {.name = "lz4", .fn = bw_h_compress},

    /* Version control, packages and builds. */
    {.name = "git", .fn = bw_h_git, .raw = true},
    {.name = "npm", .fn = bw_h_node_pkg, .arg_long = "|prefix|registry|workspace|"},
    {.name = "pnpm", .fn = bw_h_node_pkg, .arg_short = "C", .arg_long = "|dir|filter|"},
    {.name = "yarn", .fn = bw_h_node_pkg, .arg_long = "|cwd|"},
    {.name = "bun", .fn = bw_h_node_pkg, .arg_long = "|cwd|"},
    {.name = "make", .fn = bw_h_make, MAKE_OPTS},
    {.name = "gmake", .fn = bw_h_make, MAKE_OPTS},
    {.name = "ninja", .fn = bw_h_make, .arg_short = "Cfjkldt"},
    {.name = "cmake",
     .fn = bw_h_cmake,
     .arg_short = "BSGDTAUC",
     .arg_long = "|build|target|config|parallel|preset|"},
    {.name = "cargo",
     .fn = bw_h_cargo,
     .arg_short = "pjFZ",
     .arg_long = "|target-dir|manifest-path|package|jobs|features|target|bin|example|"
		 "test|bench|profile|color|config|"},
    {.name = "go", .fn = bw_h_go, .arg_short = "o", .arg_long = "|ldflags|gcflags|tags|"},
    {.name = "pip", .fn = bw_h_pip, PIP_OPTS},
    {.name = "pip3", .fn = bw_h_pip, PIP_OPTS},
    {.name = "python", .fn = bw_h_python, PYTHON_OPTS},
    {.name = "python3", .fn = bw_h_python, PYTHON_OPTS},

    /* Wrappers: run the command that follows. */
    WRAP("env", "uCS", "|unset|chdir|split-string|"),
    WRAP("sudo", "ugCDhprtUT", "|user|group|prompt|chdir|host|"),
    WRAP("doas", "uC", NULL),
    WRAP("nice", "n", "|adjustment|"),
    WRAP("nohup", NULL, NULL),
    WRAP("timeout", "sk", "|signal|kill-after|"),
    WRAP("stdbuf", "ioe", "|input|output|error|"),
    WRAP("ionice", "cnpPu", "|class|classdata|pid|pgid|uid|"),
    WRAP("time", "of", "|output|format|"),
    WRAP("command", NULL, NULL),
    WRAP("builtin", NULL, NULL),
    WRAP("exec", "a", NULL),
    WRAP("chrt", NULL, NULL),
    WRAP("taskset", NULL, NULL),
    WRAP("setsid", NULL, NULL),
    WRAP("chronic", NULL, NULL),
    WRAP("unbuffer", NULL, NULL),
    WRAP("watch", "nd", "|interval|"),
    {.name = "flock",
     .fn = bw_h_flock,
     .arg_short = "wEc",
     .arg_long = "|timeout|command|",
     .raw = true},
    {.name = "xargs",
     .fn = bw_h_xargs,
     .arg_short = "IaEdLnPs",
     .arg_long = "|replace|arg-file|eof|delimiter|max-lines|max-args|max-procs|max-chars|",
     .raw = true},
    {.name = "find", .fn = bw_h_find, .raw = true},
    SHELL("sh"),
    SHELL("bash"),
    SHELL("dash"),
    SHELL("zsh"),
    SHELL("ksh"),
    {.name = "source", .fn = bw_h_source},
    {.name = ".", .fn = bw_h_source},

    /* Known, but they run code the analysis does not follow. */
    RUNS("node", "runs JavaScript the analysis does not follow"),
    RUNS("npx", "runs a package binary the analysis does not follow"),
    RUNS("ruby", "runs Ruby code the analysis does not follow"),
    RUNS("php", "runs PHP code the analysis does not follow"),
    RUNS("deno", "runs code the analysis does not follow"),
    RUNS("vim", "an editor: it may write any file"),
    RUNS("vi", "an editor: it may write any file"),
    RUNS("nvim", "an editor: it may write any file"),
    RUNS("nano", "an editor: it may write any file"),
    RUNS("emacs", "an editor: it may write any file"),
    RUNS("code", "an editor: it may write any file"),
    RUNS("parallel", "runs commands the analysis does not follow"),
    RUNS("pytest", "runs tests the analysis does not follow"),
    RUNS("meson", "a build tool the analysis does not follow"),
};

#undef ALL
#undef WRAP
#undef RUNS
#undef SHELL
#undef CP_OPTS
#undef SED_OPTS
#undef AWK_OPTS
#undef GZIP_OPTS
#undef MAKE_OPTS
#undef PIP_OPTS
#undef PYTHON_OPTS

/* Resolves a command name: the table's name, or the basename of /bin, /usr/bin,
 * /usr/local/bin or /sbin paths (a ./rm is someone's script, not rm). A command of
 * read_only[] gets *RO, filled as a row named after it that writes nothing. */
static const bw_writer *lookup(const char *name, bw_writer *ro)
{
	static const char *const dirs[] = {"/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/",
					   "/usr/sbin/"};
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
		if (startswith(name, dirs[i]) && !strchr(name + strlen(dirs[i]), '/')) {
			name += strlen(dirs[i]);
			break;
		}
	if (pw_list_has(read_only, '|', name, strlen(name))) {
		*ro = (bw_writer){.name = name, .fn = h_none};
		return ro;
	}
	for (size_t i = 0; i < ELEMENTSOF(writers); i++)
		if (streq(writers[i].name, name))
			return &writers[i];
	return NULL;
}

void bw_dispatch(bw_ctx *c, bw_word *argv, size_t argc, unsigned depth)
{
	if (argc == 0 || !bw_spend(c, 1))
		return;
	if (depth > PW_BASH_DEPTH_MAX) {
		c->res->truncated = true;
		bw_add_unknown_cmd(c, "(analysis)", "nesting too deep");
		return;
	}
	if (argv[0].unknown || !argv[0].lit) {
		bw_add_unknown_cmd(c, argv[0].raw ? argv[0].raw : "?",
				   "the command name is an expansion the analysis cannot resolve");
		return;
	}
	bw_writer ro;
	const bw_writer *w = lookup(argv[0].lit, &ro);
	if (!w) {
		bw_add_unknown_cmd(c, argv[0].lit,
				   "unknown command: the analysis cannot tell what it writes");
		return;
	}
	bw_cmd k = {
	    .c = c, .argv = argv, .argc = argc, .depth = depth, .w = w, .dispatch = bw_dispatch};
	bw_set_label(&k, w->name, NULL);
	if (!w->raw)
		bw_scan(&k, w, 1, false);
	w->fn(&k);
	bw_cmd_done(&k);
}
