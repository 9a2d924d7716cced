"""``--model ORG/NAME[@REVISION]`` by Hugging Face id: the local caches first, then the Hub (configs and headers only).

Order: Hugging Face's own cache (a snapshot huggingface_hub or an engine downloaded), then kvplan's cache of what
it fetched before (kvplan.models.hub_cache), then the Hub at ``HF_ENDPOINT`` (default https://huggingface.co),
unless ``HF_HUB_OFFLINE`` is set. From the Hub kvplan reads config.json, hf_quant_config.json and
model.safetensors.index.json when present, and of each shard only its header (``_Hub``, as huggingface_hub's
``HfApi.get_safetensors_metadata`` does; the weights are never fetched). Plain urllib, not huggingface_hub: every
response is size-capped, every redirect kept on TLS and the token kept off other hosts (``_token``). This module
is imported only when ``--model`` names a repo id (start-up cost). The repo id and revision are checked against
strict patterns before they become a path or a URL. Exit codes: a bad id, a missing repo, revision or config, a
gated or private repo, a response past a limit: 2, bad input (the user fixes the id or the token); no answer from
the Hub (timeout, refused, 5xx, TLS): 3, unavailable, as a probe without a GPU (``HubUnavailable``).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan import fsio, limits
from kvplan.errors import EXIT_PROBE_UNAVAILABLE, InputError, KvplanError
from kvplan.models import hub_cache
from kvplan.models.hf_cache import hf_cache_dir, resolve_repo_id
from kvplan.models.safetensors import INDEX_NAME, header_length, parse_safetensors_header

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
"""ORG/NAME as the Hub allows them (letters, digits, '.', '_', '-'; 96 characters each); '..' and '--' are refused
apart, as huggingface_hub's ``validate_repo_id`` does ('--' would make two ids one cache folder models--ORG--NAME)."""
REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""A branch, tag or commit: one path component (a branch with '/' in its name is given by its commit)."""
COMMIT = re.compile(r"^[0-9a-f]{40}$")
DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT_S = 10.0
"""huggingface_hub's HF_HUB_DOWNLOAD_TIMEOUT default: the whole of one response, connection included."""
QUANT_NAME = "hf_quant_config.json"
MAX_REDIRECTS = 5
FETCH_THREADS = 8
"""Shards whose headers are read at once (huggingface_hub's get_safetensors_metadata also reads them in parallel)."""
_CHUNK = 1 << 16


class HubUnavailable(KvplanError):
    """The Hub did not answer (timeout, connection refused, 5xx, TLS failure): exit 3, like a missing GPU."""

    exit_code = EXIT_PROBE_UNAVAILABLE


@dataclass(frozen=True)
class RepoRef:
    repo_id: str
    revision: str
    """'main' unless ``@REVISION`` was given."""

    @property
    def shown(self) -> str:
        return self.repo_id if self.revision == "main" else f"{self.repo_id}@{self.revision}"


def parse_ref(ref: str) -> RepoRef:
    """``ORG/NAME[@REVISION]``, validated before it becomes a path or a URL (exit 2 naming what is wrong)."""
    repo, at, rev = ref.partition("@")
    if not REPO_ID.match(repo) or ".." in repo or "--" in repo:
        raise InputError(
            f"--model {ascii(ref)[1:-1][:120]}: not a preset, a file, or a Hugging Face repo id ORG/NAME[@REVISION]"
            " (letters, digits, '.', '_', '-'; one '/'; no '..' or '--')"
        )
    if at and (not REVISION.match(rev) or ".." in rev):
        raise InputError(
            f"--model {ascii(ref)[1:-1][:120]}: {ascii(rev)[:60]} is not a revision (a branch, tag or commit:"
            " letters, digits, '.', '_', '-')"
        )
    return RepoRef(repo, rev or "main")


def model_snapshot(ref: str, env: Mapping[str, str] | None = None) -> Path:
    """The folder to plan ``ref`` from: a Hugging Face cache snapshot, kvplan's cached fetch, or a new fetch."""
    env = os.environ if env is None else env
    r = parse_ref(ref)
    found = _hf_cached(r, env) or _kvplan_cached(r, env)
    if found is not None:
        return found
    if env.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise InputError(
            f"--model {r.shown}: not in the Hugging Face cache ({hf_cache_dir(env)}) nor kvplan's"
            f" ({hub_cache.kvplan_cache_dir(env)}), and HF_HUB_OFFLINE is set; run once online, or give a snapshot"
        )
    return _fetch(r, env)


def _hf_cached(r: RepoRef, env: Mapping[str, str]) -> Path | None:
    if r.revision == "main":
        return resolve_repo_id(r.repo_id, env)
    org, name = r.repo_id.split("/")
    repo = hf_cache_dir(env) / f"models--{org}--{name}"
    return _by_ref(repo / "refs", repo / "snapshots", r.revision)


def _kvplan_cached(r: RepoRef, env: Mapping[str, str]) -> Path | None:
    folder = hub_cache.repo_folder(r.repo_id, env)
    snap = _by_ref(folder / "refs", folder, r.revision, by_folder=False)  # a ref is written once the fetch is whole
    return snap if snap is not None and (snap / "config.json").is_file() else None


def _by_ref(refs: Path, snapshots: Path, revision: str, *, by_folder: bool = True) -> Path | None:
    """snapshots/<commit> for a commit (``by_folder``), or for a branch, tag or commit whose refs/<name> names one."""
    try:
        if by_folder and COMMIT.match(revision) and (snapshots / revision).is_dir():
            return snapshots / revision
        if (refs / revision).is_file():
            sha = limits.read_text(refs / revision, limits.CONFIG, "cache ref").strip()
            if COMMIT.match(sha) and (snapshots / sha).is_dir():
                return snapshots / sha
    except OSError as e:
        raise InputError(f"cache {snapshots}: cannot read: {e.strerror or e}") from None
    return None


# --------------------------------------------------------------------------- the fetch


def _fetch(r: RepoRef, env: Mapping[str, str]) -> Path:
    hub = _Hub(r, env)
    config, commit = hub.get(r.revision, "config.json", limits.CONFIG)
    assert config is not None  # a missing config.json is an error in get
    if not COMMIT.match(commit or ""):
        commit = r.revision if COMMIT.match(r.revision) else hub.commit()
    files = {"config.json": config}
    for name, limit in ((QUANT_NAME, limits.CONFIG), (INDEX_NAME, limits.CHECKPOINT_INDEX)):
        body, _ = hub.get(commit, name, limit, optional=True)
        if body is not None:
            files[name] = body
    shards = _shard_names(files.get(INDEX_NAME), r) if INDEX_NAME in files else ("model.safetensors",)
    with ThreadPoolExecutor(max_workers=min(FETCH_THREADS, len(shards))) as pool:  # DeepSeek-V3: 163 shards
        found = pool.map(lambda s: hub.header(commit, s, optional=INDEX_NAME not in files), shards)
        headers = [h for h in found if h]
    return _store(r, commit, files, headers, env)


def _shard_names(index: bytes | None, r: RepoRef) -> tuple[str, ...]:
    where = f"--model {r.shown}: {INDEX_NAME}"
    try:
        doc = limits.strict_json(limits.decode_utf8(index or b"", where))
    except limits.JsonError as e:
        raise InputError(f"{where}: {e.problem}") from None
    wmap = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wmap, dict):
        raise InputError(f"{where}: weight_map: expected an object of tensor name -> shard file")
    names = sorted({v for v in wmap.values() if isinstance(v, str)})
    bad = [n for n in names if not hub_cache.SHARD_NAME.match(n)]
    if bad or len(names) != len(set(wmap.values())):
        raise InputError(f"{where}: weight_map names {ascii(bad[0] if bad else '')[:80]}, not a shard file name")
    if not 0 < len(names) <= hub_cache.MAX_SHARDS:
        raise limits.LimitError(f"{where}: {len(names):,} shards; kvplan reads 1 to {hub_cache.MAX_SHARDS:,}")
    return tuple(names)


def _store(
    r: RepoRef, commit: str, files: dict[str, bytes], headers: list[tuple[str, int, bytes]], env: Mapping[str, str]
) -> Path:
    """Write the fetch into kvplan's cache, each file atomically, the ref last (a half-written fetch is unnamed)."""
    folder = hub_cache.repo_folder(r.repo_id, env)
    snap = folder / commit
    try:
        (snap / hub_cache.HEADERS_DIR).mkdir(parents=True, exist_ok=True)
        (folder / "refs").mkdir(exist_ok=True)
    except OSError as e:
        raise InputError(f"kvplan cache {folder}: cannot create: {e.strerror or e}") from None
    for name, body in files.items():
        fsio.write_atomic(snap / name, body, "kvplan cache")
    if headers:
        for name, _, raw in headers:
            fsio.write_atomic(snap / hub_cache.HEADERS_DIR / name, raw, "kvplan cache")
        manifest = {"repo": r.repo_id, "revision": commit, "shards": [{"file": n, "size": s} for n, s, _ in headers]}
        fsio.write_atomic(snap / hub_cache.HEADERS_NAME, json.dumps(manifest, indent=1) + "\n", "kvplan cache")
    for ref in dict.fromkeys((commit, r.revision)):  # last: a fetch killed before this is never named
        fsio.write_atomic(folder / "refs" / ref, commit + "\n", "kvplan cache")
    return snap


class _NoDowngrade(urllib.request.HTTPRedirectHandler):
    """Follow the Hub's redirects (to its CDN for large files) but never from https to plain http."""

    max_redirections = MAX_REDIRECTS

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        if req.full_url.startswith("https:") and not newurl.startswith("https:"):
            raise HubUnavailable(f"the Hub redirected {_safe(req.full_url)} to a non-TLS address; refused")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


# Of each shard the index names, only its first 8 bytes and its JSON header: two HTTP range reads, the way
# huggingface_hub's ``HfApi.get_safetensors_metadata`` does.
class _Hub:
    """One repo at one endpoint: GETs and range reads, each capped in size and time, errors in one line."""

    def __init__(self, r: RepoRef, env: Mapping[str, str]) -> None:
        self.r = r
        self.endpoint = (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        url = urllib.parse.urlsplit(self.endpoint)
        if url.scheme not in ("https", "http") or not url.hostname or url.query or url.fragment or url.username:
            raise InputError(f"HF_ENDPOINT={ascii(self.endpoint)[1:-1][:100]}: expected https://HOST[/PATH]")
        self.secure = url.scheme == "https" or _loopback(url.hostname)
        self.timeout_s = _timeout(env)
        self.token = _token(env) if self.secure else ""  # never over plain http to another host
        handlers = [_NoDowngrade(), urllib.request.HTTPSHandler(context=ssl.create_default_context())]
        self.opener = urllib.request.build_opener(*handlers)

    def url(self, revision: str, name: str) -> str:
        q = urllib.parse.quote
        return f"{self.endpoint}/{self.r.repo_id}/resolve/{q(revision, safe='')}/{q(name, safe='')}"

    def get(
        self, revision: str, name: str, limit: limits.FileLimit, *, optional: bool = False
    ) -> tuple[bytes | None, str]:
        """(the body, the commit the Hub named); (None, '') for an optional file the repo does not have."""
        cap = limit.effective()
        deadline = time.monotonic() + self.timeout_s
        with self._open(revision, name, optional=optional) as resp:
            if resp is None:
                return None, ""
            what = f"{name} (kvplan's {limit.kind} limit; {limit.env} raises it)"
            body = self._read(resp, cap, deadline, strict=True, what=what)
            return body, resp.headers.get("X-Repo-Commit", "").strip()

    def commit(self) -> str:
        """The revision's commit from the Hub's API (``GET /api/models/{repo}/revision/{rev}``, huggingface_hub
        ``model_info``): for an answer that came through a redirect, which drops ``X-Repo-Commit``."""
        q = urllib.parse.quote(self.r.revision, safe="")
        url = f"{self.endpoint}/api/models/{self.r.repo_id}/revision/{q}"
        deadline = time.monotonic() + self.timeout_s
        with self._request(url, "the model's revision", optional=False) as resp:
            body = self._read(resp, limits.CONFIG.effective(), deadline, strict=True, what="the revision's info")
        try:
            sha = json.loads(body).get("sha", "")
        except (ValueError, AttributeError):
            sha = ""
        if not isinstance(sha, str) or not COMMIT.match(sha):
            raise InputError(
                f"--model {self.r.shown}: {self.endpoint} named no commit for {self.r.revision}; not a Hub"
            )
        return sha

    def header(self, commit: str, shard: str, *, optional: bool = False) -> tuple[str, int, bytes] | None:
        """(shard, its size, its 8-byte length + JSON header) by range reads, checked before it is kept."""
        where = f"--model {self.r.shown}: {shard}"
        deadline = time.monotonic() + self.timeout_s
        with self._open(commit, shard, byte_range=(0, 7), optional=optional) as resp:
            if resp is None:
                return None
            size = _full_size(resp, where)
            head = self._read(resp, 8, deadline, strict=False)
            n = header_length(head, size, where)
            if resp.status == 200:  # the server ignored the range: the header follows in the same answer
                raw = self._read(resp, n, deadline, strict=False)
        if resp.status == 206:
            deadline = time.monotonic() + self.timeout_s
            with self._open(commit, shard, byte_range=(8, 8 + n - 1)) as resp2:
                raw = self._read(resp2, n, deadline, strict=False)
        if len(raw) != n:
            raise InputError(f"{where}: {len(raw):,} header bytes came, {n:,} announced")
        parse_safetensors_header(raw, size, where)  # a forged header is refused before it is cached
        return shard, size, head + raw

    def _open(
        self, revision: str, name: str, *, byte_range: tuple[int, int] | None = None, optional: bool = False
    ) -> Any:
        return self._request(self.url(revision, name), name, byte_range=byte_range, optional=optional)

    def _request(
        self, url: str, name: str, *, byte_range: tuple[int, int] | None = None, optional: bool = False
    ) -> Any:
        req = urllib.request.Request(url, headers={"User-Agent": "kvplan"})
        if byte_range is not None:
            req.add_header("Range", f"bytes={byte_range[0]}-{byte_range[1]}")
        if self.token:
            req.add_unredirected_header("Authorization", f"Bearer {self.token}")  # not sent on to the CDN
        try:
            return self.opener.open(req, timeout=self.timeout_s)
        except urllib.error.HTTPError as e:
            code = e.headers.get("X-Error-Code", "") if e.headers else ""
            e.close()
            if optional and e.code == 404 and code in ("", "EntryNotFound"):
                return _Missing()
            raise self._http_error(e.code, code, name) from None
        except (TimeoutError, ssl.SSLError, OSError) as e:
            raise self._unreachable(e) from None

    def _read(self, resp: Any, cap: int, deadline: float, *, strict: bool, what: str = "") -> bytes:
        """At most ``cap`` bytes of an answer, within the deadline; ``strict``: more than ``cap`` is refused (a
        whole file), else the rest is never read (a range the server ignored: the weights stay on the Hub)."""
        length = resp.headers.get("Content-Length", "")
        if strict and length.isdigit() and int(length) > cap:
            raise limits.LimitError(f"--model {self.r.shown}: {what}: {int(length):,} bytes announced, over {cap:,}")
        want = cap + 1 if strict else cap
        out = bytearray()
        try:
            while len(out) < want:
                if time.monotonic() > deadline:
                    raise TimeoutError("timed out")
                chunk = resp.read(min(_CHUNK, want - len(out)))
                if not chunk:
                    break
                out += chunk
        except OSError as e:
            raise self._unreachable(e) from None
        if len(out) > cap:
            raise limits.LimitError(f"--model {self.r.shown}: {what}: more than {cap:,} bytes came; refused")
        return bytes(out)

    def _http_error(self, status: int, code: str, name: str) -> KvplanError:
        who = f"--model {self.r.shown}"
        login = "set HF_TOKEN to a token of an account with access" if not self.token else "HF_TOKEN has no access"
        if code == "GatedRepo" or (status == 403 and not code):
            return InputError(f"{who}: a gated repo ({status}); accept its terms on the Hub, then {login}")
        if code == "RevisionNotFound":
            return InputError(f"{who}: the Hub has no revision {self.r.revision} of {self.r.repo_id} ({status})")
        if code == "EntryNotFound" or (status == 404 and name != "config.json" and not code):
            return InputError(f"{who}: the repo has no {name} ({status})")
        if status in (401, 403, 404):
            return InputError(f"{who}: no such repo on {self.endpoint}, or a private one ({status}); {login}")
        if status == 429 or status >= 500:
            return HubUnavailable(f"{who}: {self.endpoint} answered {status}; try again later, or HF_HUB_OFFLINE=1")
        return InputError(f"{who}: {self.endpoint} answered {status} for {name}")

    def _unreachable(self, e: BaseException) -> HubUnavailable:
        if isinstance(e, TimeoutError) or "timed out" in str(e):
            why = f"no answer within {self.timeout_s:g} s (HF_HUB_DOWNLOAD_TIMEOUT)"
        elif isinstance(e, ssl.SSLError) or isinstance(getattr(e, "reason", None), ssl.SSLError):
            why = "its TLS certificate did not verify"
        else:
            why = f"cannot connect ({getattr(e, 'reason', None) or getattr(e, 'strerror', None) or type(e).__name__})"
        return HubUnavailable(f"--model {self.r.shown}: {self.endpoint}: {why}; HF_HUB_OFFLINE=1 plans from the caches")


class _Missing:
    """An optional file the repo does not have: a context manager yielding None."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _full_size(resp: Any, where: str) -> int:
    """A shard's full size: Content-Range's total after a range read, else Content-Length of a whole answer."""
    rng = resp.headers.get("Content-Range", "")
    m = re.fullmatch(r"bytes\s+\d{1,20}-\d{1,20}/(\d{1,20})", rng.strip())
    # a 206's Content-Length is the part's (8 bytes), never the file's
    raw = (m.group(1) if m else "") if resp.status == 206 else resp.headers.get("Content-Length", "")
    if not raw.isdigit():
        raise InputError(f"{where}: the Hub did not say the file's size (Content-Range); not a Hub")
    return limits.bounded_int(int(raw), name=f"{where}: size", low=8, high=limits.MAX_GPU_BYTES)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _timeout(env: Mapping[str, str]) -> float:
    raw = env.get("HF_HUB_DOWNLOAD_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise InputError(
            f"HF_HUB_DOWNLOAD_TIMEOUT={ascii(raw)[1:-1][:40]}: expected seconds, more than 0, at most 3600"
        )
    return value


# The token (``HF_TOKEN``, or the file ``huggingface-cli login`` writes) goes only in an Authorization header that
# is not carried over redirects, only over https or to a loopback host, and never into a message, a log or a file.
def _token(env: Mapping[str, str]) -> str:
    """HF_TOKEN (or the older HUGGING_FACE_HUB_TOKEN), else the file ``huggingface-cli login`` writes."""
    for key in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if env.get(key, "").strip():
            return env[key].strip()
    home = (
        Path(env["XDG_CACHE_HOME"]) / "huggingface" if env.get("XDG_CACHE_HOME") else Path.home() / ".cache/huggingface"
    )
    home = Path(env["HF_HOME"]) if env.get("HF_HOME") else home
    path = Path(env["HF_TOKEN_PATH"]) if env.get("HF_TOKEN_PATH") else home / "token"
    try:
        return limits.read_text(path.expanduser(), limits.CONFIG, "Hugging Face token file").strip()
    except InputError:
        return ""


def _safe(url: str) -> str:
    """A URL for a message: scheme, host and path only (never a query that might carry a credential)."""
    u = urllib.parse.urlsplit(url)
    return f"{u.scheme}://{u.hostname}{u.path}"[:200]
