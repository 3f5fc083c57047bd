# TTFT of a second question on the same image, image KV cache on vs off (docs/serving.md, "Multi-turn chat and
# the image KV cache"). Starts `vispco serve` on the bundled model twice (--image-cache-mb 256, then 0), and for
# each of N sample images (data/samples/images, repeated) sends a first question, then a second one on the same image, one request at a time,
# streamed; reports the second question's TTFT at the client (request sent → first content delta) and the
# server's ttft_ms (enqueue → first token) and prefill_ms, medians over the images, per plan.
# Usage: python3 scripts/image_cache_ttft.py [N=20] [THREADS=1] [PLANS=none,divprune:layer=0,keep=64]
import base64, json, os, statistics, subprocess, sys, time, urllib.request

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
threads = sys.argv[2] if len(sys.argv) > 2 else "1"
plans = (sys.argv[3] if len(sys.argv) > 3 else "none;divprune:layer=0,keep=64").split(";")
img_dir = os.path.join(root, "data/samples/images")
images = sorted(f for f in os.listdir(img_dir) if f.endswith(".png"))
images = (images * (n // len(images) + 1))[:n]  # the 4 sample images, repeated: N second questions in all


def ask(port, png, question, plan):
    body = {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}},
        {"type": "text", "text": question}]}],
        "max_tokens": 8, "stream": True, "vispco": {"plan": plan}}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    ttft, info = None, None
    with urllib.request.urlopen(req) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            j = json.loads(line[6:])
            if ttft is None and j["choices"] and j["choices"][0]["delta"].get("content"):
                ttft = (time.perf_counter() - t0) * 1000
            if "vispco" in j:
                info = j["vispco"]
    if ttft is None:  # an empty answer: its last chunk is the first token's
        ttft = (time.perf_counter() - t0) * 1000
    return ttft, info


def run(cache_mb):
    pf = f"/tmp/vispco_cache_port_{os.getpid()}"
    if os.path.exists(pf):
        os.remove(pf)
    srv = subprocess.Popen([root + "/build/vispco", "serve", "--model", root + "/models/synthvqa-small", "--port", "0",
                            "--port-file", pf, "--threads", threads, "--image-cache-mb", str(cache_mb)],
                           stderr=subprocess.DEVNULL)
    try:
        while not (os.path.exists(pf) and open(pf).read().endswith("\n")):
            time.sleep(0.1)
        port = int(open(pf).read())
        out = {}
        for plan in plans:
            ask(port, open(os.path.join(img_dir, images[0]), "rb").read(), "warm-up", plan)
            rows = []
            for name in images:
                png = open(os.path.join(img_dir, name), "rb").read()
                ask(port, png, "What color is the cross?", plan)
                ttft, info = ask(port, png, "How many objects are there?", plan)
                rows.append((ttft, info["ttft_ms"], info["prefill_ms"], info["image_cache"]))
            out[plan] = rows
        return out
    finally:
        srv.terminate()
        srv.wait()


on, off = run(256), run(0)
print(f"{len(images)} images, server --threads {threads}; second question's TTFT, medians (ms)")
print("| plan | cache | client TTFT | server ttft_ms | prefill_ms | image_cache |")
print("|---|---|---:|---:|---:|---|")
for plan in plans:
    for label, res in (("off (cold)", off), ("on (hit)", on)):
        rows = res[plan]
        kinds = sorted(set(r[3] for r in rows))
        print(f"| `{plan}` | {label} | {statistics.median(r[0] for r in rows):.1f} | "
              f"{statistics.median(r[1] for r in rows):.1f} | {statistics.median(r[2] for r in rows):.1f} | "
              f"{','.join(kinds)} |")
