# Time to detect a bad default plan (docs/serving.md): one client sends SynthVQA test-split questions one after
# another (data folder: argv[2], from `vispco data synth --split test --out DIR`) to
# `vispco serve --plan random:keep=8 --shadow-rate R --guard-epsilon 0.25 --guard-min-samples 10` (R = argv[1])
# until a reply says the guard moved it; prints that request's index, the time and the shadow counters.
import json, base64, urllib.request, subprocess, sys, time, os
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
rate = sys.argv[1]; data = sys.argv[2]
pf = f"/tmp/vispco_guard_port_{os.getpid()}"
if os.path.exists(pf): os.remove(pf)
srv = subprocess.Popen([root + "/build/vispco", "serve", "--model", root + "/models/synthvqa-small", "--port", "0",
                        "--port-file", pf, "--threads", "1", "--plan", "random:keep=8", "--shadow-rate", rate,
                        "--guard-epsilon", "0.25", "--guard-min-samples", "10", "--shadow-seed", "1"],
                       stderr=subprocess.DEVNULL)
while not (os.path.exists(pf) and open(pf).read().endswith("\n")): time.sleep(0.1)
port = int(open(pf).read())
rows = [json.loads(l) for l in open(data + "/data.jsonl")]
t0 = time.time(); first = None
for i, r in enumerate(rows[:400]):
    img = base64.b64encode(open(data + "/" + r["image"], "rb").read()).decode()
    body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + img}},
                                                       {"type": "text", "text": r["question"]}]}], "max_tokens": 8}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    j = json.load(urllib.request.urlopen(req))
    if "guard" in j["vispco"]:
        first = i; break
dt = time.time() - t0
m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
lines = [l for l in m.splitlines() if l.startswith("vispco_shadow_samples") or l.startswith("vispco_shadow_agreements_total") or l.startswith("vispco_shadow_requests")]
srv.terminate(); srv.wait()
print(f"rate {rate}: first fallback at request {first} (0-based), {dt:.1f} s after the first request; " + "; ".join(lines))
