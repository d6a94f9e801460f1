def encode(text: str) -> str:
    """Run-length encode text: "aaabcc" -> "3a1b2c". Digits in text raise ValueError."""
    raise NotImplementedError


def decode(text: str) -> str:
    """Decode run-length text: "3a1b2c" -> "aaabcc". Malformed input raises ValueError."""
    raise NotImplementedError
