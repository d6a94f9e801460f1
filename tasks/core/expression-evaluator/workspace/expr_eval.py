def evaluate(expression: str) -> int:
    """Evaluate an integer arithmetic expression with + - * / (floor division),
    parentheses and unary minus. Malformed input raises ValueError.
    """
    raise NotImplementedError
