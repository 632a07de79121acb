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

import json

import scripted_http


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


class AnthropicHandler(scripted_http.Handler):
    def do_GET(self):
        self.send_json({"data": [], "has_more": False})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def post(self, raw, req):
        if "count_tokens" in self.path:
            self.send_json({"input_tokens": len(raw) // 4})
            return
        turn = bool(req.get("tools"))
        index = self.model.record(req, turn)
        answer = self.model.answer(index, req) if turn else "ok."
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
            self.send_json(msg)
            return
        self.start_events()

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


class ScriptedModel(scripted_http.ScriptedServer):
    handler = AnthropicHandler
