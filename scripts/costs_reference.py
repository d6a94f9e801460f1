#!/usr/bin/env python3
"""Every cost and reliability number of `ablate report` (docs/statistics.md, "Costs and
reliability"), computed again from the run folder's trials.csv by the documented rules, and
compared with the report's report.json. Plain python3 (3.11) + mpmath; none of ablate's code.

    python3 scripts/costs_reference.py RUN_DIR

Prints how many numbers it compared; exits 1 (naming each) when one differs by more than 1e-7
relative, 2 on bad input.

The rules, as docs/statistics.md states them:
- the trials: trials.csv's counted attempts; a trial's tokens are tokens_input + tokens_output,
  its cost cost_usd (absent when empty), its working seconds and steps as written; a pass is
  status `passed`.
- per comparison, the tasks both arms ran (every trial counted). Per task: the mean of each
  spend over its trials; its total, and its passes.
- difference of a spend per trial: the paired t interval over tasks on the per-task differences
  of the means (t quantile on T - 1 df), a point when the differences have no spread.
- ratio of a spend per trial, treatment / control of the mean over tasks of the per-task means;
  spend per solved task, total spend over passes; the paired ratio of spends per solved task:
  R = prod_j mean(x_j)^s_j. Its interval: below 10 tasks (or, for spend per solved task, fewer
  than 10 passes in an arm), exp(log R -/+ t se) with z_t = sum_j s_j x_j[t] / mean(x_j) and
  se = sd(z) / sqrt(T); else the studentized bootstrap of log R: the tasks sorted by their
  values term by term, 1,999 resamples of T tasks drawn with SplitMix64 seeded
  0xB0075742_00000000 xor T (index = next % T), T* = (log R* - log R) / se*, resamples with
  se* = 0 dropped, [log R - q(0.975) se, log R - q(0.025) se], q(p) the order statistic
  round(p (m + 1)) of the m values T*, clamped to 1..m.
- an arm's tokens and cost per trial: the mean over tasks of the task's mean, with the t
  interval over tasks.
- an arm's infrastructure errors: the share of a task's trials with status provider_error,
  harness_error or grader_error, averaged over tasks, with the clustered Wilson interval (n_eff
  at most the arm's trials).
- every other metric (the builtin harness's counters, `incidents` in trials.jsonl; a verifier's
  reward.json keys as `reward.KEY`; an external harness's `ablate-metric` lines as
  `harness.NAME`) recorded on every trial of both arms and not zero everywhere: each arm's mean
  over tasks of the task's mean, and the paired t interval of the difference.
- pass^k of a task, prod_{i<k} (c - i) / (n - i) (0 when k > c); consistency, pass^k of the
  passes plus pass^k of the failures; k from 2, 3, 5, 10, 20 up to the fewest trials a task has.
  The mean over tasks with the clustered Wilson interval on n_eff = min(T, p(1-p)/v) (T when
  v = 0 or p is 0 or 1), v = sd^2 / T, shrunk by (z / t)^2; the paired difference by MOVER with
  the correlation of the per-task values (0 when either has no spread).
"""
import csv, json, math, sys
from collections import defaultdict
from functools import cache
from statistics import NormalDist

import mpmath

KS = [2, 3, 5, 10, 20]
MASK = (1 << 64) - 1


@cache  # a pure function asked the same few (p, df) many times
def t_quantile(p, df):
    # Student t's quantile by bisection on its CDF (mpmath's regularized incomplete beta).
    def cdf(t):
        x = df / (df + t * t)
        tail = 0.5 * mpmath.betainc(df / 2, 0.5, 0, x, regularized=True)
        return 1 - tail if t > 0 else tail
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if cdf(mid) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def t2(conf, df):
    return t_quantile(1 - (1 - conf) / 2, df)


def mean(x):
    return sum(x) / len(x) if x else math.nan


def no_spread(x):
    return max(x) - min(x) <= 1e-12


def sd(x):
    if len(x) < 2:
        return math.nan
    if no_spread(x):
        return 0.0
    m = mean(x)
    return math.sqrt(sum((v - m) ** 2 for v in x) / (len(x) - 1))


class SplitMix64:
    def __init__(self, seed):
        self.s = seed & MASK

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def wmean(x, w):
    return sum(a * b for a, b in zip(x, w)) / sum(w)


def wsd(x, w):
    counted = [a for a, b in zip(x, w) if b > 0]
    if no_spread(counted):
        return 0.0
    m = wmean(x, w)
    return math.sqrt(max(0.0, sum(b * (a - m) ** 2 for a, b in zip(x, w)) / (sum(w) - 1)))


def log_r_at(terms, w):
    n = len(w)
    m = [wmean(x, w) for _, x in terms]
    if any(math.isnan(v) or v <= 0 for v in m):
        return math.nan, math.nan
    log_r = sum(s * math.log(v) for (s, _), v in zip(terms, m))
    z = [sum(s * x[t] / v for (s, x), v in zip(terms, m)) for t in range(n)]
    return log_r, wsd(z, w) / math.sqrt(n)


def ratio(terms, conf, bootstrap):
    return ratio_of(tuple((s, tuple(x)) for s, x in terms), conf, bootstrap)


@cache  # the same spends are asked for by more than one comparison
def ratio_of(terms, conf, bootstrap):
    n = len(terms[0][1])
    means = [mean(x) for _, x in terms]
    if n == 0 or any(not (v > 0 and math.isfinite(v)) for v in means):
        return (math.nan, math.nan, math.nan)
    est = math.exp(sum(s * math.log(v) for (s, _), v in zip(terms, means)))
    if n < 2:
        return (est, math.nan, math.nan)
    if not bootstrap or n < 10:
        log_r, se = log_r_at(terms, [1.0] * n)
        half = t2(conf, n - 1) * se
        return (est, math.exp(log_r - half), math.exp(log_r + half))
    order = sorted(range(n), key=lambda t: tuple(x[t] for _, x in terms))
    terms = [(s, [x[t] for t in order]) for s, x in terms]
    log_r, se = log_r_at(terms, [1.0] * n)
    if se == 0:
        return (est, math.exp(log_r), math.exp(log_r))
    rng = SplitMix64(0xB007574200000000 ^ n)
    ts = []
    for _ in range(1999):
        w = [0.0] * n
        for _ in range(n):
            w[rng.next() % n] += 1.0
        e, s = log_r_at(terms, w)
        if math.isfinite(e) and s > 0:
            ts.append((e - log_r) / s)
    ts.sort()
    a = (1 - conf) / 2
    q = lambda p: ts[min(max(round(p * (len(ts) + 1)), 1), len(ts)) - 1]
    return (est, math.exp(log_r - q(1 - a) * se), math.exp(log_r - q(a) * se))


def paired_t(c, t, conf):
    d = [b - a for a, b in zip(c, t)]
    m = mean(d)
    if len(d) < 2:
        return (m, math.nan, math.nan)
    se = sd(d) / math.sqrt(len(d))
    if se == 0:
        return (m, m, m)
    half = t2(conf, len(d) - 1) * se
    return (m, m - half, m + half)


def t_interval(v, conf):
    m = mean(v)
    if len(v) < 2:
        return (m, math.nan, math.nan)
    half = t2(conf, len(v) - 1) * sd(v) / math.sqrt(len(v))
    return (m, m - half, m + half)


def cwilson(v, conf, trials=None):
    T = len(v)
    trials = T if trials is None else trials
    if T < 2:
        return (math.nan, math.nan)
    p = mean(v)
    var = sd(v) ** 2 / T
    n_eff = min(p * (1 - p) / var, trials) if var > 0 and 0 < p < 1 else T
    z = NormalDist().inv_cdf(1 - (1 - conf) / 2)
    t = t2(conf, T - 1)
    ns = n_eff * (z / t) ** 2
    z2n = z * z / ns
    center = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(max(0.0, p * (1 - p) / ns + z2n / (4 * ns)))
    lo = 0.0 if p <= 0 else max(0.0, center - half)
    hi = 1.0 if p >= 1 else min(1.0, center + half)
    return (lo, hi)


def bounded(v, conf):
    return (mean(v), *cwilson(v, conf))


def corr(a, b):
    if no_spread(a) or no_spread(b):
        return 0.0
    ma, mb = mean(a), mean(b)
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    saa = sum((x - ma) ** 2 for x in a)
    sbb = sum((y - mb) ** 2 for y in b)
    return max(-1.0, min(1.0, sab / math.sqrt(saa * sbb)))


def mover(c, t, conf):
    d, lo_t, hi_t = paired_t(c, t, conf)
    if len(c) < 2:
        return (d, lo_t, hi_t)
    p1, p2 = mean(c), mean(t)
    l1, u1 = cwilson(c, conf)
    l2, u2 = cwilson(t, conf)
    r = corr(c, t)
    d = p2 - p1
    below = (p2 - l2) ** 2 - 2 * r * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2
    above = (u2 - p2) ** 2 - 2 * r * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2
    return (d, d - math.sqrt(max(below, 0.0)), d + math.sqrt(max(above, 0.0)))


def pass_hat(n, c, k):
    if k > c:
        return 0.0
    out = 1.0
    for i in range(k):
        out *= (c - i) / (n - i)
    return out


SPENDS = {
    "tokens": lambda r: float(int(r["tokens_input"]) + int(r["tokens_output"])),
    "cost_usd": lambda r: float(r["cost_usd"]) if r["cost_usd"] != "" else None,
    "working_seconds": lambda r: float(r["working_seconds"]),
    "steps": lambda r: float(r["steps"]),
}
PER_SOLVED = ["tokens", "cost_usd", "working_seconds"]
INFRA = {"provider_error", "harness_error", "grader_error"}


def spent(tasks, name):
    means, totals = [], []
    for rows in tasks:
        vals = [SPENDS[name](r) for r in rows]
        if any(v is None for v in vals):
            return None
        totals.append(sum(vals))
        means.append(totals[-1] / len(rows))
    return means, totals


def passes(tasks):
    return [float(sum(r["status"] == "passed" for r in rows)) for rows in tasks]


def ks(tasks):
    fewest = min(len(t) for t in tasks) if tasks else 0
    return [k for k in KS if k <= fewest]


def per_solved(spend, solved, conf):
    return ratio([(1, spend), (-1, solved)], conf, sum(solved) >= 10)


INCIDENTS = ["tool_calls", "loop_guard_hits", "invalid_tool_calls", "unparsed_replies", "path_refusals", "refused_done"]


def key(r):
    return (r["trial_id"], str(r["attempt"]))


def record_metrics(run, rows):
    # (trial_id, attempt) of each counted row -> its metrics, read from trials.jsonl.
    want = {key(r) for r in rows}
    out = {}
    with open(f"{run}/trials.jsonl") as f:
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            k = (rec["trial_id"], str(rec["attempt"]))
            if k not in want:
                continue
            m = {n: float(rec["incidents"].get(n, 0)) for n in INCIDENTS}
            verifier = (rec.get("grade") or {}).get("verifier") or {}
            m.update({f"reward.{n}": v for n, v in (verifier.get("rewards") or {}).items()})
            command = rec.get("harness_command") or {}
            m.update({f"harness.{n}": v for n, v in (command.get("metrics") or {}).items()})
            out[k] = m
    return out


def per_task_metric(metrics, rows, name):
    vals = [metrics[key(r)].get(name) for r in rows]
    return None if None in vals else sum(vals) / len(vals)


class Check:
    def __init__(self):
        self.n, self.bad = 0, []

    def __call__(self, what, ours, theirs):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            b = math.nan if b is None else b
            self.n += 1
            if math.isnan(a) and math.isnan(b):
                continue
            if math.isnan(a) != math.isnan(b) or abs(a - b) > 1e-7 * max(1.0, abs(a)):
                self.bad.append(f"{what}[{i}]: reference {a!r}, report {b!r}")


def span(s):
    return (s["estimate"], s["lo"], s["hi"])


def main(run):
    with open(f"{run}/trials.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["counted"] == "true"]
    with open(f"{run}/report.json") as f:
        report = json.load(f)
    metrics = record_metrics(run, rows)
    conf = 1 - report["alpha"]
    by = defaultdict(lambda: defaultdict(list))
    order = []
    for r in rows:
        by[(r["model"], r["arm"])][r["task"]].append(r)
        if r["task"] not in order:
            order.append(r["task"])
    check = Check()
    for a in report["arms"]:
        tasks = [v for v in by[(a["model"], a["arm"])].values()]
        solved = passes(tasks)
        infra = [mean([float(r["status"] in INFRA) for r in t]) for t in tasks]
        n = sum(len(t) for t in tasks)
        check(f"arm {a['arm']} infra errors", (mean(infra), *cwilson(infra, conf, n)), span(a["costs"]["infra_errors"]))
        for o, sp in a["costs"]["per_trial"]:
            m = spent(tasks, o)[0]
            check(f"arm {a['arm']} {o} per trial", t_interval(m, conf), span(sp))
        got = dict((o, s) for o, s in a["costs"]["per_solved"])
        for o in PER_SOLVED:
            sp = spent(tasks, o)
            if sp is not None:
                check(f"arm {a['arm']} {o} per solved", per_solved(sp[1], solved, conf), span(got[o]))
        rel = {x["k"]: x for x in a["costs"]["reliability"]}
        assert sorted(rel) == ks(tasks), (sorted(rel), ks(tasks))
        for k in ks(tasks):
            ph = [pass_hat(len(t), int(c), k) for t, c in zip(tasks, solved)]
            co = [pass_hat(len(t), int(c), k) + pass_hat(len(t), len(t) - int(c), k) for t, c in zip(tasks, solved)]
            check(f"arm {a['arm']} pass^{k}", bounded(ph, conf), span(rel[k]["pass_hat_k"]))
            check(f"arm {a['arm']} consistency@{k}", bounded(co, conf), span(rel[k]["consistency"]))
    for e in report["ablations"] + report["combined"]:
        cb, tb = by[(e["model"], e["control"])], by[(e["model"], e["treatment"])]
        both = [t for t in order if t in cb and t in tb]
        c, t = [cb[x] for x in both], [tb[x] for x in both]
        costs = e["costs"]
        name = f"{e['name']} ({e['model']})"
        assert costs["n_tasks"] == len(both), (costs["n_tasks"], len(both))
        got = {s["outcome"]: s for s in costs["per_trial"]}
        for o in SPENDS:
            sc, st = spent(c, o), spent(t, o)
            if sc is None or st is None:
                assert o not in got, o
                continue
            check(f"{name} {o} difference", paired_t(sc[0], st[0], conf), span(got[o]["difference"]))
            check(f"{name} {o} ratio", ratio([(1, st[0]), (-1, sc[0])], conf, True), span(got[o]["ratio"]))
            check(f"{name} {o} means", (mean(sc[0]), mean(st[0])), (got[o]["control"], got[o]["treatment"]))
        cp, tp = passes(c), passes(t)
        solved = {s["outcome"]: s for s in costs["per_solved"]}
        for o in PER_SOLVED:
            sc, st = spent(c, o), spent(t, o)
            if sc is None or st is None:
                continue
            s = solved[o]
            check(f"{name} {o} per solved control", per_solved(sc[1], cp, conf), span(s["control"]))
            check(f"{name} {o} per solved treatment", per_solved(st[1], tp, conf), span(s["treatment"]))
            terms = [(1, st[1]), (-1, tp), (-1, sc[1]), (1, cp)]
            check(f"{name} {o} per solved ratio", ratio(terms, conf, min(sum(cp), sum(tp)) >= 10), span(s["ratio"]))
        got_m = {m["name"]: m for m in costs["metrics"]}
        names = INCIDENTS + sorted({k for r in rows for k in metrics[key(r)]} - set(INCIDENTS))
        expected = []
        for m in names:
            mc = [per_task_metric(metrics, x, m) for x in c]
            mt = [per_task_metric(metrics, x, m) for x in t]
            if None in mc or None in mt or all(v == 0 for v in mc + mt):
                continue
            expected.append(m)
            check(f"{name} {m}", (mean(mc), mean(mt), *paired_t(mc, mt, conf)), (got_m[m]["control"], got_m[m]["treatment"], *span(got_m[m]["difference"])))
        assert sorted(expected) == sorted(got_m), (expected, sorted(got_m))
        hats = {h["k"]: h for h in costs["pass_hat_k"]}
        kk = [k for k in ks(c) if k in ks(t)]
        assert sorted(hats) == kk, (sorted(hats), kk)
        for k in kk:
            cv = [pass_hat(len(x), int(n), k) for x, n in zip(c, cp)]
            tv = [pass_hat(len(x), int(n), k) for x, n in zip(t, tp)]
            check(f"{name} pass^{k} control", bounded(cv, conf), span(hats[k]["control"]))
            check(f"{name} pass^{k} treatment", bounded(tv, conf), span(hats[k]["treatment"]))
            check(f"{name} pass^{k} difference", mover(cv, tv, conf), span(hats[k]["difference"]))
    print(f"compared {check.n} numbers")
    for b in check.bad:
        print(b)
    sys.exit(1 if check.bad else 0)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
