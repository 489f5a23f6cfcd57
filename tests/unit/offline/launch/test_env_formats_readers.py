"""Every ``env`` format, read back by its reader, on generated values: unchanged, or refused.

The readers: ``bash`` for real (``eval``), and ``dash`` when the value needs no ``$'...'``; Python's
``json`` plus Ray's rewrite of ``runtime_env`` values (``support.ray_reference``);
``python-dotenv`` for real; ``docker --env-file`` and systemd ``EnvironmentFile=`` as references written
here from their documented rules (no docker daemon and no systemd in the test machine: docker's
``opts/envfile`` rules -- a line is split at the first ``=``, the value is the rest verbatim, lines
trimmed on the left, ``#`` lines skipped, a ``\\r`` before the line break dropped; systemd.exec(5) --
leading and trailing whitespace discarded, backslash escapes and quotes read, U+FEFF and noncharacters
refused); PyYAML and a reference of the kubelet's ``$(VAR)`` expansion (Kubernetes' documented rules:
``$$`` is ``$``, ``$(NAME)`` of a defined variable is its value, anything else stays).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.offline.launch.env_formats import FormatError, render
from support import ray_reference

# Characters each reader treats specially, mixed with any text.
SPECIAL = "$${}()#'\"\\`= \t\n\r\x0b\x1b\x7f\x85\xa0\u061c\u200b\u200e\u202e\u2028\u2066\ufeff\ufdd0\U0001f600é/:,"
ASCII = "abcXYZ019_-./"
VALUE = st.one_of(
    st.text(alphabet=SPECIAL + ASCII, max_size=16),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=10),
)
NAMES = st.lists(st.from_regex(r"NCCL_[A-Z][A-Z0-9_]{0,6}", fullmatch=True), min_size=1, max_size=4, unique=True)


@st.composite
def environments(draw, value=VALUE):
    names = draw(NAMES)
    return {n: draw(value) for n in names}


UNSAFE_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def holds_unsafe(text: str) -> bool:
    """A raw character the terminal escaper would touch, other than the line breaks between lines."""
    return any(unicodedata.category(c) in UNSAFE_CATEGORIES for c in text.replace("\n", ""))


# --- shell: bash and dash for real -------------------------------------------------------------------


def _shell_read(shell: str, text: str, names: list[str], tmp_path) -> dict[str, str]:
    (tmp_path / "printed").write_bytes(text.encode("utf-8", "surrogateescape"))
    script = 'eval "$(cat printed)"\n' + "".join(f"printf '%s\\0' \"${n}\"\n" for n in names)
    out = subprocess.run([shell, "-c", script], cwd=tmp_path, capture_output=True, timeout=30,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"})
    assert out.returncode == 0, out.stderr
    values = out.stdout.split(b"\0")[:-1]
    return dict(zip(names, (v.decode("utf-8", "surrogateescape") for v in values), strict=True))


SHELL_VALUE = st.one_of(VALUE, st.text(alphabet=SPECIAL + "\udcff\udc80", max_size=8))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(env=environments(SHELL_VALUE))
def test_shell_eval_reads_back_every_value(env, tmp_path):
    text = render(env, "shell")
    assert not holds_unsafe(text), text  # nothing raw for the terminal, whatever the value
    assert _shell_read("bash", text, list(env), tmp_path) == env
    dash = shutil.which("dash")
    if dash and "$'" not in text:  # single quotes only: any POSIX shell
        assert _shell_read(dash, text, list(env), tmp_path) == env


def test_shell_needs_ansi_c_quotes_only_for_unsafe_characters():
    assert render({"NCCL_A": "/x y/$HOME'q"}, "shell") == "export NCCL_A='/x y/$HOME'\"'\"'q'"
    assert render({"NCCL_A": "a\u202eb\n1"}, "shell") == "export NCCL_A=$'a\\342\\200\\256b\\0121'"


# --- json: Ray's runtime_env --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(env=environments())
def test_json_is_what_ray_gives_every_worker_or_refused(env):
    try:
        text = render(env, "json")
    except FormatError as exc:
        assert "Ray expands" in str(exc)
        # Refused only where some worker environment would change the value.
        assert any(ray_reference.rewritten(v) for v in env.values())
        return
    assert json.loads(text) == env
    assert not holds_unsafe(text)
    for value in env.values():
        for worker in ({}, ray_reference.references(value), {"HOME": "/root", "A": "x", "NCCL_X": "1"}):
            assert ray_reference.worker_value(value, worker) == value


def test_json_refuses_a_dollar_path_with_the_reason_and_keeps_a_lone_dollar():
    with pytest.raises(FormatError, match=r"Ray expands.*Fix: remove the '\$'"):
        render({"SGLANG_EAGLE_NCCL_AUDIT_DIR": "/data/$run/audit"}, "json")
    assert json.loads(render({"NCCL_A": "cost$ 5$"}, "json")) == {"NCCL_A": "cost$ 5$"}


# --- dotenv: docker, systemd, python-dotenv ---------------------------------------------------------------


def docker_env_file(text: str) -> dict[str, str]:
    out = {}
    for raw in text.split("\n"):
        line = (raw[:-1] if raw.endswith("\r") else raw).lstrip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        assert sep and not any(c.isspace() for c in name), line
        out[name] = value
    return out


def _systemd_value(rest: str) -> str:
    ws = " \t\r\n"
    rest = rest.lstrip(ws)
    if rest[:1] == "'":
        return rest[1:rest.index("'", 1)]
    if rest[:1] == '"':
        out, i = [], 1
        while rest[i] != '"':
            if rest[i] == "\\" and rest[i + 1] in '"\\`$\n':
                out.append(rest[i + 1])
                i += 2
            else:
                out.append(rest[i])
                i += 1
        return "".join(out)
    out, i = [], 0
    while i < len(rest):
        if rest[i] == "\\" and i + 1 < len(rest):
            out.append(rest[i + 1])
            i += 2
        else:
            out.append(rest[i])
            i += 1
    return "".join(out).rstrip(ws)


def systemd_environment_file(text: str) -> dict[str, str]:
    bad = [c for c in text if c in "\0\ufeff" or 0xFDD0 <= ord(c) <= 0xFDEF or (ord(c) & 0xFFFE) == 0xFFFE]
    if bad:
        raise ValueError(f"systemd refuses the file: {bad!r}")
    out = {}
    for line in re.sub(r"\\\n", "", text).split("\n"):
        stripped = line.lstrip(" \t\r\n")
        if not stripped or stripped[0] in "#;" or "=" not in stripped:
            continue
        name, _, rest = stripped.partition("=")
        out[name.strip(" \t\r\n")] = _systemd_value(rest)
    return out


def python_dotenv(text: str) -> dict[str, str | None]:
    from dotenv import (
        dotenv_values,  # test extra; imported here so a stale venv fails these tests, not collection
    )

    return dict(dotenv_values(stream=io.StringIO(text)))


@settings(max_examples=300, deadline=None)
@given(env=environments())
def test_dotenv_every_reader_reads_each_value_or_it_is_refused(env):
    try:
        text = render(env, "dotenv")
    except FormatError as exc:
        assert "--format dotenv cannot carry" in str(exc) and "Fix:" in str(exc)
        return
    assert not holds_unsafe(text)
    assert docker_env_file(text) == env
    assert systemd_environment_file(text) == env
    assert python_dotenv(text) == env


@pytest.mark.parametrize("value", ["/data/$USER/audit", "a#b", "NCCL_NTHREADS=256,NCCL_ALGO=Tree", "x y", "é😀", ""])
def test_dotenv_keeps_what_all_three_read_alike(value):
    text = render({"NCCL_A": value}, "dotenv")
    assert docker_env_file(text) == systemd_environment_file(text) == python_dotenv(text) == {"NCCL_A": value}


@pytest.mark.parametrize("value", ["a\nb", " x", "x\t", "'x'", "a\\b", "${HOME}", "a #b", "#a", "a\u202eb", "\ufeffa",
                                   "a\ufdd0"])
def test_dotenv_refuses_what_a_reader_would_change(value):
    with pytest.raises(FormatError, match="NCCL_A"):
        render({"NCCL_A": value}, "dotenv")


# --- k8s: YAML and the kubelet ---------------------------------------------------------------------------


def kubelet_expand(value: str, defined: dict[str, str]) -> str:
    out, i = [], 0
    while i < len(value):
        if value[i] == "$" and i + 1 < len(value):
            nxt = value[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = value.find(")", i + 2)
                if end != -1:
                    name = value[i + 2:end]
                    out.append(defined.get(name, f"$({name})"))
                    i = end + 1
                    continue
                out.append("$(")
                i += 2
                continue
            out.append("$" + nxt)
            i += 2
            continue
        out.append(value[i])
        i += 1
    return "".join(out)


def pod_environment(text: str, first: dict[str, str] | None = None) -> dict[str, str]:
    """What a container started with this ``env:`` list holds (``first``: entries before it, e.g. LWS's)."""
    import yaml  # test extra (see dotenv above)

    entries = yaml.safe_load(text)
    assert isinstance(entries, list)
    env = dict(first or {})
    for entry in entries:
        assert set(entry) == {"name", "value"}, entry  # the EnvVar shape
        assert isinstance(entry["name"], str) and isinstance(entry["value"], str), entry
        env[entry["name"]] = kubelet_expand(entry["value"], env)
    return env


@settings(max_examples=300, deadline=None)
@given(env=environments())
def test_k8s_yaml_and_the_kubelet_give_every_value(env):
    text = render(env, "k8s")
    assert text.isascii() and not holds_unsafe(text)  # kubectl reads it in any encoding, a terminal shows it
    assert pod_environment(text) == env


def test_k8s_a_character_outside_the_bmp_is_one_yaml_escape_not_a_surrogate_pair():
    text = render({"NCCL_A": "x\U0001f600y"}, "k8s")
    assert "\\U0001f600" in text and "\\ud83d" not in text
    assert pod_environment(text) == {"NCCL_A": "x\U0001f600y"}


def test_k8s_node_rank_from_a_variable_of_the_pod():
    text = render({"NCCL_A": "$(LWS_WORKER_INDEX)", "SGLANG_EAGLE_NCCL_NODE_RANK": "0"}, "k8s",
                  node_rank_from="LWS_WORKER_INDEX")
    got = pod_environment(text, first={"LWS_WORKER_INDEX": "3"})
    assert got["SGLANG_EAGLE_NCCL_NODE_RANK"] == "3" and got["NCCL_A"] == "$(LWS_WORKER_INDEX)"


def test_k8s_refuses_an_undecodable_byte():
    with pytest.raises(FormatError, match="lone surrogate"):
        render({"NCCL_A": "a\udcffb"}, "k8s")


# --- every format ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["shell", "json", "dotenv", "k8s"])
def test_no_format_carries_a_nul_or_a_bad_name(fmt):
    with pytest.raises(FormatError, match="NUL"):
        render({"NCCL_A": "a\0b"}, fmt)
    with pytest.raises(FormatError, match="not a variable name"):
        render({"NCCL A": "x"}, fmt)


def test_an_unknown_format_is_refused():
    with pytest.raises(FormatError, match="unknown format 'xml'"):
        render({"NCCL_A": "x"}, "xml")


# --- exact texts and boundaries (what a reader's round trip alone cannot tell apart) ------------------------


def test_exact_texts_of_each_format():
    assert render({"NCCL_B": "1", "NCCL_A": "2"}, "json") == '{\n  "NCCL_A": "2",\n  "NCCL_B": "1"\n}'
    assert render({"NCCL_B": "1", "NCCL_A": "a b"}, "dotenv") == "NCCL_B=1\nNCCL_A=a b"
    assert render({"NCCL_A": "1"}, "shell", unset=["SGLANG_EAGLE_NCCL_ROOT_PID", "NCCL_A"]) == (
        "unset SGLANG_EAGLE_NCCL_ROOT_PID\nexport NCCL_A=1")
    assert render({"NCCL_A": "1"}, "k8s", unset=["NCCL_B"]) == '- name: "NCCL_A"\n  value: "1"'
    assert render({"NCCL_A": ' ~"\\\x7f\xff\u0100\uffff\U00010000$'}, "k8s") == (
        '- name: "NCCL_A"\n  value: " ~\\"\\\\\\x7f\\xff\\u0100\\uffff\\U00010000$$"')


@pytest.mark.parametrize(("value", "carried"), [
    ("\ufdcf", True), ("\ufdd0", False), ("\ufdef", False), ("\ufdf0", True), ("\ufffd", True),
    ("\ufffe", False), ("\uffff", False), ("\U0001fffe", False), ("\U0001fffd", True),
])
def test_dotenv_noncharacters_exactly(value, carried):
    if carried:
        assert render({"NCCL_A": value}, "dotenv") == f"NCCL_A={value}"
    else:
        with pytest.raises(FormatError, match="noncharacter"):
            render({"NCCL_A": value}, "dotenv")


@pytest.mark.parametrize("value", ["\ud7ff", "\ue000", "\U0010fffd"])
def test_k8s_carries_every_scalar_value_next_to_the_surrogates(value):
    assert pod_environment(render({"NCCL_A": value}, "k8s")) == {"NCCL_A": value}


@pytest.mark.parametrize("value", ["\ud800", "\udfff"])
def test_k8s_refuses_each_surrogate(value):
    with pytest.raises(FormatError, match="lone surrogate"):
        render({"NCCL_A": value}, "k8s")


def test_exact_texts_of_refusals_and_of_the_rarest_values():
    from sglang_eagle_nccl.offline.launch.env_formats import shell_quote

    assert shell_quote("a\udcffb\x01") == "$'a\\377b\\001'"  # an undecodable byte, as the byte it was
    text = render({"SGLANG_EAGLE_NCCL_NODE_RANK": "1", "NCCL_A": "$x"}, "k8s")  # the node rank: last, as given
    assert text == ('- name: "NCCL_A"\n  value: "$$x"\n'
                    '- name: "SGLANG_EAGLE_NCCL_NODE_RANK"\n  value: "1"')
    assert pod_environment(text) == {"NCCL_A": "$x", "SGLANG_EAGLE_NCCL_NODE_RANK": "1"}
    with pytest.raises(FormatError, match=r"NCCL_A='a\\nb': .*; NCCL_B=' x': "):
        render({"NCCL_A": "a\nb", "NCCL_B": " x"}, "dotenv")
    with pytest.raises(FormatError, match="one of shell, json, dotenv, k8s$"):
        render({}, "xml")
