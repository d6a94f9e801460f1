def top_words(text: str, k: int) -> list:
    """Return the k most frequent lowercase words of text as (word, count) tuples.

    Sorted by count descending, ties alphabetically. Negative k raises ValueError.
    """
    raise NotImplementedError
