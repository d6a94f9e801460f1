import re

IDENT = re.compile(r"[0-9A-Za-z-]+")
NUMBER = re.compile(r"0|[1-9][0-9]*")


def _parse(version):
    if not isinstance(version, str):
        raise ValueError("version must be a string")
    core, plus, build = version.partition("+")
    if plus and (not build or not all(IDENT.fullmatch(p) for p in build.split("."))):
        raise ValueError(f"invalid build metadata: {version!r}")
    core, dash, pre = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3 or not all(NUMBER.fullmatch(p) for p in parts):
        raise ValueError(f"invalid version core: {version!r}")
    prerelease = []
    if dash:
        if not pre:
            raise ValueError(f"empty pre-release: {version!r}")
        for ident in pre.split("."):
            if not IDENT.fullmatch(ident):
                raise ValueError(f"invalid pre-release identifier: {version!r}")
            if ident.isdigit():
                if not NUMBER.fullmatch(ident):
                    raise ValueError(f"leading zero in pre-release: {version!r}")
                prerelease.append((0, int(ident), ""))
            else:
                prerelease.append((1, 0, ident))
    return tuple(int(p) for p in parts), prerelease


def _cmp(x, y):
    return (x > y) - (x < y)


def compare(a: str, b: str) -> int:
    """Compare two SemVer 2.0.0 version strings; return -1, 0 or 1.

    Build metadata is ignored. Invalid versions raise ValueError.
    """
    core_a, pre_a = _parse(a)
    core_b, pre_b = _parse(b)
    if core_a != core_b:
        return _cmp(core_a, core_b)
    if not pre_a or not pre_b:
        # the one without a pre-release is higher
        return _cmp(not pre_a, not pre_b)
    for x, y in zip(pre_a, pre_b):
        if x != y:
            return _cmp(x, y)
    return _cmp(len(pre_a), len(pre_b))
