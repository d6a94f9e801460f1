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

The order-free equivalence test
-------------------------------
`equivalent(d, alpha, margin, seed, P=100)` decides "equivalent within
+-margin" from per-task differences d in [-1, 1] without depending on the
order in which the tasks happen to be listed. The differences are clipped to
[-1, 1], mapped to x = (d + 1) / 2 and sorted ascending; the two nulls are
m_lo = (1 - margin) / 2 ("worse by the margin") and m_hi = (1 + margin) / 2
("better by the margin"). P orders are drawn, each a Fisher-Yates shuffle of
the sorted list (i from n-1 down to 1, k = high 64 bits of the 128-bit product
next_u64() * (i + 1)) driven by one SplitMix64 stream seeded with
seed XOR 0x0E9A1E0C0DE50001. In each order the plug-in bets are those of
`bets` at level 2 alpha sized for Horizon(n), and the FINAL capitals (not a
running maximum) are

    K+_j = prod (1 + min(lam_i, 0.5 / m_lo) (y_i - m_lo))
    K-_j = prod (1 - min(lam_i, 0.5 / (1 - m_hi)) (y_i - m_hi))

i.e. those of `capitals` with no population. Each K is an e-value under its
null whatever the order, so their averages over the orders, E+ and E-, are
e-values too; "equivalent" iff E+ >= 1/alpha and E- >= 1/alpha (two one-sided
tests at alpha each, an intersection-union test at alpha).

The old rule it replaces (`old_equivalent`) used the differences in the given
order, one sequence, and rejected a margin once theta K (theta = 1/2) reached
1/(2 alpha) at any prefix; the same data listed in another order could get the
other verdict, which the last block of the output shows.
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


MASK64 = (1 << 64) - 1


class SplitMix64:
    """SplitMix64 (Steele, Lea & Flood 2014), all arithmetic mod 2^64."""

    def __init__(self, state):
        self.state = state & MASK64

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


EQUIV_SEED_XOR = 0x0E9A_1E0C_0DE5_0001


def equivalence_evalues(d, alpha, margin, seed, p=100):
    """(E+, E-): the final capitals against m_lo (upward) and m_hi (downward),
    averaged over p seeded shuffles of the sorted observations."""
    n = len(d)
    assert n >= 2
    x = sorted((min(max(di, -1.0), 1.0) + 1) / 2 for di in d)
    m_lo, m_hi = (1 - margin) / 2, (1 + margin) / 2
    rng = SplitMix64(seed ^ EQUIV_SEED_XOR)
    sum_p, sum_m = 0.0, 0.0
    for _ in range(p):
        y = list(x)
        for i in range(n - 1, 0, -1):
            k = (rng.next_u64() * (i + 1)) >> 64
            y[i], y[k] = y[k], y[i]
        lams = bets(y, 2 * alpha, horizon=n)
        sum_p += capitals(y, lams, m_lo)[0]
        sum_m += capitals(y, lams, m_hi)[1]
    return sum_p / p, sum_m / p


def equivalent(d, alpha, margin, seed, p=100):
    """The order-free rule: both averaged e-values reach 1/alpha."""
    e_plus, e_minus = equivalence_evalues(d, alpha, margin, seed, p)
    return e_plus >= 1 / alpha and e_minus >= 1 / alpha


def old_equivalent(d, alpha, margin):
    """The old rule: d in the given order, one sequence, bets at 2 alpha sized
    for Horizon(n); a margin is rejected once theta K reaches 1/(2 alpha) at
    any prefix; equivalent iff both margins are rejected."""
    n = len(d)
    xs = [(min(max(di, -1.0), 1.0) + 1) / 2 for di in d]
    m_lo, m_hi = (1 - margin) / 2, (1 + margin) / 2
    lams = bets(xs, 2 * alpha, horizon=n)
    bar = 1 / (2 * alpha)
    kp, km = 1.0, 1.0
    rej_lo = rej_hi = False
    for x, lam in zip(xs, lams):
        kp *= 1 + (lam if m_lo == 0 else min(lam, C / m_lo)) * (x - m_lo)
        km *= 1 - (lam if m_hi == 1 else min(lam, C / (1 - m_hi))) * (x - m_hi)
        rej_lo = rej_lo or THETA * kp >= bar
        rej_hi = rej_hi or (1 - THETA) * km >= bar
        if rej_lo and rej_hi:
            return True
    return False


def cycled(pattern, n):
    return [pattern[i % len(pattern)] for i in range(n)]


def no_effect_tasks(rnd, tasks=100, trials=5):
    """k_t = (treatment successes) - (control successes), d_t = k_t / trials,
    both arms Bernoulli(p_t), p_t ~ Uniform(0.1, 0.9)."""
    out = []
    for _ in range(tasks):
        pt = rnd.uniform(0.1, 0.9)
        ctl = sum(rnd.random() < pt for _ in range(trials))
        trt = sum(rnd.random() < pt for _ in range(trials))
        out.append(trt - ctl)
    return out


def equivalence_figures(seeds=(20261203, 0)):
    alpha, margin = 0.05, 0.1
    print(f"order-free equivalence test: alpha {alpha}, margin {margin}, P = 100 orders")
    for seed in seeds:
        print(f"seed {seed}")
        cache = {}

        def shown(pattern, n):
            key = (tuple(pattern), n)
            if key not in cache:
                cache[key] = equivalent(cycled(pattern, n), alpha, margin, seed)
            return cache[key]

        def onset(label, pattern, lo, hi):
            row = [(n, shown(pattern, n)) for n in range(lo, hi + 1)]
            print(f"  {label}, n = {lo}..{hi}:")
            print("    shown at: " + (" ".join(str(n) for n, s in row if s) or "none"))
            print("    not at:   " + (" ".join(str(n) for n, s in row if not s) or "none"))
            n0 = next((n for n in range(lo, hi + 1) if shown(pattern, n) and not shown(pattern, n - 1)), None)
            if n0 is None:
                print("    no n0 in range")
                return
            stays = all(shown(pattern, n) for n in range(n0, n0 + 21))
            e_p, e_m = equivalence_evalues(cycled(pattern, n0), alpha, margin, seed)
            print(f"    n0 = {n0} (shown at n0, not at n0-1); shown for all n in {n0}..{n0 + 20}: {stays}")
            print(f"    at n0: E+ = {e_p:.6g}, E- = {e_m:.6g}, 1/alpha = {1 / alpha:g}")

        # (a) every task unchanged
        row = [(n, shown([0.0], n)) for n in range(50, 61)]
        print("  (a) d = 0 for every task, n = 50..60: " + " ".join(f"{n}:{'Y' if s else 'n'}" for n, s in row))
        first = next((n for n in range(2, 1000) if shown([0.0], n)), None)
        e_p, e_m = equivalence_evalues([0.0] * first, alpha, margin, seed)
        print(f"    first n shown: {first}; E+ = {e_p:.6g}, E- = {e_m:.6g}")
        # (b), (c)
        onset("(b) [0.2, -0.2, 0, 0.4, -0.4, 0] cycled", [0.2, -0.2, 0.0, 0.4, -0.4, 0.0], 55, 100)
        onset("(c) [1, -1, 0 x 8] cycled", [1.0, -1.0] + [0.0] * 8, 110, 170)
        # (d) a mean of exactly the margin
        print(f"  (d) [0.3, -0.1] cycled, n = 400 (mean = margin): shown = {shown([0.3, -0.1], 400)}")

    # (e) the old, order-dependent rule
    import random
    search_seed = 7
    print(f"(e) the old rule (given order, running theta K >= 1/(2 alpha)) on no-effect data: "
          f"100 tasks x 5 trials, p_t ~ U(0.1, 0.9); random.Random({search_seed})")
    rnd = random.Random(search_seed)
    found = None
    for attempt in range(1, 10001):
        ks = no_effect_tasks(rnd)
        yes = no = None
        for _ in range(200):
            order = ks[:]
            rnd.shuffle(order)
            if old_equivalent([k / 5 for k in order], alpha, margin):
                yes = yes or order
            else:
                no = no or order
            if yes and no:
                found = (attempt, yes, no)
                break
        if found:
            break
    attempt, yes, no = found
    assert sorted(yes) == sorted(no)
    print(f"  data set {attempt} of the search; k_t with d_t = k_t / 5")
    print(f"  order saying 'equivalent' (old rule: {old_equivalent([k / 5 for k in yes], alpha, margin)}):")
    print("    " + " ".join(str(k) for k in yes))
    print(f"  order saying 'not equivalent' (old rule: {old_equivalent([k / 5 for k in no], alpha, margin)}):")
    print("    " + " ".join(str(k) for k in no))
    print(f"  mean difference {sum(yes) / 5 / len(yes):.4f}")
    for seed in (20261203,):
        e_p, e_m = equivalence_evalues([k / 5 for k in yes], alpha, margin, seed)
        same = equivalence_evalues([k / 5 for k in no], alpha, margin, seed) == (e_p, e_m)
        print(f"  new rule, seed {seed}: equivalent = {e_p >= 1 / alpha and e_m >= 1 / alpha} "
              f"(E+ = {e_p:.6g}, E- = {e_m:.6g}; identical for both orders: {same})")

    sets, orders, frac_seed = 2000, 20, 11
    rnd = random.Random(frac_seed)
    disagree = 0
    share_yes = 0
    for _ in range(sets):
        ks = no_effect_tasks(rnd)
        votes = 0
        for _ in range(orders):
            rnd.shuffle(ks)
            votes += old_equivalent([k / 5 for k in ks], alpha, margin)
        disagree += 0 < votes < orders
        share_yes += votes
    print(f"  {sets} no-effect data sets (random.Random({frac_seed})), {orders} random orders each: "
          f"orders disagree in {disagree}/{sets} = {disagree / sets:.4f} of data sets "
          f"(a lower bound on the share where some two orders disagree); "
          f"old rule said 'equivalent' in {share_yes / (sets * orders):.4f} of all orders")


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
    if not only:
        equivalence_figures()
