# SPDX-License-Identifier: MIT
"""A scripted model: an OpenAI-compatible chat-completions server on 127.0.0.1 (Python 3
standard library only) for driving a real Pi process in tests (and opencode in tests/agents).

It listens on an ephemeral port, records every request body (parsed JSON) in `requests`,
and answers each POST to /v1/chat/completions with the next step of its script, streamed
as server-sent events the way OpenAI's API does (one `chat.completion.chunk` per delta,
then `data: [DONE]`). A step is a function of the request number and the request body that
returns either a string (the assistant's text) or a list of tool calls
[(name, {arguments})]; it may also act (switch the view's mode) before it answers. When the
script is exhausted the model answers "done." so a run always ends. The server, the
recording and the script are tests/lib/scripted_http.py's, as for the agents' other APIs.

Nothing here reaches beyond the loopback interface.
"""

import json

import scripted_http  # tests/lib, on PYTHONPATH

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


class ChatHandler(scripted_http.Handler):
    def do_GET(self):
        # Some clients probe /v1/models; answer with our one model.
        self.send_json({"object": "list", "data": [
            {"id": "scripted", "object": "model", "owned_by": "test"}]})

    def do_POST(self):
        got = self.read_json()
        if not got:
            return
        _, req = got
        index = self.model.record(req, True)  # every request is a turn
        answer = self.model.answer(index, req)
        cid = "chatcmpl-%d" % index
        finish = "stop" if isinstance(answer, str) else "tool_calls"
        if req.get("stream", False):
            self._stream(index, cid, answer, finish)
        else:
            self._plain(cid, answer, finish)

    def _stream(self, index, cid, answer, finish):
        chunks = []
        if isinstance(answer, str):
            chunks.append({"role": "assistant", "content": answer})
        else:
            chunks.append({"role": "assistant", "content": ""})
            for i, (name, args) in enumerate(answer):
                chunks.append({"tool_calls": [{
                    "index": i, "id": "call_%d_%d" % (index, i), "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)}}]})
        self.start_events()

        def event(obj):
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

        base = {"id": cid, "object": "chat.completion.chunk", "created": 0,
                "model": "scripted"}
        for delta in chunks:
            event(dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]))
        event(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
        event(dict(base, choices=[], usage=USAGE))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _plain(self, cid, answer, finish):
        msg = {"role": "assistant", "content": answer if isinstance(answer, str) else None}
        if not isinstance(answer, str):
            msg["tool_calls"] = [{
                "id": "call_%s_%d" % (cid, i), "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}
                for i, (name, args) in enumerate(answer)]
        self.send_json({"id": cid, "object": "chat.completion", "created": 0,
                        "model": "scripted",
                        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                        "usage": USAGE})


class ScriptedModel(scripted_http.ScriptedServer):
    handler = ChatHandler
    url_suffix = "/v1"


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
