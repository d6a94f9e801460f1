def parse_ini(text: str) -> dict:
    """Parse INI text into {section: {key: value}}.

    Raises ValueError (message containing "line N") for malformed input.
    """
    result = {}
    current = None
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            name = line[1:-1].strip()
            if not name:
                raise ValueError(f"line {number}: empty section name")
            if name in result:
                raise ValueError(f"line {number}: duplicate section {name!r}")
            result[name] = {}
            current = result[name]
            continue
        if "=" not in line:
            raise ValueError(f"line {number}: missing '='")
        key, _, value = line.partition("=")
        key = key.strip().lower()
        if not key:
            raise ValueError(f"line {number}: empty key")
        if current is None:
            raise ValueError(f"line {number}: key outside of a section")
        current[key] = value.strip()
    return result
