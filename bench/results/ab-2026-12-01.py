#!/usr/bin/env python3
"""Alternating A/B runs of one bench workload under several libraries (bench/README, "Twenty-eighth
session": the medians and ranges quoted there).

Usage: ab-2026-12-01.py ROUNDS "WORKLOAD ARGS" NAME=LIB[:VAR=VALUE...] ...
  e.g. ab-2026-12-01.py 8 "stl_mix 2 3000" new=build/src/libtcmalloc_minimal.so \
       base=/tmp/base.so mi=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2
Each round runs every variant once, in the order given; prints per variant the median and range
of wall_s and cpu_s and the median peak RSS (MiB). Run from the repository root with build/bench built."""
import subprocess, sys, os, statistics, re
rounds=int(sys.argv[1]); args=sys.argv[2].split(); variants=sys.argv[3:]
res={}
for r in range(rounds):
    for v in variants:
        name, spec = v.split('=',1)
        parts=spec.split(':'); lib=parts[0]; env=dict(os.environ)
        for kv in parts[1:]:
            k,val=kv.split('=',1); env[k]=val
        if lib: env['LD_PRELOAD']=lib
        out=subprocess.run(['build/bench/'+args[0]]+args[1:],env=env,capture_output=True,text=True).stdout
        d=dict(re.findall(r'(\w+)=([0-9.]+)',out))
        res.setdefault(name,[]).append((float(d['wall_s']),float(d['cpu_s']),float(d.get('peak_rss_kib',0))))
for n,l in res.items():
    w=sorted(x[0] for x in l); c=sorted(x[1] for x in l)
    print(f"{n:10s} wall med {statistics.median(w):.3f} [{w[0]:.3f}-{w[-1]:.3f}]  cpu med {statistics.median(c):.3f} [{c[0]:.3f}-{c[-1]:.3f}] peak {statistics.median(x[2] for x in l)/1024:.1f}")
