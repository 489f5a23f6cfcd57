"""CLI decisions the mutation run found unguarded: strict JSON output, `tuner --model-config`,
`tuner --rules FILE` refusals, and `launch`'s early SGLang coverage check."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.common import emit_json, strict
from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.contract.versions import installed_sglang_version
from sglang_eagle_nccl.knowledge.sglang import patchsets
from sglang_eagle_nccl.native import library

MODEL = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "torch_dtype": "bfloat16",
}
GROUP_RULE = """
[[tuner.rules]]
collective = "allreduce"
bytes = [0, 524288]
algorithm = "ring"
protocol = "LL"
group = "tp"
"""


# --- strict JSON ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_strict_turns_every_non_finite_float_into_null(bad):
    assert strict({"a": [bad, 1.5], "b": (bad,)}) == {"a": [None, 1.5], "b": [None]}


def test_emit_json_is_sorted_two_space_indented_and_never_writes_nan():
    @click_command
    def cmd():
        emit_json({"b": 1, "a": {"y": float("nan"), "x": 2}})

    res = CliRunner().invoke(cmd)
    assert res.exit_code == 0, res.output
    assert res.output == '{\n  "a": {\n    "x": 2,\n    "y": null\n  },\n  "b": 1\n}\n'


def test_emit_json_refuses_a_non_finite_float_key():
    # strict() cleans values, not keys: json.dumps' own allow_nan=False is what refuses this one.
    @click_command
    def cmd():
        emit_json({float("nan"): 1})

    res = CliRunner().invoke(cmd)
    assert isinstance(res.exception, ValueError) and "NaN" not in res.output


def click_command(func):
    import click

    return click.command()(func)


@pytest.fixture(autouse=True)
def _no_tuner_rules_left_behind():
    """`tuner` queries the native library in this process, which replaces its tuner rules (it is meant for a
    diagnostic process); a later test of activation in the same pytest process expects a library that no
    profile configured a tuner for, so the rules are cleared after each test here."""
    yield
    from sglang_eagle_nccl.native import binding

    for loaded in binding._loaded.values():
        loaded.configure_tuner([])


# --- tuner --model-config ---------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_tuner_rules_left_behind():
    """`tuner` configures this process's native library with its rules (as a diagnostic process does);
    a test leaves the library as it found it, with no rules, so that a later test of activation in the
    same process (file order: tests/unit/inproc/boot/test_activation_decisions.py) sees none."""
    yield
    for loaded in list(library._loaded.values()):
        loaded.configure_tuner([])


def _tuner(tmp_path, *extra, config=MODEL):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(config))
    args = ["tuner", "--profile", "pcie-8gpu-eagle", "--model-config", str(cfg), "--tp", "8", *extra]
    return CliRunner().invoke(main, args)


SHAPE = ["--batch-size", "8", "--speculative-num-draft-tokens", "4", "--chunked-prefill-size", "8192"]


def test_tuner_model_config_json_keys_and_the_shape_it_was_given(tmp_path):
    res = _tuner(tmp_path, *SHAPE, "--speculative-eagle-topk", "2", "--sglang-version", "0.5.23", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert set(out) == {"ok", "sizes", "tuner", "group"}
    assert out["ok"] is True and out["group"] == "tp"
    assert out["sizes"]["speculative"]["eagle_topk"] == 2
    assert out["sizes"]["sglang_version"] == "0.5.23"
    assert all("path" in p for p in out["sizes"]["phases"])
    for a in out["tuner"]:
        assert set(a) == {"phase", "bytes", "tuner", "answer"}
        assert isinstance(a["answer"], str) and a["answer"]


def test_tuner_model_config_nnodes_reaches_the_path_prediction(tmp_path):
    one = _tuner(tmp_path, *SHAPE, "--sglang-version", "0.5.23", "--json")
    two = _tuner(tmp_path, *SHAPE, "--sglang-version", "0.5.23", "--nnodes", "2", "--json")
    assert one.exit_code == 0 and two.exit_code == 0, one.output + two.output
    paths_one = [p["path"] for p in json.loads(one.output)["sizes"]["phases"]]
    paths_two = [p["path"] for p in json.loads(two.output)["sizes"]["phases"]]
    assert paths_one != paths_two


def test_tuner_model_config_without_a_version_uses_the_installed_one(tmp_path):
    res = _tuner(tmp_path, *SHAPE, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["sizes"]["sglang_version"] == installed_sglang_version()


def test_tuner_model_config_reads_an_installed_sglang_when_no_version_is_given(tmp_path, monkeypatch):
    _fake_sglang(tmp_path, monkeypatch, "0.5.23")
    res = _tuner(tmp_path, *SHAPE, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["sizes"]["sglang_version"] == "0.5.23"


def test_tuner_model_config_asks_with_the_group_label(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text(GROUP_RULE)
    res = _tuner(tmp_path, *SHAPE, "--sglang-version", "0.5.23", "--rules", str(rules), "--json")
    assert res.exit_code == 0, res.output
    by = {a["phase"]: a["tuner"] for a in json.loads(res.output)["tuner"]}
    verify = next(v for k, v in by.items() if "verify" in k)
    # The rule holds only for group "tp" (the default label): asked without it, nothing would match.
    assert verify["rule"] is not None and verify["protocol"] == "LL"


def test_tuner_model_config_text_output(tmp_path):
    res = _tuner(tmp_path, *SHAPE, "--sglang-version", "0.5.23")
    assert res.exit_code == 0, res.output
    out = json.loads(_tuner(tmp_path, *SHAPE, "--sglang-version", "0.5.23", "--json").output)
    from sglang_eagle_nccl.knowledge.sglang.allreduce_paths import fmt_bytes
    from sglang_eagle_nccl.offline.sizes.render import format_size_report

    report = format_size_report(out["sizes"])
    assert res.output.startswith(
        report + "\n\nTuner plugin's answer for each all-reduce (group label tp, 8 rank(s), "
    )
    width = max(len(a["phase"]) for a in out["tuner"])
    for a in out["tuner"]:
        assert f"\n  {a['phase']:<{width}}  {fmt_bytes(a['bytes']):>10}  {a['answer']}\n" in res.output


def test_tuner_model_config_bad_config_exits_2_naming_it(tmp_path):
    bad = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}
    res = _tuner(tmp_path, *SHAPE, "--json", config=bad)
    assert res.exit_code == 2
    out = json.loads(res.output)
    assert out["ok"] is False and "hidden_size" in out["error"]
    assert out["findings"] and any("hidden_size" in json.dumps(f) for f in out["findings"])
    text = _tuner(tmp_path, *SHAPE, config=bad)
    assert text.exit_code == 2 and "hidden_size" in text.output and not text.output.lstrip().startswith("{")


def test_tuner_model_config_without_the_native_library_exits_2(tmp_path, monkeypatch):
    monkeypatch.setattr(library, "HERE", tmp_path / "nowhere")
    res = _tuner(tmp_path, *SHAPE, "--sglang-version", "0.5.23", "--json")
    assert res.exit_code == 2
    out = json.loads(res.output)
    assert out["ok"] is False and out["error"].startswith("the native tuner plugin is not available: ")
    text = _tuner(tmp_path, *SHAPE, "--sglang-version", "0.5.23")
    assert text.exit_code == 2 and "the native tuner plugin is not available" in text.output
    assert not text.output.lstrip().startswith("{")


# --- tuner --rules FILE ---------------------------------------------------------------------------


def _query(*extra):
    return CliRunner().invoke(
        main, ["tuner", "--profile", "pcie-8gpu-eagle", "--bytes", "14336", "--nranks", "8", *extra]
    )


def test_rules_file_through_a_symlink_is_read(tmp_path):
    real = tmp_path / "real.toml"
    real.write_text(GROUP_RULE)
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    res = _query("--group", "tp", "--rules", str(link), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["query"]["protocol"] == "LL"


def test_rules_file_not_utf8_exits_2_naming_the_byte(tmp_path):
    bad = tmp_path / "rules.toml"
    bad.write_bytes(b'# caf\xe9\n[[tuner.rules]]\ncollective = "allreduce"\n')
    res = _query("--rules", str(bad), "--json")
    assert res.exit_code == 2
    out = json.loads(res.output)
    assert out["ok"] is False and out["error"] == (
        f"--rules {bad}: not UTF-8 text (byte 5). Fix: save it as UTF-8 TOML"
    )
    text = _query("--rules", str(bad))
    assert text.exit_code == 2 and "not UTF-8 text (byte 5)" in text.output
    assert not text.output.lstrip().startswith("{")


def test_rules_file_broken_toml_exits_2_with_its_findings(tmp_path):
    bad = tmp_path / "rules.toml"
    bad.write_text("[[tuner.rules]\n")
    res = _query("--rules", str(bad), "--json")
    assert res.exit_code == 2
    out = json.loads(res.output)
    assert out["ok"] is False and out["findings"]
    assert all(f["severity"] == "error" for f in out["findings"])


# --- launch: SGLang coverage, before anything starts ---------------------------------------------


def _fake_sglang(tmp_path, monkeypatch, version):
    """An installed SGLang `version` whose source has only `_set_envs_and_config`."""
    site = tmp_path / "site"
    engine = site / "sglang" / "srt" / "entrypoints"
    engine.mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    (engine / "engine.py").write_text("def _set_envs_and_config(server_args):\n    pass\n")
    info = site / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "sglang", raising=False)


def _launch(*extra):
    return CliRunner().invoke(
        main, ["launch", "--profile", "pcie-8gpu", *extra, "--dry-run", "--", "--model-path", "M"]
    )


def test_launch_refuses_an_untested_sglang_missing_hook_targets(tmp_path, monkeypatch, clean_environ):
    _fake_sglang(tmp_path, monkeypatch, "0.5.99")
    assert not patchsets.select("0.5.99").tested
    res = _launch()
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert "--allow-partial" in res.output and "sglang.srt.managers.scheduler" in res.output


def test_launch_allow_partial_runs_an_untested_sglang_missing_targets(tmp_path, monkeypatch, clean_environ):
    _fake_sglang(tmp_path, monkeypatch, "0.5.99")
    res = _launch("--allow-partial")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output[res.output.index("{") :])["run_dir"] is None


def test_launch_does_not_check_the_source_of_a_tested_release(tmp_path, monkeypatch, clean_environ):
    _fake_sglang(tmp_path, monkeypatch, "0.5.23")
    assert patchsets.select("0.5.23").tested
    res = _launch()
    assert res.exit_code == 0, res.output
    assert json.loads(res.output[res.output.index("{") :])["run_dir"] is None
