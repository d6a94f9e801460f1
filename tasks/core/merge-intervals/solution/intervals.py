def merge_intervals(intervals: list) -> list:
    """Merge overlapping or touching closed intervals; return sorted (start, end) tuples.

    Raises ValueError for items that are not (start, end) pairs with start <= end.
    """
    pairs = []
    for item in intervals:
        if len(item) != 2:
            raise ValueError(f"interval must have two elements: {item!r}")
        start, end = item
        if start > end:
            raise ValueError(f"interval start is greater than end: {item!r}")
        pairs.append((start, end))
    pairs.sort()
    merged = []
    for start, end in pairs:
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
