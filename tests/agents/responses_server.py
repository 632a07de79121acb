# SPDX-License-Identifier: MIT
"""A scripted model speaking OpenAI's Responses API on 127.0.0.1 (Python 3 standard library
only), for driving a real Codex CLI in tests; the pattern of tests/pi/model_server.py.

Every POST body is recorded in `all_requests`; the agent's turns (requests that offer tools)
also in `requests`, answered by the next step of the script: a string (the assistant's text)
or a list of function calls [(name, {arguments})]. Answers are streamed as server-sent
events (response.created, response.output_item.added/done, response.completed).

Nothing here reaches beyond the loopback interface.
"""

import json

import scripted_http


def input_text(req):
    """Everything the model reads in one request: instructions and every input item's text
    (messages, function call outputs)."""
    parts = [req.get("instructions") or ""]
    for item in req.get("input") or []:
        c = item.get("content")
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts.extend(x.get("text", "") for x in c if isinstance(x, dict))
        if item.get("type") == "function_call_output":
            out = item.get("output")
            parts.append(out if isinstance(out, str) else json.dumps(out))
    return "\n".join(parts)


def call_outputs(req):
    """{call_id: output text} of the function call outputs in the request."""
    out = {}
    for item in req.get("input") or []:
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            o = item.get("output")
            if isinstance(o, list):
                o = "\n".join(x.get("text", "") for x in o if isinstance(x, dict))
            elif not isinstance(o, str):
                o = json.dumps(o)
            out[item.get("call_id")] = o
    return out


class ResponsesHandler(scripted_http.Handler):
    def do_GET(self):
        self.send_json({"object": "list", "data": [
            {"id": "scripted", "object": "model", "owned_by": "test"}], "models": []})

    def post(self, _raw, req):
        turn = bool(req.get("tools"))
        index = self.model.record(req, turn)
        answer = self.model.answer(index, req) if turn else "ok."
        self._stream(index, answer, req.get("model", "scripted"))

    def _stream(self, index, answer, model_name):
        items = []
        if isinstance(answer, str):
            items.append({"type": "message", "id": "msg_%d" % index, "role": "assistant",
                          "status": "completed",
                          "content": [{"type": "output_text", "text": answer,
                                       "annotations": []}]})
        else:
            for i, (name, args) in enumerate(answer):
                # "NAMESPACE/NAME": a tool of a namespace (Codex's MCP servers).
                ns, _, short = name.rpartition("/")
                it = {"type": "function_call", "id": "fc_%d_%d" % (index, i),
                      "call_id": "call_%d_%d" % (index, i), "name": short,
                      "arguments": json.dumps(args), "status": "completed"}
                if ns:
                    it["namespace"] = ns
                items.append(it)
        resp = {"id": "resp_%d" % index, "object": "response", "created_at": 0,
                "status": "in_progress", "model": model_name, "output": []}
        self.start_events()
        seq = [0]

        def event(name, obj):
            obj = dict(obj, type=name, sequence_number=seq[0])
            seq[0] += 1
            self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(obj)))
                             .encode())

        event("response.created", {"response": resp})
        for i, it in enumerate(items):
            event("response.output_item.added", {"output_index": i, "item": it})
            event("response.output_item.done", {"output_index": i, "item": it})
        done = dict(resp, status="completed", output=items,
                    usage={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                           "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens_details": {"reasoning_tokens": 0}})
        event("response.completed", {"response": done})
        self.wfile.flush()


class ScriptedModel(scripted_http.ScriptedServer):
    handler = ResponsesHandler
    url_suffix = "/v1"
