def count_vowels(text: str) -> int:
    """Return the number of vowels (a, e, i, o, u, any case) in text."""
    return sum(1 for ch in text if ch in "aeiouAEIOU")
