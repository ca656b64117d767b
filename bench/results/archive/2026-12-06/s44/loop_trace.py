# Per thread, each copy's time in the hook, the synchronize after it, and the time outside both
# until the next copy, grouped by outcome and host address (which buffer: default/cmt/pinned).
import sys, statistics, collections
rows = []
for line in open(sys.argv[1]):
    if line.startswith('#') or line.startswith('start_ns'): continue
    f = line.rstrip('\n').split('\t')
    rows.append(dict(start=int(f[0]), end=int(f[1]), tid=int(f[2]), api=f[3], dir=f[4],
                     bytes=int(f[5]), outcome=f[7], host=f[8], host_at=f[15]))
by = collections.defaultdict(list)
for r in rows: by[r['tid']].append(r)
stats = collections.defaultdict(lambda: collections.defaultdict(list))
for tid, rs in by.items():
    rs.sort(key=lambda r: r['start'])
    for i, r in enumerate(rs):
        if r['dir'] == 'wait' or r['bytes'] == 0: continue
        if i + 2 >= len(rs): continue
        w, nxt = rs[i + 1], rs[i + 2]
        if w['dir'] != 'wait' or nxt['dir'] == 'wait': continue
        key = (r['outcome'], r['host'], r['bytes'], r['dir'])
        s = stats[key]
        s['copy'].append(r['end'] - r['start'])
        s['to_wait'].append(w['start'] - r['end'])
        s['wait'].append(w['end'] - w['start'])
        s['after'].append(nxt['start'] - w['end'])
        s['cycle'].append(nxt['start'] - r['start'])
for key, s in sorted(stats.items(), key=lambda kv: -len(kv[1]['copy'])):
    if len(s['copy']) < 50: continue
    med = {k: statistics.median(v) / 1e3 for k, v in s.items()}
    print('%-12s %-9s %7d %s n=%6d  copy %6.2f  ->wait %5.2f  wait %5.2f  after %5.2f  cycle %6.2f us'
          % (key[0], key[1], key[2], key[3], len(s['copy']), med['copy'], med['to_wait'], med['wait'],
             med['after'], med['cycle']))
