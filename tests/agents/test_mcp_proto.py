# SPDX-License-Identifier: MIT
"""`piworkfs mcp` on raw stdio (Python 3 stdlib only): malformed and hostile input gets a
JSON-RPC error and the server goes on; a view whose daemon is gone is an error, not a crash.
And the texts are the Pi extension's: the announcement `piworkfs hook claude` and the MCP
server send is byte for byte the one the daemon gives the Pi extension (text.mode), for every
bundled mode; tests/pi/test_pi.py compares what a real Pi prints with both."""

import json
import os
import select
import subprocess
import sys
import time
import unittest

import harness  # noqa: E402

DEADLINE = 30


class Server:
    """`piworkfs mcp` as a child with pipes; reads one reply line at a time."""

    def __init__(self, env, cwd):
        self.p = subprocess.Popen([harness.PIWORKFS, "mcp"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                  cwd=cwd)
        self.buf = b""

    def send(self, data):
        self.p.stdin.write(data if isinstance(data, bytes) else data.encode())
        self.p.stdin.flush()

    def request(self, id, method, params=None):
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(json.dumps(msg) + "\n")
        return self.reply()

    def reply(self):
        end = time.monotonic() + DEADLINE
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("no reply; stderr: %r" % self.p.stderr.read1(65536))
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError("the server exited (%s)" % self.p.wait())
                self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def close(self):
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        self.p.wait(timeout=DEADLINE)
        self.p.stdout.close()
        self.p.stderr.close()


INIT = {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}


class TestMalformed(harness.MountCase):
    def start(self, cwd, env=None):
        s = Server(env or self.env, cwd)
        self.addCleanup(s.close)
        return s

    def assertError(self, msg, code, id=None):
        self.assertIn("error", msg, msg)
        self.assertEqual(msg["error"]["code"], code, msg)
        self.assertEqual(msg.get("id"), id, msg)

    def test_bad_input_is_answered_and_the_server_goes_on(self):
        v = self.mount("design")
        s = self.start(v.mp)
        # Before initialize, only initialize and ping are served.
        self.assertError(s.request(1, "tools/list"), -32600, 1)
        r = s.request(2, "initialize", INIT)
        self.assertEqual(r["result"]["protocolVersion"], "2025-06-18")
        # A revision we do not speak: our latest, which the client may then refuse.
        r = s.request(3, "initialize", dict(INIT, protocolVersion="1999-01-01"))
        self.assertEqual(r["result"]["protocolVersion"], "2025-11-25")
        for line, code in ((b"not json\n", -32700), (b"[1,2]\n", -32600), (b"42\n", -32700),
                           (b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}\n', -32700),
                           (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\n', -32600),
                           (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}\n', -32600),
                           (b'\xff\xfe{"jsonrpc":"2.0"}\n', -32700),
                           (b'{"jsonrpc":"2.0","id":"a\\u0000","method":"ping"}\n', -32700)):
            s.send(line)
            self.assertError(s.reply(), code)
        self.assertError(s.request(4, "nope/nope"), -32601, 4)
        self.assertError(s.request(5, "tools/call", {"name": "x"}), -32602, 5)
        self.assertError(s.request(6, "tools/call", {"name": "piworkfs_check",
                                                     "arguments": {"paths": [1]}}), -32602, 6)
        self.assertError(s.request(7, "tools/call", {"name": "piworkfs_check",
                                                     "arguments": {"paths": ["a"] * 300}}),
                         -32602, 7)
        self.assertError(s.request(8, "tools/call", {"name": "piworkfs_request_mode",
                                                     "arguments": {"mode": "build",
                                                                   "wait_s": 9999}}), -32602, 8)
        self.assertError(s.request(9, "tools/call", {"name": "piworkfs_status",
                                                     "arguments": []}), -32602, 9)
        self.assertError(s.request(10, "resources/read", {"uri": "file:///etc/passwd"}),
                         -32002, 10)
        # A line of 2 MiB: one error, skipped to its end, and the next line is served.
        s.send(b'{"jsonrpc":"2.0","id":11,"method":"ping","params":{"x":"' +
               b"a" * (2 << 20) + b'"}}\n')
        self.assertError(s.reply(), -32600)
        self.assertEqual(s.request(12, "ping"), {"jsonrpc": "2.0", "id": 12, "result": {}})
        # Deep nesting is a parse error (jansson's own depth limit), not a stack overflow.
        s.send(b"[" * 100000 + b"\n")
        self.assertError(s.reply(), -32700)
        r = s.request(13, "tools/call", {"name": "piworkfs_status", "arguments": {}})
        self.assertIn("Active mode: design", r["result"]["content"][0]["text"])

    def test_a_dead_view_is_an_error_not_a_crash(self):
        v = self.mount("design")
        # Named by $PIWORKFS_SOCKET (as inside `piworkfs run`), from outside the view, so
        # that the view can be unmounted under the server.
        s = self.start(self.cwd, dict(self.env, PIWORKFS_SOCKET=self.socket_path(v)))
        s.request(1, "initialize", INIT)
        r = s.request(2, "tools/call", {"name": "piworkfs_status", "arguments": {}})
        self.assertIn("Active mode: design", r["result"]["content"][0]["text"])
        self.unmount(v)
        r = s.request(3, "tools/call", {"name": "piworkfs_status", "arguments": {}})
        self.assertError(r, -32001, 3)
        self.assertEqual(s.request(4, "ping")["result"], {})

    def test_outside_a_view_tools_say_so(self):
        s = self.start(self.cwd)
        r = s.request(1, "initialize", INIT)
        self.assertNotIn("Active mode", r["result"].get("instructions", ""))
        r = s.request(2, "tools/call", {"name": "piworkfs_check",
                                        "arguments": {"paths": ["x"]}})
        self.assertError(r, -32001, 2)
        self.assertIn("not in a piworkfs view", r["error"]["message"])


class TestSameTextAsPi(harness.MountCase):
    def test_announcement_is_byte_for_byte_the_pi_extensions(self):
        self.same_announcements(self.mount("design"))

    def test_with_a_lane_too(self):
        # `run --only` mounts its view with the lane: both texts name it in every mode.
        v = self.mount("design", args=("--only", "src/a/**", "--only", "docs/design"))
        for ours in self.same_announcements(v)[:2]:
            self.assertIn("Lane of this run (--only): src/a/**, docs/design;", ours)

    def same_announcements(self, v):
        """Compares the hook's announcement with the one the daemon gives Pi, in every
        bundled mode; returns ours."""
        self.trust()
        texts = []
        for mode in ("build", "design", "plan", "discuss", "review", "off"):
            self.run_pw("mode", mode, cwd=v.mp, check=True)
            pi = self.rpc(v, "text.mode", {"store_full": True})["announcement"]
            ev = json.dumps({"hook_event_name": "UserPromptSubmit", "cwd": v.mp})
            p = subprocess.run([harness.PIWORKFS, "hook", "claude"], input=ev, env=self.env,
                               capture_output=True, text=True, timeout=DEADLINE, check=True)
            ours = json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]
            self.assertEqual(ours, pi, mode)
            self.assertTrue(ours.startswith("[piworkfs] Active mode: %s." % mode), ours)
            texts.append(ours)
        return texts


if __name__ == "__main__":
    unittest.main(verbosity=2)
