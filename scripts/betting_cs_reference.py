#!/usr/bin/env python3
"""The betting confidence sequence written again, in plain Python, from the
formulas of Waudby-Smith & Ramdas (2024), "Estimating means of bounded random
variables by betting", JRSS-B 86(1) (arXiv:2010.09686): the hedged capital
process (theta = 1/2), predictable plug-in bets (eq. 26) truncated at
c/m and c/(1-m) with c = 1/2, the running intersection, and the
without-replacement centring of Section 6.

It shares no code with crates/core/src/sequential/betting.rs: the capital is a plain
product (not a sum of logs) evaluated at each candidate, and the ends are found
by scanning a grid of 20,001 candidates and then halving between the last grid
point inside and the first outside. The expected values of the tests in
crates/core/src/sequential/tests.rs come from here:

    python3 scripts/betting_cs_reference.py
"""
import math

THETA = 0.5
C = 0.5


def bets(xs, alpha, horizon=None):
    """The predictable plug-in bet of each observation: sized for every time
    (t log(1 + t)) or for a sample of `horizon`."""
    out = []
    mu_sum, sq = 0.0, 0.0
    s2 = 0.25
    for t, x in enumerate(xs, start=1):
        n = t * math.log(1 + t) if horizon is None else horizon
        out.append(math.sqrt(2 * math.log(2 / alpha) / (s2 * n)))
        mu_sum += x
        mu = (0.5 + mu_sum) / (t + 1)
        sq += (x - mu) ** 2
        s2 = (0.25 + sq) / (t + 1)
    return out


def capitals(xs, lams, m, n_pop=None):
    """(K+, K-) after all of xs at candidate m; None if m is impossible (WoR)."""
    kp, km = 1.0, 1.0
    seen = 0.0
    for i, (x, lam) in enumerate(zip(xs, lams)):
        mu = m if n_pop is None else (n_pop * m - seen) / (n_pop - i)
        if mu < -1e-12 or mu > 1 + 1e-12:
            return None
        mu = min(max(mu, 0.0), 1.0)
        lp = lam if mu == 0 else min(lam, C / mu)
        lm = lam if mu == 1 else min(lam, C / (1 - mu))
        kp *= 1 + lp * (x - mu)
        km *= 1 - lm * (x - mu)
        seen += x
    return kp, km


def interval(xs, alpha, n_pop=None, horizon=None):
    """The set {m : max(theta K+, (1-theta) K-) < 1/alpha} after all of xs, as [lo, hi]."""
    lams = bets(xs, alpha, horizon)
    if n_pop is None:
        lo_l, hi_l = 0.0, 1.0
    else:
        s = sum(xs)
        lo_l, hi_l = s / n_pop, (s + n_pop - len(xs)) / n_pop

    def up(m):
        k = capitals(xs, lams, m, n_pop)
        return k is None or THETA * k[0] >= 1 / alpha

    def down(m):
        k = capitals(xs, lams, m, n_pop)
        return k is None or (1 - THETA) * k[1] >= 1 / alpha

    grid = [lo_l + (hi_l - lo_l) * i / 20000 for i in range(20001)]

    def halve(inside, a, b):
        """The edge between a (inside) and b (outside)."""
        for _ in range(80):
            mid = (a + b) / 2
            if inside(mid):
                a = mid
            else:
                b = mid
        return (a + b) / 2

    # lower end: the first grid point where the upward bettor has not won
    lo = next((m if i == 0 else halve(up, grid[i - 1], m) for i, m in enumerate(grid) if not up(m)), hi_l)
    # upper end: the last grid point where the downward bettor has not won
    last = len(grid) - 1
    hi = next((grid[i] if i == last else halve(down, grid[i + 1], grid[i]) for i in range(last, -1, -1) if not down(grid[i])), lo_l)
    return lo, hi


def running(xs, alpha, n_pop=None, horizon=None):
    """The running intersection after each observation."""
    lo, hi = 0.0, 1.0
    out = []
    for t in range(1, len(xs) + 1):
        l, h = interval(xs[:t], alpha, n_pop, horizon)
        lo, hi = max(lo, l), min(hi, h)
        out.append((lo, hi))
    return out


def cases():
    # d in [-1, 1] -> x = (d + 1) / 2
    d1 = [0.2, 0.1, 0.3, -0.1, 0.2, 0.4, 0.0, 0.2, 0.1, 0.3, 0.2, 0.1, 0.3, 0.2, 0.0, 0.2, 0.1, 0.3, 0.2, 0.2]
    d2 = [1, 0, 0, 1, 0, -1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 0]
    return {
        "iid_d1_a05": ([(d + 1) / 2 for d in d1], 0.05, None, None),
        "iid_d2_a01": ([(d + 1) / 2 for d in d2], 0.01, None, None),
        "wor_d1_n20_a05": ([(d + 1) / 2 for d in d1], 0.05, 20, None),
        "wor_d2_n30_a05": ([(d + 1) / 2 for d in d2], 0.05, 30, None),
        "horizon40_d1_a05": ([(d + 1) / 2 for d in d1], 0.05, None, 40),
        "horizon25_wor_d2_n30_a025": ([(d + 1) / 2 for d in d2], 0.025, 30, 25),
    }


if __name__ == "__main__":
    import sys
    only = sys.argv[1:]
    for name, (xs, alpha, n, horizon) in cases().items():
        if only and name not in only:
            continue
        r = running(xs, alpha, n, horizon)
        print(name)
        for t in (1, 5, 10, len(xs)):
            lo, hi = r[t - 1]
            print(f"  t={t}: x-interval [{lo:.9f}, {hi:.9f}]  d-interval [{2*lo-1:.9f}, {2*hi-1:.9f}]")
