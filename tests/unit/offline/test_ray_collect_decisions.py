"""`audit --ray` never waits forever and reads only the launch's own cluster (issue 24 item 4;
offline/ray_collect.py's docstring states the rules).

The decisions are tested here with fakes of the Ray calls (a module put where ``import ray`` finds it) and
real sockets; tests/ray runs them against a real cluster and a real unreachable address.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import types
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.offline import ray_collect
from sglang_eagle_nccl.offline.ray_collect import (
    CollectError,
    choose_address,
    clusters_seen,
    collect,
    current_cluster_file,
    recorded_clusters,
    split_address,
    within,
)
from support.audit_records import proc_file, rec, write_lines

ADDRESSES = st.from_regex(r"[a-z0-9.]{1,12}:[1-9][0-9]{0,4}", fullmatch=True)


# --- choosing the cluster ----------------------------------------------------------------------------

@given(ADDRESSES, st.lists(ADDRESSES, max_size=3, unique=True), st.lists(ADDRESSES, max_size=3, unique=True))
def test_auto_attaches_to_the_one_recorded_cluster_or_refuses_naming_what_it_saw(given_address, recorded, seen):
    assert choose_address(given_address, recorded, seen) == given_address  # an address given is the user's choice
    if len(recorded) == 1:
        assert choose_address("auto", recorded, seen) == recorded[0]
        return
    with pytest.raises(CollectError) as err:
        choose_address("auto", sorted(recorded), sorted(seen))
    message = str(err.value)
    assert all(c in message for c in seen + recorded) and "--ray HOST:PORT" in message
    assert ("seen on this machine: none" in message) == (not seen)


def test_the_recorded_clusters_are_those_the_drivers_ray_actor_env_records_name():
    records = [{"event": "ray_actor_env", "ray_cluster": "10.0.0.2:6379"},
               {"event": "ray_actor_env", "ray_cluster": "10.0.0.1:6379"},
               {"event": "ray_actor_env", "ray_cluster": "10.0.0.1:6379"},
               {"event": "ray_actor_env", "ray_cluster": None}, {"event": "ray_actor_env", "ray_cluster": ""},
               {"event": "ray_actor_env"}, {"event": "process_start", "ray_cluster": "10.9.9.9:1"}]
    assert recorded_clusters(records) == ["10.0.0.1:6379", "10.0.0.2:6379"]


def test_the_clusters_seen_here_come_from_ray_address_and_rays_current_cluster_file(tmp_path):
    current = tmp_path / "ray_current_cluster"
    assert clusters_seen({}, str(current)) == []
    current.write_text("10.0.0.5:6379\nignored\n")
    assert clusters_seen({"RAY_ADDRESS": " 10.0.0.1:6379 "}, str(current)) == ["10.0.0.1:6379", "10.0.0.5:6379"]
    assert clusters_seen({"RAY_ADDRESS": "10.0.0.5:6379"}, str(current)) == ["10.0.0.5:6379"]
    # Ray's rule: <RAY_TMPDIR, else TMPDIR (Linux), else the root's tmp>/ray/ray_current_cluster.
    assert current_cluster_file({"RAY_TMPDIR": "/x", "TMPDIR": "/y"}) == os.path.join("/x", "ray", "ray_current_cluster")
    assert current_cluster_file({"TMPDIR": "/y"}) == os.path.join("/y", "ray", "ray_current_cluster")
    assert current_cluster_file({}) == os.path.join(os.sep, "tmp", "ray", "ray_current_cluster")


def test_off_linux_ray_ignores_tmpdir_for_its_current_cluster_file(monkeypatch):
    # Ray asks TMPDIR on Linux only (macOS's per-user TMPDIR is not where its processes meet); the
    # rule reads the platform when asked, so the other branch is checked here under another name.
    monkeypatch.setattr(sys, "platform", "darwin")
    assert current_cluster_file({"TMPDIR": "/y"}) == os.path.join(os.sep, "tmp", "ray", "ray_current_cluster")
    assert current_cluster_file({"RAY_TMPDIR": "/x", "TMPDIR": "/y"}) == os.path.join("/x", "ray", "ray_current_cluster")


@given(st.text(max_size=30))
def test_an_address_is_split_only_when_it_is_host_colon_port(text):
    host, sep, port = text.rpartition(":")
    ok = (sep == ":" and "://" not in text and port.isascii() and port.isdigit() and 0 < int(port) < 65536
          and host not in ("", "[]"))
    got = split_address(text)
    assert (got is not None) == ok
    if ok:
        assert got == (host.removeprefix("[").removesuffix("]") if host[:1] == "[" and host[-1:] == "]" else host,
                       int(port))


# --- deadlines --------------------------------------------------------------------------------------

def test_a_step_that_never_answers_is_abandoned_at_its_deadline():
    never = threading.Event()
    started = time.monotonic()
    with pytest.raises(CollectError, match=r"connecting to X: no answer within 0.3s \(--ray-timeout\)"):
        within(0.3, "connecting to X", never.wait)
    assert 0.3 <= time.monotonic() - started < 2
    abandoned = [t for t in threading.enumerate() if t.name == "sglang-eagle-nccl: connecting to X"]
    assert len(abandoned) == 1 and abandoned[0].daemon  # left behind, it cannot keep the audit from exiting
    never.set()
    assert within(5, "a step", lambda: 42) == 42

    class StepFailed(Exception):
        pass

    failure = StepFailed("the step's own error")

    def fails():
        raise failure

    with pytest.raises(StepFailed) as err:
        within(5, "a step", fails)
    assert err.value is failure  # handed to the caller as it was raised


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_address_where_nothing_listens_fails_at_once_naming_address_and_deadline():
    address = f"127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(CollectError) as err:
        ray_collect.probe(address, 5)
    assert time.monotonic() - started < 5
    assert address in str(err.value) and "within 5s (--ray-timeout)" in str(err.value)
    assert str(err.value).endswith("(--ray-timeout): Connection refused")  # the system's words, not the errno
    ray_collect.probe("ray://head:10001", 5)  # a client address is left to Ray (and its deadline)


# --- collect, with fakes of the Ray calls ------------------------------------------------------------

class FakeRay(types.ModuleType):
    """What collect calls of Ray; ``init`` may hang (a head that accepts and never answers)."""

    def __init__(self, gcs: str, hang: bool = False, nodes: int = 2) -> None:
        super().__init__("ray")
        self.gcs, self.hang, self.connected, self.inits = gcs, hang, False, []
        self._nodes = [{"NodeID": f"{i:02d}" * 14, "Alive": True} for i in range(nodes)]

    def is_initialized(self) -> bool:
        return self.connected

    def init(self, address, **_kw):
        self.inits.append(address)
        if self.hang:
            threading.Event().wait()
        self.connected = True

    def get_runtime_context(self):
        return types.SimpleNamespace(gcs_address=self.gcs, get_node_id=lambda: "local")

    def nodes(self):
        return self._nodes

    def remote(self, **_kw):
        def wrap(fn):
            task = types.SimpleNamespace()
            # each node answers with its own id, as the task pinned to it would
            task.options = lambda **o: types.SimpleNamespace(
                remote=lambda *a: {**fn(*a), "node_id": o["scheduling_strategy"]["node_id"]})
            return task
        return wrap

    def get(self, refs, timeout):
        return refs


@pytest.fixture
def listening():
    """A real TCP port that accepts and never answers (what a hung head node looks like)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield f"127.0.0.1:{s.getsockname()[1]}"
    s.close()


def _fake(monkeypatch, ray):
    strategies = types.ModuleType("ray.util.scheduling_strategies")
    strategies.NodeAffinitySchedulingStrategy = lambda **kw: kw
    util = types.ModuleType("ray.util")
    util.scheduling_strategies = strategies
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "ray.util", util)
    monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", strategies)


def _launch(tmp_path: Path, clusters: list[str]) -> Path:
    run = tmp_path / "launch"
    run.mkdir(mode=0o700)
    (run / "launch.json").write_text(json.dumps({"profile": {"name": "p", "env": {"NCCL_PROTO": "LL"}}}))
    write_lines(run / proc_file(100), [rec("ray_actor_env", 100, actor_role="scheduler", env={}, ray_cluster=c)
                                       for c in clusters] or [rec("process_role", 100, title="x")])
    return run


def test_a_head_that_accepts_and_never_answers_is_given_up_at_the_deadline(monkeypatch, tmp_path, listening):
    ray = FakeRay(listening, hang=True)
    _fake(monkeypatch, ray)
    run = _launch(tmp_path, [listening])
    started = time.monotonic()
    with pytest.raises(CollectError) as err:
        collect(str(run), str(tmp_path / "dest"), address="auto", timeout_s=0.5, environ={})
    assert 0.5 <= time.monotonic() - started < 3
    assert f"connecting to the Ray cluster at {listening}: no answer within 0.5s (--ray-timeout)" in str(err.value)
    assert ray.inits == [listening]  # auto went to the cluster the launch recorded


def test_auto_without_a_recorded_cluster_refuses_before_connecting(monkeypatch, tmp_path, listening):
    ray = FakeRay(listening)
    _fake(monkeypatch, ray)
    run = _launch(tmp_path, [])
    current = tmp_path / "raytmp"
    (current / "ray").mkdir(parents=True)  # Ray writes <RAY_TMPDIR>/ray/ray_current_cluster
    (current / "ray" / "ray_current_cluster").write_text("10.1.1.1:6379\n")
    with pytest.raises(CollectError, match=r"records name none \(clusters seen on this machine: 10.1.1.1:6379, "
                                           r"10.2.2.2:6379\)"):
        collect(str(run), str(tmp_path / "dest"), environ={"RAY_TMPDIR": str(current), "RAY_ADDRESS": "10.2.2.2:6379"})
    assert ray.inits == []


def test_a_connection_to_another_cluster_than_the_recorded_one_is_refused(monkeypatch, tmp_path, listening):
    ray = FakeRay("10.7.7.7:6379")  # already connected elsewhere
    ray.connected = True
    _fake(monkeypatch, ray)
    run = _launch(tmp_path, [listening])
    with pytest.raises(CollectError, match=r"connected to the Ray cluster at 10.7.7.7:6379, not the one the launch "
                                           r"recorded \(127.0.0.1:\d+\)"):
        collect(str(run), str(tmp_path / "dest"), environ={})


def test_a_gathered_launch_names_the_cluster_it_read(monkeypatch, tmp_path, listening):
    ray = FakeRay(listening, nodes=2)
    _fake(monkeypatch, ray)
    run = _launch(tmp_path, [listening])
    got = collect(str(run), str(tmp_path / "dest"), address=listening, timeout_s=5, environ={})
    assert got.cluster == listening and got.summary().startswith(f"gathered through the Ray cluster at {listening} "
                                                                 "from 2 node(s)")
    assert len(got.directories) == 2  # this machine plays both nodes: each sent the whole directory
    assert all(sorted(os.listdir(d)) == sorted(os.listdir(run)) for d in got.directories)


def test_a_node_that_does_not_answer_in_time_names_cluster_and_deadline(monkeypatch, tmp_path, listening):
    ray = FakeRay(listening)

    def get(refs, timeout):
        raise TimeoutError(f"GetTimeoutError after {timeout}")

    ray.get = get
    _fake(monkeypatch, ray)
    with pytest.raises(CollectError, match=rf"not every node of the Ray cluster at {listening} answered within 2s "
                                           r"\(--ray-timeout\): GetTimeoutError after 2"):
        collect(str(_launch(tmp_path, [])), str(tmp_path / "dest"), address=listening, timeout_s=2, environ={})


def test_the_cli_exits_2_with_the_address_and_the_deadline(monkeypatch, tmp_path):
    _fake(monkeypatch, FakeRay("x:1"))
    address = f"127.0.0.1:{_closed_port()}"
    run = _launch(tmp_path, [])
    result = CliRunner().invoke(main, ["audit", "--ray", address, "--ray-timeout", "3", str(run)])
    assert result.exit_code == 2 and address in result.output and "within 3s (--ray-timeout)" in result.output
    result = CliRunner().invoke(main, ["audit", "--ray", address, "--ray-timeout", "0", str(run)])
    assert result.exit_code == 2 and "--ray-timeout" in result.output


# --- what collect asks of Ray and what it keeps, with fakes of the Ray calls -------------------------------


class RecordingRay(FakeRay):
    """FakeRay that records how it was called: init's and the tasks' options, get's deadline."""

    def __init__(self, gcs: str, nodes: list[dict], answers: dict[str, dict] | None = None) -> None:
        super().__init__(gcs)
        self._nodes, self.answers, self.calls = nodes, answers or {}, []

    def init(self, address, **kw):
        self.calls.append(("init", address, kw))
        self.connected = True

    def remote(self, **kw):
        self.calls.append(("remote", kw))

        def wrap(fn):
            def options(**o):
                self.calls.append(("options", o))
                node = o["scheduling_strategy"]["node_id"]
                return types.SimpleNamespace(remote=lambda *a: self.answers.get(node) or {**fn(*a), "node_id": node})
            return types.SimpleNamespace(options=options)
        return wrap

    def get(self, refs, timeout):
        self.calls.append(("get", timeout))
        return refs


def _answer(node_id: str, files: dict[str, bytes], problems: list[str] | None = None) -> dict:
    return {"node_id": node_id, "host": f"host-{node_id[:2]}", "seconds": 0.25, "files": files,
            "problems": problems or []}


def test_collect_pins_one_task_per_alive_node_reserving_nothing_and_waits_with_the_deadline(monkeypatch, tmp_path,
                                                                                            listening):
    nodes = [{"NodeID": "a" * 28, "Alive": True}, {"NodeID": "b" * 28, "Alive": False},
             {"NodeID": "c" * 28, "Alive": True}]
    ray = RecordingRay(listening, nodes)
    _fake(monkeypatch, ray)
    run = _launch(tmp_path, [])
    dest = tmp_path / "collected" / "today" / "dest"  # audit's own output folder: its parents are created
    before = time.monotonic()
    got = collect(str(run), str(dest), address=listening, timeout_s=7, environ={})
    took = time.monotonic() - before
    assert ray.calls[0] == ("init", listening, {"logging_level": "ERROR", "log_to_driver": False})
    assert ("remote", {"num_cpus": 0, "max_retries": 0}) in ray.calls  # no CPU reserved, no retry on a dead node
    pinned = [c[1]["scheduling_strategy"] for c in ray.calls if c[0] == "options"]
    assert pinned == [{"node_id": "a" * 28, "soft": False}, {"node_id": "c" * 28, "soft": False}]
    assert ray.calls[-1] == ("get", 7)
    assert [n.node_id for n in got.nodes] == ["a" * 28, "c" * 28]
    assert [os.path.basename(d) for d in got.directories] == ["node-" + "a" * 12, "node-" + "c" * 12]
    assert all(os.path.dirname(d) == str(dest) for d in got.directories)
    assert got.dest == str(dest) and got.cluster == listening and 0 <= got.seconds <= took


def test_collect_stores_only_launch_directory_names_and_skips_nodes_that_sent_nothing(monkeypatch, tmp_path,
                                                                                       listening):
    nodes = [{"NodeID": n * 28, "Alive": True} for n in "abc"]
    answers = {"a" * 28: _answer("a" * 28, {"../escape.jsonl": b"no", "proc-a/b.jsonl": b"no", "notes.txt": b"no",
                                             "proc-h-1.jsonl": b"x\n", "launch.json": b"{}"}),
               "b" * 28: _answer("b" * 28, {}, ["no launch directory /x on this node"]),
               "c" * 28: _answer("c" * 28, {"launch.json": b"{}"})}
    ray = RecordingRay(listening, nodes, answers)
    _fake(monkeypatch, ray)
    got = collect(str(_launch(tmp_path, [])), str(tmp_path / "dest"), address=listening, timeout_s=5, environ={})
    assert [(n.node_id[:1], n.host, n.seconds, sorted(n.files), n.problems) for n in got.nodes] == [
        ("a", "host-aa", 0.25, sorted(answers["a" * 28]["files"]), []),
        ("b", "host-bb", 0.25, [], ["no launch directory /x on this node"]),
        ("c", "host-cc", 0.25, ["launch.json"], [])]
    a, c = got.directories
    assert sorted(os.listdir(a)) == ["launch.json", "proc-h-1.jsonl"] and (Path(a) / "proc-h-1.jsonl").read_bytes() == b"x\n"
    assert sorted(os.listdir(c)) == ["launch.json"]
    assert not (tmp_path / "dest" / ("node-" + "b" * 12)).exists() and not (tmp_path / "escape.jsonl").exists()
    assert (Path(a) / "proc-h-1.jsonl").stat().st_mode & 0o777 == 0o600


def test_an_attached_connection_is_used_as_it_is(monkeypatch, tmp_path, listening):
    ray = RecordingRay(listening, [{"NodeID": "a" * 28, "Alive": True}])
    ray.connected = True  # the launcher's own connection (launch at exit)
    _fake(monkeypatch, ray)
    got = collect(str(_launch(tmp_path, [listening])), str(tmp_path / "dest"), address=None, environ={})
    assert not [c for c in ray.calls if c[0] == "init"] and got.cluster == listening


def test_without_the_runtime_contexts_address_the_address_given_names_the_cluster(monkeypatch, tmp_path, listening):
    for sub in ("given", "auto"):
        (tmp_path / sub).mkdir()
    ray = RecordingRay("unused", [{"NodeID": "a" * 28, "Alive": True}])

    def no_context():
        raise AttributeError("an older Ray")

    ray.get_runtime_context = no_context
    _fake(monkeypatch, ray)
    got = collect(str(_launch(tmp_path, [])), str(tmp_path / "dest"), address=listening, environ={})
    assert got.cluster == listening
    ray.connected = True  # attached to a cluster it cannot name: the address given names it, else none
    got = collect(str(_launch(tmp_path / "given", [])), str(tmp_path / "dest1"), address=listening, environ={})
    assert got.cluster == listening and not [c for c in ray.calls[1:] if c[0] == "init"]
    got = collect(str(_launch(tmp_path / "auto", [])), str(tmp_path / "dest3"), environ={})
    assert got.cluster == "" and "at an unnamed address" in got.summary()
    # attached, auto, and no way to tell which cluster: not the recorded one
    with pytest.raises(CollectError, match=r"connected to the Ray cluster at , not the one the launch recorded"):
        (tmp_path / "again").mkdir()
        collect(str(_launch(tmp_path / "again", [listening])), str(tmp_path / "dest2"), environ={})


def test_each_failing_ray_step_is_one_message_naming_the_cluster(monkeypatch, tmp_path, listening):
    run = str(_launch(tmp_path, []))

    def failing(**what):
        ray = RecordingRay(listening, [{"NodeID": "a" * 28, "Alive": True}])
        for name, fn in what.items():
            setattr(ray, name, fn)
        _fake(monkeypatch, ray)
        with pytest.raises(CollectError) as err:
            collect(run, str(tmp_path / f"dest-{len(what)}-{next(iter(what))}"), address=listening, timeout_s=0.5,
                    environ={})
        return str(err.value)

    def boom(*_a, **_kw):
        raise RuntimeError("boom")

    assert failing(init=boom) == f"cannot reach the Ray cluster at {listening!r}: boom"
    assert failing(nodes=boom) == f"cannot list the nodes of the Ray cluster at {listening}: boom"
    assert failing(nodes=lambda: [{"NodeID": "a" * 28, "Alive": False}]) == (
        f"the Ray cluster at {listening} has no alive node")
    assert failing(nodes=lambda: threading.Event().wait()) == (
        f"asking the Ray cluster at {listening} for its nodes: no answer within 0.5s (--ray-timeout); gave up waiting")
    assert failing(remote=lambda **_kw: lambda fn: types.SimpleNamespace(
        options=lambda **_o: types.SimpleNamespace(remote=lambda *_a: threading.Event().wait(5)))).startswith(
        f"starting one task per node of the Ray cluster at {listening}: no answer within 0.5s")


def test_collect_refuses_bad_arguments_and_a_missing_ray_before_any_network_step(monkeypatch, tmp_path):
    with pytest.raises(CollectError, match="must be an absolute path"):
        collect("relative/launch", str(tmp_path / "dest"), address="127.0.0.1:1")
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(CollectError, match=r"the Ray timeout must be a positive number of seconds, not"):
            collect(str(tmp_path), str(tmp_path / "dest"), address="127.0.0.1:1", timeout_s=bad)
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets where Ray is not installed
    with pytest.raises(CollectError, match=r"^Ray is not installed here \("):
        collect(str(tmp_path), str(tmp_path / "dest"), address="127.0.0.1:1", timeout_s=1)
    assert not (tmp_path / "dest").exists()


def test_a_node_inside_ray_names_itself_by_its_ray_node_id(monkeypatch, tmp_path):
    ray = FakeRay("x:1")
    ray.get_runtime_context = lambda: types.SimpleNamespace(get_node_id=lambda: "ab" * 14)
    monkeypatch.setitem(sys.modules, "ray", ray)
    assert ray_collect.read_node(str(tmp_path))["node_id"] == "ab" * 14


def test_an_address_splits_at_its_last_colon_and_only_into_a_real_port():
    # The address forms a user gives (README: --ray HOST:PORT), and the edges of each rule.
    assert split_address("10.0.0.1:6379") == ("10.0.0.1", 6379)
    assert split_address("[fe80::1]:6379") == ("fe80::1", 6379)  # IPv6 in brackets: the last colon splits
    assert split_address("fe80::1:6379") == ("fe80::1", 6379)
    assert split_address("[head:1") == ("[head", 1) and split_address("head]:1") == ("head]", 1)  # both or none
    assert split_address("head:1") == ("head", 1) and split_address("head:65535") == ("head", 65535)
    for bad in ("head", "head:", "head:0", "head:65536", "head:-1", "head:6379x", ":6379", "[]:6379",
                "ray://head:10001", "head:\u0663", "head: 1"):
        assert split_address(bad) is None, bad


def test_a_refusal_lists_the_recorded_clusters_one_by_one(monkeypatch, tmp_path):
    with pytest.raises(CollectError, match=r"records name 2 Ray clusters \(a:1, b:2\)"):
        choose_address("auto", ["a:1", "b:2"], [])
    ray = FakeRay("c:3")
    ray.connected = True
    _fake(monkeypatch, ray)
    with pytest.raises(CollectError, match=r"at c:3, not the one the launch recorded \(a:1, b:2\)"):
        collect(str(_launch(tmp_path, ["a:1", "b:2"])), str(tmp_path / "dest"), environ={})


def test_the_current_cluster_file_is_read_bounded_without_following_a_link_and_whatever_its_bytes(tmp_path):
    current = tmp_path / "ray_current_cluster"
    current.write_bytes(b"10.0.0.5:6379\n\xff\xfe not text\n")
    assert clusters_seen({}, str(current)) == ["10.0.0.5:6379"]
    current.write_bytes(b"10.0.0.5:6379\n" + b"#" * (4097 - 14))  # past its 4 KiB bound: not read
    assert clusters_seen({}, str(current)) == []
    current.write_bytes(b"10.0.0.5:6379\n" + b"#" * (4096 - 14))
    assert clusters_seen({}, str(current)) == ["10.0.0.5:6379"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("10.6.6.6:6379\n")
    link = tmp_path / "link"
    link.symlink_to(elsewhere)
    assert clusters_seen({}, str(link)) == []

