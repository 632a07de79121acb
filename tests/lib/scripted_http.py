# SPDX-License-Identifier: MIT
"""What every scripted model server of the tests shares (Python 3 standard library only): an
HTTP server on 127.0.0.1 (a port the OS picks) that records every request and answers the
agent's turns from a script. Each API's module (tests/agents: anthropic_server.py,
responses_server.py, gemini_server.py; tests/pi: model_server.py, OpenAI's chat completions)
subclasses ScriptedServer and Handler with the shapes of its own API. In tests/lib, so both
folders find it through PYTHONPATH.

A script is a list of steps; step I answers the I-th agent turn. A step is a value or a
function of (index, request) giving one: a string (the model's text) or a list of tool
calls [(name, {arguments})]. When the script is exhausted the model answers "done.", so a
run always ends; a step that raises is recorded in `errors` (the tests assert it empty).

Nothing here reaches beyond the loopback interface.
"""

import http.server
import json
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    """The plumbing of one API's handler; `model` is the ScriptedServer it serves."""

    protocol_version = "HTTP/1.1"
    model = None

    def log_message(self, *args):
        pass

    def do_POST(self):
        """Hands a JSON body and its raw bytes to post(); anything else gets a 400."""
        got = self.read_json()
        if got:
            self.post(*got)

    def post(self, raw, req):
        """Answers the POST whose body is RAW, REQ parsed: the API's own."""
        self.send_error(404)

    def read_json(self):
        """The POST body as (raw bytes, JSON), or None after answering 400."""
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        try:
            return raw, json.loads(raw)
        except ValueError as e:
            self.model.error("request is not JSON: %s" % e)
            self.send_error(400)
            return None

    def send_json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def start_events(self):
        """Starts a server-sent event stream; the connection closes after it."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True


class ScriptedServer:
    handler = Handler
    url_suffix = ""  # appended to http://127.0.0.1:PORT for base_url

    def __init__(self, steps):
        self.steps = list(steps)
        self.requests = []      # the agent's turns, in order
        self.all_requests = []  # every POST body
        self.errors = []
        self.lock = threading.RLock()  # a subclass's record may hold it around ours
        handler = type("BoundHandler", (self.handler,), {"model": self})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base_url = "http://127.0.0.1:%d%s" % (self.port, self.url_suffix)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def record(self, req, turn):
        """Records REQ (an agent's turn when TURN); returns the turn's index."""
        with self.lock:
            self.all_requests.append(req)
            index = len(self.requests)
            if turn:
                self.requests.append(req)
            return index

    def answer(self, index, req):
        """The script's answer to turn INDEX; a step that raises answers with its error."""
        step = self.steps[index] if index < len(self.steps) else None
        try:
            answer = step(index, req) if callable(step) else step
            return "done." if answer is None else answer
        except Exception as e:  # the test reads model.errors
            self.error("step %d raised %r" % (index, e))
            return "the scripted step failed: %r" % (e,)

    def error(self, msg):
        with self.lock:
            self.errors.append(msg)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
