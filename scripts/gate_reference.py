# Independent brute force of the gate's exact test (scipy.stats): the p-values and bounds that
# src/gate/decision.rs and render.rs assert. Run: python3 scripts/gate_reference.py (needs scipy).
from scipy.stats import binom, beta
import numpy as np
def cp(x,n,conf=0.999):
    a=1-conf
    lo=0.0 if x==0 else beta.ppf(a/2,x,n-x+1)
    hi=1.0 if x==n else beta.ppf(1-a/2,x+1,n-x)
    return lo,hi
def Z(x,nx,y,ny,s):
    a=(x+.5)/(nx+1); b=(y+.5)/(ny+1)
    return (y/ny-x/nx+s)/np.sqrt(a*(1-a)/nx+b*(1-b)/ny)
def T(x,nx,y,ny,s,upper):
    if upper: return max(Z(x,nx,k,ny,s) for k in range(0,y+1))
    return min(Z(x,nx,k,ny,s) for k in range(y,ny+1))
def p(x,nx,y,ny,s,upper,G=200):
    obs=T(x,nx,y,ny,s,upper)
    lo,hi=max(0,s),min(1,1+s)
    clo,chi=cp(x,nx)
    R=np.array([[ (T(a,nx,b,ny,s,upper)>=obs-1e-12) if upper else (T(a,nx,b,ny,s,upper)<=obs+1e-12) for b in range(ny+1)] for a in range(nx+1)])
    best=0
    for i in range(G+1):
        px=lo+(hi-lo)*i/G
        if px<clo or px>chi: continue
        py=min(1,max(0,px-s))
        fx=binom.pmf(np.arange(nx+1),nx,px); fy=binom.pmf(np.arange(ny+1),ny,py)
        best=max(best,(np.outer(fx,fy)*R).sum())
    return min(1,best+0.001)
print("NI 6/8->8/8", repr(p(6,8,8,8,0.05,True)))
print("NI 40/50->48/50", repr(p(40,50,48,50,0.05,True)))
print("NI 126/140->130/140", repr(p(126,140,130,140,0.05,True)))
print("REG 8/8->4/8", repr(p(8,8,4,8,0.0,False)))
print("REG 3/10->0/10", repr(p(3,10,0,10,0.0,False)))
print("REG 18/30->15/30", repr(p(18,30,15,30,0.0,False)))
print("REG 126/140->130/140", repr(p(126,140,130,140,0.0,False)))
print("REG 10/10->0/10", repr(p(10,10,0,10,0.0,False)))
print("REG 2/2->1/2", repr(p(2,2,1,2,0.0,False)))
print("REG 12/12->1/12", repr(p(12,12,1,12,0.0,False)))
# One-sided bounds by inverting the same tests, bisected as the gate does (30 halvings of [-1, 1]).
def bound(reject, rejected_low):
    a, b = -1.0, 1.0
    if rejected_low and not reject(-1.0 + 1e-9): return -1.0
    if not rejected_low and not reject(1.0 - 1e-9): return 1.0
    for _ in range(30):
        mid = 0.5 * (a + b)
        if reject(mid) == rejected_low: a = mid
        else: b = mid
    return a if rejected_low else b
x, nx, y, ny, alpha = 6, 8, 8, 8, 0.05
print("bounds 6/8->8/8", repr(bound(lambda d: p(x,nx,y,ny,-d,True) <= alpha, True)), repr(bound(lambda d: p(x,nx,y,ny,-d,False) <= alpha, False)))
