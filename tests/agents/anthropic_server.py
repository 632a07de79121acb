# SPDX-License-Identifier: MIT
"""A scripted model speaking Anthropic's Messages API on 127.0.0.1 (Python 3 standard library
only), for driving a real Claude Code in tests; the pattern of tests/pi/model_server.py.

Every POST body is recorded in `all_requests`. The agent's own turns (requests that offer
tools) are also in `requests` and are answered by the next step of the script: a function
of (index, request) or a value, giving a string (the assistant's text) or a list of tool
calls [(name, {input})]. Other requests (a title, a quota probe) get a short text. When the
script is exhausted the model answers "done." so a run always ends. Answers are streamed as
server-sent events when the request asks (message_start, content_block_*, message_delta,
message_stop), else one JSON message.

Nothing here reaches beyond the loopback interface.
"""

import http.server
import json
import threading


def blocks_text(content):
    """The text of a message's content (a string, or a list of blocks: text and the text
    parts of tool results), joined by newlines."""
    if isinstance(content, str):
        return content
    out = []
    for b in content or []:
        if b.get("type") == "text":
            out.append(b.get("text", ""))
        elif b.get("type") == "tool_result":
            out.append(blocks_text(b.get("content")))
    return "\n".join(out)


def system_text(req):
    s = req.get("system")
    return blocks_text(s) if isinstance(s, list) else (s or "")


def tool_results(req):
    """{tool_use_id: (text, is_error)} of every tool result in the request."""
    out = {}
    for m in req.get("messages", []):
        if isinstance(m.get("content"), list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    out[b.get("tool_use_id")] = (blocks_text(b.get("content")),
                                                 bool(b.get("is_error")))
    return out


def all_text(req):
    """Everything the model reads in one request: system, messages, tool descriptions."""
    parts = [system_text(req)]
    for m in req.get("messages", []):
        parts.append(blocks_text(m.get("content")))
    return "\n".join(parts)


class ScriptedModel:
    def __init__(self, steps):
        self.steps = list(steps)
        self.requests = []
        self.all_requests = []
        self.errors = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self._json({"data": [], "has_more": False})

            def do_HEAD(self):
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _json(self, obj):
                body = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                try:
                    req = json.loads(raw)
                except ValueError as e:
                    model._error("request is not JSON: %s" % e)
                    self.send_error(400)
                    return
                if "count_tokens" in self.path:
                    self._json({"input_tokens": len(raw) // 4})
                    return
                with model.lock:
                    model.all_requests.append(req)
                    main = bool(req.get("tools"))
                    index = len(model.requests)
                    if main:
                        model.requests.append(req)
                    model.changed.notify_all()
                answer = "ok."
                if main:
                    try:
                        answer = model._answer(index, req)
                    except Exception as e:  # the test reads model.errors
                        model._error("step %d raised %r" % (index, e))
                        answer = "the scripted step failed: %r" % (e,)
                self._reply(index, answer, bool(req.get("stream")), req.get("model", "m"))

            def _reply(self, index, answer, stream, model_name):
                blocks = []
                if isinstance(answer, str):
                    blocks.append({"type": "text", "text": answer})
                    stop = "end_turn"
                else:
                    for i, (name, args) in enumerate(answer):
                        blocks.append({"type": "tool_use", "id": "toolu_%d_%d" % (index, i),
                                       "name": name, "input": args})
                    stop = "tool_use"
                msg = {"id": "msg_%d" % index, "type": "message", "role": "assistant",
                       "model": model_name, "content": blocks, "stop_reason": stop,
                       "stop_sequence": None,
                       "usage": {"input_tokens": 10, "output_tokens": 5}}
                if not stream:
                    self._json(msg)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()

                def event(name, obj):
                    self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(obj)))
                                     .encode())

                start = dict(msg, content=[], stop_reason=None)
                event("message_start", {"type": "message_start", "message": start})
                for i, b in enumerate(blocks):
                    if b["type"] == "text":
                        event("content_block_start", {"type": "content_block_start",
                                                      "index": i, "content_block":
                                                      {"type": "text", "text": ""}})
                        event("content_block_delta", {"type": "content_block_delta",
                                                      "index": i, "delta":
                                                      {"type": "text_delta",
                                                       "text": b["text"]}})
                    else:
                        event("content_block_start", {"type": "content_block_start",
                                                      "index": i, "content_block":
                                                      {"type": "tool_use", "id": b["id"],
                                                       "name": b["name"], "input": {}}})
                        event("content_block_delta", {"type": "content_block_delta",
                                                      "index": i, "delta":
                                                      {"type": "input_json_delta",
                                                       "partial_json":
                                                       json.dumps(b["input"])}})
                    event("content_block_stop", {"type": "content_block_stop", "index": i})
                event("message_delta", {"type": "message_delta", "delta":
                                        {"stop_reason": stop, "stop_sequence": None},
                                        "usage": {"output_tokens": 5}})
                event("message_stop", {"type": "message_stop"})
                self.wfile.flush()
                self.close_connection = True

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base_url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _error(self, msg):
        with self.lock:
            self.errors.append(msg)

    def _answer(self, index, req):
        step = self.steps[index] if index < len(self.steps) else None
        if step is None:
            return "done."
        if callable(step):
            return step(index, req)
        return step

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
