"""The Hub fetch (kvplan/models/hub.py), pinned where the mutation check moves it, against a stand-in for the HTTP
layer: a fake opener in place of urllib's (never the network; tests/conftest.py sets HF_HUB_OFFLINE=1), and for the
redirect bound one server on 127.0.0.1.

What the stand-in answers is what huggingface_hub reads from huggingface.co (``utils/_http.py``
``hf_raise_for_status``: the error in ``X-Error-Code`` — ``GatedRepo``, ``RepoNotFound``, ``RevisionNotFound``,
``EntryNotFound`` — and 401 for a private or missing repo; ``file_download.py``: the commit in ``X-Repo-Commit``;
``hf_api.py`` ``get_safetensors_metadata``: a shard's first 8 bytes, the little-endian header length n, then bytes
8 to 8 + n - 1, the JSON header, by HTTP range reads answered 206 with ``Content-Range: bytes a-b/total``).
"""

from __future__ import annotations

import io
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kvplan import limits
from kvplan.errors import InputError
from kvplan.models import hub
from tests.models.test_hub import COMMIT, _model_files

SHARD = "model-00001-of-00002.safetensors"


class _Resp:
    """One answer: status, headers, a body read in chunks."""

    def __init__(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.status, self.headers, self._body = status, headers, io.BytesIO(body)

    def read(self, n: int) -> bytes:
        return self._body.read(n)

    def __enter__(self) -> _Resp:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class _Opener:
    """urllib's opener, answering from ``files`` as the Hub does; ``ignore_range``: a server that sends the whole
    file (200) to a range read."""

    def __init__(self, files: dict[str, bytes], *, ignore_range: bool = False) -> None:
        self.files, self.ignore_range = files, ignore_range
        self.asked: list[tuple[str, str]] = []

    def open(self, req: urllib.request.Request, timeout: float) -> _Resp:
        path = urllib.parse.urlsplit(req.full_url).path
        rng = str(req.get_header("Range") or "")
        self.asked.append((path, rng))
        name = path.rsplit("/", 1)[1]
        if name not in self.files:
            headers = Message()
            headers["X-Error-Code"] = "EntryNotFound"
            raise urllib.error.HTTPError(req.full_url, 404, "Not Found", headers, None)
        body = self.files[name]
        if rng and not self.ignore_range:
            a, b = (int(x) for x in rng.removeprefix("bytes=").split("-"))
            part = body[a : b + 1]
            return _Resp(206, part, {"Content-Length": str(len(part)), "Content-Range": f"bytes {a}-{b}/{len(body)}"})
        return _Resp(200, body, {"Content-Length": str(len(body)), "X-Repo-Commit": COMMIT})


def _hub(tmp_path: Path, opener: Any = None, endpoint: str = "https://hub.example") -> hub._Hub:
    env = {"HF_ENDPOINT": endpoint, "HF_TOKEN_PATH": str(tmp_path / "no-token")}
    h = hub._Hub(hub.RepoRef("org/tiny", "main"), env)
    if opener is not None:
        h.opener = opener
    return h


# --------------------------------------------------------------------------- the repo id


@pytest.mark.parametrize("ref", ["org/x..y", "org/a--b", "org--a/b"])
def test_ids_huggingface_hub_refuses_are_refused(ref: str) -> None:
    # huggingface_hub utils/_validators.py validate_repo_id: "Cannot have -- or .. in repo_id"; with '--' allowed,
    # org/a--b and org--a/b would both be the cache folder models--org--a--b (repo_folder_name)
    with pytest.raises(InputError, match=r"not a preset, a file, or a Hugging Face repo id .*no '\.\.' or '--'"):
        hub.parse_ref(ref)
    assert hub.parse_ref("org/a-b.c_d@v1.0") == hub.RepoRef("org/a-b.c_d", "v1.0")


def test_a_bad_id_is_shown_whole_up_to_120_characters() -> None:
    with pytest.raises(InputError) as e:
        hub.parse_ref("a/b/c")
    assert str(e.value).startswith("--model a/b/c: not a preset")
    with pytest.raises(InputError) as e:
        hub.parse_ref("x" * 200)
    assert str(e.value).startswith("--model " + "x" * 120 + ": not a preset")


def test_a_bad_revision_is_shown_up_to_60_characters() -> None:
    with pytest.raises(InputError) as e:
        hub.parse_ref("a/b@x/y")
    assert str(e.value).startswith("--model a/b@x/y: 'x/y' is not a revision")
    ref = "a/b@-" + "r" * 200
    with pytest.raises(InputError) as e:
        hub.parse_ref(ref)
    # the ref cut at 120 characters, the revision's ascii() (quotes included) at 60
    assert str(e.value).startswith(f"--model {ref[:120]}: '-{'r' * 58} is not a revision")


# --------------------------------------------------------------------------- the Hub's answers


@pytest.mark.parametrize(
    ("status", "code", "name", "kind", "text"),
    [
        (401, "GatedRepo", "config.json", InputError, "a gated repo (401); accept its terms on the Hub, then set HF_"),
        (403, "", "config.json", InputError, "a gated repo (403); accept its terms"),
        (403, "RepoNotFound", "config.json", InputError, "no such repo on https://hub.example, or a private one (403)"),
        (401, "RepoNotFound", "config.json", InputError, "no such repo on https://hub.example, or a private one (401)"),
        (404, "RevisionNotFound", "config.json", InputError, "the Hub has no revision main of org/tiny (404)"),
        (404, "EntryNotFound", SHARD, InputError, f"the repo has no {SHARD} (404)"),
        (404, "", SHARD, InputError, f"the repo has no {SHARD} (404)"),
        (404, "", "config.json", InputError, "no such repo on https://hub.example, or a private one (404)"),
        (400, "", "config.json", InputError, "https://hub.example answered 400 for config.json"),
        (428, "", "config.json", InputError, "https://hub.example answered 428 for config.json"),
        (429, "", "config.json", hub.HubUnavailable, "https://hub.example answered 429; try again later"),
        (499, "", "config.json", InputError, "https://hub.example answered 499 for config.json"),
        (500, "", "config.json", hub.HubUnavailable, "https://hub.example answered 500; try again later"),
        (503, "", "config.json", hub.HubUnavailable, "https://hub.example answered 503; try again later"),
    ],
)
def test_each_hub_error_is_its_one_line(
    tmp_path: Path, status: int, code: str, name: str, kind: type[Exception], text: str
) -> None:
    # 429 and 5xx are the Hub's transient answers (huggingface_hub utils/_http.py http_backoff retries them): exit 3,
    # as a probe without a GPU; every other status is the user's to fix (exit 2)
    err = _hub(tmp_path)._http_error(status, code, name)
    assert type(err) is kind
    assert str(err).startswith("--model org/tiny: ") and text in str(err), str(err)


def test_an_optional_file_the_repo_lacks_is_absent_and_other_errors_are_raised(tmp_path: Path) -> None:
    h = _hub(tmp_path, _Opener({"config.json": b"{}"}))
    assert h.get(COMMIT, hub.QUANT_NAME, limits.CONFIG, optional=True) == (None, "")
    with pytest.raises(InputError, match=r"the repo has no hf_quant_config\.json \(404\)"):
        h.get(COMMIT, hub.QUANT_NAME, limits.CONFIG)
    assert h.get("main", "config.json", limits.CONFIG) == (b"{}", COMMIT)


def test_an_optional_file_behind_a_gate_is_not_taken_for_absent(tmp_path: Path) -> None:
    class Gated(_Opener):
        def open(self, req: urllib.request.Request, timeout: float) -> _Resp:
            headers = Message()
            headers["X-Error-Code"] = "GatedRepo"
            raise urllib.error.HTTPError(req.full_url, 403, "Forbidden", headers, None)

    with pytest.raises(InputError, match=r"a gated repo \(403\)"):
        _hub(tmp_path, Gated({})).get(COMMIT, hub.QUANT_NAME, limits.CONFIG, optional=True)


# --------------------------------------------------------------------------- sizes and the header reads


def test_a_whole_file_is_read_up_to_its_limit_and_refused_past_it(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("KVPLAN_MAX_CONFIG_BYTES", "100")
    h = _hub(tmp_path)
    assert h._read(_Resp(200, b"x" * 100, {}), 100, 1e18, strict=True) == b"x" * 100
    with pytest.raises(limits.LimitError, match=r"--model org/tiny: config: more than 100 bytes came; refused"):
        h._read(_Resp(200, b"x" * 101, {}), 100, 1e18, strict=True, what="config")
    with pytest.raises(limits.LimitError, match=r"config: 1,000 bytes announced, over 100$"):
        h._read(_Resp(200, b"", {"Content-Length": "1000"}), 100, 1e18, strict=True, what="config")
    # not strict (a range the server ignored): the first n bytes, the rest never read
    assert h._read(_Resp(200, b"x" * 1000, {"Content-Length": "1000"}), 100, 1e18, strict=False) == b"x" * 100


def test_a_header_is_two_range_reads(tmp_path: Path) -> None:
    files = _model_files(tmp_path)
    body = files[SHARD]
    n = int.from_bytes(body[:8], "little")
    opener = _Opener(files)
    got = _hub(tmp_path, opener).header(COMMIT, SHARD)
    assert got == (SHARD, len(body), body[: 8 + n])
    assert [r for _, r in opener.asked] == ["bytes=0-7", f"bytes=8-{8 + n - 1}"]


def test_a_server_that_ignores_the_range_is_read_in_one_answer(tmp_path: Path) -> None:
    # a 200 to a range read carries the whole file: its size is Content-Length, the header follows the 8 bytes
    files = _model_files(tmp_path)
    body = files[SHARD]
    n = int.from_bytes(body[:8], "little")
    opener = _Opener(files, ignore_range=True)
    assert _hub(tmp_path, opener).header(COMMIT, SHARD) == (SHARD, len(body), body[: 8 + n])
    assert len(opener.asked) == 1


def test_a_short_header_says_both_lengths(tmp_path: Path) -> None:
    files = _model_files(tmp_path)
    body = files[SHARD]
    n = int.from_bytes(body[:8], "little")

    class Short(_Opener):
        def open(self, req: urllib.request.Request, timeout: float) -> _Resp:
            resp = super().open(req, timeout)
            if str(req.get_header("Range")).startswith("bytes=8-"):
                resp._body = io.BytesIO(resp._body.read()[:-10])
            return resp

    with pytest.raises(InputError, match=rf"{SHARD}: {n - 10:,} header bytes came, {n:,} announced"):
        _hub(tmp_path, Short(files)).header(COMMIT, SHARD)


def test_the_shard_headers_are_read_by_one_thread_a_shard_up_to_eight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the fixture's index names 2 shards: 2 threads (min(FETCH_THREADS 8, 2)), not 8
    files = _model_files(tmp_path)
    opener = _Opener(files)
    workers: list[int] = []

    class Pool(ThreadPoolExecutor):
        def __init__(self, max_workers: int) -> None:
            workers.append(max_workers)
            super().__init__(max_workers=max_workers)

    monkeypatch.setattr(hub, "ThreadPoolExecutor", Pool)
    monkeypatch.setattr(urllib.request, "build_opener", lambda *handlers: opener)
    env = {"HF_ENDPOINT": "https://hub.example", "HF_TOKEN_PATH": str(tmp_path / "t")}
    env["KVPLAN_CACHE_DIR"] = str(tmp_path)
    snap = hub._fetch(hub.RepoRef("org/tiny", "main"), env)
    assert workers == [2]
    assert snap == tmp_path / "hub" / "models--org--tiny" / COMMIT
    # the commit from X-Repo-Commit: no API request; every later read by that commit
    assert [p for p, _ in opener.asked][:3] == [
        "/org/tiny/resolve/main/config.json",
        f"/org/tiny/resolve/{COMMIT}/hf_quant_config.json",
        f"/org/tiny/resolve/{COMMIT}/model.safetensors.index.json",
    ]


def test_the_size_comes_from_content_range_after_a_range_read() -> None:
    assert hub._full_size(_Resp(206, b"", {"Content-Range": "bytes 0-7/123456"}), "w") == 123_456
    assert hub._full_size(_Resp(200, b"", {"Content-Length": "4096"}), "w") == 4096
    with pytest.raises(InputError, match=r"w: the Hub did not say the file's size \(Content-Range\); not a Hub"):
        hub._full_size(_Resp(206, b"", {"Content-Length": "8"}), "w")
    with pytest.raises(limits.LimitError, match=r"w: size: 7 is below 8"):  # 8 bytes: the header length alone
        hub._full_size(_Resp(200, b"", {"Content-Length": "7"}), "w")


# --------------------------------------------------------------------------- time, token, redirects


@pytest.mark.parametrize(("raw", "seconds"), [("", 10.0), ("0.5", 0.5), ("3600", 3600.0)])
def test_the_timeout_is_huggingface_hubs(raw: str, seconds: float) -> None:
    # huggingface_hub constants.py: HF_HUB_DOWNLOAD_TIMEOUT, default 10 (seconds)
    assert hub._timeout({"HF_HUB_DOWNLOAD_TIMEOUT": raw}) == seconds


@pytest.mark.parametrize("raw", ["0", "3601", "-1", "ten"])
def test_a_timeout_out_of_range_is_one_line(raw: str) -> None:
    expected = rf"^HF_HUB_DOWNLOAD_TIMEOUT={raw}: expected seconds, more than 0, at most 3600"
    with pytest.raises(InputError, match=expected):
        hub._timeout({"HF_HUB_DOWNLOAD_TIMEOUT": raw})


def test_the_token_goes_only_over_tls_or_to_this_machine(tmp_path: Path) -> None:
    env = {"HF_TOKEN": "hf_x"}
    for endpoint, sent in [
        ("https://hub.example", True),
        ("http://localhost:8080", True),
        ("http://127.0.0.1:8080", True),
        ("http://[::1]:8080", True),
        ("http://10.0.0.1:8080", False),
        ("http://hub.example", False),
    ]:
        h = hub._Hub(hub.RepoRef("org/tiny", "main"), {**env, "HF_ENDPOINT": endpoint})
        assert (h.token == "hf_x") is sent, endpoint


def test_the_token_file_is_huggingface_hubs(tmp_path: Path) -> None:
    # huggingface_hub constants.py: HF_HOME = $XDG_CACHE_HOME/huggingface (default ~/.cache/huggingface),
    # HF_TOKEN_PATH = $HF_HOME/token
    (tmp_path / "huggingface").mkdir()
    (tmp_path / "huggingface" / "token").write_text("hf_xdg\n")
    assert hub._token({"XDG_CACHE_HOME": str(tmp_path)}) == "hf_xdg"
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "token").write_text("hf_home")
    assert hub._token({"XDG_CACHE_HOME": str(tmp_path), "HF_HOME": str(tmp_path / "home")}) == "hf_home"
    assert hub._token({"HF_TOKEN": " hf_env ", "HF_HOME": str(tmp_path / "home")}) == "hf_env"
    assert hub._token({"HUGGING_FACE_HUB_TOKEN": "hf_old"}) == "hf_old"
    assert hub._token({"HF_TOKEN_PATH": str(tmp_path / "none")}) == ""


def test_a_message_names_no_query() -> None:
    assert hub._safe("https://cdn.example/a/b?X-Amz-Signature=s3cr3t") == "https://cdn.example/a/b"


@pytest.fixture
def hops() -> Iterator[str]:
    """A server whose /hop/N redirects to /hop/N-1; /hop/0 answers."""

    class H(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            n = int(self.path.rsplit("/", 1)[1])
            self.send_response(302 if n else 200)
            if n:
                self.send_header("Location", f"/hop/{n - 1}")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_five_redirects_are_followed_and_a_sixth_is_refused(tmp_path: Path, hops: str) -> None:
    # the Hub answers a file with at most two (a renamed repo's 307, then the CDN's 302); kvplan follows 5
    # (MAX_REDIRECTS), urllib's default being 10
    h = _hub(tmp_path, endpoint=hops)
    with h._request(f"{hops}/hop/5", "config.json") as resp:
        assert resp.status == 200
    with pytest.raises(InputError, match=rf"--model org/tiny: {hops} answered 302 for config.json"):
        h._request(f"{hops}/hop/6", "config.json")


def test_the_index_names_1_to_10000_shard_files() -> None:
    # hub_cache.MAX_SHARDS 10,000 (DeepSeek-V3 ships 163); an index naming none is refused with its count
    r = hub.RepoRef("org/tiny", "main")
    two = b'{"weight_map": {"a": "m-2.safetensors", "b": "m-1.safetensors", "c": "m-1.safetensors"}}'
    assert hub._shard_names(two, r) == ("m-1.safetensors", "m-2.safetensors")
    with pytest.raises(limits.LimitError, match=r"index\.json: 0 shards; kvplan reads 1 to 10,000$"):
        hub._shard_names(b'{"weight_map": {}}', r)
    with pytest.raises(InputError, match=r"weight_map names '\.\./x\.safetensors', not a shard file name"):
        hub._shard_names(b'{"weight_map": {"a": "../x.safetensors"}}', r)


def test_an_answer_that_trickles_in_is_read_to_its_cap_and_no_further(tmp_path: Path) -> None:
    # a socket gives what has arrived, fewer bytes than asked: each read asks only for what is still wanted
    class Trickle(_Resp):
        def read(self, n: int) -> bytes:
            return self._body.read(min(n, 3))

    h = _hub(tmp_path)
    assert h._read(Trickle(200, b"x" * 100, {}), 10, 1e18, strict=False) == b"x" * 10
    assert h._read(Trickle(200, b"x" * 10, {}), 10, 1e18, strict=True) == b"x" * 10


def test_a_long_timeout_value_is_shown_up_to_40_characters() -> None:
    raw = "9" * 30 + "s" * 30
    with pytest.raises(InputError, match=rf"^HF_HUB_DOWNLOAD_TIMEOUT={raw[:40]}: expected seconds"):
        hub._timeout({"HF_HUB_DOWNLOAD_TIMEOUT": raw})


def test_an_answer_whole_by_the_deadline_is_kept_when_the_clock_passes_it_after(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # the deadline is checked before each read: the 10 wanted bytes came at t = 0 (deadline 1), so the answer is
    # whole; the clock reading 2 after the last byte must not turn it into a timeout (exit 3, "Hub unavailable")
    clock = iter([0.0, 2.0, 2.0, 2.0])
    monkeypatch.setattr(hub.time, "monotonic", lambda: next(clock))
    h = _hub(tmp_path)
    assert h._read(_Resp(200, b"x" * 100, {}), 10, 1.0, strict=False) == b"x" * 10


def test_a_message_url_is_cut_at_200_characters() -> None:
    # scheme + host (19: "https://cdn.example") + a path of 300: the first 200 characters, the rest dropped
    shown = hub._safe("https://cdn.example/" + "p" * 299)
    assert len(shown) == 200 and shown == ("https://cdn.example/" + "p" * 299)[:200]
