"""--model ORG/NAME[@REVISION] from the Hub (kvplan.models.hub), against a real HTTP server on 127.0.0.1.

The server stands in for huggingface.co the way huggingface_hub sees it (``HF_ENDPOINT``): files at
``/{repo}/resolve/{revision}/{file}``, the commit in ``X-Repo-Commit``, HTTP range reads answered 206 with
``Content-Range: bytes a-b/total``, errors with ``X-Error-Code`` (``GatedRepo``, ``RepoNotFound``,
``RevisionNotFound``, ``EntryNotFound``: huggingface_hub ``utils/_http.py`` ``hf_raise_for_status`` reads the same
header). Never the network: tests/conftest.py sets HF_HUB_OFFLINE=1, cleared here per test.

The model is test_checkpoint_model's 2-layer Llama-like snapshot, its tensors split over two shards with an index:
at tp 2 its weights are 90,816 B per GPU (derived there, tensor by tensor), whether the headers are read from
local shards or fetched here.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.models.arch import Split
from kvplan.models.config_tensors import config_tensors
from kvplan.models.from_hf import load_model
from tests.models.test_checkpoint_headers import write_safetensors

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
    "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
}  # fmt: skip
TP2_BYTES = 90_816
"""test_checkpoint_model.test_snapshot_with_safetensors_headers derives it: 16,384 + 74,240 + 128 + 64."""
COMMIT = "c0ffee" + "0" * 34
TOKEN = "hf_SeCrEtToKeN123"


@dataclass
class Hub:
    """What the stand-in serves and saw."""

    files: dict[str, dict[str, bytes]] = field(default_factory=dict)
    """repo -> file -> bytes."""
    gated: set[str] = field(default_factory=set)
    delay_s: float = 0.0
    redirect: bool = False
    hide_commit: bool = False
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    """(path, Range, Authorization) of every request."""
    sent: dict[str, int] = field(default_factory=dict)
    """path -> body bytes sent."""
    url: str = ""


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            hub.requests.append((self.path, self.headers.get("Range", ""), self.headers.get("Authorization", "")))
            if hub.delay_s:
                time.sleep(hub.delay_s)
            if self.path.startswith("/cdn/"):  # the CDN a redirect lands on: no repo checks, the file itself
                repo, _, name = self.path[5:].rpartition("/")
                return self._send(hub.files[repo][name])
            if self.path.startswith("/api/models/"):
                body = json.dumps({"id": "org/tiny", "sha": COMMIT}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return None
            parts = self.path.lstrip("/").split("/")
            if len(parts) != 5 or parts[2] != "resolve":
                return self._error(404, "RepoNotFound")
            repo, rev, name = "/".join(parts[:2]), parts[3], parts[4]
            if repo not in hub.files:
                return self._error(401, "RepoNotFound")  # the Hub answers 401 to hide private repos
            if repo in hub.gated and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._error(401 if not self.headers.get("Authorization") else 403, "GatedRepo")
            if rev not in ("main", "v1", COMMIT):
                return self._error(404, "RevisionNotFound")
            if name not in hub.files[repo]:
                return self._error(404, "EntryNotFound")
            if hub.redirect and name.endswith(".safetensors"):
                self.send_response(302)
                self.send_header("Location", f"{hub.url}/cdn/{repo}/{name}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            return self._send(hub.files[repo][name])

        def _send(self, body: bytes) -> None:
            rng = self.headers.get("Range", "")
            status, part = 200, body
            if rng.startswith("bytes="):
                a, b = (int(x) for x in rng[6:].split("-"))
                status, part = 206, body[a : b + 1]
            self.send_response(status)
            if not hub.hide_commit:
                self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("Content-Length", str(len(part)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {a}-{a + len(part) - 1}/{len(body)}")
            self.end_headers()
            self.wfile.write(part)
            hub.sent[self.path] = hub.sent.get(self.path, 0) + len(part)

        def _error(self, status: int, code: str) -> None:
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return H


def _model_files(tmp_path: Path) -> dict[str, bytes]:
    """config.json, an index and two real shards of the 2-layer model (+ one tensor no rule knows, as there)."""
    tensors = config_tensors(CONFIG)
    assert tensors is not None
    every = {**{t.name: (t.dtype, t.shape) for t in tensors}, "model.layers.0.odd.weight": ("F32", (16,))}
    names = list(every)
    shards = {"model-00001-of-00002.safetensors": names[:10], "model-00002-of-00002.safetensors": names[10:]}
    files = {"config.json": json.dumps(CONFIG).encode()}
    for shard, held in shards.items():
        write_safetensors(tmp_path / shard, {n: every[n] for n in held})
        files[shard] = (tmp_path / shard).read_bytes()
    index = {"metadata": {"total_size": 0}, "weight_map": {n: s for s, held in shards.items() for n in held}}
    files["model.safetensors.index.json"] = json.dumps(index).encode()
    return files


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    h = Hub()
    files = _model_files(tmp_path)
    h.files = {"org/tiny": files, "org/gated": dict(files)}
    h.gated = {"org/gated"}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(h))
    h.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_DOWNLOAD_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # empty: no cached snapshot, no token file
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "kvplan-cache"))
    monkeypatch.chdir(tmp_path)
    yield h
    server.shutdown()
    server.server_close()


runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None})


def one_line(r: Result, code: int, needle: str) -> None:
    assert r.exit_code == code, r.stdout + r.stderr
    assert r.stderr.startswith("kvplan: error:") and len(r.stderr.splitlines()) == 1, r.stderr
    assert needle in r.stderr, r.stderr


def test_fetch_reads_configs_and_headers_only(hub: Hub, tmp_path: Path) -> None:
    arch = load_model("org/tiny")
    assert arch.estimated_weights_per_gpu(Split.of(tp=2)) == TP2_BYTES
    assert "per tensor from the safetensors headers (22 tensors, " in arch.weights_summary
    assert arch.source == str(tmp_path / "kvplan-cache" / "hub" / "models--org--tiny" / COMMIT / "config.json")
    asked = [p.rsplit("/", 1)[1] for p, _, _ in hub.requests]
    assert asked[:3] == ["config.json", "hf_quant_config.json", "model.safetensors.index.json"]
    for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        body = hub.files["org/tiny"][shard]
        n = int.from_bytes(body[:8], "little")
        ranges = [r for p, r, _ in hub.requests if p.endswith(shard)]
        assert ranges == ["bytes=0-7", f"bytes=8-{8 + n - 1}"]  # two range reads: the length, the header
        assert hub.sent[f"/org/tiny/resolve/{COMMIT}/{shard}"] == 8 + n < len(body)  # never a weight byte
    # nothing is written into Hugging Face's own cache (a folder of headers would look like a snapshot there)
    assert not (tmp_path / "hf").exists()


def test_the_cache_answers_the_next_run_and_offline(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    load_model("org/tiny")
    seen = len(hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert load_model("org/tiny").estimated_weights_per_gpu(Split.of(tp=2)) == TP2_BYTES
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert load_model("org/tiny").estimated_weights_per_gpu(Split.of(tp=2)) == TP2_BYTES
    assert len(hub.requests) == seen  # both answered from kvplan's cache


def test_offline_without_a_cached_copy_is_one_line(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = runner.invoke(app, ["budget", "--model", "org/tiny"])
    one_line(r, 2, "--model org/tiny: not in the Hugging Face cache (")
    assert "HF_HUB_OFFLINE is set" in r.stderr
    assert hub.requests == []


def test_a_revision_is_resolved_to_its_commit(hub: Hub, tmp_path: Path) -> None:
    arch = load_model("org/tiny@v1")
    assert COMMIT in arch.source
    assert (tmp_path / "kvplan-cache" / "hub" / "models--org--tiny" / "refs" / "v1").read_text() == COMMIT + "\n"
    assert all(f"/resolve/{COMMIT}/" in p for p, _, _ in hub.requests[1:])  # after config.json: the commit
    seen = len(hub.requests)
    assert load_model(f"org/tiny@{COMMIT}").source == arch.source and len(hub.requests) == seen  # cached by commit
    r = runner.invoke(app, ["budget", "--model", "org/tiny@v2"])
    one_line(r, 2, "the Hub has no revision v2 of org/tiny (404)")


def test_gated_repo_and_the_token(hub: Hub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    r = runner.invoke(app, ["budget", "--model", "org/gated"])
    one_line(r, 2, "--model org/gated: a gated repo (401); accept its terms on the Hub, then set HF_TOKEN")
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    r = runner.invoke(app, ["budget", "--model", "org/gated"])
    one_line(r, 2, "a gated repo (403); accept its terms on the Hub, then HF_TOKEN has no access")
    assert "hf_wrong" not in r.stdout + r.stderr
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub.redirect = True  # the shards come from a CDN the token must not reach
    r = runner.invoke(app, ["budget", "--model", "org/gated", "--format", "json"])
    assert r.exit_code == 0, r.stderr
    assert TOKEN not in r.stdout + r.stderr
    cdn = [a for p, _, a in hub.requests if p.startswith("/cdn/")]
    assert cdn and not any(cdn)  # Authorization is not carried over the redirect
    for f in (tmp_path / "kvplan-cache").rglob("*"):
        assert not f.is_file() or TOKEN.encode() not in f.read_bytes(), f


def test_the_token_stays_out_of_a_lock(hub: Hub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a deployment naming a gated Hub model, locked with HF_TOKEN set: the token is in no file and no output
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    (tmp_path / "dep.yaml").write_text("model: org/gated\ngpus_per_node: 2\ntp: 2\n")
    r = runner.invoke(app, ["lock", "dep.yaml"])
    assert r.exit_code == 0, r.stdout + r.stderr
    lock = (tmp_path / "kvplan.lock").read_text()
    assert '"cell_bytes": 128' in lock  # 2 layers × 1 kv head per rank × (16 + 16) × 2 B: the fetched model
    assert TOKEN not in lock and TOKEN not in r.stdout + r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("kvplan.lock")) == ["kvplan.lock"]


def test_the_commit_from_the_api_when_a_redirect_hid_it(hub: Hub, tmp_path: Path) -> None:
    # X-Repo-Commit rides on the Hub's own answer; a config.json served through a redirect loses it, and the
    # commit then comes from /api/models/{repo}/revision/{rev} (what huggingface_hub's model_info reads)
    hub.hide_commit = True
    arch = load_model("org/tiny")
    assert COMMIT in arch.source
    assert any(p == "/api/models/org/tiny/revision/main" for p, _, _ in hub.requests)


def test_missing_repo_is_one_line(hub: Hub) -> None:
    r = runner.invoke(app, ["budget", "--model", "org/nothing"])
    one_line(r, 2, "--model org/nothing: no such repo on http://127.0.0.1:")
    assert "or a private one (401); set HF_TOKEN" in r.stderr


def test_oversize_responses_are_refused(hub: Hub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KVPLAN_MAX_CONFIG_BYTES", "100")  # the config is ~300 B
    r = runner.invoke(app, ["budget", "--model", "org/tiny"])
    one_line(r, 2, "config.json (kvplan's config limit; KVPLAN_MAX_CONFIG_BYTES raises it)")
    monkeypatch.delenv("KVPLAN_MAX_CONFIG_BYTES")
    # a shard whose header claims 200 MiB: refused from its first 8 bytes (limits.MAX_SAFETENSORS_HEADER_BYTES)
    files = hub.files["org/tiny"]
    shard = "model-00002-of-00002.safetensors"
    files[shard] = (200 << 20).to_bytes(8, "little") + files[shard][8:]
    with pytest.raises(InputError, match=r"header is over kvplan's limit of 104,857,600 bytes"):
        load_model("org/tiny")
    assert not list((tmp_path / "kvplan-cache").rglob("refs/*"))  # nothing half-fetched is named
    # a fetch killed after config.json was written: the folder is there, unnamed, and never planned from
    folder = tmp_path / "kvplan-cache" / "hub" / "models--org--tiny" / COMMIT
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    with pytest.raises(InputError, match="HF_HUB_OFFLINE is set"), pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        load_model(f"org/tiny@{COMMIT}")


@pytest.mark.parametrize("ref", ["../../etc", "a/b/c", "a/b@../x", "a/b@x/y", "a/..", "org/tiny@", "a/b@-x"])
def test_hostile_repo_ids_never_reach_a_path_or_url(hub: Hub, ref: str, tmp_path: Path) -> None:
    r = runner.invoke(app, ["budget", "--model", ref])
    assert r.exit_code == 2, r.stdout + r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert hub.requests == []
    assert not (tmp_path / "kvplan-cache").exists()


def test_a_slow_hub_times_out_in_one_line(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "0.3")
    hub.delay_s = 2.0  # the message comes only from a TimeoutError: the 0.3 s limit fired (no wall-clock assert)
    r = runner.invoke(app, ["budget", "--model", "org/tiny"])
    one_line(r, 3, "no answer within 0.3 s (HF_HUB_DOWNLOAD_TIMEOUT); HF_HUB_OFFLINE=1 plans from the caches")


def test_planning_without_a_repo_id_never_imports_the_hub_code() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from kvplan.cli import app\n"
        "from typer.testing import CliRunner\n"
        "r = CliRunner().invoke(app, ['admit', '--ctx', '128K', '--model', 'glm-5.3'])\n"
        "assert r.exit_code == 0, (r.exit_code, r.output)\n"
        "bad = [m for m in ('kvplan.models.hub', 'urllib.request', 'ssl') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
