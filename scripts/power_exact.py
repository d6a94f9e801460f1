"""Tasks for 80% power, computed exactly instead of simulated, for the cells of the power grid
(docs/statistics.md, `simulation_power_grid`) at 3 and 5 trials where the paired t-test needs at
most 40 tasks, and for its one-trial cells where ablate needs more than 5% more tasks than the
t-test. Written from docs/statistics.md; shares no code with crates/report/src/report/stats/.
Needs numpy and scipy (`pip install numpy scipy`).

A cell is the grid's: tasks with rates p ~ Beta(base s, (1 - base) s), s = (1 - icc) / icc (icc 0:
every task at base), the treated rate q = p + delta (1 - p) / (1 - base) (base above 0.5:
q = p - delta p / base), k pass/fail trials per task and arm. A task's difference is
d = (Y - X) / k, with X and Y its control and treated passes; its distribution is exact (Beta
moments of the binomial terms). A run is n i.i.d. tasks.

- **mid-p sign flip**, ablate's test without its trial-noise floor (ablate's rule rejects only
  where this test does; `simulation_power_matches_the_exact_powers` measures what the floor
  takes away, and checks these figures against the rule itself): given the sizes |d|, every
  sign pattern is equally likely under no effect; p = 2 min(P(S < s), P(S > s)) + P(S = s) on
  S = sum d, never below 2^(1 - m) (m tasks with d != 0); rejects at p <= 0.05. Exact by summing
  over the counts of tasks at each |d| and convolving the signs' binomials.
- **paired t**: |t| >= t_{n-1}(0.975), t the one-sample t of the d; no spread: rejects when every
  d is the same non-zero value. Exact over the joint distribution of (sum d, sum d^2), by dynamic
  programming over tasks. Its **size**: its largest rejection rate over the no-effect nulls of
  the grid's cells with these trials (33 base rates over [0.1, 0.9] x ICC {0, 0.25, 0.5}).
- **paired t held to alpha**: the same |t| ordering with the critical value raised to the
  smallest that keeps its largest rejection rate over those nulls at most 0.05 (the paired t-test
  of correct size).
- **sign-flip bound**: where ablate needs more than 5% more tasks than the t-test, the first size
  at which it reaches 80%; where ablate needs more than 5% more than the t-test held to alpha,
  its power at the most tasks within 5% of that t-test's. A test whose size is at most alpha for
  every null of independent, symmetric per-task differences (the guarantee of the exact
  sign-flip test and of the permutation t-test, which the mid-p gives up for power: it keeps its
  size on the grid's nulls of pass/fail trials) has, given the |d|, at most alpha of the sign
  patterns' probability in its rejection region (the null d_t = +-|d_t| with equal chances is
  one such). The most powerful such test that treats the two directions alike is Neyman-Pearson
  on the mirror pairs of sign patterns, randomized at the boundary and tailored to the cell's
  alternative: its power bounds every test with that guarantee.
- **LP bound** (one trial, where the sign-flip bound is given: the first size at which it
  reaches 80%): the most powerful test on the counts of tasks that went fail -> pass and
  pass -> fail, treating both directions alike, whose size is at most alpha at every no-effect
  null above: a linear programme (scipy's HiGHS), randomized tests allowed.

    python3 scripts/power_exact.py      # about 10 minutes
"""
import functools
import itertools
import math

import numpy as np
from scipy import stats
from scipy.optimize import linprog
from scipy.special import betaln, gammaln

ALPHA = 0.05
NULL_BASES = np.linspace(0.1, 0.9, 33)
NULL_ICCS = (0.0, 0.25, 0.5)
MAX_TASKS = 40


def moment(base, icc):
    """E[p^a (1 - p)^b] over the cell's task rates."""
    if icc == 0:
        return lambda a, b: base**a * (1 - base) ** b
    s = (1 - icc) / icc
    al, be = base * s, (1 - base) * s
    return lambda a, b: math.exp(betaln(al + a, be + b) - betaln(al, be))


def differences(k, base, icc, delta):
    """P(d = j / k) for j = -k .. k (index j + k)."""
    m = moment(base, icc)
    d = np.zeros(2 * k + 1)
    for x in range(k + 1):
        for y in range(k + 1):
            if base > 0.5:  # q = (1 - c) p, 1 - q = (1 - p) + c p
                c = delta / base
                e = sum(math.comb(k - y, i) * c**i * (1 - c) ** y * m(x + y + i, 2 * k - x - y - i)
                        for i in range(k - y + 1))
            else:  # q = c + (1 - c) p, 1 - q = (1 - c) (1 - p)
                c = delta / (1 - base)
                e = sum(math.comb(y, i) * c ** (y - i) * (1 - c) ** (i + k - y) * m(x + i, 2 * k - x - y)
                        for i in range(y + 1))
            d[y - x + k] += math.comb(k, x) * math.comb(k, y) * e
    return d / d.sum()


class Sums:
    """The joint distribution of (sum j, sum j^2) over n tasks, j = k d, grown a task at a time."""

    def __init__(self, k, dist, most):
        self.k, self.dist, self.n = k, dist, 0
        self.p = np.zeros((2 * k * most + 1, k * k * most + 1))
        self.off = k * most
        self.p[self.off, 0] = 1.0

    def grow(self):
        k, new = self.k, np.zeros_like(self.p)
        rows, cols = self.p.shape
        for j in range(-k, k + 1):
            if self.dist[j + k] > 0:  # wide enough that nothing falls off
                new[max(j, 0) : rows + min(j, 0), j * j :] += (
                    self.dist[j + k] * self.p[max(-j, 0) : rows - max(j, 0), : cols - j * j]
                )
        self.p, self.n = new, self.n + 1


def t_of(k, n, shape, off):
    """|t| at every (sum j, sum j^2) cell (inf: no spread and a non-zero sum)."""
    s1 = (np.arange(shape[0]) - off)[:, None] / k
    s2 = np.arange(shape[1])[None, :] / (k * k)
    ss = s2 - s1 * s1 / n
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(s1 / n) / np.sqrt(np.maximum(ss, 0) / (n - 1) / n)
    return np.round(np.where(ss <= 1e-12, np.where(np.abs(s1) > 1e-12, np.inf, 0.0), t), 9)


def t_power(k, alt, last):
    """The first n <= last at which the t-test reaches 80% power, or None."""
    sums = Sums(k, alt, last)
    for n in range(1, last + 1):
        sums.grow()
        if n >= 2:
            t = t_of(k, n, sums.p.shape, sums.off)
            if sums.p[t >= stats.t.ppf(1 - ALPHA / 2, n - 1)].sum() >= 0.8:
                return n
    return None


def t_tests(k, alt, nulls, first):
    """For n = first, first + 1, ... until the t-test held to alpha reaches 80% power:
    (n, t power, t size, held power, held size, held critical |t|)."""
    last = 2 * first + 10
    sums = [Sums(k, d, last) for d in [alt] + nulls]
    out = []
    for n in range(1, last + 1):
        for s in sums:
            s.grow()
        if n < first:
            continue
        t = t_of(k, n, sums[0].p.shape, sums[0].off).ravel()
        live = np.nonzero(np.max([s.p.ravel() for s in sums], axis=0) > 0)[0]
        order = live[np.argsort(-t[live], kind="stable")]
        ts = t[order]
        ends = np.nonzero(np.append(ts[1:] != ts[:-1], True))[0]  # a region is a prefix ending here
        power = np.cumsum(sums[0].p.ravel()[order])[ends]
        size = np.max([np.cumsum(s.p.ravel()[order])[ends] for s in sums[1:]], axis=0)
        crit = stats.t.ppf(1 - ALPHA / 2, n - 1)
        it = np.count_nonzero(ts[ends] >= crit) - 1
        ih = np.count_nonzero(size <= ALPHA) - 1  # the largest rate grows with the region
        out.append((n, power[it], size[it], power[ih], size[ih], ts[ends[ih]]))
        if power[ih] >= 0.8:
            return out
    raise AssertionError("the t-test held to alpha never reached 80%")


def compositions(n, parts):
    """Every vector of `parts` non-negative counts summing to n."""
    for cut in itertools.combinations(range(n + parts - 1), parts - 1):
        edges = (-1,) + cut + (n + parts - 1,)
        yield [edges[i + 1] - edges[i] - 1 for i in range(parts)]


def binomial_pmf(m, p):
    return np.array([math.comb(m, a) * p**a * (1 - p) ** (m - a) for a in range(m + 1)])


def sizes(k, n, alt):
    """The counts m of tasks at |d| = 0, 1/k, .., 1 (some not 0) with their probability, those
    below e^-36 left out; and P(d > 0 | |d| = j / k) for j = 1 .. k."""
    absp = [alt[k]] + [alt[k + j] + alt[k - j] for j in range(1, k + 1)]
    up = [alt[k + j] / (alt[k + j] + alt[k - j]) for j in range(1, k + 1)]
    lg = gammaln(np.arange(n + 1) + 1.0)  # log x!
    logabs = [math.log(p) if p > 0 else -math.inf for p in absp]

    def counts():
        for m in compositions(n, k + 1):
            logc = lg[n] - sum(lg[x] for x in m) + sum(x * l for x, l in zip(m, logabs) if x)
            if logc >= -36 and m[0] < n:
                yield m, math.exp(logc)

    return counts(), up


def mid_p_power(k, n, alt):
    """Exact power of the mid-p sign-flip test (with its floor 2^(1 - m))."""
    counts, up = sizes(k, n, alt)
    power = 0.0
    for m, pc in counts:
        total = n - m[0]
        # S = sum_j j (2 a_j - m_j), on the integers, offset by k n
        null, alt_s = np.ones(1), np.ones(1)
        for j in range(1, k + 1):
            x = m[j]
            if x == 0:
                continue
            spread = np.zeros(2 * j * x + 1)
            spread[:: 2 * j] = binomial_pmf(x, 0.5)
            null = np.convolve(null, spread)
            spread_alt = np.zeros(2 * j * x + 1)
            spread_alt[:: 2 * j] = binomial_pmf(x, up[j - 1])
            alt_s = np.convolve(alt_s, spread_alt)
        below = np.concatenate([[0.0], np.cumsum(null)[:-1]])
        above = np.maximum(1.0 - below - null, 0.0)
        p = np.maximum(np.minimum(1.0, 2 * np.minimum(below, above) + null), 2.0 ** (1 - total))
        power += pc * alt_s[(p <= ALPHA) & (null > 0)].sum()
    return power


def sign_flip_bound(k, n, alt):
    """The most powerful mirror-symmetric test of conditional size alpha given the |d|."""
    counts, up = sizes(k, n, alt)
    bound = 0.0
    for m, pc in counts:
        nz = m[1:]
        total = sum(nz)
        # a[i, j]: positives among the tasks with |d| = (j + 1) / k, every combination
        a = np.stack([g.ravel() for g in np.meshgrid(*[np.arange(x + 1) for x in nz], indexing="ij")], 1)
        mult, log1 = np.ones(len(a)), np.zeros(len(a))
        for j, (x, u) in enumerate(zip(nz, up)):
            mult *= np.array([math.comb(x, i) for i in range(x + 1)], dtype=float)[a[:, j]]
            log1 += a[:, j] * math.log(u) + (x - a[:, j]) * math.log1p(-u)
        p0, p1 = mult / 2.0**total, mult * np.exp(log1)
        radix = np.cumprod([1] + [x + 1 for x in nz[:-1]])
        key, mkey = a @ radix, (np.array(nz)[None, :] - a) @ radix
        mirror = np.argsort(key)[np.searchsorted(np.sort(key), mkey)]
        keep, self_mirror = key <= mkey, key == mkey
        o0 = np.where(self_mirror, p0, p0 + p0[mirror])[keep]
        o1 = np.where(self_mirror, p1, p1 + p1[mirror])[keep]
        order = np.argsort(-(o1 / o0), kind="stable")
        c0, c1 = np.cumsum(o0[order]), np.cumsum(o1[order])
        whole = np.count_nonzero(c0 <= ALPHA)
        pw = c1[whole - 1] if whole else 0.0
        if whole < len(order):
            pw += (ALPHA - (c0[whole - 1] if whole else 0.0)) / o0[order[whole]] * o1[order[whole]]
        bound += pc * pw
    return bound


def lp_bound(n, alt, nulls):
    """One trial: the most powerful mirror-symmetric test on (b, c) with size <= alpha at every null."""
    pairs = [(m - c, c) for m in range(n + 1) for c in range(m // 2 + 1)]
    b = np.array([p[0] for p in pairs], dtype=float)
    c = np.array([p[1] for p in pairs], dtype=float)
    logc = gammaln(n + 1) - gammaln(b + 1) - gammaln(c + 1) - gammaln(n - b - c + 1)

    def orbit(dist):  # dist over d = -1, 0, +1
        lu, ld, l0 = (math.log(max(x, 1e-300)) for x in (dist[2], dist[0], dist[1]))
        v = np.exp(logc + b * lu + c * ld + (n - b - c) * l0)
        w = np.exp(logc + c * lu + b * ld + (n - b - c) * l0)
        return np.where(b == c, v, v + w)

    a = np.array([orbit(d) for d in nulls])
    r = linprog(-orbit(alt), A_ub=a, b_ub=np.full(len(nulls), ALPHA), bounds=(0, 1), method="highs")
    assert r.status == 0, r.message
    return -r.fun


def first_at(powers):
    return next((n for n, p in powers if p >= 0.8), None)


def first_size(power, start):
    """The smallest n with power(n) >= 0.8, searched from `start` (power grows with n)."""
    n = start
    while n > 2 and power(n - 1) >= 0.8:
        n -= 1
    while power(n) < 0.8:
        n += 1
        assert n <= 2 * start + 10, "never reached 80%"
    return n


def cell(k, base, icc, delta, last):
    """One cell: print each test's tasks for 80% power (and its power there); None when the t-test
    needs more than `last` tasks."""
    alt = differences(k, base, icc, delta)
    nulls = [differences(k, b, c, 0.0) for b in NULL_BASES for c in NULL_ICCS]
    n_t = t_power(k, alt, last)
    if n_t is None:
        return None
    rows = t_tests(k, alt, nulls, n_t)
    n_held = first_at([(r[0], r[3]) for r in rows])
    power_t, size_t, power_held = rows[0][1], rows[0][2], rows[n_held - n_t][3]
    # each power computed once: the searches and the lines below ask for some sizes again
    mid_p = functools.cache(lambda m: mid_p_power(k, m, alt))
    bound = functools.cache(lambda m: sign_flip_bound(k, m, alt))
    n = first_size(mid_p, n_t)
    power = mid_p(n)
    line = (f"{k} {base:4.1f} {icc:4.2f} {delta:5.1f} | {n:4} ({power:.4f}) | {n_t:4} ({power_t:.4f}) "
            f"{size_t:.4f} | {n_held:4} ({power_held:.4f}) | {n / n_held:.3f}")
    allowed = math.floor(1.05 * n_held)
    if n > allowed:
        line += (f" | at {allowed} tasks: ablate {mid_p(allowed):.4f}, "
                 f"sign-flip bound {bound(allowed):.4f}")
    if n > math.floor(1.05 * n_t):
        firsts = {"sign-flip bound": first_size(bound, n_t)}
        if k == 1:
            firsts["LP bound"] = first_size(lambda m: lp_bound(m, alt, nulls), n_t)
        line += " | first at 80%: " + ", ".join(f"{name} {m} tasks" for name, m in firsts.items())
    print(line, flush=True)
    return n, n_held


def main():
    print("exact tasks for 80% power at alpha 0.05 (power there):")
    print("trials base  icc delta | ablate (mid-p) | paired t, its size | t held to alpha | ablate/held")
    within, cells = 0, 0
    for k in (3, 5):
        for base in (0.1, 0.5, 0.9):
            for icc in (0.0, 0.25, 0.5):
                for delta in (0.1, 0.2):
                    r = cell(k, base, icc, delta, MAX_TASKS)
                    if r is not None:
                        cells += 1
                        within += r[0] <= 1.05 * r[1]
    for base in (0.1, 0.9):
        r = cell(1, base, 0.5, 0.1, 140)
        cells += 1
        within += r[0] <= 1.05 * r[1]
    print(f"within 5% of the t-test held to alpha: {within} of {cells} cells")


if __name__ == "__main__":
    main()
