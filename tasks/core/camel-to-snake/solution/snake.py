def camel_to_snake(name: str) -> str:
    """Convert a camelCase / PascalCase identifier to snake_case."""
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i > 0:
            prev = name[i - 1]
            nxt = name[i + 1] if i + 1 < len(name) else ""
            if prev.islower() or prev.isdigit():
                out.append("_")
            elif prev.isupper() and nxt.islower():
                out.append("_")
        out.append(ch.lower())
    return "".join(out)
