# SPDX-License-Identifier: MIT
"""A scripted model speaking Gemini's API (generativelanguage v1beta, as the @google/genai SDK
calls it) on 127.0.0.1 (Python 3 standard library only), for driving a real Gemini CLI in
tests; the pattern of responses_server.py.

Gemini CLI asks `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse` for the agent's
turns (requests that offer tools) and `:generateContent` for its side questions (a JSON
answer to a schema: routing, next speaker). Every POST body is recorded in `all_requests`
(with its path in `paths`); the agent's turns also in `requests`, answered by the next
step of the script: a string (the model's text) or a list of function calls
[(name, {arguments})]. A side question gets a JSON object that ends the turn.

Nothing here reaches beyond the loopback interface.
"""

import json

import scripted_http


def parts_of(req):
    """Every part of every content in the request, in order."""
    for c in req.get("contents") or []:
        for p in c.get("parts") or []:
            if isinstance(p, dict):
                yield p


def all_text(req):
    """Everything the model reads in one request as text: the system instruction, every
    text part, every function response, and the function declarations (names,
    descriptions, schemas)."""
    out = [system_text(req)]
    for p in parts_of(req):
        if "text" in p:
            out.append(p["text"])
        if "functionResponse" in p:
            out.append(json.dumps(p["functionResponse"]))
    out.append(json.dumps(req.get("tools") or []))
    return "\n".join(out)


def system_text(req):
    si = req.get("systemInstruction") or {}
    return "\n".join(p.get("text", "") for p in si.get("parts") or [] if isinstance(p, dict))


def declarations(req):
    """{name: declaration} of the functions the request offers."""
    out = {}
    for t in req.get("tools") or []:
        for f in t.get("functionDeclarations") or []:
            out[f["name"]] = f
    return out


def response_text(resp):
    """A functionResponse's `response` as the text the model reads."""
    if isinstance(resp, dict):
        for k in ("output", "error"):
            if isinstance(resp.get(k), str):
                return resp[k]
    return json.dumps(resp)


def function_responses(req):
    """{call id (or the function's name without one): response text} of the function
    responses in the request."""
    out = {}
    for p in parts_of(req):
        fr = p.get("functionResponse")
        if isinstance(fr, dict):
            out[fr.get("id") or fr.get("name")] = response_text(fr.get("response"))
    return out


# A side question's answer: the fields Gemini CLI's JSON questions read, each ending the
# turn (the next speaker is the user; the task is simple).
SIDE_ANSWER = {"next_speaker": "user", "reasoning": "the scripted turn is over",
               "complexity_score": 10, "complexity_reasoning": "scripted"}


class GeminiHandler(scripted_http.Handler):
    def do_GET(self):
        self.model.error("unexpected GET %s" % self.path)
        self.send_error(404)

    def post(self, raw, req):
        if ":countTokens" in self.path:
            self.send_json({"totalTokens": max(1, len(raw) // 4)})
            return
        stream = ":streamGenerateContent" in self.path
        turn = bool(req.get("tools")) and stream
        index = self.model.record(req, turn, self.path)
        if turn:
            parts = self._parts(index, self.model.answer(index, req))
        else:
            parts = [{"text": json.dumps(SIDE_ANSWER)}]
        resp = {"candidates": [{"content": {"role": "model", "parts": parts},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": max(1, len(raw) // 4),
                                  "candidatesTokenCount": 5,
                                  "totalTokenCount": max(1, len(raw) // 4) + 5},
                "modelVersion": req.get("model", "scripted"),
                "responseId": "resp_%d" % index}
        if stream:
            self._sse(resp)
        else:
            self.send_json(resp)

    def _parts(self, index, answer):
        if isinstance(answer, str):
            return [{"text": answer}]
        return [{"functionCall": {"id": "call_%d_%d" % (index, i), "name": name,
                                  "args": args}}
                for i, (name, args) in enumerate(answer)]

    def _sse(self, obj):
        self.start_events()
        self.wfile.write(("data: %s\r\n\r\n" % json.dumps(obj)).encode())
        self.wfile.flush()


class ScriptedModel(scripted_http.ScriptedServer):
    handler = GeminiHandler

    def __init__(self, steps):
        super().__init__(steps)
        self.paths = []  # the path of every POST, paths[i] that of all_requests[i]

    def record(self, req, turn, path=""):
        with self.lock:
            self.paths.append(path)
            return super().record(req, turn)
