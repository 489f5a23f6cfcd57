"""The Ray runtime_env decisions (decision/ray_env.py) on generated inputs, against references written
here: what the actor's ``runtime_env`` holds, what its worker ends up with once Ray merges the job's
``env_vars`` under the actor's (per variable, the actor's win), what is reported, how nodes are numbered,
which values Ray would rewrite (``os.path.expandvars`` over the worker's environment, then unset
``${NAME}`` deleted). The Ray tier runs the same decisions on a real cluster."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sglang_eagle_nccl.decision.ray_env import (
    PER_ACTOR,
    actor_runtime_env,
    foreign_inputs,
    number_nodes,
    overlay_sglang_writes,
    ray_rewrites,
    ray_rewritten,
)
from support import ray_reference

NAMES = st.sampled_from(
    ["NCCL_PROTO", "NCCL_ALGO", "NCCL_DEBUG", "HF_TOKEN", "PYTHONPATH", "SGLANG_EAGLE_NCCL",
     "SGLANG_EAGLE_NCCL_ENV", "SGLANG_EAGLE_NCCL_AUDIT_DIR", "SGLANG_EAGLE_NCCL_PROFILE",
     "SGLANG_EAGLE_NCCL_NODE_RANK", "SGLANG_EAGLE_NCCL_ROOT_PID"]
)
VALUES = st.sampled_from(["a", "b", "LL", "Simple", "", "1"])
ENV = st.dictionaries(NAMES, VALUES, max_size=6)
GIVEN = st.one_of(
    st.none(),
    st.just("not a mapping"),
    st.fixed_dictionaries({}, optional={"env_vars": st.one_of(ENV, st.just(["x"])), "pip": st.just(["numpy"]),
                                        "working_dir": st.just("/w")}),
)


def reference(given_env, job, ours):
    runtime_env = dict(given_env) if isinstance(given_env, dict) else {}
    actor = runtime_env.get("env_vars") if isinstance(runtime_env.get("env_vars"), dict) else {}
    env_vars = dict(actor)
    env_vars.update(ours)
    runtime_env["env_vars"] = env_vars
    user = {**job, **actor}
    replaced = [
        {"name": k, "user_value": user[k], "value": v}
        for k, v in ours.items()
        if k in user and user[k] != v and k not in PER_ACTOR
    ]
    return runtime_env, replaced


@given(GIVEN, ENV, ENV)
def test_the_actors_runtime_env_keeps_the_user_and_ours_win(given_env, job, ours):
    runtime_env, replaced = actor_runtime_env(given_env, job, ours)
    assert (runtime_env, replaced) == reference(given_env, job, ours)
    worker = {**job, **runtime_env["env_vars"]}  # Ray's merge of the job's env_vars under the actor's
    assert {k: worker[k] for k in ours} == ours
    user = {**job, **(given_env.get("env_vars") if isinstance(given_env, dict)
                      and isinstance(given_env.get("env_vars"), dict) else {})}
    assert {k: v for k, v in worker.items() if k not in ours} == {k: v for k, v in user.items() if k not in ours}
    # The job's own variables are left to Ray's merge, never copied into the actor's.
    assert all(k in ours or k in user and k not in job or k in (given_env or {}).get("env_vars", {})
               for k in runtime_env["env_vars"])


def test_per_actor_values_are_not_reported_and_the_callers_dict_is_not_changed():
    given_env = {"env_vars": {"SGLANG_EAGLE_NCCL_PROFILE": "old", "NCCL_PROTO": "Simple"}}
    runtime_env, replaced = actor_runtime_env(given_env, {}, {"SGLANG_EAGLE_NCCL_PROFILE": "new", "NCCL_PROTO": "LL"})
    assert replaced == [{"name": "NCCL_PROTO", "user_value": "Simple", "value": "LL"}]
    assert given_env == {"env_vars": {"SGLANG_EAGLE_NCCL_PROFILE": "old", "NCCL_PROTO": "Simple"}}
    assert runtime_env["env_vars"] == {"SGLANG_EAGLE_NCCL_PROFILE": "new", "NCCL_PROTO": "LL"}


@given(ENV, ENV)
def test_foreign_inputs_are_the_jobs_plugin_inputs_we_lack(job, ours):
    from sglang_eagle_nccl.contract.names import INPUT_VARS

    assert foreign_inputs(job, ours) == sorted(set(job) & set(INPUT_VARS) - set(ours))


@st.composite
def placements(draw):
    bundles = draw(st.lists(st.integers(0, 30), min_size=1, max_size=8, unique=True))
    nodes = {b: draw(st.sampled_from(["n-a", "n-b", "n-c", "n-d"])) for b in bundles}
    return nodes, draw(st.sampled_from(bundles))


@given(placements())
def test_node_zero_is_the_first_actors_then_by_lowest_bundle(placement):
    bundle_nodes, first = placement
    ranks = number_nodes(bundle_nodes, first)
    lowest = {}
    for b in sorted(bundle_nodes):
        lowest.setdefault(bundle_nodes[b], b)
    others = sorted((n for n in lowest if n != bundle_nodes[first]), key=lowest.get)
    assert ranks == {n: i for i, n in enumerate([bundle_nodes[first], *others])}


@given(st.dictionaries(NAMES, VALUES, max_size=5), st.dictionaries(NAMES, st.one_of(st.none(), VALUES), max_size=5),
       st.sets(NAMES, max_size=3))
def test_sglang_writes_reach_the_actor_unless_the_profile_keeps_them(values, written, keep):
    out = overlay_sglang_writes(values, written, keep)
    for name in set(values) | set(written):
        if name in written and (name not in values or name in keep):
            assert out.get(name) == written[name]
        else:
            assert out.get(name) == values.get(name)


@given(st.text(alphabet="$${}()aZ_9 -/é", max_size=12))
def test_ray_rewrites_exactly_the_values_some_worker_would_see_otherwise(value):
    changed = ray_reference.rewritten(value)
    assert ray_rewrites(value) == changed
    assert ray_rewritten({"NCCL_A": value, "NCCL_B": "plain"}) == (["NCCL_A"] if changed else [])
