def camel_to_snake(name: str) -> str:
    """Convert a camelCase / PascalCase identifier to snake_case."""
    raise NotImplementedError
