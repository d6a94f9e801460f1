#!/usr/bin/env python3
"""A small coding agent with switchable components, standard library only.

It is an example of an external harness for ablate (docs/external-harness.md):
it reads the task and its settings from the environment ablate sets, talks to
the model through the OpenAI-compatible API at $OPENAI_BASE_URL (ablate's
gateway during a trial), edits the task's files in the working directory and
exits. Run by hand against any OpenAI-compatible server, it works the same.

Components (ABLATE_COMPONENT_<NAME>, "true" or "false"):
  FEEDBACK    after each edit, run the tests and send the failures back
  LOOP_GUARD  do not re-run code already tried; say so instead
  TOOLS       offer read_file and run_tests as tools instead of pasting files
  PROGRESS    every 4 calls, restart the conversation with a progress note
"""
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request


def flag(name):
    return os.environ.get("ABLATE_COMPONENT_" + name, "false").lower() == "true"


FEEDBACK, LOOP_GUARD, TOOLS, PROGRESS = flag("FEEDBACK"), flag("LOOP_GUARD"), flag("TOOLS"), flag("PROGRESS")
BASE = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1").rstrip("/")
KEY = os.environ.get("OPENAI_API_KEY", "none")
MODEL = os.environ.get("ABLATE_MODEL", "default")
PROMPT = os.environ.get("ABLATE_TASK_PROMPT", "")
EDITABLE = [f for f in os.environ.get("ABLATE_EDITABLE", "").split("\n") if f]
TEST_COMMAND = json.loads(os.environ.get("ABLATE_TEST_COMMAND", '["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."]'))
MAX_CALLS = int(os.environ.get("ABLATE_MAX_STEPS", "8"))
SESSION = 4

SYSTEM = (
    "You are a careful Python programmer. Reply with the complete new content of the file in one "
    "fenced code block whose info string names the file, like ```python {name}, then the word DONE."
)
TOOL_SPECS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file of the workspace.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "run_tests", "description": "Run the tests; get the failures.",
     "parameters": {"type": "object", "properties": {}}}},
]


class BudgetOver(Exception):
    pass


def chat(messages):
    body = {"model": MODEL, "messages": messages}
    if TOOLS:
        body["tools"] = TOOL_SPECS
    req = urllib.request.Request(BASE + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            return json.load(resp)["choices"][0]["message"]
    except urllib.error.HTTPError as e:
        if e.code == 429:
            raise BudgetOver(e.read().decode(errors="replace"))
        raise


def run_tests():
    try:
        out = subprocess.run(TEST_COMMAND, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return False, "the tests timed out"
    text = out.stdout + out.stderr
    return out.returncode == 0, text[-1500:]


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as e:
        return "cannot read %s: %s" % (path, e)


def first_message(note):
    text = PROMPT + "\n\nEditable file(s): " + ", ".join(EDITABLE)
    if TOOLS:
        text += "\nUse read_file to read files and run_tests to run the tests."
    else:
        for name in EDITABLE:
            text += "\n\n--- %s ---\n```python\n%s\n```" % (name, read(name))
    if note:
        text += "\n\n" + note
    return [{"role": "system", "content": SYSTEM.format(name=EDITABLE[0] if EDITABLE else "file.py")},
            {"role": "user", "content": text}]


def extract(reply):
    """The last fenced block and the editable file it names (or the only one)."""
    blocks = re.findall(r"```([^\n`]*)\n(.*?)```", reply or "", re.S)
    if not blocks:
        return None, None
    info, code = blocks[-1]
    for name in EDITABLE:
        if name in info:
            return name, code
    return (EDITABLE[0], code) if len(EDITABLE) == 1 else (None, None)


def main():
    tried = {}      # code -> the test summary it got
    progress = []   # one line per attempt, for the progress note
    messages = first_message("")
    for call in range(1, MAX_CALLS + 1):
        if PROGRESS and call > 1 and (call - 1) % SESSION == 0:
            messages = first_message("Progress so far:\n" + "\n".join(progress[-8:]))
        try:
            msg = chat(messages)
        except BudgetOver as e:
            print("budget over:", e, file=sys.stderr)
            return 0
        messages.append({k: v for k, v in msg.items() if k in ("role", "content", "tool_calls")})
        if msg.get("tool_calls"):
            for tc in msg["tool_calls"]:
                fn = tc["function"]
                args = json.loads(fn.get("arguments") or "{}")
                if fn["name"] == "read_file":
                    result = read(args.get("path", ""))
                else:
                    ok, result = run_tests()
                    result = ("all tests pass\n" if ok else "tests fail\n") + result
                messages.append({"role": "tool", "tool_call_id": tc["id"], "content": result})
            continue
        name, code = extract(msg.get("content"))
        if code is None:
            if "DONE" in (msg.get("content") or ""):
                return 0
            messages.append({"role": "user", "content": "Send the whole file in a fenced code block naming it."})
            continue
        if LOOP_GUARD and code in tried:
            messages.append({"role": "user", "content": "You already sent exactly this code; it got: %s\nChange something." % tried[code][:500]})
            continue
        with open(name, "w", encoding="utf-8") as f:
            f.write(code)
        if not FEEDBACK:
            return 0
        ok, summary = run_tests()
        tried[code] = summary
        progress.append("attempt %d: %s" % (call, "all tests pass" if ok else summary.strip().splitlines()[-1:]))
        if ok:
            return 0
        messages.append({"role": "user", "content": "The tests fail:\n" + summary + "\nFix the file."})
    return 0


if __name__ == "__main__":
    sys.exit(main())
