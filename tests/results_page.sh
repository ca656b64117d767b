#!/bin/sh
# The results page (bench/site.py) from the repository's bench/results/ and configs/: rendered in
# headless Chromium, every machine's curves must be in the page (six per copy result: three
# modes, two directions), each with its points, and every shared profile listed. Exit 77 without
# Chromium.
set -u
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$root/bench/site.py" "$tmp/index.html" "$root/bench/results" "$root/configs" || { echo "FAIL: site.py"; exit 1; }
browser=""
for b in chromium chromium-browser google-chrome headless_shell; do
  command -v "$b" > /dev/null 2>&1 && { browser=$b; break; }
done
[ -n "$browser" ] || { echo "no Chromium: skipped (apt-get install chromium to run it)"; exit 77; }
HOME=$tmp timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
  --dump-dom "file://$tmp/index.html" > "$tmp/dom.html" 2> "$tmp/browser.err" ||
  { echo "FAIL: $browser could not render the page"; tail -5 "$tmp/browser.err"; exit 1; }
python3 - "$root" "$tmp/dom.html" <<'PY' || exit 1
import glob, json, os, re, sys
root, dom = sys.argv[1], open(sys.argv[2]).read()
expected = 0
for path in glob.glob(os.path.join(root, "bench/results/**/*.json"), recursive=True):
    try:
        r = json.load(open(path))
    except ValueError:
        continue
    if r.get("benchmark") == "cmt-bench-copy" and any(x.get("case", "plain") == "plain" for x in r.get("results", [])):
        expected += 6
curves = re.findall(r'<polyline class="curve"[^>]*points="([^"]*)"', dom)
assert expected > 0 and len(curves) == expected, (len(curves), expected)
assert all(len(c.split()) >= 2 for c in curves), "a curve without points"
for mode in ("default", "cmt", "pinned"):
    assert dom.count(f'data-mode="{mode}"') == expected // 3, mode
profiles = glob.glob(os.path.join(root, "configs/*.toml"))
for p in profiles:
    assert "Profile " + os.path.basename(p) in dom, p
external = re.findall(r'(?:src|href)\s*=\s*"(?:https?:)?//[^"]*"', dom)
assert not external, f"the page must read offline, but loads {external[:3]}"
print(f"ok: rendered; {len(curves)} curves with points, {len(profiles)} profiles; nothing loaded from outside")
PY
