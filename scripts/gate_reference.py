"""The gate's exact unconditional test and its operating characteristics, written again from
their definition in plain Python (no scipy): Barnard 1947 / Chan 1998 with half-counts in the Wald
variance, made monotone in y; Berger & Boos 1994: the supremum over a 201-point grid inside the
99.9% Clopper-Pearson interval of the baseline rate, plus 0.001; Clopper-Pearson by bisection of
the binomial tails. The one-sided bounds invert the same tests, bisected as the gate does (30
halvings of [-1, 1]). An earlier brute force of the same definition with scipy.stats (binom, beta)
gave the first six p-values below; this file reproduces them to 1e-12.

    python3 scripts/gate_reference.py

prints every value crates/report/src/gate/decision.rs, crates/report/src/gate/render.rs and
tests/integration/gate.rs assert.
"""
import math
def binom_pmf_vec(n,p):
    if p<=0: return [1.0 if k==0 else 0.0 for k in range(n+1)]
    if p>=1: return [1.0 if k==n else 0.0 for k in range(n+1)]
    lp,lq=math.log(p),math.log(1-p)
    return [math.exp(math.lgamma(n+1)-math.lgamma(k+1)-math.lgamma(n-k+1)+k*lp+(n-k)*lq) for k in range(n+1)]
def cp(x,n,conf=0.999):
    a=1-conf
    def upper_tail(p): return sum(binom_pmf_vec(n,p)[x:])     # P(X>=x)
    def lower_tail(p): return sum(binom_pmf_vec(n,p)[:x+1])   # P(X<=x)
    if x==0: lo=0.0
    else:
        l,h=0.0,1.0
        for _ in range(100):
            m=(l+h)/2
            if upper_tail(m)<a/2: l=m
            else: h=m
        lo=(l+h)/2
    if x==n: hi=1.0
    else:
        l,h=0.0,1.0
        for _ in range(100):
            m=(l+h)/2
            if lower_tail(m)>a/2: l=m
            else: h=m
        hi=(l+h)/2
    return lo,hi
G=200
class Exact:
    def __init__(s,nx,ny,shift,upper):
        s.nx,s.ny,s.upper=nx,ny,upper
        fr,to=max(shift,0.0),min(1+shift,1.0)
        s.ok = not(nx==0 or ny==0 or fr>to)
        if not s.ok: return
        s.stat=[]
        for x in range(nx+1):
            a=(x+.5)/(nx+1)
            row=[]
            for y in range(ny+1):
                b=(y+.5)/(ny+1)
                row.append((y/ny-x/nx+shift)/math.sqrt(a*(1-a)/nx+b*(1-b)/ny))
            if upper:
                for k in range(1,len(row)): row[k]=max(row[k],row[k-1])
            else:
                for k in range(len(row)-2,-1,-1): row[k]=min(row[k],row[k+1])
            s.stat.append(row)
        s.grid=[];s.fx=[];s.tail=[]
        for i in range(G+1):
            px=fr+(to-fr)*i/G
            fy=binom_pmf_vec(ny,min(1,max(0,px-shift)))
            tail=[0.0]*(ny+1); acc=0.0
            rng=range(ny,-1,-1) if upper else range(ny+1)
            for k in rng:
                acc+=fy[k]; tail[k]=acc
            s.grid.append(px); s.fx.append(binom_pmf_vec(nx,px)); s.tail.append(tail)
        s.cpc={}
    def p(s,x,y):
        if not s.ok: return 1.0
        obs=s.stat[x][y]; cut=[]
        import bisect
        for xp in range(s.nx+1):
            row=s.stat[xp]
            if s.upper:
                k=sum(1 for v in row if v<obs-1e-12)  # partition_point on nondecreasing
                cut.append(k if k<=s.ny else None)
            else:
                k=sum(1 for v in row if v<=obs+1e-12)
                cut.append(k-1 if k>0 else None)
        if x not in s.cpc: s.cpc[x]=cp(x,s.nx)
        lo,hi=s.cpc[x]; worst=0.0
        for g,px in enumerate(s.grid):
            if px<lo or px>hi: continue
            fx,tail=s.fx[g],s.tail[g]
            prob=sum(fx[xp]*tail[c] for xp,c in enumerate(cut) if c is not None)
            worst=max(worst,prob)
        return min(1.0,worst+0.001)
def ni_p(x,nx,y,ny,shift): return Exact(nx,ny,shift,True).p(x,y)
def reg_p(x,nx,y,ny,shift): return Exact(nx,ny,shift,False).p(x,y)
def verdict(x,nx,y,ny,alpha,margin):
    pr=reg_p(x,nx,y,ny,0.0); pn=ni_p(x,nx,y,ny,margin)
    v='FAIL' if pr<=alpha else ('PASS' if pn<=alpha else 'INCONCLUSIVE')
    return v,pn,pr
def bounds(x,nx,y,ny,alpha):
    def bound(reject,low):
        a,b=-1.0,1.0
        if low:
            if not reject(-1+1e-9): return -1.0
        elif not reject(1-1e-9): return 1.0
        for _ in range(30):
            m=(a+b)/2
            if reject(m)==low: a=m
            else: b=m
        return a if low else b
    lower=bound(lambda d: ni_p(x,nx,y,ny,-d)<=alpha, True)
    upper=bound(lambda d: reg_p(x,nx,y,ny,-d)<=alpha, False)
    return lower,upper
def partition(n,pred,low):
    if low:
        if not pred(0): return None
        a,b=0,n+1
        while b-a>1:
            m=(a+b)//2
            if pred(m): a=m
            else: b=m
        return a
    if not pred(n): return None
    a,b=-1,n
    while b-a>1:
        m=(a+b)//2
        if pred(m): b=m
        else: a=m
    return b
def characteristics(rate,drops,nx,ny,alpha,margin):
    reg=Exact(nx,ny,0.0,False); ni=Exact(nx,ny,margin,True)
    th=[]
    for x in range(nx+1):
        th.append((partition(ny,lambda y: reg.p(x,y)<=alpha,True), partition(ny,lambda y: ni.p(x,y)<=alpha,False)))
    out=[]
    for drop in drops:
        q=min(1,max(0,rate-drop)); fx=binom_pmf_vec(nx,rate); fy=binom_pmf_vec(ny,q)
        pf=pp=0.0
        for x in range(nx+1):
            yf,yp=th[x]
            for y in range(ny+1):
                f= yf is not None and y<=yf
                p= (not f) and yp is not None and y>=yp
                w=fx[x]*fy[y]
                if f: pf+=w
                elif p: pp+=w
        out.append((drop,pf,pp))
    return out


# The stratified test (docs/statistics.md, "The gate"): the mean of the per-task differences; its
# standard error under a difference of -delta from each task's rates restricted to it (Dunnett &
# Gent, half a count added, the plug-in variance times (n + m) / (n + m - 1), each side at least
# the floor h (1 - h) / k with h = 0.5 / (k + 1)), on Welch-Satterthwaite degrees of freedom; the
# t tail by its own regularized incomplete beta (Numerical Recipes' continued fraction).
def _betacf(a, b, x):
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / d
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1 / (1 + aa * d); c = 1 + aa / c; h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1 / (1 + aa * d); c = 1 + aa / c; de = d * c; h *= de
        if abs(de - 1) < 1e-15:
            break
    return h
def _ibeta(a, b, x):
    if x <= 0: return 0.0
    if x >= 1: return 1.0
    bt = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x))
    if x < (a + 1) / (a + b + 2): return bt * _betacf(a, b, x) / a
    return 1 - bt * _betacf(b, a, 1 - x) / b
def t_sf(t, df):
    p = 0.5 * _ibeta(df / 2, 0.5, df / (df + t * t))
    return p if t > 0 else 1 - p
def strat_se(counts, delta):
    v = v2 = 0.0
    for b, n, c, m in counts:
        pb = min(max((b + c + m * delta + 0.5) / (n + m + 1), 0.0), 1.0)
        pc = min(max(pb - delta, 0.0), 1.0)
        u = (n + m) / (n + m - 1)
        floor = lambda k: (0.5 / (k + 1)) * (1 - 0.5 / (k + 1)) / k
        vb = max(u * pb * (1 - pb) / n, floor(n)); vc = max(u * pc * (1 - pc) / m, floor(m))
        v += vb + vc; v2 += vb * vb / max(n - 1, 1) + vc * vc / max(m - 1, 1)
    return math.sqrt(v) / len(counts), v * v / v2
def strat_verdict(counts, alpha, margin):
    mean = sum(c / m - b / n for b, n, c, m in counts) / len(counts)
    se0, df0 = strat_se(counts, 0.0); sem, dfm = strat_se(counts, margin)
    if t_sf(-mean / se0, df0) <= alpha: return "FAIL"
    if t_sf((mean + margin) / sem, dfm) <= alpha: return "PASS"
    return "INCONCLUSIVE"
def strat_characteristics(tasks, drops, alpha, margin, draws, seed=1):
    """tasks: (baseline passes, baseline trials, candidate trials); each task at its own baseline
    rate, the candidate's p - drop p / mean(p); (drop, P(FAIL), P(PASS)) by `draws` draws."""
    import random
    rng = random.Random(seed)
    ps = [b / n for b, n, m in tasks]; mp = sum(ps) / len(ps)
    out = []
    for drop in drops:
        f = pa = 0
        for _ in range(draws):
            counts = []
            for (b, n, m), p in zip(tasks, ps):
                q = min(max(p - drop * p / mp, 0.0), 1.0)
                counts.append((sum(rng.random() < p for _ in range(n)), n, sum(rng.random() < q for _ in range(m)), m))
            v = strat_verdict(counts, alpha, margin)
            f += v == "FAIL"; pa += v == "PASS"
        out.append((drop, f / draws, pa / draws))
    return out


if __name__ == "__main__":
    # tests/integration/gate.rs pass_fail_and_outputs: the 40 pp drop's tasks, 40 trials a side,
    # alpha 0.05 over 14 tasks.
    worse = [("balanced-brackets", 15, 3), ("camel-to-snake", 6, 0), ("count-vowels", 28, 9), ("expression-evaluator", 27, 14),
             ("fizzbuzz-list", 32, 15), ("ini-parser", 15, 0), ("is-prime", 14, 0), ("merge-intervals", 13, 0), ("parse-duration", 3, 0),
             ("reverse-words", 31, 15), ("roman-to-int", 27, 9), ("run-length", 23, 1), ("semver-compare", 7, 0), ("word-frequency", 4, 0)]
    for name, x, y in worse:
        p = reg_p(x, 40, y, 40, 0.0)
        print(f"regression {name} {x}/40 -> {y}/40: p {p!r}, regressed at 0.05/14: {p <= 0.05 / 14}")
    # the_shipped_baseline...: 63/96 baseline, 48-trial candidate, margin 20 pp; then margin 5 pp.
    for drop, pf, pp in characteristics(63 / 96, [0.0, 0.10, 0.20], 96, 48, 0.05, 0.20):
        print(f"margin 0.20 drop {drop}: p_fail {pf!r} p_pass {pp!r}")
    print("margin 0.05 drop 0.0: p_pass", repr(characteristics(63 / 96, [0.0], 96, 48, 0.05, 0.05)[0][2]))
    # The same with tasks as strata (the gate's rule at 24 and 12 trials a task), simulated.
    shipped = [(18, 24, 12), (12, 24, 12), (24, 24, 12), (9, 24, 12)]
    for drop, pf, pp in strat_characteristics(shipped, [0.0, 0.10, 0.20], 0.05, 0.20, 50000):
        print(f"stratified margin 0.20 drop {drop}: p_fail {pf!r} p_pass {pp!r}")
    print("stratified margin 0.05 drop 0.0: p_pass", repr(strat_characteristics(shipped, [0.0], 0.05, 0.05, 50000)[0][2]))
    # tests/integration/gate.rs pass_fail_and_outputs: the unchanged candidate, 40 trials a side.
    same = [(15, 21), (6, 10), (28, 25), (27, 27), (32, 32), (15, 21), (14, 11), (13, 8), (3, 6), (31, 32), (27, 25), (23, 17), (7, 6), (4, 8)]
    counts = [(b, 40, c, 40) for b, c in same]
    mean = sum(c / 40 - b / 40 for b, c in same) / 14
    (se0, df0), (sem, dfm), (sep, dfp) = strat_se(counts, 0.0), strat_se(counts, 0.05), strat_se(counts, -0.05)
    print("stratified same: mean", mean, "p not worse", t_sf(-mean / se0, df0), "p worse by 5 pp", t_sf((mean + 0.05) / sem, dfm),
          "p no better", t_sf(mean / se0, df0), "p better by 5 pp", t_sf((0.05 - mean) / sep, dfp))
    # crates/report/src/gate/decision.rs exact_p_known_values and decision_rule; crates/report/src/gate/render.rs (the JUnit case).
    for x, nx, y, ny in [(6, 8, 8, 8), (40, 50, 48, 50), (126, 140, 130, 140)]:
        print(f"NI {x}/{nx}->{y}/{ny}", repr(ni_p(x, nx, y, ny, 0.05)))
    for x, nx, y, ny in [(8, 8, 4, 8), (3, 10, 0, 10), (18, 30, 15, 30), (126, 140, 130, 140), (10, 10, 0, 10), (2, 2, 1, 2), (12, 12, 1, 12)]:
        print(f"REG {x}/{nx}->{y}/{ny}", repr(reg_p(x, nx, y, ny, 0.0)))
    print("bounds 6/8->8/8", *map(repr, bounds(6, 8, 8, 8, 0.05)))
