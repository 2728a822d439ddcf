"""Load test with client faults: N concurrent streaming chat requests with short outputs, a
random third of the clients disconnecting mid-stream. The server must answer the rest without
a 5xx, stay healthy, and afterwards have every KV block back in the pool (read from /metrics).

    python3 tests/e2e/load_disconnect.py BASE_URL API_KEY MODEL N
"""
import asyncio
import random
import re
import sys
import time

import httpx

base, key, model, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
headers = {"authorization": f"Bearer {key}"}
rng = random.Random(7)


async def one(client, i, quit_early):
    body = {
        "model": model, "stream": True, "max_tokens": 8,
        "messages": [{"role": "user", "content": f"Request {i}: name a color."}],
    }
    async with client.stream("POST", f"{base}/v1/chat/completions", json=body, headers=headers) as r:
        if r.status_code != 200:
            return ("error", r.status_code)
        async for line in r.aiter_lines():
            if quit_early and line.startswith("data: "):
                return ("disconnected", 200)  # leaving the block closes the connection
            if line == "data: [DONE]":
                return ("done", 200)
    return ("truncated", 200)


def metric(text, name):
    m = re.search(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


async def main():
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    t = time.time()
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        quits = [rng.random() < 1 / 3 for _ in range(n)]
        results = await asyncio.gather(*(one(client, i, q) for i, q in enumerate(quits)))
        elapsed = time.time() - t
        kinds = {k: sum(1 for r in results if r[0] == k) for k in ("done", "disconnected", "error", "truncated")}
        statuses = sorted({r[1] for r in results})
        print(f"{n} requests in {elapsed:.1f} s: {kinds}, statuses {statuses}")
        assert kinds["error"] == 0 and kinds["truncated"] == 0, results
        assert kinds["done"] + kinds["disconnected"] == n
        deadline = time.time() + 60
        while True:
            m = (await client.get(f"{base}/metrics")).text
            running = metric(m, "vllm:num_requests_running")
            waiting = metric(m, "vllm:num_requests_waiting")
            usage = metric(m, "vllm:kv_cache_usage_perc")
            if running == 0 and waiting == 0 and usage == 0:
                break
            assert time.time() < deadline, f"blocks not released: running {running}, waiting {waiting}, kv {usage}"
            await asyncio.sleep(0.5)
        health = await client.get(f"{base}/health")
        assert health.status_code == 200, health.text
        ok = await client.post(f"{base}/v1/chat/completions", headers=headers,
                               json={"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
        assert ok.status_code == 200, ok.text
        print(f"after the load: running {running}, waiting {waiting}, kv usage {usage}; health 200; serving")


asyncio.run(main())
