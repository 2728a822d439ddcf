"""A stand-in for the Hugging Face hub's HTTP API, enough for the real `hf download` client
(huggingface_hub, pointed here by HF_ENDPOINT) to fetch one model repository: its info at a
revision, its file tree, and its files by commit. Serves the files of one local directory as
repository ORG/NAME at one commit. No network: the end-to-end test of `hf:` model sources.

usage: fake_hub.py PORT ORG/NAME DIR
"""
import hashlib
import http.server
import json
import os
import sys

PORT, REPO, ROOT = int(sys.argv[1]), sys.argv[2], sys.argv[3]
COMMIT = hashlib.sha1(REPO.encode()).hexdigest()
FILES = sorted(
    os.path.relpath(os.path.join(d, f), ROOT) for d, _, fs in os.walk(ROOT) for f in fs
)


def etag(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Hub(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        sys.stderr.write("fake hub: " + (args[0] % args[1:]) + "\n")

    def send(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def route(self):
        path = self.path.split("?")[0]
        info = f"/api/models/{REPO}/revision/"
        if path.startswith(info):
            body = json.dumps({
                "id": REPO, "modelId": REPO, "sha": COMMIT, "private": False,
                "siblings": [{"rfilename": f} for f in FILES],
            }).encode()
            return self.send(200, body, [("Content-Type", "application/json")])
        tree = f"/api/models/{REPO}/tree/"
        if path.startswith(tree):
            body = json.dumps([
                {"type": "file", "path": f, "oid": etag(f),
                 "size": os.path.getsize(os.path.join(ROOT, f))}
                for f in FILES
            ]).encode()
            return self.send(200, body, [("Content-Type", "application/json")])
        prefix = f"/{REPO}/resolve/"
        if path.startswith(prefix):
            _rev, _, file = path[len(prefix):].partition("/")
            if file not in FILES:
                return self.send(404, b"not found", [("X-Error-Code", "EntryNotFound")])
            with open(os.path.join(ROOT, file), "rb") as f:
                data = f.read()
            return self.send(200, data, [
                ("X-Repo-Commit", COMMIT), ("ETag", f'"{etag(file)}"'),
                ("Content-Type", "application/octet-stream"),
            ])
        return self.send(404, b"not found", [("X-Error-Code", "RepoNotFound")])

    do_GET = route
    do_HEAD = route


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Hub).serve_forever()
