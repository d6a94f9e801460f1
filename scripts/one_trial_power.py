"""Exact power of ablate's effect test and of the paired t-test on the one-trial cells of the
power grid (docs/statistics.md, `simulation_power_grid`), in plain Python (no scipy), from the
definitions on that page; it shares no code with crates/report/src/report/stats/.

With one trial a task and arm, a task's difference is +1, -1 or 0, so a run of n tasks is the
counts (b, c) of tasks that went fail -> pass and pass -> fail, multinomial with
P(+) = E[(1 - p) q] and P(-) = E[p (1 - q)] over the grid's Beta task rates p and the treated
rate q (the moments of Beta(base s, (1 - base) s), s = (1 - icc) / icc). Both tests depend on
(b, c) alone:

- ablate: the mid-p sign-flip test (given m = b + c, b ~ Binomial(m, 1/2) under no effect;
  p = 2 min(P(B < b), P(B > b)) + P(B = b)), never below 2^(1 - m); rejects at p <= 0.05.
- the paired t-test: t = mean / (sd / sqrt(n)) on n - 1 degrees of freedom (Student's t by the
  regularized incomplete beta, Numerical Recipes' continued fraction); no spread: rejects when
  every difference is the same non-zero value.

Power is the exact sum over (b, c); "tasks for 80% power" is the smallest n that reaches it,
scanning n upwards from 6 to 200. Prints, for each one-trial cell, the tasks each test needs and their ratio,
and each test's size with no effect at the cell's null (P(+) = P(-) = E[p (1 - p)]).

    python3 scripts/one_trial_power.py      # about 90 s
"""
import math

ALPHA = 0.05


def betacf(a, b, x):
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > 1e-300 else 1e-300)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1 + aa * d
        d = 1 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1 + aa / c if abs(1 + aa / c) > 1e-300 else 1e-300
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1 + aa * d
        d = 1 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1 + aa / c if abs(1 + aa / c) > 1e-300 else 1e-300
        de = d * c
        h *= de
        if abs(de - 1) < 1e-15:
            break
    return h


def betai(a, b, x):
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(lbt) * betacf(a, b, x) / a
    return 1 - math.exp(lbt) * betacf(b, a, 1 - x) / b


def t_two_sided_p(t, df):
    """P(|T| >= |t|) for Student's t on df degrees of freedom."""
    return betai(df / 2, 0.5, df / (df + t * t))


def sign_flip_rejects(b, m):
    if m == 0:
        return False
    pmf = [math.comb(m, k) / 2 ** m for k in range(m + 1)]
    below, above = sum(pmf[:b]), sum(pmf[b + 1:])
    p = min(1.0, 2 * min(below, above) + pmf[b])
    return max(p, 2.0 ** (1 - m)) <= ALPHA


def t_rejects(b, c, n):
    s = b - c
    ss = (b + c) - s * s / n  # sum of squared deviations from the mean
    if ss <= 1e-12:
        return s != 0
    t = (s / n) / math.sqrt(ss / (n - 1) / n)
    return t_two_sided_p(t, n - 1) <= ALPHA


_regions = {}


def regions(n):
    """For each m = b + c: the b at which each test rejects."""
    if n not in _regions:
        sf, tt = [], []
        for m in range(n + 1):
            sf.append([b for b in range(m + 1) if sign_flip_rejects(b, m)])
            tt.append([b for b in range(m + 1) if t_rejects(b, m - b, n)])
        _regions[n] = (sf, tt)
    return _regions[n]


def probs(base, icc, delta):
    if icc == 0:
        ep2 = base * base
    else:
        s = (1 - icc) / icc
        ep2 = base * (base * s + 1) / (s + 1)
    epq = base - ep2  # E[p (1 - p)]
    if base > 0.5:  # q = p (1 - k): the treatment lowers every rate
        k = delta / base
        return (1 - k) * epq, epq + k * ep2
    k = delta / (1 - base)  # q = p + k (1 - p)
    return epq + k * (1 - 2 * base + ep2), (1 - k) * epq


def power(n, up, down):
    sf, tt = regions(n)
    r = up + down
    pi = up / r
    out = [0.0, 0.0]
    for m in range(n + 1):
        pm = math.comb(n, m) * r ** m * (1 - r) ** (n - m)
        if pm < 1e-15:
            continue
        for k, region in enumerate((sf[m], tt[m])):
            out[k] += pm * sum(math.comb(m, b) * pi ** b * (1 - pi) ** (m - b) for b in region)
    return out


def main():
    print("trials base  icc delta | ablate paired_t | ratio | size at no effect (n = t-test's): ablate, t")
    for base in (0.1, 0.5, 0.9):
        for icc in (0.0, 0.25, 0.5):
            for delta in (0.1, 0.2):
                up, down = probs(base, icc, delta)
                need = [None, None]
                n = 6
                while None in need and n <= 200:
                    pw = power(n, up, down)
                    for k in (0, 1):
                        if need[k] is None and pw[k] >= 0.8:
                            need[k] = n
                    n += 1
                show = lambda v: ">200" if v is None else str(v)
                ratio = f"{need[0] / need[1]:.3f}" if None not in need else "-"
                size = ""
                if need[1] is not None:
                    q, _ = probs(base, icc, 0.0)
                    s = power(need[1], q, q)
                    size = f"{s[0]:.4f}, {s[1]:.4f}"
                print(f"1 {base:4.1f} {icc:4.2f} {delta:5.1f} | {show(need[0]):>6} {show(need[1]):>8} | {ratio:>5} | {size}", flush=True)


if __name__ == "__main__":
    main()
