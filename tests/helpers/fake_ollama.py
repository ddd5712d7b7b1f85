"""A stand-in for Ollama's embed API on a loopback port: POST /api/embed -> {"embeddings": [...]}.

Vectors are a hashed bag of words (64 dimensions), so texts sharing words are close. `stop()` takes it
down mid-session, as a crashed or closed Ollama would be.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIM = 64


def toy_vector(text: str) -> list[float]:
    v = [0.0] * DIM
    for w in re.findall(r"\w+", text.lower()):
        h = int.from_bytes(hashlib.sha256(w.encode()).digest()[:4], "big")
        v[h % DIM] += 1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


class FakeOllama:
    def __init__(self, model: str = "toy-embed", digest: str = "a1b2c3d4e5f6" * 5 + "a1b2") -> None:
        self.model = model
        self.digest = digest  # what /api/tags lists for the model: change it to "re-pull" the model
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                if self.path != "/api/tags":
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps({"models": [{"name": f"{fake.model}:latest", "model": f"{fake.model}:latest",
                                               "digest": fake.digest, "size": 1234}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                fake.requests.append(body)
                if self.path != "/api/embed":
                    self.send_response(404)
                    self.end_headers()
                    return
                if body.get("model") != fake.model:
                    data = json.dumps({"error": f"model '{body.get('model')}' not found"}).encode()
                    self.send_response(404)
                else:
                    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    data = json.dumps({"model": fake.model, "embeddings": [toy_vector(t) for t in inputs]}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def key(self) -> str:
        """The model identity retained should store with this fake's vectors."""
        return f"ollama:{self.model}@{self.digest[:12]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeOllama:
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        except Exception:
            pass
