# SPDX-License-Identifier: MIT
"""A scripted model: an OpenAI-compatible chat-completions server on 127.0.0.1 (Python 3
standard library only) for driving a real Pi process in tests.

It listens on an ephemeral port, records every request body (parsed JSON) in `requests`,
and answers each POST to /v1/chat/completions with the next step of its script, streamed
as server-sent events the way OpenAI's API does (one `chat.completion.chunk` per delta,
then `data: [DONE]`). A step is a function of the request number and the request body that
returns either a string (the assistant's text) or a list of tool calls
[(name, {arguments})]; it may also act (switch the view's mode) before it answers. When the
script is exhausted the model answers "done." so a run always ends.

Nothing here reaches beyond the loopback interface.
"""

import http.server
import json
import threading


class ScriptedModel:
    def __init__(self, steps):
        self.steps = list(steps)
        self.requests = []
        self.errors = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                # Some clients probe /v1/models; answer with our one model.
                body = json.dumps({"object": "list", "data": [
                    {"id": "scripted", "object": "model", "owned_by": "test"}]}).encode()
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
                with model.lock:
                    index = len(model.requests)
                    model.requests.append(req)
                    model.changed.notify_all()
                try:
                    answer = model._answer(index, req)
                except Exception as e:  # the test reads model.errors
                    model._error("step %d raised %r" % (index, e))
                    answer = "the scripted step failed: %r" % (e,)
                self._stream(index, answer, bool(req.get("stream", False)))

            def _stream(self, index, answer, stream):
                chunks = []
                cid = "chatcmpl-%d" % index
                if isinstance(answer, str):
                    chunks.append({"role": "assistant", "content": answer})
                    finish = "stop"
                else:
                    chunks.append({"role": "assistant", "content": ""})
                    for i, (name, args) in enumerate(answer):
                        chunks.append({"tool_calls": [{
                            "index": i, "id": "call_%d_%d" % (index, i), "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}]})
                    finish = "tool_calls"
                if not stream:
                    self._plain(cid, answer, finish)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()

                def event(obj):
                    self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

                base = {"id": cid, "object": "chat.completion.chunk", "created": 0,
                        "model": "scripted"}
                for delta in chunks:
                    event(dict(base, choices=[{"index": 0, "delta": delta,
                                               "finish_reason": None}]))
                event(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
                event(dict(base, choices=[], usage={"prompt_tokens": 10,
                                                    "completion_tokens": 5,
                                                    "total_tokens": 15}))
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _plain(self, cid, answer, finish):
                msg = {"role": "assistant", "content": answer if isinstance(answer, str)
                       else None}
                if not isinstance(answer, str):
                    msg["tool_calls"] = [{
                        "id": "call_%s_%d" % (cid, i), "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)}}
                        for i, (name, args) in enumerate(answer)]
                body = json.dumps({"id": cid, "object": "chat.completion", "created": 0,
                                   "model": "scripted", "choices": [
                                       {"index": 0, "message": msg, "finish_reason": finish}],
                                   "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                             "total_tokens": 15}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base_url = "http://127.0.0.1:%d/v1" % self.port
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
        self.thread.join(10)


# --- reading the recorded requests --------------------------------------------------------

def text_of(content):
    """The text of an OpenAI message content (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def system_text(req):
    """Every system (or developer) message of a request, joined."""
    return "\n".join(text_of(m.get("content")) for m in req.get("messages", [])
                     if m.get("role") in ("system", "developer"))


def tool_results(req):
    """{tool_call_id: text} of the tool messages in a request."""
    return {m.get("tool_call_id"): text_of(m.get("content"))
            for m in req.get("messages", []) if m.get("role") == "tool"}


def non_system(req):
    return [m for m in req.get("messages", []) if m.get("role") not in ("system", "developer")]
