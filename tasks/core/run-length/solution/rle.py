def encode(text: str) -> str:
    """Run-length encode text: "aaabcc" -> "3a1b2c". Digits in text raise ValueError."""
    if any(ch.isdigit() for ch in text):
        raise ValueError("cannot encode digits")
    parts = []
    i = 0
    while i < len(text):
        j = i
        while j < len(text) and text[j] == text[i]:
            j += 1
        parts.append(f"{j - i}{text[i]}")
        i = j
    return "".join(parts)


def decode(text: str) -> str:
    """Decode run-length text: "3a1b2c" -> "aaabcc". Malformed input raises ValueError."""
    parts = []
    count = ""
    for ch in text:
        if ch in "0123456789":
            count += ch
            continue
        if not count:
            raise ValueError(f"character {ch!r} has no count")
        n = int(count)
        if n == 0:
            raise ValueError("count must be positive")
        parts.append(ch * n)
        count = ""
    if count:
        raise ValueError("trailing count without a character")
    return "".join(parts)
