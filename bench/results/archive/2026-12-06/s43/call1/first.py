import sys, time, torch
torch.zeros(1, device='cuda'); x = torch.randint(0, 255, (125 << 20,), dtype=torch.uint8)
t = time.perf_counter(); y = x.cuda(); torch.cuda.synchronize(); a = time.perf_counter() - t
t = time.perf_counter(); z = y.cpu(); b = time.perf_counter() - t
t = time.perf_counter(); y2 = x.cuda(); torch.cuda.synchronize(); c = time.perf_counter() - t
print('%s: first h2d %.1f ms, first d2h %.1f ms, second h2d %.1f ms, equal %s' % (sys.argv[1], a * 1e3, b * 1e3, c * 1e3, torch.equal(x, z) and torch.equal(y2.cpu(), x)))
