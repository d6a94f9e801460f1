import re
from collections import Counter


def top_words(text: str, k: int) -> list:
    """Return the k most frequent lowercase words of text as (word, count) tuples.

    Sorted by count descending, ties alphabetically. Negative k raises ValueError.
    """
    if k < 0:
        raise ValueError("k must not be negative")
    counts = Counter(word.lower() for word in re.findall(r"[A-Za-z]+", text))
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ordered[:k]
