"""`sglang-eagle-nccl tuner` and doctor's native section, run in-process against the real library."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.knowledge import _toml
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import parse_rules
from sglang_eagle_nccl.native import library

RULES = """
[[tuner.rules]]
collective = "allreduce"
bytes = [0, 65536]
algorithm = "ring"
protocol = "LL"

[[tuner.rules]]
collective = "allreduce"
bytes = [65536, "inf"]
group = "tp"
algorithm = "ring"
protocol = "Simple"
channels = 8
"""


@pytest.fixture
def rules_file(tmp_path):
    path = tmp_path / "rules.toml"
    path.write_text(RULES)
    return path


@pytest.fixture
def run(native_lib, clean_environ):
    if native_lib.path != library.library_path():
        pytest.skip(f"the CLI uses the installed library, which is unavailable: {library.status()[1]}")

    def invoke(*args: str):
        return CliRunner().invoke(main, list(args))

    yield invoke
    native_lib.configure_tuner([])


def test_query_prints_what_the_library_answers(run, rules_file):
    result = run("tuner", "--rules", str(rules_file), "--bytes", "14336", "--nranks", "8")
    assert result.exit_code == 0, result.output
    assert "Answer of libsglang_eagle_nccl_nccl.so" in result.output
    assert result.output.rstrip().endswith("tuner.rules#1: Ring/LL")
    assert "tuner ABI v6 (NCCL 2.30+)" in result.output


@pytest.mark.parametrize("abi", ["2", "3", "4", "5", "6"])
def test_query_json_for_every_abi(run, rules_file, abi):
    result = run(
        "tuner",
        "--rules",
        str(rules_file),
        "--bytes",
        "16MiB",
        "--nranks",
        "8",
        "--group",
        "tp",
        "--abi",
        abi,
        "--json",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["query"]["abi"] == int(abi) and out["query"]["bytes"] == 16 << 20
    assert (out["query"]["rule"], out["query"]["protocol"], out["query"]["channels"]) == (
        "tuner.rules#2",
        "Simple",
        8,
    )
    rules, _ = parse_rules(_toml.loads(RULES)["tuner"]["rules"], "x")
    assert out["rules_digest"] == library.rules_digest(rules)


def test_no_rule_means_nccl_decides(run, rules_file):
    result = run("tuner", "--rules", str(rules_file), "--bytes", "1G", "--nranks", "8", "--json")
    assert json.loads(result.output)["query"]["answer"] == "no rule: NCCL decides"
    result = run("tuner", "--bytes", "1", "--nranks", "2")
    assert result.exit_code == 0 and "No tuner rules" in result.output and "NCCL decides" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--bytes", "lots", "--nranks", "8"), "--bytes 'lots': not a size"),
        (("--bytes", "1", "--nranks", "8", "--collective", "alltoall"), "unknown collective"),
        (("--bytes", "1", "--nranks", "8", "--nccl-env", "NCCL_PROTO=LL"), "NCCL_PROTO='LL'"),
        (("--bytes", "1", "--nranks", "0"), "--nranks"),
        (("--bytes", "1", "--nranks", "8", "--abi", "7"), "--abi"),
    ],
)
def test_bad_input_exits_2_with_the_reason(run, rules_file, args, message):
    result = run("tuner", "--rules", str(rules_file), *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_bad_rules_file_exits_2_naming_each_problem(run, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        RULES
        + '\n[[tuner.rules]]\ncollective = "allreduce"\nbytes = [0, 100]\nalgorithm = "ring"\nprotocol = "LL"\n'
    )
    result = run("tuner", "--rules", str(bad), "--bytes", "1", "--nranks", "8")
    assert result.exit_code == 2 and "tuner.rules#3" in result.output and "can never match" in result.output
    missing = run("tuner", "--rules", str(tmp_path / "none.toml"), "--bytes", "1", "--nranks", "8")
    assert missing.exit_code == 2 and "cannot read it" in missing.output
    (tmp_path / "empty.toml").write_text("[env]\n")
    empty = run("tuner", "--rules", str(tmp_path / "empty.toml"), "--bytes", "1", "--nranks", "8", "--json")
    assert empty.exit_code == 2 and json.loads(empty.output)["ok"] is False


def test_doctor_reports_the_native_plugins(run):
    result = run("doctor", "--json")
    native = json.loads(result.output)["native"]
    assert native["available"] is True and native["library"] == str(library.library_path())
    assert native["exported"] == {"env": [1, 2], "tuner": [2, 3, 4, 5, 6]}
    assert "Native NCCL plugins (env + tuner): available" in run("doctor").output


def test_tuner_with_a_model_config_answers_per_phase(tmp_path):
    """pcie-8gpu-eagle: LL (Ring) for decode and EAGLE verify all-reduces, NCCL's choice for a prefill chunk."""
    import json as _json

    from click.testing import CliRunner

    from sglang_eagle_nccl.cli.main import main

    cfg = tmp_path / "config.json"
    cfg.write_text(
        _json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "hidden_size": 7168,
                "num_hidden_layers": 61,
                "torch_dtype": "bfloat16",
            }
        )
    )
    res = CliRunner().invoke(
        main,
        [
            "tuner",
            "--profile",
            "pcie-8gpu-eagle",
            "--model-config",
            str(cfg),
            "--tp",
            "8",
            "--batch-size",
            "8",
            "--speculative-num-draft-tokens",
            "4",
            "--chunked-prefill-size",
            "8192",
            "--sglang-version",
            "0.5.23",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = _json.loads(res.output)
    by_phase = {a["phase"]: a for a in out["tuner"]}
    verify = next(a for label, a in by_phase.items() if "verify" in label)
    prefill = next(a for label, a in by_phase.items() if "prefill" in label)
    assert (
        verify["bytes"] == 8 * 4 * 7168 * 2
        and verify["tuner"]["protocol"] == "LL"
        and verify["tuner"]["algorithm"] == "Ring"
    )
    assert (
        prefill["bytes"] == 8192 * 7168 * 2
        and prefill["tuner"]["decided_by"] == "nccl"
        and prefill["tuner"]["rule"] is None
    )


def test_sizes_with_a_profile_says_what_the_library_itself_answers(tmp_path):
    """`sizes --profile` names the rule each all-reduce matches through the plugin's model of its tuner (no
    library needed); on the same model config the shipped library (`tuner --model-config`) answers the same,
    phase by phase -- the model users are shown is the library's behaviour."""
    import json as _json

    from click.testing import CliRunner

    from sglang_eagle_nccl.cli.main import main

    cfg = tmp_path / "config.json"
    cfg.write_text(
        _json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "hidden_size": 7168,
                "num_hidden_layers": 61,
                "torch_dtype": "bfloat16",
            }
        )
    )
    shape = [
        "--model-config",
        str(cfg),
        "--tp",
        "8",
        "--batch-size",
        "8",
        "--speculative-num-draft-tokens",
        "4",
        "--chunked-prefill-size",
        "8192",
        "--sglang-version",
        "0.5.23",
        "--json",
    ]
    model = CliRunner().invoke(main, ["sizes", "--profile", "pcie-8gpu-eagle", *shape])
    lib = CliRunner().invoke(main, ["tuner", "--profile", "pcie-8gpu-eagle", *shape])
    assert model.exit_code == 0 and lib.exit_code == 0, model.output + lib.output
    by_model = {p["label"]: p["tuner"] for p in _json.loads(model.output)["phases"]}
    by_lib = {a["phase"]: a["tuner"] for a in _json.loads(lib.output)["tuner"]}
    assert set(by_model) == set(by_lib) and len(by_model) >= 3
    for phase, answer in by_lib.items():
        predicted = by_model[phase]
        if answer["rule"] is None:
            assert predicted is None, phase
        else:
            assert (predicted["rule"], predicted["algorithm"], predicted["protocol"]) == (
                answer["rule"],
                answer["algorithm"],
                answer["protocol"],
            ), phase
    assert any(v is None for v in by_model.values()) and any(v is not None for v in by_model.values())
    text = CliRunner().invoke(main, ["sizes", "--profile", "pcie-8gpu-eagle", *shape[:-1]]).output
    assert "tuner (pcie-8gpu-eagle, where NCCL carries it): tuner.rules#1: Ring/LL" in text
    assert "no rule matches: NCCL decides" in text
