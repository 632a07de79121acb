/* SPDX-License-Identifier: MIT */
/*
 * The consent question of `piworkfs run` (run.h, docs/SECURITY.md "Asking to switch").
 *
 * The run holds an operator connection to the view's daemon for as long as the command
 * runs. Through it, it opened the sandbox's agent socket as its own (`agent.open {"own":
 * true}`: the socket goes away with the connection) and subscribed to `mode.request`: the
 * daemon tells this run, and only this run, when its sandbox asks for a looser mode.
 *
 * On a terminal, the question is drawn on the person's real terminal, on the bottom rows:
 * as many as its words need (bar.c: the question, the agent's reason whole, how to answer),
 * up to half the screen. The sandbox's pty loses those rows meanwhile (its programs redraw
 * into fewer) and the real terminal's scrolling region stops above them, so the command
 * keeps drawing around the question.
 * While it is open, the person's keystrokes go to the question, never to the command. The
 * sandbox cannot answer: it writes only to its own pty (whatever it draws, even a copy of
 * the bar, is output, and output is never read as input), and TIOCSTI reaches only its pty.
 * Nor can it time a request to catch keys meant for it: keys read during the first
 * GRACE_MS after the bar appeared are discarded, a new request restarts that time, and the
 * answer is the target mode's name, typed, then Enter: a key that does not continue the
 * name denies. Typing the name is what makes a fake bar useless: the command may draw
 * "plan -> design" anywhere above, but an answer counts only for the target the real bar
 * names, so the person who means design and types it denies the request for off.
 *
 * Nor can it hide or move the real bar with the terminal state it leaves behind
 * (concealed or black-on-black text, a shifted character set, origin mode, an escape
 * sequence left open): each drawing of the bar resets that state first and restores it
 * after (BAR_BEGIN, BAR_END).
 *
 * Without a terminal, nothing is shown: the person answers with `piworkfs mode --approve`.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"
#include "bar.h"
#include "run.h"
#include "pw_limits.h"

#define GRACE_MS 300   /* keys read this soon after the question appeared never answer it */
#define SETUP_MS 10000 /* the calls at start */

typedef struct question {
	bool open;
	long long id;
	char from[PW_ASK_MODE_SHOWN_MAX + 1], to[PW_ASK_MODE_SHOWN_MAX + 1];
	char reason[PW_ASK_REASON_SHOWN_MAX + 1];
	char plan[PW_ASK_MODE_SHOWN_MAX + 1]; /* plan.request_approval: the plan; "" for a switch */
	int64_t shown_ms;
	size_t typed; /* how much of `to` the person typed after the grace time */
} question;

/* One per process: a run has one sandbox (run.h explains the hooks). */
static struct {
	int fd; /* the operator connection, non-blocking after set-up; -1: none */
	char *in;
	size_t in_len;
	long long next_id;
	pw_run_pty *pty;
	question q;
	unsigned short rows, cols; /* the real terminal's size while a question is open */
	size_t bar_rows;	   /* the rows the question takes at the bottom; 0: none */
} ask = {.fd = -1};

/* ---- the operator connection ----------------------------------------------------------- */

static int send_line(json_t *msg)
{
	_cleanup_free_ char *s = json_dumps(msg, JSON_COMPACT);
	size_t len, off = 0;

	json_decref(msg);
	if (!s)
		return -ENOMEM;
	len = strlen(s);
	s[len] = '\n'; /* json_dumps leaves the NUL; the newline replaces it */
	len++;
	while (off < len) {
		ssize_t n = send(ask.fd, s + off, len - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pfd = {.fd = ask.fd, .events = POLLOUT};
			if (poll(&pfd, 1, SETUP_MS) <= 0)
				return -ETIMEDOUT;
			continue;
		}
		if (n < 0)
			return -errno;
		off += (size_t)n;
	}
	return 0;
}

static long long call_async(const char *method, json_t *params)
{
	long long id = ++ask.next_id;
	json_t *m = json_pack("{s:s,s:I,s:s,s:o?}", "jsonrpc", "2.0", "id", (json_int_t)id,
			      "method", method, "params", params);

	return send_line(m) < 0 ? -1 : id;
}

/* Takes the next complete line out of the buffer: a malloc'd JSON value or NULL. */
static json_t *take_line(void)
{
	char *nl = ask.in ? memchr(ask.in, '\n', ask.in_len) : NULL;
	json_t *j;
	size_t len;

	if (!nl)
		return NULL;
	len = (size_t)(nl - ask.in);
	j = json_loadb(ask.in, len, 0, NULL);
	memmove(ask.in, nl + 1, ask.in_len - len - 1);
	ask.in_len -= len + 1;
	return j ? j : json_object(); /* a line we cannot parse: skipped */
}

/* Reads what is there. Returns false when the daemon is gone. */
static bool fill(void)
{
	if (!ask.in) {
		ask.in = malloc(PW_ASK_LINE_MAX);
		if (!ask.in)
			return false;
	}
	if (ask.in_len == PW_ASK_LINE_MAX)
		ask.in_len = 0; /* a line longer than any reply: drop it */
	ssize_t n = recv(ask.fd, ask.in + ask.in_len, PW_ASK_LINE_MAX - ask.in_len, MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	if (n == 0)
		return false;
	ask.in_len += (size_t)n;
	return true;
}

/* Calls METHOD and waits for its reply (notifications before it are handled later). */
static int call_sync(const char *method, json_t *params, json_t **ret_result, char **ret_err)
{
	long long id = call_async(method, params);
	int64_t deadline = pw_clock_ms(CLOCK_MONOTONIC) + SETUP_MS;

	if (id < 0)
		return -EIO;
	for (;;) {
		json_t *j;
		while ((j = take_line())) {
			json_t *jid = json_object_get(j, "id");
			if (json_is_integer(jid) && json_integer_value(jid) == id) {
				json_t *err = json_object_get(j, "error");
				if (err) {
					const char *m =
					    json_string_value(json_object_get(err, "message"));
					*ret_err = strdup(m ? m : "refused");
					json_decref(j);
					return -EREMOTE;
				}
				*ret_result = json_incref(json_object_get(j, "result"));
				json_decref(j);
				return 0;
			}
			json_decref(j); /* nothing else is expected during set-up */
		}
		int left = (int)(deadline - pw_clock_ms(CLOCK_MONOTONIC));
		struct pollfd pfd = {.fd = ask.fd, .events = POLLIN};
		if (left <= 0 || poll(&pfd, 1, left) <= 0)
			return -ETIMEDOUT;
		if (!fill())
			return -ECONNRESET;
	}
}

int pw_run_ask_open(const char *sock, char **ret_agent_socket)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_free_ char *err = NULL;
	json_t *res = NULL;
	const char *path;
	int r;

	if (strlen(sock) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, sock);
	ask.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ask.fd < 0)
		return -errno;
	if (connect(ask.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		goto fail;
	}
	r = call_sync("agent.open", json_pack("{s:b}", "own", true), &res, &err);
	if (r == 0) {
		path = json_string_value(json_object_get(res, "socket"));
		*ret_agent_socket = path && path[0] == '/' ? strdup(path) : NULL;
		json_decref(res);
		res = NULL;
		r = *ret_agent_socket ? 0 : -EBADMSG;
	}
	if (r == 0 && pw_run_pty_wanted())
		r = call_sync("subscribe", json_pack("{s:[s]}", "events", "mode.request"), &res,
			      &err);
	json_decref(res);
	if (r == -EREMOTE)
		pw_err("run", "the view's daemon refused a socket of the run's own: %s", err);
	if (r < 0)
		goto fail;
	return 0;
fail:
	close(ask.fd);
	ask.fd = -1;
	return r;
}

void pw_run_ask_close(void)
{
	if (ask.fd >= 0)
		close(ask.fd);
	ask.fd = -1;
	free(ask.in);
	ask.in = NULL;
	ask.in_len = 0;
}

/* ---- the bar --------------------------------------------------------------------------- */

static void term_size(unsigned short *rows, unsigned short *cols)
{
	struct winsize ws = {0};

	if (ioctl(ask.pty->term_out, TIOCGWINSZ, &ws) < 0 || !ws.ws_row)
		(void)ioctl(ask.pty->term_in, TIOCGWINSZ, &ws);
	*rows = ws.ws_row ? ws.ws_row : 24;
	*cols = ws.ws_col ? ws.ws_col : 80;
}

/* The sandbox's pty at ROWS rows (the kernel tells its programs with SIGWINCH). */
static void pty_rows(unsigned short rows)
{
	struct winsize ws = {.ws_row = rows, .ws_col = ask.cols};

	(void)ioctl(ask.pty->master, TIOCSWINSZ, &ws);
}

/*
 * What comes before the bar's text: the terminal state the command may have left, put back
 * to what the bar needs, after saving what DECSC saves (the cursor, attributes, character
 * sets, origin mode), so that BAR_END gives the command its own state back.
 *   CAN, ST     end an escape sequence or a string (OSC, DCS) left open, which would
 *               otherwise swallow the bar (CAN for the sequences, ST where CAN does not
 *               end a string; outside one, both are ignored)
 *   ESC 7       DECSC
 *   CSI ? 6 l   origin mode off: the row is counted from the top of the screen, not of a
 *               scrolling region the command set (which could put the bar on its row)
 *   ESC ( B ... G0 to G3 are ASCII and SI puts G0 in use: no line-drawing letters, and a
 *               single shift the command left pending finds ASCII too
 *   SGR 0       no conceal, no colours, no blink, no reverse
 *   ESC # 5     each of the bar's rows single-width (a double-width row shows half of it)
 * Not touched, since DECSC does not save them and the command's drawing relies on them,
 * and none can hide the bar: the scrolling region (rows are absolute with origin mode
 * off), insert mode and autowrap (the row is cleared and the text never reaches the last
 * column), the cursor's visibility (the bar needs no cursor). The text's colours are
 * direct RGB after the 16-colour ones, which the command cannot redefine (OSC 4, 10, 11
 * change the palette and the default colours, not RGB).
 */
#define BAR_BEGIN "\030\033\\\0337\033[?6l\033(B\033)B\033*B\033+B\017\033[0m"
#define BAR_COLOURS "\033[0;1;97;41m\033[38;2;255;255;255;48;2;160;0;0m"
#define BAR_END "\033[0m\0338"

/* What the person types to allow: the target mode's name, or the plan's for an approval. */
static const char *answer_word(void)
{
	return ask.q.plan[0] ? ask.q.plan : ask.q.to;
}

/* The rows the bar may take: PW_BAR_ROWS_MAX, and never more than half the screen. */
static size_t bar_rows_max(void)
{
	size_t half = ask.rows / 2;

	return half < 1 ? 1 : half < PW_BAR_ROWS_MAX ? half : PW_BAR_ROWS_MAX;
}

/* The command keeps the rows above the bar's N: its pty shrinks to them (the kernel tells
 * its programs with SIGWINCH), and the real terminal's scrolling stops above the bar. */
static void give_rows(size_t n)
{
	char region[64];
	unsigned keep = ask.rows > n + 1 ? (unsigned)(ask.rows - n) : ask.rows;
	int len;

	ask.bar_rows = n;
	pty_rows((unsigned short)keep);
	len = snprintf(region, sizeof(region), "\0337\033[1;%ur\0338", keep);
	pw_run_pty_write_term(ask.pty, region, (size_t)len);
}

/* Draws the question on the bottom rows, the cursor left where the command had it. It takes
 * the rows its words need (bar.c); while it is open it never gives one back (typing changes
 * the words, and a bar that jumps is hard to read). */
static void draw_bar(void)
{
	pw_bar bar;
	pw_bar_question q = {.from = ask.q.from,
			     .to = ask.q.to,
			     .plan = ask.q.plan,
			     .reason = ask.q.reason,
			     .typed = ask.q.typed};
	/* two columns of margin, and never the last one (autowrap) */
	size_t width = ask.cols > 4 ? (size_t)ask.cols - 3 : 1;
	size_t n = pw_bar_layout(&q, width, bar_rows_max(), &bar);
	char line[PW_BAR_TEXT_MAX + 512];
	size_t len = 0;

	if (n > ask.bar_rows)
		give_rows(n);
	/* BAR_BEGIN (saves the cursor); per row: the row, single-width, cleared with no
	 * colours, then its words on the bar's colours (the rows the words no longer need stay
	 * cleared); BAR_END (restores). */
	len += (size_t)snprintf(line + len, sizeof(line) - len, BAR_BEGIN);
	for (size_t i = 0; i < ask.bar_rows && len < sizeof(line); i++) {
		unsigned row = (unsigned)(ask.rows - ask.bar_rows + 1 + i);
		len += (size_t)snprintf(line + len, sizeof(line) - len,
					"\033[%u;1H\033#5\033[0m\033[2K", row);
		if (i < n && len < sizeof(line))
			len +=
			    (size_t)snprintf(line + len, sizeof(line) - len, BAR_COLOURS " %.*s ",
					     (int)bar.len[i], bar.text + bar.start[i]);
	}
	if (len < sizeof(line))
		len += (size_t)snprintf(line + len, sizeof(line) - len, BAR_END);
	if (len < sizeof(line))
		pw_run_pty_write_term(ask.pty, line, len);
}

static void open_question(json_t *p)
{
	bool was_open = ask.q.open;

	ask.q = (question){.open = true,
			   .id = json_integer_value(json_object_get(p, "id")),
			   .shown_ms = pw_clock_ms(CLOCK_MONOTONIC)};
	/* cleaned here (the daemon cleaned them already: this is the run's own guard) */
	pw_bar_clean(ask.q.from, PW_ASK_MODE_SHOWN_MAX,
		     json_string_value(json_object_get(p, "from")));
	pw_bar_clean(ask.q.to, PW_ASK_MODE_SHOWN_MAX, json_string_value(json_object_get(p, "to")));
	pw_bar_clean(ask.q.reason, PW_ASK_REASON_SHOWN_MAX,
		     json_string_value(json_object_get(p, "reason")));
	pw_bar_clean(ask.q.plan, PW_ASK_MODE_SHOWN_MAX,
		     json_string_value(json_object_get(p, "plan")));
	if (!was_open) {
		term_size(&ask.rows, &ask.cols);
		ask.bar_rows = 0;
	}
	draw_bar();
}

static void close_question(void)
{
	char buf[64];
	int n;

	if (!ask.q.open)
		return;
	ask.q.open = false;
	/* Clear the bar, give the whole screen back to the command, and its rows back to its
	 * pty: the size change makes full-screen programs redraw. */
	n = snprintf(buf, sizeof(buf), "\0337\033[r\033[0m");
	pw_run_pty_write_term(ask.pty, buf, (size_t)n);
	for (size_t i = 0; i < ask.bar_rows; i++) {
		n = snprintf(buf, sizeof(buf), "\033[%u;1H\033[2K",
			     (unsigned)(ask.rows - ask.bar_rows + 1 + i));
		pw_run_pty_write_term(ask.pty, buf, (size_t)n);
	}
	pw_run_pty_write_term(ask.pty, "\0338", 2);
	ask.bar_rows = 0;
	pty_rows(ask.rows);
	pw_run_pty_resize(ask.pty); /* the real size, should it have changed meanwhile */
}

/* HOW (null: allowed) is the key that denied, as the switch history records it. */
static void answer(bool approve, const char *how)
{
	char by[96];

	snprintf(by, sizeof(by), "the terminal of piworkfs run (pid %d)", (int)getpid());
	(void)call_async("mode.request.answer",
			 json_pack("{s:I,s:b,s:s,s:s*}", "id", (json_int_t)ask.q.id, "approve",
				   approve, "by", by, "how", how));
	close_question();
}

/* The key CH that denied, named for the switch history (never its raw byte): "Ctrl-C",
 * "\"y\"", "Enter after typing \"bu\"". */
static void denying_key(char ch, char *buf, size_t size)
{
	unsigned char c = (unsigned char)ch;
	char key[24];

	if (c == '\r' || c == '\n')
		snprintf(key, sizeof(key), "Enter");
	else if (c == 0x1b)
		snprintf(key, sizeof(key), "Escape");
	else if (c == 0x7f || c == 0x08)
		snprintf(key, sizeof(key), "Backspace");
	else if (c < 0x20)
		snprintf(key, sizeof(key), "Ctrl-%c", c + 0x40);
	else if (c < 0x80 && c != '"' && c != '\\')
		snprintf(key, sizeof(key), "\"%c\"", c);
	else
		snprintf(key, sizeof(key), "a key (0x%02x)", c);
	if (ask.q.typed > 0)
		snprintf(buf, size, "%s after typing \"%.*s\"", key, (int)ask.q.typed,
			 answer_word());
	else
		snprintf(buf, size, "%s", key);
}

/* ---- hooks of the relay ---------------------------------------------------------------- */

static void on_input(pw_run_pty *p, const char *buf, size_t n)
{
	if (!ask.q.open) {
		pw_run_pty_to_sandbox(p, buf, n);
		return;
	}
	/* The question holds the keyboard: nothing reaches the command meanwhile. */
	if (pw_clock_ms(CLOCK_MONOTONIC) - ask.q.shown_ms < GRACE_MS)
		return; /* typed before the person could have read it */
	for (size_t i = 0; i < n && ask.q.open; i++) {
		const char *word = answer_word();
		size_t tolen = strlen(word);
		char ch = buf[i];
		if (ask.q.typed < tolen && ch == word[ask.q.typed]) {
			ask.q.typed++;
			draw_bar();
		} else if (ask.q.typed == tolen && tolen > 0 && (ch == '\r' || ch == '\n')) {
			answer(true, NULL);
		} else {
			/* not the name the bar shows, or Enter before its end */
			char how[PW_MODE_NAME_MAX + 64];
			denying_key(ch, how, sizeof(how));
			answer(false, how);
		}
	}
}

static void on_output(pw_run_pty *p, const char *buf, size_t n)
{
	pw_run_pty_write_term(p, buf, n);
	if (ask.q.open)
		draw_bar(); /* whatever the command drew over it */
}

static void on_resize(pw_run_pty *p)
{
	if (!ask.q.open)
		return;
	/* what the old size's rows showed is the terminal's to reflow: laid out anew */
	term_size(&ask.rows, &ask.cols);
	ask.bar_rows = 0;
	draw_bar();
}

void pw_run_ask_attach(pw_run_pty *pty)
{
	if (!pty || pty->master < 0 || ask.fd < 0)
		return;
	ask.pty = pty;
	pty->on_input = on_input;
	pty->on_output = on_output;
	pty->on_resize = on_resize;
	int fl = fcntl(ask.fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(ask.fd, F_SETFL, fl | O_NONBLOCK);
}

int pw_run_ask_fd(void)
{
	return ask.pty ? ask.fd : -1;
}

void pw_run_ask_events(void)
{
	json_t *j, *latest = NULL;
	long long done_max = 0;

	if (!fill()) {
		/* The daemon is gone: no question can be answered any more. */
		close_question();
		pw_run_ask_close();
		return;
	}
	/* Of a burst of requests only the newest is shown (each supersedes the one before). */
	while ((j = take_line())) {
		const char *method = json_string_value(json_object_get(j, "method"));
		json_t *params = json_object_get(j, "params");
		long long id = json_integer_value(json_object_get(params, "id"));

		if (streq_ptr(method, "mode.request")) {
			json_decref(latest);
			latest = json_incref(params);
		} else if (streq_ptr(method, "mode.request.done") && id > done_max) {
			done_max = id;
		}
		json_decref(j);
	}
	if (latest && json_integer_value(json_object_get(latest, "id")) > done_max)
		open_question(latest);
	else if (ask.q.open && ask.q.id <= done_max)
		close_question();
	json_decref(latest);
}

void pw_run_ask_finish(void)
{
	close_question();
}
