def parse_duration(text: str) -> int:
    """Parse a duration such as "1h 30m" or "1.5h" into whole seconds (rounded down).

    Units d, h, m, s (case-insensitive), each at most once, in that order.
    Raises ValueError for invalid input.
    """
    raise NotImplementedError
