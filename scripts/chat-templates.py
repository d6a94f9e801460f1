#!/usr/bin/env python3
"""The chat templates the embedded model renders, and their golden renderings.

    scripts/chat-templates.py extract MODEL.gguf OUT.jinja
        Write the GGUF's `tokenizer.chat_template` (read from its metadata; no
        library needed) to OUT.jinja.

    scripts/chat-templates.py golden [DIR]
        Render every case of DIR/cases.json (default crates/core/src/model/chat_templates)
        with every DIR/*.jinja template, as Hugging Face transformers renders a
        chat template (jinja2's ImmutableSandboxedEnvironment with trim_blocks,
        lstrip_blocks and loop controls; `tojson` as json.dumps with
        ensure_ascii=False; `raise_exception`), and write the results to
        DIR/golden/<template>/<case>.txt. Needs jinja2 (`pip install jinja2`).

crates/core/src/model/chat_template.rs renders the same cases with minijinja and its tests
must give these files byte for byte. A template that does not read `tools` is
rendered only for the cases without tools: ablate does not give it tools
(model::chat_template describes what it does instead).

The cases are written in ablate's message form; they are turned into the form
chat templates read (transformers, vLLM) here: an assistant's tool calls as
{"type": "function", "function": {"name", "arguments"}} with the arguments a
dict when they are a JSON object, else the text as it is; a tool as
{"type": "function", "function": {"name", "description", "parameters"}}.
"""
import json
import pathlib
import struct
import sys

GGUF_STRING, GGUF_ARRAY = 8, 9
GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gguf_chat_template(path):
    """tokenizer.chat_template out of a GGUF's metadata (GGUF v2/v3 layout)."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            sys.exit(f"{path}: not a GGUF file")
        f.read(4)  # version
        _tensors, kv_count = struct.unpack("<QQ", f.read(16))

        def string():
            (n,) = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8")

        def value(kind):
            if kind == GGUF_STRING:
                return string()
            if kind == GGUF_ARRAY:
                item, n = struct.unpack("<IQ", f.read(12))
                if item in GGUF_SIZES:
                    f.seek(GGUF_SIZES[item] * n, 1)
                    return None
                return [value(item) for _ in range(n)]
            f.seek(GGUF_SIZES[kind], 1)
            return None

        for _ in range(kv_count):
            key = string()
            (kind,) = struct.unpack("<I", f.read(4))
            v = value(kind)
            if key == "tokenizer.chat_template":
                return v
    sys.exit(f"{path}: no tokenizer.chat_template in its metadata")


def environment():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def template_message(m):
    out = {"role": m["role"], "content": m["content"]}
    if m.get("tool_calls"):
        calls = []
        for c in m["tool_calls"]:
            try:
                args = json.loads(c["arguments"])
            except ValueError:
                args = None
            if not isinstance(args, dict):
                args = c["arguments"]
            calls.append({"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": args}})
        out["tool_calls"] = calls
    for key in ("tool_call_id", "name"):
        if key in m:
            out[key] = m[key]
    return out


def template_tool(t):
    return {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]}}


def golden(folder):
    from jinja2 import meta

    env = environment()
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))["cases"]
    for path in sorted(folder.glob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        takes_tools = "tools" in meta.find_undeclared_variables(env.parse(source))
        template = env.from_string(source)
        out_dir = folder / "golden" / path.stem
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, case in cases.items():
            if case["tools"] and not takes_tools:
                continue
            context = {"messages": [template_message(m) for m in case["messages"]], "add_generation_prompt": True}
            if case["tools"]:
                context["tools"] = [template_tool(t) for t in case["tools"]]
            text = template.render(**context, bos_token="<|bos|>", eos_token="<|eos|>")
            (out_dir / f"{name}.txt").write_text(text, encoding="utf-8")
            print(f"{out_dir / name}.txt: {len(text)} characters")


def main(argv):
    if len(argv) == 3 and argv[0] == "extract":
        pathlib.Path(argv[2]).write_text(gguf_chat_template(argv[1]), encoding="utf-8")
    elif argv[:1] == ["golden"] and len(argv) <= 2:
        golden(pathlib.Path(argv[1] if len(argv) == 2 else "crates/core/src/model/chat_templates"))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
