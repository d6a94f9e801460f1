def parse_ini(text: str) -> dict:
    """Parse INI text into {section: {key: value}}.

    Raises ValueError (message containing "line N") for malformed input.
    """
    raise NotImplementedError
