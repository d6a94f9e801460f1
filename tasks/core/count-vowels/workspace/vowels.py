def count_vowels(text: str) -> int:
    """Return the number of vowels (a, e, i, o, u, any case) in text."""
    raise NotImplementedError
