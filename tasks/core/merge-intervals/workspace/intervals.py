def merge_intervals(intervals: list) -> list:
    """Merge overlapping or touching closed intervals; return sorted (start, end) tuples.

    Raises ValueError for items that are not (start, end) pairs with start <= end.
    """
    raise NotImplementedError
